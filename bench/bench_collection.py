"""Collection time at scale: `pytest --co` of N tasks x S profile sets x R repeats, next to
pytest collecting the same number of parametrised no-op tests, in one invocation.

    python3 bench/bench_collection.py                       # 1,000 tasks x 3 sets x 5 repeats
    python3 bench/bench_collection.py --tasks 200 --runs 3 --json out.json

Both trees are generated in a scratch directory (removed afterwards unless --keep):

- ours: N task folders, each a task.yaml, a two-file fixture and a config root with one
  profile per set; collected with `--profile-set=s0,s1,s2 --jaato-repeats R`.
- baseline: N test files, each one no-op test parametrised over S x R values (the same
  number of files and items), collected by the same interpreter, with the same plugins.

Each side runs --runs times, alternating, in fresh processes; the table gives the median
wall time of each and the ratio ours / baseline. Standard library only.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PYTHON = HERE.parent / ".venv" / "bin" / "python"

TASK = """\
id: task-{i:04d}
description: generated task {i} for the collection benchmark
environment:
  fixture: fixture
  config_root: .jaato
input:
  prompt: Write the word READY, on a line of its own, to answer.txt.
  agent_params: {{port: {port}}}
harness:
  profile: writer
  profile_set: s0
graders:
  - kind: script
    run: grep -qx READY answer.txt
  - kind: processor
    script: processors/check.py
repeats: 1
"""
PROFILE = """\
name: writer
provider: echo
model: echo
plugins: ["file_edit(preload)", permission]
plugin_configs:
  echo:
    tool_call: {name: writeNewFile, args: {path: answer.txt, content: "READY\\n"}}
    response: done
  permission: {policy: {defaultPolicy: allow}}
"""
PROCESSOR = "def validate(payload, context):\n    return []\n"
BASELINE = """\
import pytest


@pytest.mark.parametrize("arm", range({n}))
def test_noop(arm):
    pass
"""


def make_tasks(root: Path, tasks: int, sets: int) -> None:
    for i in range(tasks):
        folder = root / f"task-{i:04d}"
        (folder / "fixture" / "src").mkdir(parents=True)
        (folder / "task.yaml").write_text(TASK.format(i=i, port=8000 + i))
        (folder / "fixture" / "README.txt").write_text(f"task {i}\n" * 20)
        (folder / "fixture" / "src" / "app.py").write_text("print('hello')\n" * 50)
        (folder / ".jaato" / "processors").mkdir(parents=True)
        (folder / ".jaato" / "processors" / "check.py").write_text(PROCESSOR)
        for s in range(sets):
            profiles = folder / ".jaato" / "profiles" / f"s{s}"
            profiles.mkdir(parents=True)
            (profiles / "writer.yaml").write_text(PROFILE)


def make_baseline(root: Path, files: int, per_file: int) -> None:
    for i in range(files):
        (root / f"test_noop_{i:04d}.py").write_text(BASELINE.format(n=per_file))


def collect(python: str, args: list[str], cwd: Path, expect: int) -> float:
    """Wall seconds of one `pytest --co -q` run; checks it collected `expect` items."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JAATO_EVAL"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # No bytecode cache for the baseline's test files either: both sides parse every run.
    cmd = [python, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesis",
           *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    found = re.search(r"(\d+) tests? collected", proc.stdout)
    if proc.returncode != 0 or not found or int(found.group(1)) != expect:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise SystemExit(f"bench: {' '.join(cmd)} in {cwd} failed (exit {proc.returncode}, "
                         f"expected {expect} items):\n{tail}")
    return wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--sets", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=5, help="runs per side (median reported)")
    p.add_argument("--python", default=str(DEFAULT_PYTHON), help="interpreter with the plugin")
    p.add_argument("--json", metavar="PATH", help="write every measurement here")
    p.add_argument("--keep", action="store_true", help="keep the generated trees")
    args = p.parse_args(argv)

    arms = args.tasks * args.sets * args.repeats
    scratch = Path(tempfile.mkdtemp(prefix="jaato-bench-co-"))
    try:
        ours, base = scratch / "tasks", scratch / "baseline"
        ours.mkdir()
        base.mkdir()
        make_tasks(ours, args.tasks, args.sets)
        make_baseline(base, args.tasks, args.sets * args.repeats)
        sets = ",".join(f"s{s}" for s in range(args.sets))
        ours_args = [f"--profile-set={sets}", f"--jaato-repeats={args.repeats}", str(ours)]
        times: dict[str, list[float]] = {"ours": [], "baseline": []}
        collect(args.python, ours_args, scratch, arms)  # one unmeasured run each: warm caches
        collect(args.python, [str(base)], scratch, arms)
        for run in range(args.runs):
            times["ours"].append(collect(args.python, ours_args, scratch, arms))
            times["baseline"].append(collect(args.python, [str(base)], scratch, arms))
            print(f"run {run + 1}/{args.runs}: ours {times['ours'][-1]:.2f} s, "
                  f"baseline {times['baseline'][-1]:.2f} s", file=sys.stderr)
        ours_s, base_s = statistics.median(times["ours"]), statistics.median(times["baseline"])
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"\n`pytest --co` of {arms:,} items ({args.tasks:,} files x {args.sets} x "
              f"{args.repeats}), median of {args.runs} runs, load average {load:.1f}\n")
        print("| what | median s | min s | max s |")
        print("|---|---|---|---|")
        for side, label in (("ours", f"{args.tasks:,} tasks, {arms:,} arms"),
                            ("baseline", f"{arms:,} parametrised no-op tests")):
            t = times[side]
            print(f"| {label} | {statistics.median(t):.2f} | {min(t):.2f} | {max(t):.2f} |")
        print(f"\nratio ours / baseline: {ours_s / base_s:.2f}x")
        if args.json:
            Path(args.json).write_text(json.dumps({
                "tasks": args.tasks, "sets": args.sets, "repeats": args.repeats, "arms": arms,
                "runs": times, "median": {"ours": ours_s, "baseline": base_s},
                "ratio": ours_s / base_s, "load": load}, indent=2))
    finally:
        if args.keep:
            print(f"kept: {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
