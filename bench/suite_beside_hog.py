#!/usr/bin/env python3
"""The project's own test command on a fresh clone, beside a busy machine, R times in a row.

What a contributor and CI do (`bash .ci/run`, the README's test command) is run on a fresh
clone of a commit (its `.venv` built on the first run, reused after), with `hog.py`'s busy
loops and memory hog running the whole time, and the result of each run is printed: its exit
code, its wall time, pytest's summary line and the load average. Nothing is retried.
`--idle` runs the same without the hog: the budget's own case (CONTRIBUTING.md).

    ./dev python bench/suite_beside_hog.py [--ref HEAD] [--repeats 2] [--cpu 6] [--memory-mb 1024]
                                           [--hog-sessions each|one]
    ./dev python bench/suite_beside_hog.py --idle --repeats 1   # once per fresh clone
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess

import benchkit as bk
from hog import SESSIONS, Hog, describe

SUMMARY = re.compile(rb"=+ (.*(?:passed|failed|error).*) in ([0-9.]+)s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cpu", type=int, default=6)
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--hog-sessions", choices=SESSIONS, default="each",
                    help="each busy loop a session of its own (the default: a run beside it "
                         "gets one share in cpu+1 under autogroup), or all in one (hog.py)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds, per run")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its logs")
    ap.add_argument("--idle", action="store_true",
                    help="no hog: the same runs on a machine left alone (the budget's case)")
    args = ap.parse_args()
    rows, failed = [], 0
    with bk.scratch("jaato-suite-hog-", keep=args.keep) as where:
        clone = where / "clone"
        subprocess.run(["git", "clone", "-q", str(bk.REPO), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", args.ref], check=True)
        env = {**os.environ, "CI": "true"}
        env.pop("VIRTUAL_ENV", None)
        hog = None if args.idle else Hog(args.cpu, args.memory_mb,
                                         seconds=args.timeout * args.repeats + 600,
                                         sessions=args.hog_sessions)
        with hog or contextlib.nullcontext():
            for i in range(args.repeats):
                log_path = where / f"run-{i}.log"
                ran = bk.run(["bash", ".ci/run"], cwd=clone, env=env, log_path=log_path,
                             timeout=args.timeout)
                said = SUMMARY.findall(log_path.read_bytes())
                summary, took = said[-1] if said else (b"(no summary)", b"nan")
                rows.append([i + 1, ran.rc, f"{ran.wall / 60:.1f} min",
                             f"{float(took) / 60:.1f} min", summary.decode(), bk.load()])
                failed += ran.rc != 0
                bk.log(f"run {i + 1}: exit {ran.rc} in {ran.wall:.0f} s")
            beside = describe(hog)
    print(f"`bash .ci/run` on a fresh clone of {args.ref}, {args.repeats} runs in a row, "
          f"beside {beside}:")
    print("\n".join(bk.table(["run", "exit", "wall (venv build in run 1)", "pytest's own",
                                  "pytest", "load after"], rows, markdown=True)))
    return 1 if failed else 0


if __name__ == "__main__":
    bk.run_cli(main)
