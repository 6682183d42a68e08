"""jaato's runner template warmed by the private daemon's PYTHONPATH against the same run
without it, interleaved in one invocation.

    ./dev python bench/bench_warm_template.py
    ./dev python bench/bench_warm_template.py --arms 1 6 --runs 3

One run is one `pytest tasks/` on the plugin's private daemon (confined, the default), its
start and stop included, on the echo provider: `--arms` one-arm tasks. On the "cold" side a
conftest.py in the project gives the daemon the user's PYTHONPATH alone, as before the
warm-up (engine/warm_template/sitecustomize.py). CPU is the whole machine's busy time over
the run (bk.busy_seconds): run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import benchkit as bk

COLD = """\
import pytest_jaato_eval.engine.daemon as daemon

daemon.warm_template_path = lambda pythonpath: pythonpath or ""
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", type=int, nargs="+", default=[1, 6], help="arms per run")
    p.add_argument("--runs", type=int, default=3, help="runs per side and size, interleaved")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {}
    with bk.scratch("jaato-bench-warm-") as tmp:
        for arms in args.arms:
            for side in ("warm", "cold"):
                project = tmp / f"{side}-{arms}"
                for i in range(arms):
                    bk.echo_task(project / "tasks", f"t{i}")
                if side == "cold":
                    (project / "conftest.py").write_text(COLD)
            for i in range(args.runs):
                for side in (("cold", "warm") if i % 2 == 0 else ("warm", "cold")):
                    project = tmp / f"{side}-{arms}"
                    store = project / f"run-{i}.jsonl"
                    cmd = bk.our_pytest(sys.executable, "tasks", store)
                    cpu0, wall0 = bk.busy_seconds(), time.perf_counter()
                    out = bk.measure(cmd, cwd=project, env=dict(os.environ, TMPDIR=str(tmp)))
                    records = bk.read_records(store)
                    row = {"wall": time.perf_counter() - wall0, "cpu": bk.busy_seconds() - cpu0,
                           "rc": out["rc"], "arms": len(records),
                           "passed": sum(r.get("state") == "PASS" for r in records)}
                    results.setdefault(f"{side}-{arms}", []).append(row)
                    bk.log(f"{side}, {arms} arms, run {i + 1}: {row}")
    rows = []
    for arms in args.arms:
        warm, cold = results[f"warm-{arms}"], results[f"cold-{arms}"]
        size = f"{arms} arm{'s' * (arms > 1)}"
        rows += bk.compare_rows(warm, cold, ("cpu", "wall"),
                                lambda key, size=size: f"{size}: {key} (s)")
        passed = [r["passed"] == r["arms"] == arms for r in warm + cold]
        rows.append([f"{size}: every arm PASS", all(passed), "", ""])
    bk.write_json(args.json, {"args": vars(args), "results": results})
    print(f"`pytest tasks/` on its private daemon, start and stop included; {args.runs} runs "
          f"each side (medians); load at the start: {bk.load()}",
          *bk.table(["", "warm", "cold", "warm / cold"], rows), sep="\n")
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
