"""Collection time at scale: `pytest --co` of N tasks x S profile sets x R repeats, next to
pytest collecting the same number of parametrised no-op tests, in one invocation.

    ./dev python bench/bench_collection.py                  # 1,000 tasks x 3 sets x 5 repeats
    ./dev python bench/bench_collection.py --tasks 200 --runs 3 --json out.json

Both trees are generated in a scratch directory (removed afterwards unless --keep):

- ours: N task folders, each a task.yaml, a two-file fixture and a config root with one
  profile per set; collected with `--profile-set=s0,s1,s2 --jaato-repeats R`.
- baselines, collected by the same interpreter with the same plugins:
  `one file`: one no-op test parametrised over N x S x R values;
  `N files`: N test files, each one no-op test parametrised over S x R values.
  `N folders` (with --folders): the same N files, each in a folder of its own: the shape
  of a task tree (pytest's per-folder work) with no task in it.

Each side runs --runs times, interleaved, in fresh processes; the table gives the
median wall time and the median CPU time (user + system of the pytest process: steadier
than wall time on a loaded machine) and the ratios ours / baseline.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
from pathlib import Path

import benchkit as bk

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


def make_baseline(root: Path, files: int, per_file: int, folders: bool = False) -> None:
    for i in range(files):
        where = root / f"d{i:04d}" if folders else root
        where.mkdir(exist_ok=True)
        (where / f"test_noop_{i:04d}.py").write_text(BASELINE.format(n=per_file))


def collect(python: str, args: list[str], cwd: Path, expect: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one `pytest --co -q` run; checks it collected `expect` items."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JAATO_EVAL"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # No bytecode cache for the baseline's test files either: both sides parse every run.
    cmd = [python, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
           *args]
    m = bk.measure(cmd, cwd=cwd, env=env, output=cwd / "collect.out")
    out = (cwd / "collect.out").read_text(errors="replace")
    found = re.search(r"(\d+) tests? collected", out)
    if m["rc"] != 0 or not found or int(found.group(1)) != expect:
        tail = "\n".join((out + m["stderr"]).splitlines()[-15:])
        raise SystemExit(f"bench: {' '.join(cmd)} in {cwd} failed (exit {m['rc']}, "
                         f"expected {expect} items):\n{tail}")
    return m["wall"], m["cpu"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--sets", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=5, help="runs per side (median reported)")
    p.add_argument("--python", default=bk.OUR_PYTHON, help="interpreter with the plugin")
    p.add_argument("--before", metavar="PYTHON", help="also collect our tasks with this "
                   "interpreter (another checkout of the plugin), interleaved, for a before/after")
    p.add_argument("--folders", action="store_true", help="also collect the N-files baseline "
                   "with each file in a folder of its own (the task tree's shape)")
    p.add_argument("--json", metavar="PATH", help="write every measurement here")
    p.add_argument("--keep", action="store_true", help="keep the generated trees")
    args = p.parse_args(argv)

    arms = args.tasks * args.sets * args.repeats
    with bk.scratch("jaato-bench-co-", args.keep) as scratch:
        ours, files, one = scratch / "tasks", scratch / "files", scratch / "one"
        folders = scratch / "folders"
        for d in (ours, files, one, folders):
            d.mkdir()
        make_tasks(ours, args.tasks, args.sets)
        make_baseline(files, args.tasks, args.sets * args.repeats)
        make_baseline(one, 1, arms)
        if args.folders:
            make_baseline(folders, args.tasks, args.sets * args.repeats, folders=True)
        sets = ",".join(f"s{s}" for s in range(args.sets))
        ours_argv = [f"--profile-set={sets}", f"--jaato-repeats={args.repeats}", str(ours)]
        sides = {
            "ours": (ours_argv, f"{args.tasks:,} tasks, {arms:,} arms"),
            **({"before": (ours_argv, f"the same, with {args.before}")} if args.before else {}),
            "one file": ([str(one)], f"{arms:,} parametrised no-op tests in one file"),
            "files": ([str(files)], f"{arms:,} parametrised no-op tests in {args.tasks:,} files"),
            **({"folders": ([str(folders)], f"the same {args.tasks:,} files, one per folder")}
               if args.folders else {}),
        }
        runs: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        python = {side: args.before if side == "before" else args.python for side in sides}
        for side, (argv, _) in sides.items():  # one unmeasured run each: warm caches
            collect(python[side], argv, scratch, arms)
        for run in range(args.runs):
            for side, (argv, _) in sides.items():
                runs[side].append(collect(python[side], argv, scratch, arms))
            bk.log(f"run {run + 1}/{args.runs}: " + ", ".join(
                f"{side} {runs[side][-1][0]:.2f} s" for side in sides))
    med = {side: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r))
           for side, r in runs.items()}
    print(f"\n`pytest --co` of {arms:,} items ({args.tasks:,} tasks x {args.sets} sets x "
          f"{args.repeats} repeats), median of {args.runs} runs, {bk.load()}\n")
    rows = []
    for side, (_, label) in sides.items():
        walls = [w for w, _ in runs[side]]
        ratios = ["", ""] if side == "ours" else [f"{med['ours'][i] / med[side][i]:.2f}x"
                                                  for i in (0, 1)]
        rows.append([label, f"{med[side][0]:.2f}", f"{min(walls):.2f}-{max(walls):.2f}",
                     f"{med[side][1]:.2f}", *ratios])
    print("\n".join(bk.table(["what", "wall s (median)", "wall min-max", "CPU s (median)",
                              "ours / this, wall", "ours / this, CPU"], rows, markdown=True)))
    bk.write_json(args.json, {"tasks": args.tasks, "sets": args.sets, "repeats": args.repeats,
                              "arms": arms, "runs": runs, "median": med, "load": bk.load()})
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
