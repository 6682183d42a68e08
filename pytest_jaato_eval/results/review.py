"""The arms a judge handed to a human (`python -m pytest_jaato_eval review STORE`).

A judge that answers with a `confidence` below its grader's `needs_human_below`
leaves the arm BLOCKED "needs human review (…)": out of every pass rate, and
listed by `review`, one block per arm, with what the judge said (its reasoning,
its answer, the defects it named) so a person can decide.
"""
from __future__ import annotations

from typing import Any, Iterable

from .record import ArmRecord
from .stores import latest_by_arm
from ..verdict import BLOCKED

NEEDS_HUMAN = "needs human review"  # the judge's blocked reason starts with it


def awaiting_review(records: Iterable[ArmRecord]) -> list[tuple[ArmRecord, dict[str, Any]]]:
    """(record, verdict) for each judge verdict that asked for a human, latest record per arm."""
    return [(record, v) for record in latest_by_arm(records).values() for v in record.verdicts
            if v["state"] == BLOCKED and (v.get("blocked_reason") or "").startswith(NEEDS_HUMAN)]
