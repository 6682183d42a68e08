"""Arm records for tests: the suite's one factory, and a store writer.

    arm_record("write-file", "echo", 1, "FAIL", cost=0.02, evidence=["exit 1"])

gives a complete, consistent ArmRecord (every key, one verdict per grader agreeing
with the state, a BLOCKED arm with its reason); any ArmRecord field can be given by
name. `write_store` writes records (or raw dicts, for hostile lines) as a store.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ..results.record import ArmRecord

GRADER = "script:grep -qx READY answer.txt"
PROVENANCE = {"jaato_sdk_path": "/x/jaato_sdk/__init__.py", "jaato_sdk_version": "0.29.4",
              "harness": "pytest-jaato-eval", "harness_version": "0.1.0"}


def arm_record(task: str = "t", profile_set: str = "echo", repeat: int = 0,
               state: str = "PASS", *, reason: str | None = None, cost: float | None = 0.01,
               tokens: float | None = 10, graders: list[tuple[str, str]] | None = None,
               evidence: Iterable[str] = (), claim: str = "the answer is READY",
               **fields: Any) -> ArmRecord:
    if state == "BLOCKED":
        reason = reason or "ProviderError: 429 Too Many Requests"
    verdicts = [{"grader_id": g, "claim": claim, "state": s,
                 "detail": "exit 1, expected 0" if s == "FAIL" else "",
                 "evidence": list(evidence) if s != "PASS" else [],
                 "blocked_reason": reason if s == "BLOCKED" else None}
                for g, s in (graders or [(GRADER, state)])]
    values: dict[str, Any] = dict(
        arm_id=f"{task}@{profile_set}#{repeat}", task_id=task, profile_set=profile_set,
        repeat=repeat, state=state, blocked_reason=reason if state == "BLOCKED" else None,
        verdicts=verdicts, usage={"cost_usd": cost, "spend_total_tokens": tokens},
        turns=2, duration_seconds=3.25, finish_reason="stop",
        payload_hash=None if state == "BLOCKED" else "ab" * 32,
        session_id=f"sess-{task}-{profile_set}-{repeat}", session_ids=[f"s{repeat}"],
        model="echo", provider="echo", completion_nudges=0,
        provenance=dict(PROVENANCE), run_id="run1", task_hash="h1")
    values.update(fields)
    known = {k: v for k, v in values.items() if k in ArmRecord.__dataclass_fields__}
    extra = {k: v for k, v in values.items() if k not in known}
    return ArmRecord(**known, extra=extra)


def write_store(path: Path, records: Iterable[ArmRecord | dict], tail: str = "") -> Path:
    """One JSON line per record (dicts written as they are), then `tail` (e.g. a cut line)."""
    path = Path(path)
    path.write_text("".join(json.dumps(r.to_dict() if isinstance(r, ArmRecord) else r) + "\n"
                            for r in records) + tail)
    return path
