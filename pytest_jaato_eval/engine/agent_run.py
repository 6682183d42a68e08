"""What the engine observed of one arm's agent run: a plain value, free of the SDK,
so graders and records can hold it without loading the client."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .accounting import empty_usage

UNSIGNED_ERRORS = ("NudgeExhausted",)  # S8 (the driver's twin is DriverStoppedShort)


@dataclass
class AgentRun:
    """What the engine observed of one arm's agent run (the record's engine half)."""

    session_id: str | None = None
    session_ids: list[str] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    payload: Any = None
    turns: int = 0
    finish_reason: str | None = None
    completion_gap: str | None = None
    usage: dict = field(default_factory=empty_usage)
    termination_reason: str | None = None
    termination_detail: str | None = None
    stopped: bool = False  # the harness sent session.stop (its ceiling): not the agent's act
    error_type: str | None = None
    error: str | None = None          # S8: set on an unsigned arm, which is still graded
    blocked_reason: str | None = None  # set when the run taught us nothing
    agent_fault: str | None = None  # the agent broke what it ran on (its daemon): its FAIL
    exhausted: str | None = None  # what it used up, or a read bound it passed: its FAIL
    history: list | None = None        # S5: None is "absent", never []
    turn_accounting: list | None = None  # per turn: tokens, seconds, tool calls (the daemon's)
    duration_seconds: float | None = None
    caveats: list[str] = field(default_factory=list)  # what the engine did that a reader should know

    @property
    def unsigned(self) -> bool:
        return self.error_type in UNSIGNED_ERRORS or (self.error or "").startswith(
            "DriverStoppedShort")
