#!/usr/bin/env python3
"""What keeping transcripts costs: a sweep's time with them against without, side by side,
and their size on disk per arm.

1. End to end: one echo task of N arms, run alternately with transcripts (the default)
   and with `--no-jaato-transcripts`, each run on its own private daemon. Per side: the
   median wall time and the median time between two stored arms (the steady-state cost
   of an arm, which is what a 1,000-arm sweep multiplies), their ratio on / off, and the
   transcripts folder's bytes per arm.
2. In process, the harness's own work per arm — build, mask, compress, write — for
   histories of three sizes: the echo arm's (4 messages), a working agent's (40 turns of
   tool calls with 2 kB results), and one that hits every bound (the file's ceiling). This
   is the part of (1) that grows with a transcript's size: seconds and bytes per arm.

    ./dev python bench/bench_transcripts.py [--arms 24] [--runs 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import benchkit as bk

from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.redact import Redactor
from pytest_jaato_eval.results import transcripts


def one_run(tasks: Path, scratch: Path, side: str, i: int) -> dict:
    store, tmp = scratch / f"{side}-{i}.jsonl", scratch / f"tmp-{side}-{i}"
    tmp.mkdir()
    extra = ("--no-jaato-transcripts",) if side == "off" else ()
    env = dict(os.environ, TMPDIR=str(tmp))
    ran = bk.run(bk.our_pytest(bk.OUR_PYTHON, tasks, store, *extra), cwd=scratch, env=env,
                 timeout=900, log_path=scratch / f"{side}-{i}.log", watch=store)
    gaps = [b - a for a, b in zip(ran.landed, ran.landed[1:])]
    folder = transcripts.folder_of(store)
    files = list(folder.iterdir()) if folder.is_dir() else []
    return {"rc": ran.rc, "wall": ran.wall, "arms": len(ran.landed),
            "per_arm": bk.median(gaps), "files": len(files),
            "bytes": sum(p.stat().st_size for p in files)}


def history(turns: int, result_chars: int, text_chars: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "parts": [{"type": "text", "text": "Fix the bug."}]}]
    for t in range(turns):
        messages.append({"role": "model", "parts": [
            {"type": "text", "text": f"Step {t}: " + "reasoning " * (text_chars // 10)},
            {"type": "function_call", "call_id": f"c{t}", "name": "readFile",
             "args": {"path": f"src/module_{t}.py"}}]})
        messages.append({"role": "tool", "parts": [{
            "type": "function_response", "call_id": f"c{t}", "name": "readFile",
            "response": {"content": "".join(f"line {n}: x = {n}\n"
                                            for n in range(result_chars // 16))}}]})
    return messages


def in_process(label: str, hist: list[dict], arms: int, folder: Path) -> dict:
    run = AgentRun(session_id="s", session_ids=["s"], model="m", provider="p",
                   payload={"answer": "42"}, history=hist,
                   turn_accounting=[{"turn": t, "prompt": 100, "output": 20, "total": 120,
                                     "duration_seconds": 1.0} for t in range(len(hist) // 2)])
    redact = Redactor({"OPENAI_API_KEY": "sk-bench-0123456789abcdef"})
    store = folder / f"{label}.jsonl"
    started = time.process_time()
    wall = time.perf_counter()
    size = 0
    for i in range(arms):
        document = transcripts.build(arm_id=f"t@s#{i}", task_id="t", run_id="bench", run=run,
                                     driver=False)
        data = transcripts.encode(redact(document))
        transcripts.write(store, transcripts.file_name(f"t@s#{i}", "bench"), data)
        size += len(data)
    return {"label": label, "messages": len(hist), "arms": arms,
            "cpu_ms_per_arm": 1000 * (time.process_time() - started) / arms,
            "wall_ms_per_arm": 1000 * (time.perf_counter() - wall) / arms,
            "bytes_per_arm": size / arms, "cuts": len(document["cuts"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", type=int, default=24, help="arms of the end-to-end sweep")
    ap.add_argument("--runs", type=int, default=2, help="runs per side, alternating")
    ap.add_argument("--in-process-arms", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    summary: dict = {"load": bk.load()}
    with bk.scratch("jaato-bench-transcripts-") as scratch:
        tasks = scratch / "tasks"
        bk.echo_task(tasks, "sweep", repeats=args.arms)
        summary.update(bk.on_off(args.runs, lambda side, i: one_run(tasks, scratch, side, i)))
        with tempfile.TemporaryDirectory(dir=scratch) as folder:
            summary["in_process"] = [
                in_process("echo arm", history(1, 40, 10), args.in_process_arms, Path(folder)),
                in_process("40 turns", history(40, 2000, 400), args.in_process_arms,
                           Path(folder)),
                in_process("at the bounds", history(400, 20_000, 25_000),
                           max(args.in_process_arms // 10, 5), Path(folder))]
    on, off = summary["on"], summary["off"]
    summary["ratio_wall"] = bk.ratio(on["wall_s"], off["wall_s"])
    summary["ratio_per_arm"] = bk.ratio(on["per_arm_s"], off["per_arm_s"])
    print(f"{args.arms} echo arms, median of {args.runs} runs a side (alternating), "
          f"{summary['load']}:")
    print("\n".join(bk.table(("side", "wall s", "s per arm (stored to stored)", "transcript bytes/arm"),
                   [(side, bk.fmt(summary[side]["wall_s"]), bk.fmt(summary[side]["per_arm_s"]),
                     bk.fmt(summary[side]["bytes_per_arm"], 0)) for side in ("off", "on")])))
    print(f"ratio on / off: wall {bk.fmt(summary['ratio_wall'])}, "
          f"per arm {bk.fmt(summary['ratio_per_arm'])}")
    print("the harness's own work per arm (build, mask, compress, write), in process:")
    print("\n".join(bk.table(("history", "messages", "CPU ms/arm", "wall ms/arm", "bytes/arm", "cuts"),
                   [(r["label"], r["messages"], bk.fmt(r["cpu_ms_per_arm"], 1),
                     bk.fmt(r["wall_ms_per_arm"], 1), bk.fmt(r["bytes_per_arm"], 0), r["cuts"])
                    for r in summary["in_process"]])))
    bk.write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
