#!/usr/bin/env python3
"""Soak on a busy machine: N echo arms at `-n 2`, idle and beside a CPU + memory hog, R times.

Every arm runs on jaato's echo provider and passes on a quiet machine, so every BLOCKED arm
is spurious: the machine's load, not a fault. Each repetition runs the same project twice,
idle then loaded (fresh private daemons each time, so every run meets cold daemons and
runners), and reports the spurious BLOCKED count of each and the wall-time ratio loaded/idle.

    ./dev python bench/soak_load.py [--arms 200] [--repeats 3] [--workers 2]
                                    [--cpu 6] [--memory-mb 1024] [--hog-seconds 900]

The hog (hog.py) is `--cpu` busy loops and one process holding `--memory-mb`, each bounded by
`timeout --hog-seconds` and ended by pid when the run is over; the table says whether it
outlived the run. `--compare-python` runs another build of the plugin loaded as well (an
interpreter whose `pytest_jaato_eval` is, say, an older commit's), for a side-by-side count (a run longer than the bound was partly measured idle). "Idle" is this
machine without the hog: the load average before each run is printed, since it is shared.
"""
from __future__ import annotations

import argparse
import os

import benchkit as bk
from hog import Hog


def one_run(base, label: str, run: int, args: argparse.Namespace, hog: Hog | None) -> dict:
    store, tmp = base / f"{label}{run}.jsonl", base / f"tmp-{label}{run}"
    tmp.mkdir()
    load = os.getloadavg()[0]
    python = args.compare_python if label == "compared" else args.python
    ran = bk.run(bk.our_pytest(python, "tasks", store, "-n", str(args.workers),
                               f"--arm-timeout={args.arm_timeout}", *args.pytest_arg),
                 cwd=base, log_path=base / f"{label}{run}.log", needle=str(tmp), settle=0.5,
                 env={**os.environ, "TMPDIR": str(tmp)}, timeout=args.run_timeout)
    covered = hog is not None and all(p.poll() is None for p, _ in hog.running)
    records = bk.read_records(store)
    blocked = [r for r in records if r["state"] == "BLOCKED"]
    row = {"label": label, "run": run, "exit": ran.rc, "records": len(records),
           "blocked": len(blocked), "failed": sum(r["state"] == "FAIL" for r in records),
           "retried": sum(any(c.startswith(("session.new was sent again",
                                             "the daemon refused the connection"))
                              for c in r.get("notes") or r.get("caveats") or [])
                          for r in records),
           "wall": round(ran.wall, 2), "load_before": round(load, 2),
           "hog_covered_run": covered if hog is not None else None,
           "left_running": len(ran.leftovers),
           "reasons": [f"{r['arm_id']}: {r['blocked_reason']}" for r in blocked]}
    bk.log(f"{label} run {run}: exit {ran.rc}, {len(records)}/{args.arms} records, "
           f"{ran.wall:.1f} s, blocked {len(blocked)}, failed {row['failed']}, "
           f"sent again {row['retried']}, load before {load:.2f}"
           + ("" if hog is None else f", hog covered the run: {covered}"))
    for reason in row["reasons"][:10]:
        bk.log(f"    BLOCKED {reason[:300]}")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cpu", type=int, default=6)
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--hog-seconds", type=float, default=900.0)
    ap.add_argument("--arm-timeout", type=float, default=900.0)
    ap.add_argument("--run-timeout", type=float, default=3600.0)
    ap.add_argument("--python", default=bk.OUR_PYTHON, help="ours (default .venv/bin/python)")
    ap.add_argument("--compare-python", default=None,
                    help="another build of the plugin (e.g. an older commit's), run loaded too")
    ap.add_argument("--pytest-arg", action="append", default=[],
                    help="passed to every run (e.g. --pytest-arg=--jaato-sandbox=none)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows: list[dict] = []
    with bk.scratch("jsoakl-") as base:
        bk.echo_task(base / "tasks", "echo", repeats=args.arms)
        for run in range(1, args.repeats + 1):
            rows.append(one_run(base, "idle", run, args, None))
            with Hog(args.cpu, args.memory_mb, args.hog_seconds) as hog:
                rows.append(one_run(base, "loaded", run, args, hog))
            if args.compare_python:
                with Hog(args.cpu, args.memory_mb, args.hog_seconds) as hog:
                    rows.append(one_run(base, "compared", run, args, hog))
    idle = [r for r in rows if r["label"] == "idle"]
    loaded = [r for r in rows if r["label"] == "loaded"]
    head = ["run", "idle wall s", "loaded wall s", "loaded/idle", "spurious BLOCKED idle",
            "spurious BLOCKED loaded", "FAIL", "sent again (loaded)", "hog covered the run"]
    body = [[i["run"], i["wall"], lo["wall"], bk.ratio(lo["wall"], i["wall"]), i["blocked"],
             lo["blocked"], i["failed"] + lo["failed"], lo["retried"], lo["hog_covered_run"]]
            for i, lo in zip(idle, loaded)]
    print("\n".join(bk.table(head, body, markdown=True)))
    compared = [r for r in rows if r["label"] == "compared"]
    if compared:
        print(f"\ncompared ({args.compare_python}), loaded:")
        print("\n".join(bk.table(
            ["run", "wall s", "wall / ours loaded", "spurious BLOCKED", "FAIL", "hog covered the run"],
            [[c["run"], c["wall"], bk.ratio(c["wall"], lo["wall"]), c["blocked"], c["failed"],
              c["hog_covered_run"]] for c, lo in zip(compared, loaded)], markdown=True)))
    spurious = sum(r["blocked"] for r in loaded) + sum(r["blocked"] for r in idle)  # ours
    print(f"\n{args.repeats} x {args.arms} echo arms at -n {args.workers}, loaded = {args.cpu} "
          f"busy loops + {args.memory_mb} MB on {os.cpu_count()} CPUs: spurious BLOCKED "
          f"{spurious}; median wall loaded/idle "
          f"{bk.fmt(bk.ratio(bk.median(r['wall'] for r in loaded), bk.median(r['wall'] for r in idle)))}; "
          f"processes left {sum(r['left_running'] for r in rows)}; {bk.load()}")
    bk.write_json(args.json, {"args": vars(args), "runs": rows})
    return 0 if spurious == 0 else 1


if __name__ == "__main__":
    bk.run_cli(main)
