"""The script a :class:`~pytest_jaato_eval.testing.server.ScriptedModel` plays: one
:class:`Turn` per chat request (prose, tool calls, usage, faults), and how a script is
read from a JSON or YAML file (:func:`load_script`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import yaml

DEFAULT_MODEL = "scripted"
DEFAULT_MAX_MODEL_LEN = 32768
MALFORMED_MODES = ("garbage", "truncated", "unterminated")
TOOL_NAME_MODES = ("auto", "real", "wire")


def wire_tool_name(name: str) -> str:
    """The id jaato shows the model for tool ``name``: ``t_`` + 8 hex digits of SHA-256."""
    return "t_" + hashlib.sha256(name.encode()).hexdigest()[:8]



@dataclass(frozen=True)
class ToolCall:
    """One function call in a model turn.  ``args`` may be a raw string to send
    arguments that are not valid JSON (the daemon keeps them as unreadable)."""

    name: str
    args: Mapping[str, Any] | str = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.args, str):  # read-only, whatever mapping it is given
            object.__setattr__(self, "args", MappingProxyType(dict(self.args)))

    def arguments_json(self) -> str:
        return self.args if isinstance(self.args, str) else json.dumps(dict(self.args))


@dataclass(frozen=True)
class Usage:
    """Token counts (and optional cost in USD) reported for one turn."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    cost: float | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            wire["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        if self.cost is not None:
            wire["cost"] = self.cost
        return wire


