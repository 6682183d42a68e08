#!/usr/bin/env python3
"""What each grader's own view of the workspace and the arm's resource limits cost.

Two parts, each side by side:

* end to end: the same confined echo arms (three script graders each) run by the package as
  of a git ref (`--ref`, before the view and the limits) and by the working tree, alternating,
  R runs each: the median per-arm time (gaps between records landing in the store, watched
  from outside, after the first), the wall time, and the ratios head / ref;
* in process: one script grader (`true`) with and without the fresh copy of the workspace
  (workspace.as_left), and one arm's resource guard (engine/resources.guarded: the disk watch's
  two walks and its thread) against none, on workspaces of three sizes.

    ./dev python bench/bench_grader_view.py [--ref f3294eb] [--runs 3] [--arms 10]

Every daemon is the plugin's own private one; only processes this script started are ended.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import benchkit as bk
import yaml

GRADERS = [{"kind": "script", "run": "grep -qx READY answer.txt"},
           {"kind": "script", "run": "test -f seed.txt"},
           {"kind": "script", "run": "test ! -e nothing"}]


def tasks_with_graders(scratch: Path) -> Path:
    tasks = scratch / "tasks"
    task = bk.echo_task(tasks, "three-graders")
    manifest = yaml.safe_load((task / "task.yaml").read_text())
    manifest["graders"] = GRADERS
    (task / "task.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return tasks


def one_run(python: str, tasks: Path, scratch: Path, side: str, i: int, arms: int,
            pythonpath: str | None) -> dict:
    store, tmp = scratch / f"{side}-{i}.jsonl", scratch / f"tmp-{side}-{i}"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    ran = bk.run(bk.our_pytest(python, tasks, store, "--jaato-sandbox=bwrap",
                               f"--jaato-repeats={arms}"),
                 cwd=scratch, env=env, timeout=900, log_path=scratch / f"{side}-{i}.log",
                 watch=store)
    gaps = [b - a for a, b in zip(ran.landed, ran.landed[1:])]
    states = [r.get("state") for r in bk.read_records(store)] if store.exists() else []
    return {"rc": ran.rc, "wall": ran.wall, "per_arm": bk.median(gaps),
            "passed": states.count("PASS")}


def end_to_end(args, scratch: Path) -> dict:
    ref = bk.git_export(args.ref, scratch / "ref")
    tasks = tasks_with_graders(scratch)
    runs: dict[str, list[dict]] = {"ref": [], "head": []}
    for i in range(args.runs):  # alternate: load drift hits both alike
        for side in runs:
            runs[side].append(one_run(args.python, tasks, scratch, side, i, args.arms,
                                      str(ref) if side == "ref" else None))
    out: dict = {side: {key: bk.median(r[key] for r in rs) for key in ("per_arm", "wall")}
                 | {"runs": rs} for side, rs in runs.items()}
    print(f"{args.arms} confined echo arms of 3 script graders a run, median of {args.runs} runs "
          f"(alternating), {bk.load()}:")
    for side in runs:
        s = out[side]
        passed = sum(r["passed"] for r in s["runs"])
        print(f"  {side:4}  per arm {bk.fmt(s['per_arm'])} s   wall {bk.fmt(s['wall'])} s   "
              f"({passed} of {args.runs * args.arms} PASS)")
    for key in ("per_arm", "wall"):
        out[f"ratio_{key}"] = bk.ratio(out["head"][key], out["ref"][key])
        print(f"  ratio head / {args.ref}, {key.replace('_', ' ')}: {bk.fmt(out[f'ratio_{key}'])}")
    return out


def workspace_of(size: str, root: Path) -> Path:
    ws = root / size / "ws"
    ws.mkdir(parents=True)
    (ws / "seed.txt").write_text("seed\n")
    (ws / "answer.txt").write_text("READY\n")
    if size == "1k files, 10 MB":
        for i in range(1000):
            (ws / f"d{i % 20}").mkdir(exist_ok=True)
            (ws / f"d{i % 20}" / f"f{i}").write_bytes(os.urandom(10 << 10))
    elif size == "a package: 65 MB":
        src = Path(bk.OUR_PYTHON).parents[1] / "lib"
        site = next(src.glob("python3*/site-packages"), None)
        if site is None or not (site / "jaato_server").is_dir():
            return ws
        shutil.copytree(site / "jaato_server", ws / "jaato_server", symlinks=True)
    return ws


def timed(fn, n: int) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def measure_one(ws: Path, config: Path, calls: int) -> tuple[float, float, float]:
    """(a grader without its view, with it, an arm's guard), seconds, for one workspace."""
    from pytest_jaato_eval.engine import resources
    from pytest_jaato_eval.engine.agent_run import AgentRun
    from pytest_jaato_eval.graders import context
    from pytest_jaato_eval.graders.context import GraderContext
    from pytest_jaato_eval.graders.script import grade_script
    from pytest_jaato_eval.task.model import ScriptGrader

    spec = ScriptGrader(kind="script", run="true")
    ctx = GraderContext(workspace=ws, config_root=config, params={},
                        run=AgentRun(finish_reason="stop"))
    view = timed(lambda: grade_script(spec, ctx), calls)
    real = context.as_left
    context.as_left = lambda ws: contextlib.nullcontext(ws)  # type: ignore[assignment]
    try:
        bare = timed(lambda: grade_script(spec, ctx), calls)
    finally:
        context.as_left = real

    def guarded():
        with resources.guarded(resources.Bounds(), None, [ws.parent]):
            pass
    return bare, view, timed(guarded, calls)


def in_process(args, scratch: Path) -> dict:
    sys.path.insert(0, str(bk.REPO))
    config = scratch / "config"
    config.mkdir()
    rows, out = [], {}
    for size in ("an echo arm's: 3 files", "1k files, 10 MB", "a package: 65 MB"):
        ws = workspace_of(size, scratch / "sizes")
        bare, view, guard = measure_one(ws, config, args.calls)
        out[size] = {"grader_bare": bare, "grader_view": view, "guard": guard}
        rows.append((size, f"{bare * 1000:.1f} ms", f"{view * 1000:.1f} ms",
                     f"{(view - bare) * 1000:.1f} ms", f"{guard * 1000:.1f} ms"))
    print(f"\nin process, median of {args.calls} calls, unconfined (the copy is the same in the "
          f"sandbox), {bk.load()}:")
    print("\n".join(bk.table(("workspace", "a grader, no view", "with its view",
                              "the view's cost", "an arm's guard"), rows)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=bk.OUR_PYTHON)
    ap.add_argument("--ref", default="f3294eb", help="the package before the view and limits")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--arms", type=int, default=10, help="repeats of the task in each run")
    ap.add_argument("--calls", type=int, default=20, help="in-process calls per measurement")
    ap.add_argument("--only", choices=("e2e", "process"), default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    summary = {}
    with bk.scratch("jaato-bench-grader-view-") as scratch:
        if args.only != "process":
            summary["end_to_end"] = end_to_end(args, scratch)
        if args.only != "e2e":
            summary["in_process"] = in_process(args, scratch)
    bk.write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
