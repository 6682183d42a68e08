#!/usr/bin/env python3
"""Soak: a sweep of >= 12 arms at `-n 4` on private daemons, run N times in a row.

Counts what must stay zero: spurious BLOCKED arms, missing or duplicated records, and
daemon/runner processes left behind after a run (ended by pid when found).

    ./dev python bench/soak_xdist.py [--runs 10] [--workers 4] [--arms 12]
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import benchkit as bk


def make_tasks(root: Path, arms: int) -> set[str]:
    """Three copies of the shipped write-file task, repeats spread to reach `arms` arms."""
    expected = set()
    per_task = -(-arms // 3)
    for i in range(3):
        d = root / f"soak-{i}"
        shutil.copytree(bk.REPO / "tasks" / "write-file", d)
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
    totals = dict.fromkeys(("blocked", "missing", "duplicated", "left_running", "failed"), 0)
    walls = []
    with bk.scratch("jsoak-") as base:
        expected = make_tasks(base / "tasks", args.arms)
        for run in range(1, args.runs + 1):
            store, tmp = base / f"run{run}.jsonl", base / f"tmp{run}"
            tmp.mkdir()
            ran = bk.run(bk.our_pytest(bk.OUR_PYTHON, base / "tasks", store, "-n", str(args.workers)),
                         cwd=base, log_path=base / f"run{run}.log", needle=str(tmp),
                         env={**os.environ, "TMPDIR": str(tmp)})
            walls.append(ran.wall)
            records = bk.read_records(store)
            ids = [r["arm_id"] for r in records]
            blocked = [r for r in records if r["state"] == "BLOCKED"]
            row = {"blocked": len(blocked), "missing": len(expected - set(ids)),
                   "duplicated": len(ids) - len(set(ids)), "left_running": len(ran.leftovers),
                   "failed": sum(r["state"] == "FAIL" for r in records)}
            for k, v in row.items():
                totals[k] += v
            print(f"run {run:2d}: exit {ran.rc}, {len(records)} records, {ran.wall:5.1f} s, "
                  + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
            for r in blocked:
                print(f"        BLOCKED {r['arm_id']}: {r['blocked_reason']}")
    print(f"\n{args.runs} runs x {len(expected)} arms at -n {args.workers}: "
          + ", ".join(f"{k} {v}" for k, v in totals.items())
          + f"; wall {min(walls):.1f}-{max(walls):.1f} s per run; {bk.load()}")
    return 0 if not any(totals.values()) else 1


if __name__ == "__main__":
    bk.run_cli(main)
