#!/usr/bin/env python3
"""Write a big result store, shaped exactly as the plugin writes one, for bench_store.py.

Every record is made by the plugin's own producer (`record.build_record` from an
`AgentRun` and grader `Verdict`s) and written by its own `Store`, so the lines are
byte-for-byte what a run writes: PASS, FAIL and BLOCKED arms, graders with evidence
(FAIL arms carry a failing script's output), usage, pins, a payload hash.

    ./dev python bench/make_store.py OUT.jsonl [--records 100000] [--seed 1]

The default (100,000 records over 250 tasks x 4 profile sets x 100 repeats) is ~250 MB.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from pytest_jaato_eval.engine.session import AgentRun
from pytest_jaato_eval.results.record import build_record
from pytest_jaato_eval.results.store import Store
from pytest_jaato_eval.verdict import Verdict, roll_up

SETS = ("echo", "openrouter_haiku", "vllm_qwen3_14b", "gpt-large")
REASONS = ("ProviderError: 429 Too Many Requests (session {sid})",
           "SessionNotConfirmed: the connection dropped before session.new was answered",
           "pool jaato-eval-run-pool of task {task!r} exhausted: CascadeExhaustedError")


def _evidence(rng: random.Random, n: int) -> list[str]:
    return [f"tests/test_feature_{i}.py::test_case_{rng.randrange(10**6)} FAILED - assert "
            f"{rng.random():.6f} == {rng.random():.6f} (expected the agent's answer)"
            for i in range(n)]


def arm_record(rng: random.Random, task: str, pset: str, repeat: int, run_id: str):
    sid = f"{rng.getrandbits(64):016x}-{rng.getrandbits(32):08x}"
    roll = rng.random()
    run = AgentRun(session_id=sid, session_ids=[sid], model=f"model-{pset}", provider="openrouter",
                   turns=rng.randrange(1, 30), finish_reason="stop",
                   duration_seconds=round(rng.uniform(2, 200), 3))
    run.usage.update(spend_prompt_tokens=rng.randrange(10**5), spend_output_tokens=rng.randrange(10**4),
                     cost_usd=round(rng.uniform(0.001, 0.5), 6))
    run.usage["spend_total_tokens"] = run.usage["spend_prompt_tokens"] + run.usage["spend_output_tokens"]
    graders = [f"script:pytest -q tests/ -k {task.split('/')[-1]}", "processor:checks/schema.py",
               "judge:rubric"]
    if roll < 0.08:  # BLOCKED before grading
        reason = rng.choice(REASONS).format(sid=sid, task=task)
        verdicts, blocked = [], reason
        run.usage["cost_usd"] = None
    else:
        run.payload = {"answer": rng.choice(["done", "done", "done", "partial", None])}
        failing = roll > 0.62
        verdicts = [
            Verdict.failed(graders[0], "the test suite passes", "exit 1, expected 0",
                           _evidence(rng, 20)) if failing else
            Verdict.passed(graders[0], "the test suite passes", "exit 0",
                           [f"{rng.randrange(40, 90)} passed in {rng.uniform(1, 9):.2f}s"]),
            Verdict.passed(graders[1], "the payload matches the schema", ""),
            Verdict.passed(graders[2], "the change is idiomatic",
                           f"score {rng.uniform(0.7, 1):.2f} >= 0.70",
                           ["The change follows the project's conventions; tests were added "
                            "for the new code path and the error handling is explicit."]),
        ]
        blocked = None
    state, reason = roll_up(verdicts, blocked)
    return build_record(
        arm_id=f"{task}@{pset}#{repeat}", task_id=task, profile_set=pset, repeat=repeat,
        state=state, blocked_reason=reason, verdicts=verdicts, run=run, notes=[],
        completion_nudges=rng.randrange(3), budget_ceiling={"usd": 0.5},
        extra={"run_id": run_id, "task_hash": f"{hash(task) & (2**64 - 1):016x}" * 4,
               "termination_reason": None, "workspace": None, "finished_at": time.time()})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    repeats = 100
    tasks = [f"suite/task-{i:04d}" for i in range(max(1, args.records // (len(SETS) * repeats)) + 1)]
    if args.out.exists():
        args.out.unlink()
    store = Store(args.out, keep_previous="all", fsync=False)
    store.claim()
    t0 = time.perf_counter()
    n = 0
    try:
        for task in tasks:
            for pset in SETS:
                for repeat in range(repeats):
                    if n == args.records:
                        break
                    store.append(arm_record(rng, task, pset, repeat, "bench"))
                    n += 1
    finally:
        store.close()
    size = args.out.stat().st_size
    print(f"{args.out}: {n} records, {size / 1e6:.0f} MB, {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
