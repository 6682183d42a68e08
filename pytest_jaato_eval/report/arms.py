"""One arm as a report row (P4): every value as display text, `—` when unknown (P2).

Plain text only; each renderer escapes for its own medium (the HTML templates by
autoescape). Shared by the HTML/PDF document and the pytest-html columns so the two
never disagree.
"""
from __future__ import annotations

from typing import Any

from ..results.cell import DASH, money, pct

COLUMNS = ("arm", "state", "model", "provider", "upstream", "session id", "sessions", "turns",
           "cost", "budget", "nudges", "duration", "finish", "payload", "notes")

# Budget dimensions in the order a reader cares about, with how the arm's spend is read.
_DIMENSIONS = (
    ("usd", lambda r: usage(r).get("cost_usd"), lambda v: f"${v:.4f}"),
    ("tokens", lambda r: usage(r).get("spend_total_tokens"), lambda v: f"{v:,.0f} tokens"),
    ("turns", lambda r: r.get("turns"), lambda v: f"{v:,.0f} turns"),
    ("seconds", lambda r: r.get("duration_seconds"), lambda v: f"{v:,.0f}s"),
)


def as_mapping(record: Any) -> dict[str, Any]:
    """A record as a mapping: a store's dict as it is, a typed record through its to_dict."""
    if isinstance(record, dict):
        return record
    to_dict = getattr(record, "to_dict", None)
    return to_dict() if callable(to_dict) else {}


def usage(record: dict[str, Any]) -> dict[str, Any]:
    value = record.get("usage")
    return value if isinstance(value, dict) else {}


def number(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None



def _text(value) -> str:
    return DASH if value is None or value == "" else str(value)


def _limits(value) -> dict[str, Any]:
    """A ceiling or pool reading: a mapping of dimension -> number (a bare number is usd)."""
    if isinstance(value, dict):
        return value
    if number(value) is not None:
        return {"usd": value}
    return {}


def _consumed_on_arrival(value) -> dict[str, Any]:
    """What the pool had spent when the arm started. Our records carry the daemon's own
    reading ({limits, remaining, ...}); a plain mapping is read as spent per dimension."""
    if isinstance(value, dict) and isinstance(value.get("remaining"), dict):
        limits = value.get("limits") if isinstance(value.get("limits"), dict) else {}
        return {dim: limits[dim] - left for dim, left in value["remaining"].items()
                if number(left) is not None and number(limits.get(dim)) is not None}
    return _limits(value)


def budget_text(record: dict[str, Any]) -> str:
    """P4: `$spent / own $X` (the profile's own ceiling), or
    `$spent / pool $Y (N% consumed on arrival)` (the task pool, read as the arm started)."""
    record = as_mapping(record)
    own, pool = _limits(record.get("budget_ceiling")), _limits(record.get("pool_limits"))
    arrival = _consumed_on_arrival(record.get("pool_on_arrival"))
    for dim, spent_of, fmt in _DIMENSIONS:
        spent = number(spent_of(record))
        spent_s = DASH if spent is None else fmt(spent)
        if number(own.get(dim)) is not None:  # B3: an own ceiling does not draw on the pool
            return f"{spent_s} / own {fmt(own[dim])}"
        if number(pool.get(dim)):
            used = number(arrival.get(dim))
            share = DASH if used is None else pct(used / pool[dim])
            return f"{spent_s} / pool {fmt(pool[dim])} ({share} consumed on arrival)"
    return DASH


def notes_text(record: dict[str, Any]) -> list[str]:
    record = as_mapping(record)
    notes = []
    if record.get("blocked_reason"):
        notes.append(f"blocked: {record['blocked_reason']}")
    if record.get("error"):
        notes.append(f"error: {record['error']}")
    for key in ("notes", "caveats"):
        said = record.get(key)
        notes += [str(c) for c in said] if isinstance(said, list) else []
    if record.get("workspace"):
        notes.append(f"workspace kept: {record['workspace']}")
    return notes


def cost_text(record: dict[str, Any]) -> str:
    """The agent's cost, and the judge's beside it when a judge graded the arm."""
    text = money(number(usage(record).get("cost_usd")))
    judge = record.get("judge_usage")
    if isinstance(judge, dict):
        text += f" + judge {money(number(judge.get('cost_usd')))}"
    return text


def arm_fields(record: dict[str, Any]) -> dict[str, str]:
    """The P4 columns of one arm, as text."""
    record = as_mapping(record)
    nudges = number(record.get("completion_nudges"))
    duration = number(record.get("duration_seconds"))
    sessions = record.get("session_ids")
    payload = record.get("payload_hash")
    return {
        "arm": _text(record.get("arm_id")),
        "state": _text(record.get("state")),
        "model": _text(record.get("model")),
        "provider": _text(record.get("provider")),
        "upstream": _text(record.get("upstream_provider")),
        "session id": _text(record.get("session_id")),
        "sessions": str(len(sessions)) if isinstance(sessions, list) else DASH,
        "turns": _text(record.get("turns")),
        "cost": cost_text(record),
        "budget": budget_text(record),
        "nudges": DASH if nudges is None else f"{nudges:g}/2",
        "duration": DASH if duration is None else f"{duration:.1f}s",
        "finish": _text(record.get("finish_reason")),
        "payload": payload[:12] if isinstance(payload, str) and payload else DASH,
        "notes": "; ".join(notes_text(record)) or "",
    }


def verdicts(record: dict[str, Any]) -> list[dict[str, Any]]:
    vs = as_mapping(record).get("verdicts")
    if not isinstance(vs, list):
        return []
    return [v if isinstance(v, dict) else v.to_dict() for v in vs
            if isinstance(v, dict) or callable(getattr(v, "to_dict", None))]


def evidence_lines(verdict: dict[str, Any]) -> list[str]:
    ev = verdict.get("evidence")
    if isinstance(ev, list):
        return [str(x) for x in ev]
    return [] if ev in (None, "") else [str(ev)]


def grader_ids(records) -> list[str]:
    """Every grader id seen, in first-seen (manifest) order: one column each."""
    seen: dict[str, None] = {}
    for r in records:
        for v in verdicts(r):
            seen.setdefault(str(v.get("grader_id")), None)
    return list(seen)


def verdict_of(record: dict[str, Any], grader_id: str) -> dict[str, Any] | None:
    for v in verdicts(record):
        if str(v.get("grader_id")) == grader_id:
            return v
    return None
