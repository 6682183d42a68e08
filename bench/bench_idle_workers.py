"""Workers xdist gives no arm: what a `-n N` run pays for them, ours against an earlier commit
of ours, interleaved in one invocation.

    ./dev python bench/bench_idle_workers.py                       # against HEAD~1
    ./dev python bench/bench_idle_workers.py --before 6b66e59 --workers 4 --runs 5

The sweep is one task with a `budget:` pool (every arm on one worker, B1) of `--repeats` arms,
on the echo provider. Each worker collects the task and starts its private daemon early;
the workers with no arm abandon that start when xdist shuts them down. CPU is the whole
machine's busy time over the run (/proc/stat: the daemons and runners included, which a
child's rusage misses once they are re-parented), so run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import benchkit as bk


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="HEAD~1", help="the commit to compare with")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--repeats", type=int, default=4, help="arms of the one pooled task")
    p.add_argument("--runs", type=int, default=3, help="runs per side, interleaved")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    with bk.scratch("jaato-bench-idle-") as tmp:
        tasks = tmp / "tasks"
        bk.echo_task(tasks, "pooled", repeats=args.repeats, budget={"tokens": 10_000})
        sides = {"ours": None, "before": bk.git_export(args.before, tmp / "before")}
        results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for i in range(args.runs):
            for side, code in sides.items():
                env = dict(os.environ, TMPDIR=str(tmp))
                if code is not None:
                    env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")])
                store = tmp / f"{side}-{i}.jsonl"
                cmd = bk.our_pytest(sys.executable, tasks, store, "-n", str(args.workers))
                cpu0, wall0 = bk.busy_seconds(), time.perf_counter()
                out = bk.measure(cmd, cwd=tmp, env=env)
                results[side].append({"wall": time.perf_counter() - wall0,
                                      "cpu": bk.busy_seconds() - cpu0, "rc": out["rc"],
                                      "arms": len(bk.read_records(store))})
                bk.log(f"{side} run {i + 1}: {results[side][-1]}")
    rows = []
    for key in ("wall", "cpu"):
        ours = bk.median(r[key] for r in results["ours"])
        before = bk.median(r[key] for r in results["before"])
        rows.append([f"{key} (s)", bk.fmt(ours), bk.fmt(before), bk.fmt(bk.ratio(ours, before))])
    print(f"-n {args.workers}, one pool of {args.repeats} arms, {args.runs} runs each "
          f"(medians); load at the start: {bk.load()}")
    print("\n".join(bk.table(["", "ours", f"before ({args.before})", "ours / before"], rows)))
    bk.write_json(args.json, {"args": vars(args), "results": results})
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
