"""What an arm spent and how its turns ended (S6, S9, S10, S11)."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Any

from ..number import is_int, is_number
from . import files
from .files import inside, read_text_bounded

MAX_LOGS = 64  # a session's logs read for its nudges: past it, the count is unknown

# S6: spend fields are per turn, so they add up; level fields (prompt_tokens,
# total_tokens, cache_*) describe the context at one moment and never do.
SPEND_FIELDS = (
    "spend_prompt_tokens", "spend_output_tokens", "spend_total_tokens",
    "spend_cache_read_tokens", "spend_cache_creation_tokens",
    "reasoning_tokens", "thinking_tokens",
)
USAGE_KEYS = SPEND_FIELDS + ("cost_usd",)


def empty_usage() -> dict[str, Any]:
    return {k: None for k in USAGE_KEYS}


class TurnAccumulator:
    """Folds TurnCompleted events of one session into turns, finish reason and usage."""

    def __init__(self) -> None:
        self.turns = 0
        self.finish_reason: str | None = None
        self.completion_gap: str | None = None
        self.usage = empty_usage()

    def add(self, event: Any) -> None:
        self.turns += 1
        finish = getattr(event, "finish_reason", None)
        if finish:
            self.finish_reason = finish  # the last non-empty one
        gap = getattr(event, "completion_gap", None)
        if gap and not self.completion_gap:
            self.completion_gap = gap  # the first non-empty one
        usage = getattr(event, "usage", None)
        for key in USAGE_KEYS:
            value = getattr(usage, key, None) if usage is not None else None
            if value is not None:  # cost stays null until a turn reports one
                self.usage[key] = (self.usage[key] or 0) + value


def summed_usage(usages) -> dict[str, Any]:
    """Several sessions' usage as one: each key summed over the sessions that reported it,
    null when none did (unknown is never 0)."""
    total = empty_usage()
    for usage in usages:
        for key in USAGE_KEYS:
            value = usage.get(key)
            if is_number(value, finite=True):
                total[key] = (total[key] or 0) + value
    return total


def tracker_record(workspace: Path, session_id: str) -> dict | None:
    """The daemon's persisted session record in this workspace, if it wrote one."""
    path = Path(workspace) / ".jaato" / "sessions" / f"{session_id}.json"
    text = read_text_bounded(path, root=workspace)
    try:
        record = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def session_ids_in(workspace: Path) -> list[str]:
    """Ids of the sessions whose record the daemon wrote in this workspace: every one, with
    no bound (what asks, a retried session.new, stops each: one left out would go on)."""
    folder = Path(workspace) / ".jaato" / "sessions"
    if not inside(folder, workspace):
        return []
    try:
        with os.scandir(folder) as listing:
            return sorted(e.name[:-len(".json")] for e in listing
                          if e.name.endswith(".json") and len(e.name) > len(".json"))
    except OSError:
        return []


def merge_tracker(usage: dict, turns: int, record: dict | None) -> tuple[dict, int]:
    """S9: per dimension, the larger of the event totals and the tracker's budget_usage.

    A tracker 0.0 never replaces an unknown cost: zero from a ledger that never
    priced anything is not "free".
    """
    spent = (record or {}).get("budget_usage") or {}
    if not isinstance(spent, dict):
        return usage, turns
    usage = dict(usage)
    for tracker_key, usage_key in (("usd", "cost_usd"), ("tokens", "spend_total_tokens")):
        value = spent.get(tracker_key)
        if not is_number(value, finite=True):
            continue
        if usage_key == "cost_usd" and value == 0 and usage[usage_key] is None:
            continue
        usage[usage_key] = value if usage[usage_key] is None else max(usage[usage_key], value)
    tracker_turns = spent.get("turns")
    if is_int(tracker_turns) and 0 <= tracker_turns < 10**9:
        turns = max(turns, tracker_turns)
    return usage, turns


def count_nudges(workspace: Path, session_id: str, completion_gap: str | None) -> int | None:
    """S10: 2 on a reported completion gap, else COMPLETION_NUDGE: lines in the session's logs.

    No logs, or logs without DEBUG lines (a daemon logging at INFO), is unknown:
    None, never 0.
    """
    if completion_gap:
        return 2
    folder = Path(workspace) / ".jaato" / "logs"
    if not inside(folder, workspace):
        return None
    try:  # the agent may have filled the folder: look at a bounded number of names
        logs = sorted(itertools.islice(folder.glob(f"session_{session_id}_*.log"), MAX_LOGS + 1))
    except OSError:
        return None
    if not logs or len(logs) > MAX_LOGS:  # logs left unread: a count of the rest says less
        return None
    nudges, saw_debug = 0, False
    for log in logs:
        raw = files.read_bounded(log, files.LOG_CAP + 1, root=workspace)  # never a FIFO, a device or a link out
        if raw is None:
            continue
        if len(raw) > files.LOG_CAP:  # a log read in part: its nudges are not all counted
            return None
        text = raw.decode("utf-8", errors="replace")
        saw_debug = saw_debug or "[DEBUG]" in text
        nudges += text.count("COMPLETION_NUDGE:")
    return nudges if saw_debug else None


def payload_hash(payload: Any) -> str | None:
    """S11: sha256 of the payload as canonical JSON; None when there is no payload."""
    if payload is None:
        return None
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
