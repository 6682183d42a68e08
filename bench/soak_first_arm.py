#!/usr/bin/env python3
"""Soak under load: the shipped tasks at `-n 2` beside CPU burners, N runs; spurious BLOCKED counted.

Every arm of the shipped tasks passes on the echo provider, so any BLOCKED arm is
spurious. Each run's private daemons are fresh, so every run exercises a cold
daemon's first session, where a dropped `session.new` was seen under load.
When a run has a BLOCKED arm, its daemons' logs are kept (a conftest in the scratch
project copies them before the run folder is removed) and the lines naming the
cause are printed.

    ./dev python bench/soak_first_arm.py [--runs 25] [--workers 2] [--burners 2] [--json out.json]

Burners are busy-looping Python processes this script starts and ends by PID.
Reports the machine's load average before and after, because the machine is shared.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import benchkit as bk

# Loaded by the controller and by every xdist worker: before the plugin removes a run
# folder, its daemon logs are copied to $SOAK_KEEP (only the logs; nothing else changes).
KEEPER = '''
import os, shutil, time
from pathlib import Path
from pytest_jaato_eval.pytest_layer import worker as _worker

_finish = _worker.Worker.finish

def _keep(self):
    dest = Path(os.environ["SOAK_KEEP"])
    if self._run_dir is not None:  # a worker's run folder holds its daemon's logs
        for log in Path(self._run_dir).glob("**/daemon/daemon.*"):
            if log.suffix in (".log", ".out"):
                target = dest / f"{os.getpid()}-{time.time_ns()}-{log.name}"
                try:
                    shutil.copyfile(log, target)
                except OSError:
                    pass
    _finish(self)

_worker.Worker.finish = _keep
'''

CAUSE_WORDS = ("Error reading from", "Traceback", "Client error", "ERROR", "LOOP_STALL")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--keep-logs", default=tempfile.gettempdir() + "/jsoak1-logs",
                    help="where the daemon logs of runs with a BLOCKED arm are copied")
    ap.add_argument("--json", default=None, help="write every run's raw numbers here")
    args = ap.parse_args()
    expected_arms = None
    rows: list[dict] = []
    load_before = bk.load()
    burning = [bk.spawn([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    print(f"before: {load_before}; {args.burners} burners started", flush=True)
    try:
        with bk.scratch("jsoak1-") as base:
            shutil.copytree(bk.REPO / "tasks", base / "tasks")
            (base / "conftest.py").write_text(KEEPER)
            for run in range(1, args.runs + 1):
                store, tmp, keep = base / f"run{run}.jsonl", base / f"tmp{run}", base / f"logs{run}"
                tmp.mkdir()
                keep.mkdir()
                ran = bk.run(bk.our_pytest(bk.OUR_PYTHON, "tasks", store, "-n", str(args.workers)),
                             cwd=base, log_path=base / f"run{run}.log", needle=str(tmp), settle=0.5,
                             env={**os.environ, "TMPDIR": str(tmp), "SOAK_KEEP": str(keep)})
                records = bk.read_records(store)
                expected_arms = expected_arms or len(records)
                blocked = [r for r in records if r["state"] == "BLOCKED"]
                rows.append({"run": run, "exit": ran.rc, "records": len(records),
                             "blocked": len(blocked), "failed": sum(r["state"] == "FAIL" for r in records),
                             "left_running": len(ran.leftovers), "wall": round(ran.wall, 2),
                             "reasons": [f"{r['arm_id']}: {r['blocked_reason']}" for r in blocked]})
                print(f"run {run:2d}: exit {ran.rc}, {len(records)} records, {ran.wall:5.1f} s, "
                      f"blocked {len(blocked)}, left {len(ran.leftovers)}, "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
                for r in blocked:
                    print(f"        BLOCKED {r['arm_id']}: {r['blocked_reason'][:300]}")
                if blocked:
                    for log in sorted(keep.iterdir()):
                        lines = log.read_text(errors="replace").splitlines()
                        for x in [x for x in lines if any(w in x for w in CAUSE_WORDS)][:12]:
                            print(f"        {log.name}: {x[:300]}")
                        saved = Path(args.keep_logs) / f"run{run}"
                        saved.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(log, saved / log.name)
                shutil.rmtree(keep, ignore_errors=True)
    finally:
        for proc, tree in burning:
            tree.kill(0)
            proc.wait()
    walls = [r["wall"] for r in rows]
    spurious = sum(r["blocked"] for r in rows)
    print(f"\n{len(rows)} runs x {expected_arms} arms at -n {args.workers} beside {args.burners} "
          f"burners: spurious BLOCKED {spurious}, FAIL {sum(r['failed'] for r in rows)}, "
          f"processes left {sum(r['left_running'] for r in rows)}; wall {min(walls):.1f}-"
          f"{max(walls):.1f} s; after: {bk.load()}")
    bk.write_json(args.json, {"runs": rows, "load_before": load_before,
                              "load_after": bk.load(), "burners": args.burners})
    return 0 if spurious == 0 else 1


if __name__ == "__main__":
    bk.run_cli(main)
