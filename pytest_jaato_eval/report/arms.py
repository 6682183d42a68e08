"""One arm as a report row (P4): every value as display text, `—` when unknown (P2).

Plain text only; each renderer escapes for its own medium (the HTML templates by
autoescape). Shared by the HTML/PDF document and the pytest-html columns so the two
never disagree.
"""
from __future__ import annotations

from typing import Any

from ..render import safe_text
from ..results.pivot import DASH, money, pct
from ..results.record import ArmRecord, number

COLUMNS = ("arm", "state", "model", "provider", "upstream", "session id", "sessions", "turns",
           "cost", "budget", "nudges", "arm time", "session time", "finish", "payload", "notes")
# What a column's name does not say: under the report's table, and as its header's title.
COLUMN_NOTES = {
    "nudges": "nudges n/2: completion reminders jaato sent the agent (of at most 2) before it "
              "signed off with its payload, or gave up",
    "arm time": "arm time: the whole arm as pytest timed it, setup (preflight, workspace, "
                "the daemon's start) and call (the agent, the graders): the terminal's and "
                "JUnit's figure",
    "session time": "session time: the agent's session alone (a driver arm: its driver)",
}
EVIDENCE_LINES = 40         # per verdict: the tail is where a script's failure is
EVIDENCE_LINE_CHARS = 2000  # one evidence line; a 100k-char line would swamp the page

# Budget dimensions in the order a reader cares about, with how the arm's spend is read.
_DIMENSIONS = (
    ("usd", lambda r: r.cost, lambda v: f"${v:.4f}"),
    ("tokens", lambda r: r.tokens, lambda v: f"{v:,.0f} tokens"),
    ("turns", lambda r: r.turns, lambda v: f"{v:,.0f} turns"),
    ("seconds", lambda r: r.duration_seconds, lambda v: f"{v:,.0f}s"),
)


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
        limits = m if isinstance(m := value.get("limits"), dict) else {}
        return {dim: limits[dim] - left for dim, left in value["remaining"].items()
                if number(left) is not None and number(limits.get(dim)) is not None}
    return _limits(value)


def budget_text(record: ArmRecord) -> str:
    """P4: `$spent / own $X` (the profile's own ceiling), or
    `$spent / pool $Y (N% consumed on arrival)` (the task pool, read as the arm started)."""
    own, pool = _limits(record.budget_ceiling), _limits(record.pool_limits)
    arrival = _consumed_on_arrival(record.pool_on_arrival)
    for dim, spent_of, fmt in _DIMENSIONS:
        spent = spent_of(record)
        spent_s = DASH if spent is None else fmt(spent)
        if number(own.get(dim)) is not None:  # B3: an own ceiling does not draw on the pool
            return f"{spent_s} / own {fmt(own[dim])}"
        if number(pool.get(dim)):
            used = number(arrival.get(dim))
            share = DASH if used is None else pct(used / pool[dim])
            return f"{spent_s} / pool {fmt(pool[dim])} ({share} consumed on arrival)"
    return DASH


def notes_text(record: ArmRecord) -> list[str]:
    notes = []
    if record.blocked_reason:
        notes.append(f"blocked: {record.blocked_reason}")
    if record.error:
        notes.append(f"error: {record.error}")
    notes += record.notes + record.caveats
    if record.workspace:
        notes.append(f"workspace kept: {record.workspace}")
    return notes


def cost_text(record: ArmRecord) -> str:
    """The agent's cost, and the judge's beside it when a judge graded the arm."""
    text = money(record.cost)
    if record.judge_usage is not None:
        text += f" + judge {money(record.judge_cost)}"
    return text


def arm_fields(record: ArmRecord) -> dict[str, str]:
    """The P4 columns of one arm, as text."""
    nudges, duration, whole = (record.completion_nudges, record.duration_seconds,
                               record.arm_seconds)
    return {
        "arm": _text(record.arm_id),
        "state": _text(record.state),
        "model": _text(record.model),
        "provider": _text(record.provider),
        "upstream": _text(record.upstream_provider),
        "session id": _text(record.session_id),
        "sessions": str(len(record.session_ids)),
        "turns": _text(record.turns),
        "cost": cost_text(record),
        "budget": budget_text(record),
        "nudges": DASH if nudges is None else f"{nudges:g}/2",
        "arm time": DASH if whole is None else f"{whole:.1f}s",
        "session time": DASH if duration is None else f"{duration:.1f}s",
        "finish": _text(record.finish_reason),
        "payload": record.payload_hash[:12] if record.payload_hash else DASH,
        "notes": "; ".join(notes_text(record)) or "",
    }


def evidence_tail(verdict: dict[str, Any]) -> list[str]:
    """The last EVIDENCE_LINES lines of a verdict's evidence, each bounded, after a line
    saying how many earlier ones are not shown: the terminal's `show` and the report alike."""
    lines = verdict["evidence"]
    cut = len(lines) - EVIDENCE_LINES
    return ([f"… {cut} earlier lines not shown"] if cut > 0 else []) + [
        safe_text(line, EVIDENCE_LINE_CHARS, collapse=False) for line in lines[-EVIDENCE_LINES:]]
