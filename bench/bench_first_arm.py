#!/usr/bin/env python3
"""Start -> first arm stored: this tree against an earlier commit of the plugin, side by side.

The plugin starts its private daemon in the background as soon as an arm is collected;
before, it started it when the first arm ran. One invocation alternates the two, N times
each, on the same tasks and the same venv:

* after   this working tree's plugin (the venv's editable install)
* before  the plugin as of ``--before REF`` (``git archive``d into a scratch folder and put
          first on PYTHONPATH, so the same entry point loads that code)

and prints, per side, the median time from the command's start to the first record landing
in its store (watched from outside), the wall time, and the ratio after / before.

    ./dev python bench/bench_first_arm.py [--before 8e023c2] [--runs 5] [--tasks bench/tasks]

Every daemon is the plugin's own private one; only processes this script started are
ever ended.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import benchkit as bk


def one_run(python: str, tasks: Path, scratch: Path, tag: str, i: int,
            pythonpath: str | None) -> dict:
    store, tmp = scratch / f"{tag}-{i}.jsonl", scratch / f"tmp-{tag}-{i}"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(TMPDIR=str(tmp), **({"PYTHONPATH": pythonpath} if pythonpath else {}))
    ran = bk.run(bk.our_pytest(python, tasks, store), cwd=scratch, env=env, timeout=600,
                 log_path=scratch / f"{tag}-{i}.log", watch=store)
    return {"rc": ran.rc, "wall": ran.wall, "first": ran.landed[0] if ran.landed else None,
            "arms": len(ran.landed)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=bk.OUR_PYTHON)
    ap.add_argument("--before", default="8e023c2", help="the commit to compare with")
    ap.add_argument("--tasks", default=str(bk.HERE / "tasks"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with bk.scratch("jaato-bench-first-") as scratch:
        old = str(bk.git_export(args.before, scratch / "before"))
        for i in range(args.runs):  # alternate: load drift hits both alike
            for side, path in (("before", old), ("after", None)):
                runs[side].append(one_run(args.python, Path(args.tasks), scratch, side, i, path))
    summary: dict = {side: {"first_arm_s": bk.median(r["first"] for r in rs),
                            "wall_s": bk.median(r["wall"] for r in rs), "runs": rs}
                     for side, rs in runs.items()}
    b, a = summary["before"]["first_arm_s"], summary["after"]["first_arm_s"]
    print(f"start -> first arm stored, median of {args.runs} (alternating), {bk.load()}:")
    for side in ("before", "after"):
        s = summary[side]
        print(f"  {side:6}  first arm {bk.fmt(s['first_arm_s'])} s   wall {bk.fmt(s['wall_s'])} s")
    if a and b:
        print(f"  ratio after / before: {a / b:.2f}")
        summary["ratio"] = a / b
    bk.write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
