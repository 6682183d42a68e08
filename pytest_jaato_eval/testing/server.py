"""The scripted model server: serves a script on 127.0.0.1, records what it saw, and
writes the jaato profile, ``.env`` and pricing table that point the daemon at it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from . import profiles
from .handler import POLL_SECONDS, ModelHTTPServer
from .recorded import RecordedRequest
from .script import DEFAULT_MAX_MODEL_LEN, DEFAULT_MODEL, TOOL_NAME_MODES, Turn, load_script


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
        self._server: ModelHTTPServer | None = None
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
        server = ModelHTTPServer(("127.0.0.1", self._port), self)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"scripted-model:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: end hangs, close open connections, wait for handlers."""
        if self._server is None:
            return
        self._server.close(timeout)
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
            time.sleep(POLL_SECONDS)
        return request.outcome

    # -- profile and pricing helpers (see profiles.py) -------------------------

    def profile(self, name: str = "scripted", **kwargs: Any) -> dict[str, Any]:
        """A jaato profile (as a dict) that points the ``vllm`` provider here; the options
        are :func:`~pytest_jaato_eval.testing.profiles.vllm_profile`'s."""
        return profiles.vllm_profile(self.url, self.model, name, **kwargs)

    def write_profile(self, config_root: str | Path, name: str = "scripted", *,
                      profile_set: str | None = None, **kwargs: Any) -> Path:
        """Write :meth:`profile` to ``<config_root>/profiles/[<profile_set>/]<name>.yaml``
        (as JSON, which is valid YAML) and return the path."""
        return profiles.write_profile(config_root, self.profile(name, **kwargs), profile_set)

    @property
    def env(self) -> dict[str, str]:
        """The session environment that points a host-less ``vllm`` profile here."""
        return {"VLLM_HOST": self.url}

    def write_env(self, workspace: str | Path, **extra: str) -> Path:
        """Set ``VLLM_HOST`` (plus ``extra``, e.g. ``AI_RETRY_ATTEMPTS="1"``) in
        ``<workspace>/.env``, keeping the file's other lines."""
        return profiles.write_env(workspace, {**self.env, **{k: str(v) for k, v in extra.items()}})

    def pricing(self, *, input_per_token: float, output_per_token: float,
                cache_read_per_token: float | None = None) -> dict[str, Any]:
        """A jaato pricing table entry for this model (LiteLLM field names)."""
        return profiles.pricing(self.model, input_per_token=input_per_token,
                                output_per_token=output_per_token,
                                cache_read_per_token=cache_read_per_token)

    def write_pricing(self, workspace: str | Path, **rates: float) -> Path:
        """Write :meth:`pricing` to ``<workspace>/.jaato/pricing.json``, where the daemon
        looks for it -- the only way to give a ``vllm`` turn a cost."""
        return profiles.write_pricing(workspace, self.pricing(**rates))

    # -- what the handler asks of its owner (handler.py) -----------------------

    def arrived(self, rec: RecordedRequest) -> None:
        with self._request_arrived:
            self._requests.append(rec)
            self._request_arrived.notify_all()

    def next_turn(self) -> tuple[int, Turn]:
        with self._lock:
            index = self._cursor
            self._cursor += 1
        if index < len(self.turns):
            return index, self.turns[index]
        if self.when_exhausted is not None:
            return index, self.when_exhausted
        return index, self.turns[-1]

    def say(self, line: str) -> None:
        if self._log is not None:
            self._log(line)
