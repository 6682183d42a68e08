#!/usr/bin/env python3
"""What keeping snapshots costs, side by side with snapshots off, and what a regrade saves.

1. End to end: one echo task of N arms, run alternately with snapshots (the default) and
   with `--no-jaato-snapshots`, each run on its own private daemon. Per side: the median
   wall time and the median time between two stored arms (the steady-state cost of an
   arm), their ratio on / off, and the snapshots folder's bytes per arm. Then the last
   store with snapshots is graded again (`--jaato-regrade`): its wall and time per arm.
2. In process, the harness's own work per arm — walk, read, tar, compress, write — on an
   echo arm's real workspace (kept from a run of 1.), on a working agent's (a source tree
   of 200 files, 2 MB) and on one at the default cap: milliseconds and bytes per arm.
   Against the echo arm's stored-to-stored time of 1., this is the snapshot's share of
   an arm.

    ./dev python bench/bench_snapshots.py [--arms 20] [--runs 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import time
from pathlib import Path

import benchkit as bk

from pytest_jaato_eval.results import snapshots

FACTS = {"format": snapshots.FORMAT, "run": {"payload": None, "history": []}}


def one_run(tasks: Path, scratch: Path, side: str, i: int, *extra: str) -> dict:
    store, tmp = scratch / f"{side}-{i}.jsonl", scratch / f"tmp-{side}-{i}"
    tmp.mkdir()
    flags = ("--no-jaato-snapshots",) if side == "off" else ()
    env = dict(os.environ, TMPDIR=str(tmp))
    ran = bk.run(bk.our_pytest(bk.OUR_PYTHON, tasks, store, *flags, *extra), cwd=scratch,
                 env=env, timeout=900, log_path=scratch / f"{side}-{i}.log", watch=store)
    gaps = [b - a for a, b in zip(ran.landed, ran.landed[1:])]
    folder = snapshots.folder_of(store)
    files = list(folder.iterdir()) if folder.is_dir() else []
    return {"rc": ran.rc, "wall": ran.wall, "arms": len(ran.landed),
            "per_arm": bk.median(gaps), "files": len(files), "store": str(store),
            "bytes": sum(p.stat().st_size for p in files)}


def regrade(tasks: Path, scratch: Path, source: str) -> dict:
    out = scratch / "regraded.jsonl"
    (scratch / "tmp-regrade").mkdir()
    ran = bk.run(bk.our_pytest(bk.OUR_PYTHON, tasks, out, "--jaato-regrade", source),
                 cwd=scratch, env=dict(os.environ, TMPDIR=str(scratch / "tmp-regrade")),
                 timeout=900, log_path=scratch / "regrade.log", watch=out)
    gaps = [b - a for a, b in zip(ran.landed, ran.landed[1:])]
    return {"rc": ran.rc, "wall": ran.wall, "arms": len(ran.landed), "per_arm": bk.median(gaps)}


def source_tree(root: Path, files: int, size: int) -> Path:
    rng = random.Random(7)
    words = [f"name_{n}" for n in range(400)]
    for n in range(files):
        path = root / f"pkg_{n % 12}" / f"module_{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        while sum(map(len, lines)) < size:
            lines.append(f"def {rng.choice(words)}_{len(lines)}(x):\n    return x + "
                         f"{rng.randint(0, 999)}  # {rng.choice(words)}\n")
        path.write_text("".join(lines))
    return root


def in_process(label: str, ws: Path, arms: int, folder: Path) -> dict:
    cap = snapshots.DEFAULT_MAX_MB * snapshots.MB
    cpu, wall, size = time.process_time(), time.perf_counter(), 0
    for i in range(arms):
        taken = snapshots.take(ws, FACTS, folder / f"{label}-{i}.tar.gz", cap)
        size += taken.size
    return {"label": label, "files": taken.entries, "read": taken.read, "arms": arms,
            "cpu_ms_per_arm": 1000 * (time.process_time() - cpu) / arms,
            "wall_ms_per_arm": 1000 * (time.perf_counter() - wall) / arms,
            "bytes_per_arm": size / arms}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", type=int, default=20, help="arms of the end-to-end sweep")
    ap.add_argument("--runs", type=int, default=2, help="runs per side, alternating")
    ap.add_argument("--in-process-arms", type=int, default=100)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    summary: dict = {"load": bk.load()}
    with bk.scratch("jaato-bench-snapshots-") as scratch:
        tasks = scratch / "tasks"
        bk.echo_task(tasks, "sweep", repeats=args.arms)
        summary.update(bk.on_off(args.runs, lambda side, i: one_run(tasks, scratch, side, i)))
        summary["regrade"] = regrade(tasks, scratch, summary["on"]["runs"][-1]["store"])
        kept = one_run(tasks, scratch, "kept", 0, "--keep-workspaces", "--jaato-repeats=1")
        echo_ws = next(Path(p) for p in (scratch / "tmp-kept-0").glob("jaato-eval-*/workspaces/*")
                       if not p.name.startswith("."))
        folder = scratch / "in-process"
        folder.mkdir()
        tree = source_tree(scratch / "tree", 200, 10_000)
        at_cap = scratch / "cap"
        at_cap.mkdir()
        source_tree(at_cap / "src", 200, 10_000)
        (at_cap / "data.bin").write_bytes(os.urandom(snapshots.DEFAULT_MAX_MB * snapshots.MB
                                                     - 3_000_000))
        summary["kept"] = kept
        summary["in_process"] = [
            in_process("echo arm", echo_ws, args.in_process_arms, folder),
            in_process("200 files, 2 MB", tree, max(args.in_process_arms // 5, 5), folder),
            in_process("at the cap (32 MB)", at_cap, 3, folder)]
        shutil.rmtree(folder, ignore_errors=True)
    on, off = summary["on"], summary["off"]
    summary["ratio_wall"] = bk.ratio(on["wall_s"], off["wall_s"])
    summary["ratio_per_arm"] = bk.ratio(on["per_arm_s"], off["per_arm_s"])
    echo = summary["in_process"][0]
    summary["share_of_echo_arm"] = bk.ratio(echo["wall_ms_per_arm"] / 1000, off["per_arm_s"])
    print(f"{args.arms} echo arms, median of {args.runs} runs a side (alternating), "
          f"{summary['load']}:")
    print("\n".join(bk.table(("side", "wall s", "s per arm (stored to stored)",
                              "snapshot bytes/arm"),
                             [(side, bk.fmt(summary[side]["wall_s"]),
                               bk.fmt(summary[side]["per_arm_s"]),
                               bk.fmt(summary[side]["bytes_per_arm"], 0))
                              for side in ("off", "on")])))
    print(f"ratio on / off: wall {bk.fmt(summary['ratio_wall'])}, "
          f"per arm {bk.fmt(summary['ratio_per_arm'])}")
    rg = summary["regrade"]
    print(f"the 'on' store graded again (--jaato-regrade): wall {bk.fmt(rg['wall'])} s, "
          f"{bk.fmt(rg['per_arm'])} s per arm, {rg['arms']} arms, rc {rg['rc']}")
    print("the harness's own work per arm (walk, read, tar, gzip, write), in process:")
    print("\n".join(bk.table(("workspace", "entries", "bytes read", "CPU ms/arm",
                              "wall ms/arm", "bytes/arm"),
                             [(r["label"], r["files"], r["read"], bk.fmt(r["cpu_ms_per_arm"], 1),
                               bk.fmt(r["wall_ms_per_arm"], 1), bk.fmt(r["bytes_per_arm"], 0))
                              for r in summary["in_process"]])))
    print(f"an echo arm's snapshot / an echo arm (stored to stored, snapshots off): "
          f"{bk.fmt(summary['share_of_echo_arm'], 4)}")
    bk.write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
