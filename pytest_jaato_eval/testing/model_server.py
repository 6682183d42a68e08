"""A scripted, OpenAI-compatible model server for driving jaato's ``vllm`` provider.

A real agent run needs a model; a test of the harness needs a model whose every turn
is known in advance.  :class:`ScriptedModel` is that model: a tiny HTTP server on
``127.0.0.1`` (an ephemeral port, standard library only) that answers the three
endpoints jaato's ``vllm`` provider calls --

* ``GET /health``                 -> 200 (the provider's liveness probe at session start)
* ``GET /v1/models``              -> one model, with ``max_model_len`` (the provider
  reads its context window from it and fails the session without one)
* ``POST /v1/chat/completions``   -> the next turn of the script, streamed as SSE when
  the request says ``stream: true`` (the daemon always does), else one JSON body

-- and answers each chat request with the next :class:`Turn` of a script::

    from pytest_jaato_eval.testing.model_server import ScriptedModel, Turn

    with ScriptedModel([
        Turn.tool("writeNewFile", path="hello.txt", content="hi\\n"),
        Turn.tool("signal_completion", answer="wrote hello.txt").with_usage(900, 40),
    ]) as model:
        model.write_profile(config_root)          # profiles/scripted.yaml -> model.url
        ...drive a jaato session...
        assert len(model.chat_requests) == 2

One script position is consumed per chat request, retries included: the daemon and the
openai client both retry failed calls, so ``[Turn.fault(429), Turn.text("ok")]`` is a
transient rate limit that the retry absorbs, while ``[Turn.fault(429)]`` is a rate limit
that never lifts.  When the script runs out the server repeats its LAST turn (so a lone
fault keeps failing every retry and a final ``signal_completion`` stays benign), unless
``when_exhausted=`` names another turn.  ``/health`` and ``/v1/models`` never consume turns.

Faults (see ``docs/scripted-model.md`` for what the daemon does with each):

* ``Turn.fault(status)``  an HTTP error with an OpenAI-shaped error body (429, 500, ...);
* ``Turn.hang(seconds)``  hold the request open without a byte of response until the
  client hangs up, the server stops, or ``seconds`` pass -- then drop the connection;
* ``Turn.malformed(mode)`` a 200 stream that breaks: ``"garbage"`` (a non-JSON ``data:``
  line), ``"truncated"`` (half a JSON chunk, then the connection drops mid-body), or
  ``"unterminated"`` (valid chunks, then a clean end with no ``finish_reason``).

A task's profile can stay static: leave ``plugin_configs.vllm.host`` out
(``profile(host=False)``) and :meth:`ScriptedModel.write_env` puts ``VLLM_HOST`` in the
arm workspace's ``.env``, which the daemon loads into the session's environment.

Tool names: jaato offers tools to the model under hashed ids (``t_<8 hex>``, the first
eight hex digits of the name's SHA-256).  The daemon maps an id back to its name, and
passes an unknown name through unchanged, so either spelling works.  By default
(``tool_names="auto"``) the server answers with the hashed id whenever the request
offered it -- what a real model would do -- and with the name as scripted otherwise.

Cost: the ``vllm`` provider reads only ``prompt_tokens`` / ``completion_tokens`` /
``prompt_tokens_details.cached_tokens`` from a usage chunk; it never reads a cost field.
``Usage.cost`` is still sent (as ``usage.cost``, OpenRouter's spelling) for clients that
do, but jaato prices a ``vllm`` turn only from a pricing table: see :meth:`ScriptedModel.write_pricing`.

A pytest fixture: :func:`scripted_model_fixture` is a plain generator, meant to be
registered by the plugin as ``pytest.fixture(scripted_model_fixture, name="scripted_model")``.

Standalone: ``python -m pytest_jaato_eval.testing.model_server --script FILE --port 0``
loads a JSON or YAML script (format in :meth:`Turn.from_dict` / :func:`load_script`),
prints the server URL on stdout and serves until interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

__all__ = [
    "DEFAULT_MAX_MODEL_LEN",
    "DEFAULT_MODEL",
    "MALFORMED_MODES",
    "RecordedRequest",
    "ScriptSpec",
    "ScriptedModel",
    "ToolCall",
    "Turn",
    "Usage",
    "load_script",
    "scripted_model_fixture",
    "wire_tool_name",
]

DEFAULT_MODEL = "scripted"
DEFAULT_MAX_MODEL_LEN = 32768
MALFORMED_MODES = ("garbage", "truncated", "unterminated")
TOOL_NAME_MODES = ("auto", "real", "wire")
# A schema that lets a scripted agent finish with signal_completion(answer=...).  Without a
# completion_payload_schema a scripted agent that cannot recognise its own earlier calls
# loops until the context overflows (measured; see design.md).
DEFAULT_COMPLETION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
_CHAT_PATH = "/v1/chat/completions"
_POLL_SECONDS = 0.05


def wire_tool_name(name: str) -> str:
    """The id jaato shows the model for tool ``name``: ``t_`` + 8 hex digits of SHA-256."""
    return "t_" + hashlib.sha256(name.encode()).hexdigest()[:8]


# --------------------------------------------------------------------------- script


@dataclass(frozen=True)
class ToolCall:
    """One function call in a model turn.  ``args`` may be a raw string to send
    arguments that are not valid JSON (the daemon keeps them as unreadable)."""

    name: str
    args: Mapping[str, Any] | str = field(default_factory=dict)

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
        import yaml  # a project dependency; the server itself needs only the stdlib

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


# --------------------------------------------------------------------------- records


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
        return self.method == "POST" and self.path == _CHAT_PATH

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


# --------------------------------------------------------------------------- server


class ScriptedModel:
    """The scripted model server.  Use as a context manager, or ``start()`` / ``stop()``.

    Args:
        turns: the script, one :class:`Turn` per chat request.
        model: the model id served by ``/v1/models`` (the profile's ``model:``).
        max_model_len: the context window reported by ``/v1/models``.
        when_exhausted: the turn to answer once the script is used up; ``None``
            (default) repeats the last scripted turn.
        port: 0 (default) for an ephemeral port.  The host is always 127.0.0.1.
        tool_names: ``"auto"`` (hashed id when offered, else as scripted), ``"real"``
            (always as scripted) or ``"wire"`` (always the hashed id).
        chunk_chars: characters per streamed content/arguments delta.
        log: optional callable receiving one line per request (e.g. ``print``).
    """

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        model: str = DEFAULT_MODEL,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
        when_exhausted: Turn | None = None,
        port: int = 0,
        tool_names: str = "auto",
        chunk_chars: int = 24,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.turns: tuple[Turn, ...] = tuple(turns)
        if not self.turns and when_exhausted is None:
            raise ValueError("a script needs at least one turn, or when_exhausted=")
        if tool_names not in TOOL_NAME_MODES:
            raise ValueError(f"tool_names must be one of {TOOL_NAME_MODES}")
        self.model = model
        self.max_model_len = max_model_len
        self.when_exhausted = when_exhausted
        self.tool_names = tool_names
        self.chunk_chars = max(1, chunk_chars)
        self._log = log
        self._port = port
        self._lock = threading.Lock()
        self._cursor = 0  # chat requests answered so far
        self._requests: list[RecordedRequest] = []
        self._request_arrived = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> ScriptedModel:
        spec = load_script(path)
        kwargs: dict[str, Any] = {"model": spec.model, "max_model_len": spec.max_model_len,
                                  "when_exhausted": spec.when_exhausted}
        kwargs.update(overrides)
        return cls(spec.turns, **kwargs)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> ScriptedModel:
        if self._server is not None:
            raise RuntimeError("ScriptedModel already started")
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"scripted-model:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: end hangs, close open connections, wait for handlers."""
        server = self._server
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        # Idle keep-alive connections would otherwise block their handler threads on
        # a read forever; closing them is also how a client learns the server is gone.
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._connections:
                    break
            time.sleep(_POLL_SECONDS)
        if self._thread is not None:
            self._thread.join(timeout)
        self._server = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- where it is ---------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedModel not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:40123`` (the vllm ``host``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``url`` + ``/v1``), for an ``openai.OpenAI`` client."""
        return self.url + "/v1"

    # -- what it saw ---------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a snapshot)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_chat]

    @property
    def turns_served(self) -> int:
        """Chat requests answered (each consumed one script position)."""
        with self._lock:
            return self._cursor

    @property
    def exhausted(self) -> bool:
        """Whether the script ran out (later requests got the fallback turn)."""
        return self.turns_served > len(self.turns)

    def wait_for_chat_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` chat requests have arrived; raise TimeoutError if not."""
        deadline = time.monotonic() + timeout
        with self._request_arrived:
            while sum(r.is_chat for r in self._requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{count} chat requests not received within {timeout}s")
                self._request_arrived.wait(left)
            return [r for r in self._requests if r.is_chat]

    def wait_for_outcome(self, request: RecordedRequest, timeout: float = 10.0) -> str:
        """Block until ``request`` is answered (or abandoned); return its outcome."""
        deadline = time.monotonic() + timeout
        while request.outcome == "pending":
            if time.monotonic() >= deadline:
                raise TimeoutError(f"request still pending after {timeout}s")
            time.sleep(_POLL_SECONDS)
        return request.outcome

    # -- profile and pricing helpers ------------------------------------------

    def profile(
        self,
        name: str = "scripted",
        *,
        plugins: Iterable[str] = ("file_edit(preload)", "permission"),
        completion_payload_schema: Mapping[str, Any] | None = DEFAULT_COMPLETION_SCHEMA,
        unload_grace_seconds: float | None = 0,
        host: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        """A jaato profile (as a dict) that points the ``vllm`` provider here.

        ``host=False`` leaves ``plugin_configs.vllm.host`` out, so the provider takes
        ``VLLM_HOST`` from the session's environment (see :meth:`write_env`) -- the way
        to keep a task's profile static while the port changes every run.  The
        ``permission`` plugin, when listed, gets ``defaultPolicy: allow`` so tools run
        unattended.  ``extra`` keys are merged in at the top level (a ``plugin_configs``
        given there is merged with the generated one).
        """
        plugin_list = list(plugins)
        plugin_configs: dict[str, Any] = {"vllm": {"host": self.url} if host else {}}
        if any(p.split("(")[0] == "permission" for p in plugin_list):
            plugin_configs["permission"] = {"policy": {"defaultPolicy": "allow"}}
        plugin_configs.update(extra.pop("plugin_configs", {}) or {})
        prof: dict[str, Any] = {
            "name": name,
            "provider": "vllm",
            "model": self.model,
            "plugins": plugin_list,
            "plugin_configs": plugin_configs,
        }
        if completion_payload_schema is not None:
            prof["completion_payload_schema"] = dict(completion_payload_schema)
        if unload_grace_seconds is not None:
            prof["runtime_limits"] = {"unload_grace_seconds": unload_grace_seconds}
        prof.update(extra)
        return prof

    def write_profile(self, config_root: str | Path, name: str = "scripted", *,
                      profile_set: str | None = None, **kwargs: Any) -> Path:
        """Write :meth:`profile` to ``<config_root>/profiles/[<profile_set>/]<name>.yaml``
        (as JSON, which is valid YAML) and return the path."""
        folder = Path(config_root) / "profiles"
        if profile_set:
            folder = folder / profile_set
        path = folder / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.profile(name, **kwargs), indent=2) + "\n", encoding="utf-8")
        return path

    @property
    def env(self) -> dict[str, str]:
        """The session environment that points a host-less ``vllm`` profile here."""
        return {"VLLM_HOST": self.url}

    def write_env(self, workspace: str | Path, **extra: str) -> Path:
        """Set ``VLLM_HOST`` (plus ``extra``, e.g. ``AI_RETRY_ATTEMPTS="1"``) in
        ``<workspace>/.env``, keeping the file's other lines.  The daemon reads that file
        into the session's environment when the client passes ``env_file=".env"``."""
        path = Path(workspace) / ".env"
        wanted = {**self.env, **{k: str(v) for k, v in extra.items()}}
        kept = []
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                key = line.split("=", 1)[0].strip()
                if key.startswith("export "):
                    key = key[len("export "):].strip()
                if key not in wanted:
                    kept.append(line)
        kept.extend(f"{k}={v}" for k, v in wanted.items())
        path.write_text("\n".join(kept) + "\n", encoding="utf-8")
        return path

    def pricing(self, *, input_per_token: float, output_per_token: float,
                cache_read_per_token: float | None = None) -> dict[str, Any]:
        """A jaato pricing table entry for this model (LiteLLM field names)."""
        entry: dict[str, float] = {"input_cost_per_token": input_per_token,
                                   "output_cost_per_token": output_per_token}
        if cache_read_per_token is not None:
            entry["cache_read_input_token_cost"] = cache_read_per_token
        return {self.model: entry}

    def write_pricing(self, workspace: str | Path, **rates: float) -> Path:
        """Write :meth:`pricing` to ``<workspace>/.jaato/pricing.json``, where the daemon
        looks for it.  Then a turn costs ``prompt_tokens * input + completion_tokens *
        output`` -- the only way to give a ``vllm`` turn a cost."""
        path = Path(workspace) / ".jaato" / "pricing.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.pricing(**rates), indent=2) + "\n", encoding="utf-8")
        return path

    # -- internals used by the handler --------------------------------------

    def _record(self, rec: RecordedRequest) -> None:
        with self._request_arrived:
            self._requests.append(rec)
            self._request_arrived.notify_all()

    def _next_turn(self) -> tuple[int, Turn]:
        with self._lock:
            index = self._cursor
            self._cursor += 1
        if index < len(self.turns):
            return index, self.turns[index]
        if self.when_exhausted is not None:
            return index, self.when_exhausted
        return index, self.turns[-1]

    def _emit(self, line: str) -> None:
        if self._log is not None:
            self._log(line)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck on a client must never block interpreter exit
    block_on_close = False  # stop() waits for handlers itself, with a bound
    allow_reuse_address = True
    owner: ScriptedModel

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client dropping an idle keep-alive connection (the daemon's runner exiting)
        # is normal here, not worth a traceback on stderr.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _ClientGone(ConnectionError):
    """The client closed the connection while we were answering."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams like vLLM's uvicorn
    server: _Server
    server_version = "ScriptedModel/1"

    # -- plumbing ------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        with self.server.owner._lock:
            self.server.owner._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.owner._lock:
                self.server.owner._connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # requests are recorded; stderr noise is not wanted in test output

    def _begin(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        rec = RecordedRequest(self.command, self.path.split("?")[0], headers, body, time.monotonic())
        self.server.owner._record(rec)
        return rec

    def _end(self, rec: RecordedRequest, outcome: str) -> None:
        rec.outcome = outcome
        rec.finished_at = time.monotonic()
        turn = f" turn={rec.turn_index}:{rec.turn.kind}" if rec.turn is not None else ""
        self.server.owner._emit(f"{rec.method} {rec.path}{turn} -> {outcome} "
                                f"({rec.duration:.2f}s)")

    def _send_json(self, rec: RecordedRequest, outcome: str, status: int, payload: Any,
                   headers: Mapping[str, str] = {}) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        # Record the outcome before the last byte leaves: a client holding its answer
        # must never find the record still pending.
        self._end(rec, outcome)
        try:
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _ClientGone from exc

    def _write_chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _ClientGone from exc

    def _sse(self, payload: Any) -> None:
        self._write_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _wait(self, seconds: float | None) -> str:
        """Sit on the open request; say why we stopped: ``timeout``,
        ``client_closed`` or ``server_stopped``."""
        owner = self.server.owner
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            if owner._stopping.is_set():
                return "server_stopped"
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            step = _POLL_SECONDS if deadline is None else max(0.0, min(_POLL_SECONDS, deadline - time.monotonic()))
            try:
                readable, _, _ = select.select([self.connection], [], [], step)
                # A readable socket with nothing to read is a peer that hung up --
                # or stop() shutting the socket, which must not read as the client's doing.
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    return "server_stopped" if owner._stopping.is_set() else "client_closed"
            except (OSError, ValueError):
                return "server_stopped" if owner._stopping.is_set() else "client_closed"
            if readable:
                time.sleep(step)  # unexpected pipelined bytes: keep waiting, don't spin

    # -- routes --------------------------------------------------------------

    def do_GET(self) -> None:
        rec = self._begin()
        owner = self.server.owner
        if rec.path == "/health":
            self._end(rec, "ok")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif rec.path in ("/v1/models", "/models"):
            self._send_json(rec, "ok", 200, {"object": "list", "data": [{
                "id": owner.model, "object": "model", "created": int(time.time()),
                "owned_by": "scripted", "root": owner.model, "parent": None,
                "max_model_len": owner.max_model_len,
            }]})
        else:
            self._not_found(rec)

    def do_POST(self) -> None:
        rec = self._begin()
        if rec.path not in (_CHAT_PATH, "/chat/completions"):
            self._not_found(rec)
            return
        rec.path = _CHAT_PATH
        if not isinstance(rec.body, dict):
            self._send_json(rec, "bad_request", 400, _error_body(400, "request body is not a JSON object"))
            return
        rec.turn_index, rec.turn = self.server.owner._next_turn()
        try:
            self._answer(rec, rec.turn)
        except _ClientGone:
            self.close_connection = True
            self._end(rec, "client_closed")

    def _not_found(self, rec: RecordedRequest) -> None:
        self._send_json(rec, "not_found", 404, _error_body(404, f"no route {rec.method} {rec.path}"))

    # -- answering one chat request -----------------------------------------

    def _answer(self, rec: RecordedRequest, turn: Turn) -> None:
        if turn.delay:
            why = self._wait(turn.delay)
            if why != "timeout":
                self.close_connection = True
                self._end(rec, why)
                return
        if turn.kind == "fault":
            self._fault(rec, turn)
        elif turn.kind == "hang":
            why = self._wait(turn.seconds)
            self.close_connection = True  # drop the connection without a response
            self._end(rec, f"hang:{why}")
        elif turn.kind == "malformed":
            self._malformed(rec, turn)
        elif rec.stream:
            self._stream_reply(rec, turn)
        else:
            self._json_reply(rec, turn)

    def _fault(self, rec: RecordedRequest, turn: Turn) -> None:
        headers: dict[str, str] = {}
        if turn.retry_after is not None:
            headers["Retry-After"] = f"{turn.retry_after:g}"
        if turn.should_retry is not None:
            headers["x-should-retry"] = "true" if turn.should_retry else "false"
        status = int(turn.status or 500)
        message = turn.message or f"scripted fault: HTTP {status}"
        self._send_json(rec, "fault", status, _error_body(status, message), headers)

    def _wire_names(self, rec: RecordedRequest, turn: Turn) -> list[str]:
        mode = self.server.owner.tool_names
        offered = set(rec.tool_names)
        names = []
        for call in turn.tool_calls:
            hashed = wire_tool_name(call.name)
            use_hash = mode == "wire" or (mode == "auto" and hashed in offered)
            names.append(hashed if use_hash else call.name)
        return names

    def _usage(self, rec: RecordedRequest, turn: Turn) -> Usage:
        if turn.usage is not None:
            return turn.usage
        # Deterministic estimate (~4 characters a token) so budgets see non-zero use.
        prompt_chars = len(json.dumps(rec.messages)) + len(json.dumps((rec.body or {}).get("tools") or []))
        reply_chars = len(turn.content) + sum(len(c.name) + len(c.arguments_json()) for c in turn.tool_calls)
        return Usage(max(1, math.ceil(prompt_chars / 4)), max(1, math.ceil(reply_chars / 4)))

    def _finish_reason(self, turn: Turn) -> str:
        if turn.finish_reason is not None and not (turn.tool_calls and turn.finish_reason == "stop"):
            return turn.finish_reason
        return "tool_calls" if turn.tool_calls else "stop"

    def _pieces(self, text: str) -> Iterator[str]:
        size = self.server.owner.chunk_chars
        for start in range(0, len(text), size):
            yield text[start:start + size]

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _end_stream(self, done: bool = True) -> None:
        if done:
            self._write_chunk(b"data: [DONE]\n\n")
        try:
            self.wfile.write(b"0\r\n\r\n")  # the terminating chunk: a clean end of body
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _ClientGone from exc

    def _stream_reply(self, rec: RecordedRequest, turn: Turn) -> None:
        owner = self.server.owner
        chunk_id = f"chatcmpl-scripted-{rec.turn_index}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                    "model": owner.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        self._start_stream()
        self._sse(chunk({"role": "assistant", "content": ""}))
        for piece in self._pieces(turn.content):
            self._sse(chunk({"content": piece}))
        for i, (call, name) in enumerate(zip(turn.tool_calls, self._wire_names(rec, turn))):
            # The opening delta carries id, type and name; arguments follow in pieces.
            self._sse(chunk({"tool_calls": [{"index": i, "id": f"call_{rec.turn_index}_{i}",
                                             "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
            for piece in self._pieces(call.arguments_json()):
                self._sse(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        self._sse(chunk({}, self._finish_reason(turn)))
        options = rec.body.get("stream_options") or {}
        if options.get("include_usage"):
            self._sse({"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                       "model": owner.model, "choices": [],
                       "usage": self._usage(rec, turn).to_wire()})
        self._end(rec, "ok")
        self._end_stream()

    def _json_reply(self, rec: RecordedRequest, turn: Turn) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{rec.turn_index}_{i}", "type": "function",
                 "function": {"name": name, "arguments": call.arguments_json()}}
                for i, (call, name) in enumerate(zip(turn.tool_calls, self._wire_names(rec, turn)))
            ]
        self._send_json(rec, "ok", 200, {
            "id": f"chatcmpl-scripted-{rec.turn_index}", "object": "chat.completion",
            "created": int(time.time()), "model": self.server.owner.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish_reason(turn)}],
            "usage": self._usage(rec, turn).to_wire(),
        })

    def _malformed(self, rec: RecordedRequest, turn: Turn) -> None:
        owner = self.server.owner
        opening = {"id": f"chatcmpl-scripted-{rec.turn_index}", "object": "chat.completion.chunk",
                   "created": int(time.time()), "model": owner.model,
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": "partial "},
                                "finish_reason": None}]}
        self._start_stream()
        self._sse(opening)
        self._end(rec, "malformed")
        if turn.mode == "garbage":
            self._write_chunk(b"data: {this is not json\n\n")
            self._end_stream(done=False)
        elif turn.mode == "truncated":
            half = json.dumps(opening).encode()
            self._write_chunk(b"data: " + half[: len(half) // 2])
            # No terminating chunk: the body ends mid-chunk, as a crashed engine's would.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        else:  # unterminated: a clean end of body, but no finish_reason and no [DONE]
            self._end_stream(done=False)


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            429: "rate_limit_error"}.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": status},
            "object": "error", "message": message, "type": kind, "code": status}


# --------------------------------------------------------------------------- pytest


def scripted_model_fixture() -> Iterator[Callable[..., ScriptedModel]]:
    """Body of a ``scripted_model`` pytest fixture: yields ``start(turns, **kwargs)``,
    which starts a :class:`ScriptedModel` and returns it; every server started through
    it is stopped at teardown.  Register it from the plugin with::

        from pytest_jaato_eval.testing.model_server import scripted_model_fixture
        scripted_model = pytest.fixture(scripted_model_fixture, name="scripted_model")

    and use it as::

        def test_x(scripted_model, tmp_path):
            model = scripted_model([Turn.tool("signal_completion", answer="ok")])
            model.write_profile(tmp_path / "cfg")
    """
    started: list[ScriptedModel] = []

    def start(turns: Iterable[Turn] = (), **kwargs: Any) -> ScriptedModel:
        model = ScriptedModel(turns, **kwargs).start()
        started.append(model)
        return model

    try:
        yield start
    finally:
        for model in reversed(started):
            model.stop()


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_jaato_eval.testing.model_server",
        description="Serve a scripted OpenAI-compatible model on 127.0.0.1 for jaato's vllm provider.")
    parser.add_argument("--script", required=True, help="JSON or YAML script file")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = ephemeral)")
    parser.add_argument("--model", help="model id (overrides the script's)")
    parser.add_argument("--max-model-len", type=int, help="context window (overrides the script's)")
    parser.add_argument("--tool-names", choices=TOOL_NAME_MODES, default="auto")
    parser.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    args = parser.parse_args(argv)

    overrides: dict[str, Any] = {"port": args.port, "tool_names": args.tool_names}
    if args.model:
        overrides["model"] = args.model
    if args.max_model_len:
        overrides["max_model_len"] = args.max_model_len
    if not args.quiet:
        overrides["log"] = lambda line: print(line, file=sys.stderr, flush=True)
    model = ScriptedModel.from_file(args.script, **overrides)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with model:
        print(model.url, flush=True)
        while not stop.wait(0.5):
            pass
    print(f"served {model.turns_served} chat requests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