@dataclass(frozen=True)
class Turn:
    """One scripted answer to one chat request.  Build it with the class methods."""

    kind: str  # "reply" | "fault" | "hang" | "malformed"
    content: str = ""  # prose (for a tool turn: narration before the calls)
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None  # None: "tool_calls" if any calls, else "stop"
    usage: Usage | None = None  # None: estimated from the request and reply sizes
    status: int | None = None
    message: str | None = None
    retry_after: float | None = None
    should_retry: bool | None = None
    seconds: float | None = None  # hang length; None = until hung up or stopped
    mode: str | None = None  # malformed mode
    delay: float = 0.0  # seconds to wait before answering at all

    # -- constructors --------------------------------------------------------

    @classmethod
    def text(cls, content: str, *, finish_reason: str = "stop") -> Turn:
        """Prose only (``finish_reason`` ``stop`` unless given, e.g. ``"length"``)."""
        return cls("reply", content=content, finish_reason=finish_reason)

    @classmethod
    def tool(cls, name: str, /, **args: Any) -> Turn:
        """One tool call, e.g. ``Turn.tool("writeNewFile", path="a.txt", content="x")``."""
        return cls("reply", tool_calls=(ToolCall(name, args),))

    @classmethod
    def tools(cls, *calls: ToolCall | tuple[str, Mapping[str, Any] | str]) -> Turn:
        """Several tool calls in one turn (parallel calls)."""
        built = tuple(c if isinstance(c, ToolCall) else ToolCall(c[0], c[1]) for c in calls)
        if not built:
            raise ValueError("Turn.tools needs at least one call")
        return cls("reply", tool_calls=built)

    @classmethod
    def fault(
        cls,
        status: int,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        should_retry: bool | None = None,
    ) -> Turn:
        """An HTTP error response.  ``retry_after`` sends a ``Retry-After`` header (the
        openai client honours it); ``should_retry`` sends ``x-should-retry``, which
        switches the openai client's own retries on or off for this response."""
        if not 400 <= status <= 599:
            raise ValueError(f"fault status must be 4xx or 5xx, got {status}")
        return cls("fault", status=status, message=message,
                   retry_after=retry_after, should_retry=should_retry)

    @classmethod
    def hang(cls, seconds: float | None = None) -> Turn:
        """Hold the request open with no response; after ``seconds`` (if given), drop
        the connection.  Ends early when the client hangs up or the server stops."""
        return cls("hang", seconds=seconds)

    @classmethod
    def malformed(cls, mode: str = "garbage") -> Turn:
        """A 200 stream that breaks -- ``mode`` is one of :data:`MALFORMED_MODES`."""
        if mode not in MALFORMED_MODES:
            raise ValueError(f"malformed mode must be one of {MALFORMED_MODES}, got {mode!r}")
        return cls("malformed", mode=mode)

    # -- modifiers (each returns a new Turn) --------------------------------

    def with_usage(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        cached_tokens: int | None = None,
        cost: float | None = None,
    ) -> Turn:
        return replace(self, usage=Usage(prompt_tokens, completion_tokens, cached_tokens, cost))

    def with_text(self, text: str) -> Turn:
        """Prose streamed before this turn's tool calls (narration)."""
        return replace(self, content=text)

    def after(self, seconds: float) -> Turn:
        """Wait ``seconds`` before answering (a slow model, not a fault)."""
        return replace(self, delay=float(seconds))

    # -- (de)serialisation --------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Build a turn from its script-file form.  Exactly one of these keys::

            {tool: NAME, args: {...}}            {text: "..."}
            {tool_calls: [{name:, args:}, ...]}  {fault: 429, message:, retry_after:, should_retry:}
            {hang: SECONDS or null}              {malformed: garbage|truncated|unterminated}

        plus, on any turn, ``usage: {prompt_tokens:, completion_tokens:, cached_tokens:,
        cost:}``, ``delay: SECONDS``; on replies ``finish_reason:``; on tool turns ``text:``.
        """
        data = dict(data)
        kinds = [k for k in ("tool", "tool_calls", "text", "fault", "hang", "malformed") if k in data]
        if "tool" in kinds or "tool_calls" in kinds:
            kinds = [k for k in kinds if k != "text"]  # text is narration here
        if len(kinds) != 1:
            raise ValueError(f"a turn needs exactly one of tool/tool_calls/text/fault/hang/"
                             f"malformed, got {sorted(data)}")
        kind = kinds[0]
        if kind == "tool":
            turn = cls("reply", tool_calls=(ToolCall(data["tool"], data.get("args") or {}),))
        elif kind == "tool_calls":
            turn = cls.tools(*(ToolCall(c["name"], c.get("args") or {}) for c in data["tool_calls"]))
        elif kind == "text":
            turn = cls.text(data["text"])
        elif kind == "fault":
            turn = cls.fault(int(data["fault"]), data.get("message"),
                             retry_after=data.get("retry_after"),
                             should_retry=data.get("should_retry"))
        elif kind == "hang":
            turn = cls.hang(data["hang"])
        else:
            turn = cls.malformed(data["malformed"] or "garbage")
        if turn.kind == "reply":
            if turn.tool_calls and data.get("text"):
                turn = turn.with_text(data["text"])
            if "finish_reason" in data:
                turn = replace(turn, finish_reason=data["finish_reason"])
        if data.get("usage"):
            u = data["usage"]
            turn = turn.with_usage(int(u["prompt_tokens"]), int(u["completion_tokens"]),
                                   cached_tokens=u.get("cached_tokens"), cost=u.get("cost"))
        if data.get("delay"):
            turn = turn.after(data["delay"])
        return turn

    def to_dict(self) -> dict[str, Any]:
        """The script-file form (inverse of :meth:`from_dict`)."""
        out: dict[str, Any]
        if self.kind == "reply":
            if len(self.tool_calls) == 1:
                out = {"tool": self.tool_calls[0].name, "args": _jsonable(self.tool_calls[0].args)}
            elif self.tool_calls:
                out = {"tool_calls": [{"name": c.name, "args": _jsonable(c.args)}
                                      for c in self.tool_calls]}
            else:
                out = {}
            if self.content or not self.tool_calls:
                out["text"] = self.content
            if self.finish_reason is not None and self.finish_reason != "stop":
                out["finish_reason"] = self.finish_reason
        elif self.kind == "fault":
            out = {"fault": self.status}
            for key in ("message", "retry_after", "should_retry"):
                if getattr(self, key) is not None:
                    out[key] = getattr(self, key)
        elif self.kind == "hang":
            out = {"hang": self.seconds}
        else:
            out = {"malformed": self.mode}
        if self.usage is not None:
            out["usage"] = {k: v for k, v in vars(self.usage).items() if v is not None}
        if self.delay:
            out["delay"] = self.delay
        return out


def _jsonable(args: Mapping[str, Any] | str) -> Any:
    return args if isinstance(args, str) else dict(args)


@dataclass(frozen=True)
class ScriptSpec:
    """A script file's contents: the turns plus optional server settings."""

    turns: tuple[Turn, ...]
    model: str = DEFAULT_MODEL
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    when_exhausted: Turn | None = None  # None = repeat the last turn


def load_script(path: str | Path) -> ScriptSpec:
    """Read a script from JSON (``.json``) or YAML (anything else; needs PyYAML).

    Either a bare list of turns, or a mapping::

        model: scripted            # optional
        max_model_len: 32768       # optional
        when_exhausted: {text: "..."}   # optional; default: repeat the last turn
        turns:
          - {tool: writeNewFile, args: {path: hello.txt, content: "hi\\n"}}
          - {tool: signal_completion, args: {answer: done}, usage: {prompt_tokens: 900, completion_tokens: 40}}
    """
    path = Path(path)
    raw = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(raw)
    else:

        data = yaml.safe_load(raw)
    if isinstance(data, list):
        data = {"turns": data}
    if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
        raise ValueError(f"{path}: a script is a list of turns or a mapping with 'turns:'")
    exhausted = data.get("when_exhausted")
    if exhausted in (None, "repeat_last"):
        exhausted_turn = None
    else:
        exhausted_turn = Turn.from_dict(exhausted)
    return ScriptSpec(
        turns=tuple(Turn.from_dict(t) for t in data["turns"]),
        model=str(data.get("model", DEFAULT_MODEL)),
        max_model_len=int(data.get("max_model_len", DEFAULT_MAX_MODEL_LEN)),
        when_exhausted=exhausted_turn,
    )
