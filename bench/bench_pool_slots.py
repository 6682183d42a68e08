"""Arms after a task's budget pool: jaato's default ceiling on idle runner slots against ours,
interleaved in one invocation.

    ./dev python bench/bench_pool_slots.py
    ./dev python bench/bench_pool_slots.py --plain 8 --runs 3

One run is one `pytest tasks/` on the plugin's private daemon: a task with a `budget:` pool
(`--pooled` arms, collected first), then `--plain` one-arm tasks without one, on the echo
provider. The slots the pool's arms ran on stay reserved to it for five minutes; with jaato's
default ceiling (`JAATO_RUNNER_POOL_MAX_SIZE` = twice the pool size, 2 here) they fill the
pool and every later arm starts its runner cold. The plugin's private daemon leaves room for
them (`engine/daemon.py`'s `pool_ceiling`); the other side sets jaato's default back through
the environment, which the plugin's default never overrides. CPU is the whole machine's busy
time over the run (bk.busy_seconds), so run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import benchkit as bk

SIDES = {"ours": {}, "jaato's ceiling": {"JAATO_RUNNER_POOL_MAX_SIZE": "2"}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pooled", type=int, default=3, help="arms of the pooled task")
    p.add_argument("--plain", type=int, default=8, help="one-arm tasks after it")
    p.add_argument("--runs", type=int, default=3, help="runs per side, interleaved")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    with bk.scratch("jaato-bench-slots-") as tmp:
        tasks = tmp / "tasks"
        bk.echo_task(tasks, "a-pooled", repeats=args.pooled, budget={"tokens": 1_000_000})
        for i in range(args.plain):
            bk.echo_task(tasks, f"b-plain-{i}")
        for i in range(args.runs):
            for side, extra in SIDES.items():
                env = dict(os.environ, TMPDIR=str(tmp), **extra)
                store = tmp / f"run-{i}-{len(results[side])}-{side[:4]}.jsonl"
                cmd = bk.our_pytest(sys.executable, tasks, store)
                cpu0, wall0 = bk.busy_seconds(), time.perf_counter()
                out = bk.measure(cmd, cwd=tmp, env=env)
                records = bk.read_records(store)
                results[side].append({"wall": time.perf_counter() - wall0,
                                      "cpu": bk.busy_seconds() - cpu0, "rc": out["rc"],
                                      "arms": len(records),
                                      "passed": sum(r.get("state") == "PASS" for r in records)})
                bk.log(f"{side} run {i + 1}: {results[side][-1]}")
    ours, theirs = (results[side] for side in SIDES)
    rows = bk.compare_rows(ours, theirs)
    print(f"one pooled task of {args.pooled} arms, then {args.plain} one-arm tasks; "
          f"{args.runs} runs each (medians); load at the start: {bk.load()}")
    print("\n".join(bk.table(["", "ours", "jaato's ceiling", "ours / jaato's"], rows)))
    bk.write_json(args.json, {"args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
