"""The HTTP side of the scripted model: the three endpoints jaato's ``vllm`` provider
calls, each chat request answered with the script's next turn (SSE or one JSON body).
"""

from __future__ import annotations

import json
import math
import select
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from .recorded import CHAT_PATH, RecordedRequest
from .script import Turn, Usage, wire_tool_name

if TYPE_CHECKING:
    from .server import ScriptedModel

POLL_SECONDS = 0.05


class ModelHTTPServer(ThreadingHTTPServer):
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


class ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams like vLLM's uvicorn
    server: ModelHTTPServer
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
            step = POLL_SECONDS if deadline is None else max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))
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
        if rec.path not in (CHAT_PATH, "/chat/completions"):
            self._not_found(rec)
            return
        rec.path = CHAT_PATH
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
