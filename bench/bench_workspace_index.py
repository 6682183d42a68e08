#!/usr/bin/env python3
"""What jaato's `~/.jaato/session_workspace_index.json` costs an arm: a daemon whose HOME holds
a copy of this machine's index (the user's, grown by every session ever run here) against one
whose HOME is empty, side by side.

jaato's daemon loads that index at start and rewrites it whole on every session it saves, so
an arm's cost grows with every session the machine has ever run. The suite's daemons get a
HOME of their own (tests/e2e/conftest.py; the plugin's daemons in a test's runs get pytester's).
Two private daemons, each warmed by one run first, then runs of `--arms` echo arms against
them in turn, `--rounds` times:

* grown  HOME holds a copy of `--index` (default: the user's `~/.jaato/...index.json`)
* empty  HOME is a fresh empty folder

Per side: the median wall of a run, and the CPU of the daemon's whole tree (its runners
included) and of the pytest process, per arm. The user's own index is only read.

    ./dev python bench/bench_workspace_index.py [--arms 20] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import benchkit as bk
import psutil

INDEX = Path.home() / ".jaato" / "session_workspace_index.json"


def tree_cpu(daemon: bk.PrivateDaemon) -> float:
    """CPU seconds of the daemon's tree so far: every live member, with what it reaped."""
    total = 0.0
    assert daemon.tree is not None
    for ident in daemon.tree.members():
        try:
            t = psutil.Process(ident.pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def one_run(daemon: bk.PrivateDaemon, tasks: Path, scratch: Path, env: dict[str, str],
            tag: str) -> dict:
    store = scratch / f"{tag}.jsonl"
    before = tree_cpu(daemon)
    got = bk.measure(bk.our_pytest(bk.OUR_PYTHON, tasks, store, f"--jaato-socket={daemon.socket}"),
                     cwd=scratch, env=env)
    return {"rc": got["rc"], "wall": got["wall"], "pytest_cpu": got["cpu"],
            "daemon_cpu": tree_cpu(daemon) - before, "arms": len(bk.read_records(store))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--index", default=str(INDEX), help="the grown index to copy")
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    index = Path(args.index)
    if not index.is_file():
        raise SystemExit(f"bench: no index at {index} (--index)")
    bk.log(bk.load())
    runs: dict[str, list[dict]] = {"grown": [], "empty": []}
    with bk.scratch("jaato-bench-index-") as scratch:
        bk.echo_task(scratch / "tasks", "arm", repeats=args.arms)
        bk.echo_task(scratch / "warm", "warm", repeats=2)
        daemons, envs = {}, {}
        try:
            for side in runs:
                home, tmp = scratch / f"home-{side}", scratch / f"tmp-{side}"
                (home / ".jaato").mkdir(parents=True)
                tmp.mkdir()
                if side == "grown":
                    shutil.copyfile(index, home / ".jaato" / index.name)
                envs[side] = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp)}
                daemons[side] = bk.PrivateDaemon(bk.OUR_PYTHON, scratch / f"d-{side}", side,
                                                 env={"HOME": str(home), "TMPDIR": str(tmp)})
                daemons[side].start(timeout=120)
                one_run(daemons[side], scratch / "warm", scratch, envs[side], f"warm-{side}")
            size = (scratch / "home-grown" / ".jaato" / index.name).stat().st_size
            for i in range(args.rounds):
                order = ("grown", "empty") if i % 2 == 0 else ("empty", "grown")
                for side in order:
                    runs[side].append(one_run(daemons[side], scratch / "tasks", scratch,
                                              envs[side], f"{side}-{i}"))
                    bk.log(f"{side} round {i}: {runs[side][-1]}")
        finally:
            for d in daemons.values():
                d.stop()
    bk.log(bk.load())
    rows = []
    for side, got in runs.items():
        wall = bk.median(r["wall"] for r in got)
        daemon = bk.median(r["daemon_cpu"] / args.arms for r in got)
        ours = bk.median(r["pytest_cpu"] / args.arms for r in got)
        rows.append((side, len(got), sum(r["arms"] for r in got), wall, daemon, ours))
    print(f"index copied: {size / 1000:.0f} kB; {args.arms} echo arms a run, {args.rounds} "
          f"runs a side, interleaved")
    print("\n".join(bk.table(["HOME", "runs", "arms stored", "wall s (median)",
                              "daemon CPU s/arm", "pytest CPU s/arm"], rows, markdown=True)))
    g, e = rows
    print(f"empty / grown: wall {bk.fmt(bk.ratio(e[3], g[3]))}, daemon CPU per arm "
          f"{bk.fmt(bk.ratio(e[4], g[4]))}")
    bk.write_json(args.json, runs)
    return 0 if all(r["rc"] == 0 for got in runs.values() for r in got) else 1


if __name__ == "__main__":
    bk.run_cli(main)
