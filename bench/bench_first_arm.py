#!/usr/bin/env python3
"""Start -> first arm stored: this tree against an earlier commit of the plugin, side by side.

The plugin starts its private daemon in the background as soon as an arm is collected;
before, it started it when the first arm ran. One invocation alternates the two, N times
each, on the same tasks and the same venv:

* after   this working tree's plugin (the venv's editable install)
* before  the plugin as of ``--before REF`` (``git archive``d into a scratch folder and put
          first on PYTHONPATH, so the same entry point loads that code)

and prints, per side, the median time from the command's start to the first record landing
in its store (watched from outside, as bench_vs_reference.py does), the wall time, and the
ratio after / before.

    python3 bench/bench_first_arm.py [--before 8e023c2] [--runs 5] [--tasks bench/tasks]

Every daemon is the plugin's own private one; only processes this script started are
ever signalled. Stdlib only.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_vs_reference as bvr  # noqa: E402  (our own sibling script)

REPO = HERE.parent


def export(ref: str, dest: Path) -> Path:
    """The package as of `ref`, unpacked under dest (nothing else of the repository)."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", ref, "pytest_jaato_eval"],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def one_run(python: str, tasks: Path, scratch: Path, tag: str, i: int,
            pythonpath: str | None) -> dict:
    store = scratch / f"{tag}-{i}.jsonl"
    tmp = scratch / f"tmp-{tag}-{i}"
    tmp.mkdir()
    cmd = [python, "-m", "pytest", str(tasks), "-p", "no:cacheprovider", "-q",
           *bvr.DEV_ONLY_PLUGINS, "--jaato-out", str(store)]
    env_before = dict(os.environ)
    os.environ["TMPDIR"] = str(tmp)
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    else:
        os.environ.pop("PYTHONPATH", None)
    try:
        rc, wall, landed = bvr.run_command(cmd, cwd=scratch, log_path=scratch / f"{tag}-{i}.log",
                                           timeout=600, watch=store)
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    return {"rc": rc, "wall": wall, "first": landed[0] if landed else None, "arms": len(landed)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    ap.add_argument("--before", default="8e023c2", help="the commit to compare with")
    ap.add_argument("--tasks", default=str(HERE / "tasks"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jaato-bench-first-") as name:
        scratch = Path(name)
        old = export(args.before, scratch / "before")
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for i in range(args.runs):  # alternate: load drift hits both alike
            runs["before"].append(one_run(args.python, Path(args.tasks), scratch, "before", i,
                                          str(old)))
            runs["after"].append(one_run(args.python, Path(args.tasks), scratch, "after", i,
                                         None))
    summary = {}
    for side, rs in runs.items():
        firsts = [r["first"] for r in rs if r["first"] is not None]
        summary[side] = {"first_arm_s": statistics.median(firsts) if firsts else None,
                         "wall_s": statistics.median(r["wall"] for r in rs),
                         "runs": rs}
    b, a = summary["before"]["first_arm_s"], summary["after"]["first_arm_s"]
    print(f"start -> first arm stored, median of {args.runs} (alternating), "
          f"load average {os.getloadavg()[0]:.2f}:")
    for side in ("before", "after"):
        s = summary[side]
        print(f"  {side:6}  first arm {bvr.fmt(s['first_arm_s'])} s   wall {bvr.fmt(s['wall_s'])} s")
    if a and b:
        print(f"  ratio after / before: {a / b:.2f}")
        summary["ratio"] = a / b
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    bvr.run_cli(main)
