#!/usr/bin/env python3
"""The sandbox's cost: the same echo arms with the agent confined (bubblewrap) and without.

One invocation alternates the two, R runs each, on the same task and venv:

* bwrap   `--jaato-sandbox=bwrap`: the private daemon and everything below it confined
* none    `--jaato-sandbox=none`: the daemon as before

and prints, per side, the median per-arm time (the gaps between records landing in the store,
watched from outside, after the first), the first arm (the daemon's start in it), the wall
time, and the ratios bwrap / none.

    ./dev python bench/bench_sandbox.py [--runs 5] [--arms 10] [--tasks bench/tasks]

Every daemon is the plugin's own private one; only processes this script started are ended.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import benchkit as bk


def one_run(python: str, tasks: Path, scratch: Path, side: str, i: int, arms: int) -> dict:
    store, tmp = scratch / f"{side}-{i}.jsonl", scratch / f"tmp-{side}-{i}"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    ran = bk.run(bk.our_pytest(python, tasks, store, f"--jaato-sandbox={side}",
                               f"--jaato-repeats={arms}"),
                 cwd=scratch, env=env, timeout=900, log_path=scratch / f"{side}-{i}.log",
                 watch=store)
    gaps = [b - a for a, b in zip(ran.landed, ran.landed[1:])]
    states = [r.get("state") for r in bk.read_records(store)] if store.exists() else []
    return {"rc": ran.rc, "wall": ran.wall, "first": ran.landed[0] if ran.landed else None,
            "per_arm": bk.median(gaps), "arms": len(ran.landed),
            "passed": states.count("PASS")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=bk.OUR_PYTHON)
    ap.add_argument("--tasks", default=str(bk.HERE / "tasks"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--arms", type=int, default=10, help="repeats of the task in each run")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    runs: dict[str, list[dict]] = {"none": [], "bwrap": []}
    with bk.scratch("jaato-bench-sandbox-") as scratch:
        for i in range(args.runs):  # alternate: load drift hits both alike
            for side in runs:
                runs[side].append(one_run(args.python, Path(args.tasks), scratch, side, i,
                                          args.arms))
    summary: dict = {side: {key: bk.median(r[key] for r in rs)
                            for key in ("per_arm", "first", "wall")} | {"runs": rs}
                     for side, rs in runs.items()}
    print(f"{args.arms} echo arms a run, median of {args.runs} runs (alternating), {bk.load()}:")
    for side in runs:
        s = summary[side]
        passed = sum(r["passed"] for r in s["runs"])
        print(f"  {side:5}  per arm {bk.fmt(s['per_arm'])} s   first arm {bk.fmt(s['first'])} s"
              f"   wall {bk.fmt(s['wall'])} s   ({passed} of {args.runs * args.arms} PASS)")
    for key in ("per_arm", "first", "wall"):
        r = bk.ratio(summary["bwrap"][key], summary["none"][key])
        summary[f"ratio_{key}"] = r
        print(f"  ratio bwrap / none, {key.replace('_', ' ')}: {bk.fmt(r)}")
    bk.write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
