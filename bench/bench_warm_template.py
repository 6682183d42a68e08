"""jaato's runner template warmed by the private daemon's PYTHONPATH against the same run
without it (or warmed but not frozen before each fork), interleaved in one invocation.

    ./dev python bench/bench_warm_template.py
    ./dev python bench/bench_warm_template.py --arms 1 6 --runs 3
    ./dev python bench/bench_warm_template.py --against unfrozen

One run is one `pytest tasks/` on the plugin's private daemon (confined, the default), its
start and stop included, on the echo provider: `--arms` one-arm tasks. On the "cold" side a
conftest.py in the project gives the daemon the user's PYTHONPATH alone, as before the
warm-up (engine/warm_template/sitecustomize.py); with `--against unfrozen` it gives the daemon
a copy of the warm-up without its `gc.freeze` before each fork, and both sides run unconfined
(`--jaato-sandbox=none`: the sandbox would not show the copy, in the project's folder). CPU is the whole machine's busy time over
the run (bk.busy_seconds): run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import benchkit as bk

from pytest_jaato_eval.engine.daemon import WARM_TEMPLATE

COLD = """\
import pytest_jaato_eval.engine.daemon as daemon

daemon.warm_template_path = lambda pythonpath: pythonpath or ""
"""
# The warm-up from a copy of its folder (unfrozen_copy) whose at-fork freeze is taken out.
UNFROZEN = """\
import pytest_jaato_eval.engine.daemon as daemon

_warmed = daemon.warm_template_path
daemon.warm_template_path = lambda pythonpath: _warmed(pythonpath).replace(
    daemon.WARM_TEMPLATE, {folder!r}, 1)
"""
FREEZE = "os.register_at_fork(before=_freeze_before_fork)"


def unfrozen_copy(dest: Path) -> Path:
    source = (Path(WARM_TEMPLATE) / "sitecustomize.py").read_text()
    if FREEZE not in source:
        raise SystemExit(f"bench: {WARM_TEMPLATE}/sitecustomize.py no longer says {FREEZE}")
    dest.mkdir(parents=True)
    (dest / "sitecustomize.py").write_text(source.replace(FREEZE, "pass"))
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", type=int, nargs="+", default=[1, 6], help="arms per run")
    p.add_argument("--runs", type=int, default=3, help="runs per side and size, interleaved")
    p.add_argument("--against", choices=("cold", "unfrozen"), default="cold",
                   help="the other side: no warm-up, or the warm-up without its freeze")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {}
    with bk.scratch("jaato-bench-warm-") as tmp:
        for arms in args.arms:
            for side in ("warm", "cold"):
                project = tmp / f"{side}-{arms}"
                for i in range(arms):
                    bk.echo_task(project / "tasks", f"t{i}")
                if side == "cold" and args.against == "cold":
                    (project / "conftest.py").write_text(COLD)
                elif side == "cold":
                    folder = unfrozen_copy(project / "unfrozen")
                    (project / "conftest.py").write_text(UNFROZEN.format(folder=str(folder)))
            for i in range(args.runs):
                for side in (("cold", "warm") if i % 2 == 0 else ("warm", "cold")):
                    project = tmp / f"{side}-{arms}"
                    store = project / f"run-{i}.jsonl"
                    cmd = bk.our_pytest(sys.executable, "tasks", store,
                                        *(["--jaato-sandbox=none"] * (args.against == "unfrozen")))
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
          *bk.table(["", "warm", args.against, f"warm / {args.against}"], rows), sep="\n")
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
