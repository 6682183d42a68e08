"""What each added xdist worker costs in memory: `-n N` on the workers' own private daemons,
beside `-n N` on one daemon they all share (`--jaato-socket`), summed PSS of the whole tree.

    ./dev python bench/bench_worker_memory.py                    # 8 echo arms, -n 1, 2, 4
    ./dev python bench/bench_worker_memory.py --arms 16 --levels 1,2,4 --json out.json

The shared side is the bound of what one daemon for the run could save: a daemon started
here as the plugin starts its own (its runner template warmed, a HOME of its own) with
`JAATO_RUNNER_POOL_SIZE` = max(2, N), as the run's header advises for a shared daemon. It
keeps none of a private daemon's guarantees (docs/running.md, "What `-n` costs"); it is
measured to say what they cost in memory, not as a way to run. PSS splits each shared page
between the processes that map it, so runners forked from one template count once.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import benchkit as bk

from pytest_jaato_eval.engine.daemon import warm_template_path


def one_run(scratch: Path, tasks: Path, workers: int, shared: bool) -> dict[str, Any]:
    run_dir = scratch / f"{'shared' if shared else 'private'}-{workers}"
    run_dir.mkdir()
    extra = ["-n", str(workers)]
    daemon = None
    if shared:
        daemon = bk.PrivateDaemon(bk.OUR_PYTHON, scratch / f"d{workers}", "shared", env={
            "JAATO_RUNNER_POOL_SIZE": str(max(2, workers)), "HOME": str(run_dir),
            "PYTHONPATH": warm_template_path(os.environ.get("PYTHONPATH"))})
        daemon.start(120)
        extra += ["--jaato-socket", daemon.socket]
    store = run_dir / "results.jsonl"
    try:
        run = bk.run(bk.our_pytest(bk.OUR_PYTHON, tasks, store, *extra), cwd=run_dir,
                     log_path=run_dir / "log", timeout=600, memory="pss",
                     also=lambda: [daemon.pid] if daemon is not None and daemon.pid else [])
    finally:
        if daemon is not None:
            daemon.stop()
    records = [r for r in bk.read_records(store) if "state" in r]
    return {"rc": run.rc, "wall": round(run.wall, 1), "arms": len(records),
            "states": bk.count(r["state"] for r in records), **(run.memory or {})}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", type=int, default=8, help="repeats of the one echo task")
    p.add_argument("--levels", default="1,2,4", help="worker counts (comma-separated)")
    p.add_argument("--json", help="write every measurement here")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    results: dict[str, dict[str, Any]] = {}
    with bk.scratch("jworkmem-", args.keep) as scratch:
        (scratch / "t").mkdir()
        os.environ["TMPDIR"] = str(scratch / "t")  # the daemons' trace folders, removed with it
        tasks = scratch / "tasks"
        bk.echo_task(tasks, "ready", repeats=args.arms)
        load = bk.load()
        for n in levels:
            for shared in (False, True):
                key = f"{'shared' if shared else 'private'} -n {n}"
                results[key] = one_run(scratch, tasks, n, shared)
                bk.log(f"{key}: {results[key]}")
    rows = []
    for n in levels:
        private, shared = results[f"private -n {n}"], results[f"shared -n {n}"]
        rows.append([f"-n {n}", bk.fmt(private["peak_rss_mb"], 0), bk.fmt(shared["peak_rss_mb"], 0),
                     f"{private['states']} / {shared['states']}",
                     bk.fmt(private["wall"], 1), bk.fmt(shared["wall"], 1)])
    print(f"{args.arms} echo arms; peak summed PSS (MB) of pytest, its workers, the daemons and "
          f"runners; load at the start: {load}")
    print("\n".join(bk.table(["workers", "private daemons", "one shared daemon",
                              "arms (private / shared)", "wall s private", "wall s shared"], rows)))
    for key, result in results.items():
        print(f"{key}: {result['peak_breakdown']}")
    bk.write_json(args.json, {"args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
