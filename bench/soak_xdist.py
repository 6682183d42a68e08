#!/usr/bin/env python3
"""Soak: a sweep of >= 12 arms at `-n 4` on private daemons, run N times in a row.

Counts what must stay zero: spurious BLOCKED arms, missing or duplicated records, and
daemon/runner processes left behind after a run. Needs the project's .venv (./dev makes it).

    python3 bench/soak_xdist.py [--runs 10] [--workers 4] [--arms 12]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing the sibling script
import bench_vs_reference as bvr  # noqa: E402  (our own sibling script: its /proc helper)
PY = REPO / ".venv" / "bin" / "python"


def make_tasks(root: Path, arms: int) -> set[str]:
    """Three copies of the shipped write-file task, repeats spread to reach `arms` arms."""
    expected = set()
    per_task = -(-arms // 3)
    for i in range(3):
        d = root / f"soak-{i}"
        shutil.copytree(REPO / "tasks" / "write-file", d)
        text = (d / "task.yaml").read_text()
        text = text.replace("id: write-file", f"id: soak-{i}").replace("repeats: 2", f"repeats: {per_task}")
        (d / "task.yaml").write_text(text)
        expected |= {f"soak-{i}@echo#{r}" for r in range(per_task)}
    return expected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--arms", type=int, default=12)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="jsoak-"))
    tasks = base / "tasks"
    expected = make_tasks(tasks, args.arms)
    totals = {"blocked": 0, "missing": 0, "duplicated": 0, "left_running": 0, "failed": 0}
    walls = []
    try:
        for run in range(1, args.runs + 1):
            store = base / f"run{run}.jsonl"
            tmp = base / f"tmp{run}"
            tmp.mkdir()
            t0 = time.monotonic()
            proc = subprocess.run(
                [str(PY), "-m", "pytest", str(tasks), "-q", "-p", "no:cacheprovider",
                 "-p", "no:hypothesispytest", "-n", str(args.workers), f"--jaato-out={store}"],
                cwd=base, capture_output=True, text=True, env={**__import__("os").environ,
                                                                "TMPDIR": str(tmp)})
            walls.append(time.monotonic() - t0)
            records = [json.loads(line) for line in store.read_text().splitlines() if line.strip()]
            ids = [r["arm_id"] for r in records]
            blocked = [r for r in records if r["state"] == "BLOCKED"]
            time.sleep(1)
            left = bvr.processes_naming(str(tmp))
            row = {"blocked": len(blocked), "missing": len(expected - set(ids)),
                   "duplicated": len(ids) - len(set(ids)), "left_running": len(left),
                   "failed": sum(r["state"] == "FAIL" for r in records)}
            for k, v in row.items():
                totals[k] += v
            print(f"run {run:2d}: exit {proc.returncode}, {len(records)} records, "
                  f"{walls[-1]:5.1f} s, " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
            for r in blocked:
                print(f"        BLOCKED {r['arm_id']}: {r['blocked_reason']}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{args.runs} runs x {len(expected)} arms at -n {args.workers}: "
          + ", ".join(f"{k} {v}" for k, v in totals.items())
          + f"; wall {min(walls):.1f}-{max(walls):.1f} s per run")
    return 0 if not any(totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
