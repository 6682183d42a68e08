"""What the scripted model server saw: one :class:`RecordedRequest` per request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .script import Turn, wire_tool_name

CHAT_PATH = "/v1/chat/completions"



@dataclass
class RecordedRequest:
    """One request the server received, and how it was answered.

    ``outcome`` is filled in as the answer completes: ``"ok"`` (a health/models
    answer or a full reply), ``"fault"``, ``"malformed"``, ``"hang:timeout"``,
    ``"hang:client_closed"``, ``"hang:server_stopped"``, ``"client_closed"`` (the
    client went away mid-answer or during a turn's ``after()`` delay), ``"server_stopped"``
    (stopped during a delay), ``"not_found"``, ``"bad_request"``, or ``"pending"``.
    """

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON body, or None
    received_at: float  # time.monotonic()
    turn_index: int | None = None  # script position that answered it (chat only)
    turn: Turn | None = None
    outcome: str = "pending"
    finished_at: float | None = None

    @property
    def is_chat(self) -> bool:
        return self.method == "POST" and self.path == CHAT_PATH

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def stream(self) -> bool:
        return bool(isinstance(self.body, dict) and self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered, as sent (jaato sends hashed ids)."""
        tools = (self.body or {}).get("tools") or [] if isinstance(self.body, dict) else []
        return [t.get("function", {}).get("name", "") for t in tools]

    def offers_tool(self, name: str) -> bool:
        """Whether tool ``name`` was offered, under its own name or its hashed id."""
        offered = set(self.tool_names)
        return name in offered or wire_tool_name(name) in offered

    @property
    def duration(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.received_at
