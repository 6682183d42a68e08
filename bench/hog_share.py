#!/usr/bin/env python3
"""What share of the machine a run gets beside `hog.py`'s busy loops.

`k` CPU burners are started in one session of their own, as a test run's processes share the
session of the command that started them, beside `--cpu` busy loops (each in a session of its
own, as `hog.py` starts them by default; `--hog-sessions one`: all in one). Their CPU over their
wall time is the share the run got, printed beside what two schedulers would give: the same
share to every runnable process, or the same share to every session (Linux's autogroup,
`/proc/sys/kernel/sched_autogroup_enabled`).

    ./dev python bench/hog_share.py [--cpu 6] [--burners 1 3] [--seconds 10] [--hog-sessions one]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import benchkit as bk
from hog import SESSIONS, Hog, describe_sessions

# Busy for `seconds` of wall time, then says how much CPU it got.
BURNER = ("import sys, time; end = time.monotonic() + float(sys.argv[1])\n"
          "while time.monotonic() < end: pass\n"
          "print(time.process_time())")


def autogroup() -> str:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    except OSError:
        return "unknown"


def share(burners: int, seconds: float) -> float:
    """CPU-seconds per second of the `burners`, started together in one new session."""
    group = [sys.executable, "-c",
             "import subprocess, sys\n"
             f"procs = [subprocess.Popen([sys.executable, '-c', {BURNER!r}, '{seconds}'], "
             f"stdout=subprocess.PIPE, text=True) for _ in range({burners})]\n"
             "print(sum(float(p.communicate()[0]) for p in procs))"]
    out = subprocess.run(group, capture_output=True, text=True, check=True,
                         start_new_session=True, timeout=seconds * 10).stdout
    return float(out) / seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cpu", type=int, default=6)
    ap.add_argument("--burners", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--hog-sessions", choices=SESSIONS, default="each")
    args = ap.parse_args()
    cpus = os.cpu_count() or 1
    rows = []
    hog = Hog(args.cpu, 0, seconds=args.seconds * len(args.burners) * 3 + 60,
              sessions=args.hog_sessions)
    hog_sessions = args.cpu if args.hog_sessions == "each" else 1
    with hog:
        for k in args.burners:
            got = share(k, args.seconds)
            per_process = cpus * k / (args.cpu + k)
            per_session = cpus / (hog_sessions + 1)
            rows.append([k, f"{got:.2f}", f"{per_process:.2f}", f"{per_session:.2f}"])
    print(f"{args.cpu} busy loops ({describe_sessions(hog)}) on {cpus} CPUs, autogroup "
          f"{autogroup()}: CPUs a session of k burners got")
    print("\n".join(bk.table(["k", "measured", "if per process", "if per session"], rows,
                             markdown=True)))
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
