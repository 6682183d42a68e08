#!/usr/bin/env python3
"""The plugin and jaato-eval 0.3.4 side by side, in one run, on the same work: every figure of
the README's comparison at once.

    ./dev python bench/bench_side_by_side.py [--rounds 1] [--cold-arms 8] [--arms 16]
        [--levels 0:1,2:2,4:4] [--store /tmp/store.jsonl] [--ref-python /tmp/je/bin/python]
        [--only cold,levels,report] [--json OUT]

The workloads, each run by both engines in alternating order (which goes first swaps every
round), so a machine that gets busier or quieter meanwhile weighs on both alike:

* cold      ``--cold-arms`` echo arms one at a time on a daemon started for the run: ours
            ``pytest TASKS`` (its private daemon starts inside the run), the reference
            ``jaato_eval run TASKS --concurrency 1`` on a private daemon started just before
            (its start counted in its wall, as ours is);
* levels    ``--arms`` echo arms at each pair of ``--levels`` (``N:C``: ours ``-n N``, the
            reference ``--concurrency C``), each run on fresh private daemons;
* report    ``report STORE`` of a store made by bench/make_store.py (100,000 records).

The agent is jaato's echo provider (bench/tasks/ready-echo: a file written, a script grader),
so the figures are the engines' and the daemon's own floor. For each run: wall seconds, arms
stored and BLOCKED, and the peak of the summed proportional set size of its whole process
tree, daemons and runners included, sampled every 0.2 s (`report`: its own peak RSS, from
wait4: one process). The table gives the median over rounds and ours / reference.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import benchkit as bk
from bench_vs_reference import with_repeats

TASK = bk.HERE / "tasks" / "ready-echo"


def levels(text: str) -> list[tuple[int, int]]:
    pairs = [part.split(":") for part in text.split(",")]
    return [(int(n), int(c)) for n, c in pairs]


def ours_run(args: argparse.Namespace, tasks: Path, run_dir: Path, workers: int) -> dict[str, Any]:
    store = run_dir / "results.jsonl"
    cmd = bk.our_pytest(args.python, tasks, store, "-n", str(workers))
    ran = bk.run(cmd, cwd=run_dir, log_path=run_dir / "output.log", timeout=args.timeout,
                 watch=store, memory="pss")
    return outcome(ran, store, ran.wall)


def ref_run(args: argparse.Namespace, tasks: Path, run_dir: Path, concurrency: int) -> dict[str, Any]:
    store = run_dir / "results.jsonl"
    daemon = bk.PrivateDaemon(args.ref_python, run_dir / "daemon", "reference")
    ready = daemon.start(args.daemon_timeout)
    try:
        cmd = [args.ref_python, "-m", "jaato_eval", "run", str(tasks), "--out", str(store),
               "--socket", daemon.socket, "--workspaces", str(run_dir / "workspaces"),
               "--concurrency", str(concurrency)]
        ran = bk.run(cmd, cwd=run_dir, log_path=run_dir / "output.log", timeout=args.timeout,
                     watch=store, memory="pss", also=lambda: [daemon.pid] if daemon.pid else [])
    finally:
        daemon.stop("sigterm")
    return outcome(ran, store, ready + ran.wall, ready)


def outcome(ran: bk.Run, store: Path, wall: float, before: float = 0.0) -> dict[str, Any]:
    """`before`: the seconds spent before the command (the reference's daemon start)."""
    records = bk.read_records(store, ran.landed)
    states = bk.count(r.get("state") or r.get("verdict") for r in records)
    landed = sorted(before + r["landed_at"] for r in records if r.get("landed_at") is not None)
    return {"wall": wall, "rc": ran.rc, "arms": len(records), "blocked": states.get("BLOCKED", 0),
            "mb": (ran.memory or {}).get("peak_pss_mb"), "leftovers": len(ran.leftovers),
            # from the start (the daemon's, for the reference) to the first record, then
            # from one record to the next
            "arm_gaps": [round(b - a, 2) for a, b in zip([0.0, *landed], landed)]}


def report_run(args: argparse.Namespace, side: str, run_dir: Path) -> dict[str, Any]:
    cmd = ([args.python, "-m", "pytest_jaato_eval", "report", str(args.store), "--exit-zero"]
           if side == "ours" else [args.ref_python, "-m", "jaato_eval", "report", str(args.store)])
    m = bk.measure(cmd, cwd=run_dir)
    return {"wall": m["wall"], "cpu": m["cpu"], "rc": m["rc"], "mb": m["rss_mb"]}


def summary_lines(results: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """The table (medians, ours / reference), then `report`'s CPU seconds."""
    rows = []
    for name, sides in results.items():
        o, r = sides.get("ours", []), sides.get("reference", [])
        ow, rw = bk.median(m["wall"] for m in o), bk.median(m["wall"] for m in r)
        om, rm = bk.median(m["mb"] for m in o), bk.median(m["mb"] for m in r)
        blocked = (f"{sum(m.get('blocked', 0) for m in o)} / {sum(m.get('blocked', 0) for m in r)}"
                   if "blocked" in o[0] else "—")
        rows.append((name, bk.fmt(ow), bk.fmt(rw), bk.fmt(bk.ratio(ow, rw)),
                     bk.fmt(om, 0), bk.fmt(rm, 0), bk.fmt(bk.ratio(om, rm)), blocked))
    lines = bk.table(("work", "ours s", "ref s", "wall ratio", "ours MB", "ref MB",
                      "memory ratio", "BLOCKED ours / ref"), rows)
    for name, sides in results.items():
        if all("cpu" in m for ms in sides.values() for m in ms):  # report: one process each
            oc = bk.median(m["cpu"] for m in sides.get("ours", []))
            rc = bk.median(m["cpu"] for m in sides.get("reference", []))
            lines.append(f"{name}: CPU seconds ours {bk.fmt(oc)}, reference {bk.fmt(rc)}, "
                         f"ratio {bk.fmt(bk.ratio(oc, rc))} (steadier than wall on a busy machine)")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cold-arms", type=int, default=8)
    ap.add_argument("--arms", type=int, default=16)
    ap.add_argument("--levels", type=levels, default=levels("0:1,2:2,4:4"))
    ap.add_argument("--store", type=Path, default=Path("/tmp/store.jsonl"),
                    help="the report's store; made (100,000 records) when missing")
    ap.add_argument("--only", default="cold,levels,report")
    ap.add_argument("--python", default=bk.OUR_PYTHON)
    ap.add_argument("--ref-python", default="/tmp/je/bin/python")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--daemon-timeout", type=float, default=120)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    args.ref_python = bk.ensure_ref_python(args.ref_python)
    parts = set(args.only.split(","))
    if "report" in parts and not args.store.exists():
        bk.log(f"writing 100,000 records to {args.store}")
        bk.measure([args.python, str(bk.HERE / "make_store.py"), str(args.store)], cwd=bk.REPO)

    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with bk.scratch("bench-side-", keep=args.keep) as scratch:
        work: list[tuple[str, Any, Any]] = []
        if "cold" in parts:
            cold = with_repeats(TASK, args.cold_arms, scratch / "cold" / "ready-echo").parent
            work.append((f"{args.cold_arms} arms, cold, one at a time",
                         lambda d: ours_run(args, cold, d, 0), lambda d: ref_run(args, cold, d, 1)))
        if "levels" in parts:
            tasks = with_repeats(TASK, args.arms, scratch / "levels" / "ready-echo").parent
            for n, c in args.levels:
                work.append((f"{args.arms} arms, -n {n} / --concurrency {c}",
                             lambda d, n=n: ours_run(args, tasks, d, n),
                             lambda d, c=c: ref_run(args, tasks, d, c)))
        if "report" in parts:
            work.append(("report, 100k-record store", lambda d: report_run(args, "ours", d),
                         lambda d: report_run(args, "reference", d)))
        for rnd in range(args.rounds):
            for i, (name, ours, ref) in enumerate(work):
                sides = [("ours", ours), ("reference", ref)]
                for side, fn in sides if (rnd + i) % 2 == 0 else reversed(sides):
                    run_dir = scratch / f"r{rnd}-w{i}-{side}"
                    run_dir.mkdir(parents=True)
                    m = fn(run_dir)
                    results.setdefault(name, {}).setdefault(side, []).append(m)
                    bk.log(f"round {rnd + 1} {name} {side}: {m['wall']:.2f} s, {bk.fmt(m['mb'], 0)} MB, "
                           f"arms {m.get('arms', '-')}, BLOCKED {m.get('blocked', '-')}, "
                           f"rc {m['rc']}; {bk.load()}")

    print(f"\n{args.rounds} round(s), median; the engines alternate; {bk.load()}\n")
    print("\n".join(summary_lines(results)))
    bk.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
