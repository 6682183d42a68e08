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
from pathlib import Path

import benchkit as bk
import yaml

PROFILE = {"name": "writer", "provider": "echo", "model": "echo",
           "plugins": ["file_edit(preload)", "permission"],
           "plugin_configs": {
               "echo": {"tool_call": {"name": "writeNewFile",
                                      "args": {"path": "answer.txt", "content": "READY\n"}},
                        "response": "done", "usage": {"prompt_tokens": 10, "output_tokens": 5}},
               "permission": {"policy": {"defaultPolicy": "allow"}}},
           "runtime_limits": {"unload_grace_seconds": 0}}


def busy_seconds() -> float:
    with open("/proc/stat", encoding="ascii") as fh:
        fields = fh.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def make_task(root: Path, repeats: int) -> Path:
    task = root / "tasks" / "pooled"
    (task / "fixture").mkdir(parents=True)
    (task / "fixture" / "seed.txt").write_text("seed\n")
    (task / ".jaato" / "profiles" / "echo").mkdir(parents=True)
    (task / ".jaato" / "profiles" / "echo" / "writer.yaml").write_text(yaml.safe_dump(PROFILE))
    (task / "task.yaml").write_text(yaml.safe_dump({
        "id": "pooled", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "Write READY."},
        "harness": {"profile": "writer", "profile_set": "echo"},
        "graders": [{"kind": "script", "run": "grep -qx READY answer.txt"}],
        "repeats": repeats, "budget": {"tokens": 10_000}}, sort_keys=False))
    return root / "tasks"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="HEAD~1", help="the commit to compare with")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--repeats", type=int, default=4, help="arms of the one pooled task")
    p.add_argument("--runs", type=int, default=3, help="runs per side, interleaved")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    with bk.scratch("jaato-bench-idle-") as tmp:
        tasks = make_task(tmp, args.repeats)
        sides = {"ours": None, "before": bk.git_export(args.before, tmp / "before")}
        results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for i in range(args.runs):
            for side, code in sides.items():
                env = dict(os.environ, TMPDIR=str(tmp))
                if code is not None:
                    env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")])
                store = tmp / f"{side}-{i}.jsonl"
                cmd = bk.our_pytest(sys.executable, tasks, store, "-n", str(args.workers))
                cpu0, wall0 = busy_seconds(), time.perf_counter()
                out = bk.measure(cmd, cwd=tmp, env=env)
                results[side].append({"wall": time.perf_counter() - wall0,
                                      "cpu": busy_seconds() - cpu0, "rc": out["rc"],
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
