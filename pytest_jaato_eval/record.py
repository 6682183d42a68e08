"""The arm record (R2): every key, nulls included, readable by the reference's `report`."""
from __future__ import annotations

import functools
import importlib.metadata
from typing import Any

import jaato_sdk

from .engine.accounting import payload_hash

RESULTS_VERSION = "1"

RECORD_KEYS = (
    "results_version", "caveats", "arm_id", "task_id", "profile_set", "repeat", "state",
    "blocked_reason", "verdicts", "usage", "duration_seconds", "turns", "finish_reason",
    "payload_hash", "error", "session_id", "session_ids", "model", "provider",
    "upstream_provider", "native_finish_reason", "completion_nudges", "budget_ceiling",
    "pool_limits", "pool_on_arrival", "provenance",
)


@functools.cache
def _provenance() -> dict[str, Any]:
    """Which SDK this process actually imported: a sweep's numbers are evidence about it."""
    try:
        version = importlib.metadata.version("jaato-sdk")
    except importlib.metadata.PackageNotFoundError:
        version = getattr(jaato_sdk, "__version__", None)
    try:
        harness = importlib.metadata.version("pytest-jaato-eval")
    except importlib.metadata.PackageNotFoundError:
        harness = None
    return {"jaato_sdk_path": jaato_sdk.__file__, "jaato_sdk_version": version,
            "harness": "pytest-jaato-eval", "harness_version": harness}


def build_record(*, arm_id: str, task_id: str, profile_set: str, repeat: int, state: str,
                 blocked_reason: str | None, verdicts: list, run: Any, caveats: list[str],
                 completion_nudges: int | None, extra: dict[str, Any],
                 budget_ceiling: dict | None = None, pool_limits: dict | None = None,
                 pool_on_arrival: dict | None = None) -> dict[str, Any]:
    record = {
        "results_version": RESULTS_VERSION,
        "caveats": list(caveats),
        "arm_id": arm_id,
        "task_id": task_id,
        "profile_set": profile_set,
        "repeat": repeat,
        "state": state,
        "blocked_reason": blocked_reason,
        "verdicts": [v.to_dict() for v in verdicts],
        "usage": dict(run.usage),
        "duration_seconds": run.duration_seconds,
        "turns": run.turns,
        "finish_reason": run.finish_reason,
        "payload_hash": payload_hash(run.payload),
        "error": run.error,
        "session_id": run.session_id,
        "session_ids": list(run.session_ids),
        "model": run.model,
        "provider": run.provider,
        "upstream_provider": None,      # not on the wire yet
        "native_finish_reason": None,   # not on the wire yet
        "completion_nudges": completion_nudges,
        "budget_ceiling": budget_ceiling,
        "pool_limits": pool_limits,
        "pool_on_arrival": pool_on_arrival,
        "provenance": dict(_provenance()),
    }
    record.update(extra)
    return record
