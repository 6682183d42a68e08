"""What every grader is handed about the arm it grades (G1)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..verdict import Verdict


def truncation_reason(termination_reason: str | None, payload: Any,
                      finish_reason: str | None) -> str | None:
    """G1: why an arm's run did not reach its end, or None when it did.

    The termination outranks a payload, a payload outranks finish_reason: a
    schema-driven arm ends inside a tool_use turn and is complete.
    """
    if termination_reason == "budget_exhausted":
        return "stopped at its budget ceiling"
    if termination_reason == "error":
        return "ended in a session error"
    if payload is not None or finish_reason == "stop":
        return None
    if finish_reason == "tool_use":
        return "ended mid-tool-loop"
    return f"finish_reason={finish_reason!r}"


@dataclass
class GraderContext:
    workspace: Path
    config_root: Path
    params: Mapping[str, Any]
    payload: Any = None
    history: list | None = None
    ledger: Any = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    turns: int = 0
    finish_reason: str | None = None
    termination_reason: str | None = None
    termination_detail: str | None = None
    error_type: str | None = None
    error: str | None = None
    completion_gap: str | None = None
    socket_path: str | None = None
    cascade_id: str | None = None
    unsigned: bool = False
    verdicts: list[Verdict] = field(default_factory=list)  # the graders before this one
    mask: Callable[[str], str] | None = None  # masks credentials before output is cut
    arm_id: str | None = None
    profile_set: str | None = None  # the set the arm ran under (the harness wrote it)

    @property
    def truncation_reason(self) -> str | None:
        return truncation_reason(self.termination_reason, self.payload, self.finish_reason)

    @property
    def tool_calls(self):
        """The ledger's entries; reading them on an unfaithful ledger is refused (G3)."""
        if self.ledger is None or not getattr(self.ledger, "faithful", False):
            reason = getattr(self.ledger, "reason", "no history was received")
            raise UnfaithfulLedger(reason)
        return self.ledger.entries


class UnfaithfulLedger(Exception):
    """A processor read context.tool_calls from a ledger that cannot be trusted."""
