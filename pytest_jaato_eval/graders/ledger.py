"""The tool-call ledger (G4), built by the SDK's one pairing rule (by call id, never by order)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jaato_sdk.completion_processors import build_ledger


@dataclass
class Ledger:
    entries: list = field(default_factory=list)
    faithful: bool = False
    reason: str | None = None


def _calls(history: list) -> list[dict]:
    calls = []
    for message in history:
        parts = message.get("parts", []) if isinstance(message, dict) else []
        calls += [p for p in parts if isinstance(p, dict) and p.get("type") == "function_call"]
    return calls


def ledger_of(history: list | None) -> Ledger:
    """Absent history is not an empty one: it is an unfaithful ledger with a reason."""
    if history is None:
        return Ledger(reason="no history: the daemon did not answer the history request "
                             "(absent, not empty)")
    missing = [c.get("name", "?") for c in _calls(history) if not (c.get("call_id") or c.get("id"))]
    if missing:
        return Ledger(reason=f"{len(missing)} tool call(s) carry no call id ({', '.join(missing[:3])}); "
                             f"calls cannot be paired with their responses - upgrade the daemon")
    try:
        entries: list[Any] = build_ledger(history)
    except Exception as exc:  # noqa: BLE001 - a malformed history is an unusable ledger
        return Ledger(reason=f"the history could not be read: {type(exc).__name__}: {exc}")
    return Ledger(entries=list(entries), faithful=True)
