"""The HTTP side of the scripted model: the three endpoints jaato's ``vllm`` provider
calls, each chat request answered with the script's next turn (SSE or one JSON body;
what the answer says is replies.py's).
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Mapping

from .recorded import CHAT_PATH, RecordedRequest
from .replies import error_body, fault_reply, json_reply, malformed_opening, stream_chunks
from .script import Turn

if TYPE_CHECKING:
    from .server import ScriptedModel

POLL_SECONDS = 0.05


class ModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck on a client must never block interpreter exit
    block_on_close = False  # close() waits for handlers itself, with a bound
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: ScriptedModel) -> None:
        super().__init__(address, ChatHandler)
        self.owner = owner
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    def opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def closed(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)

    def close(self, timeout: float) -> None:
        """Stop serving: end hangs, close open connections, wait for handlers."""
        self.stopping.set()
        self.shutdown()
        self.server_close()
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
                    return
            time.sleep(POLL_SECONDS)

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
        self.server.opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.closed(self.connection)

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
        self.server.owner.arrived(rec)
        return rec

    def _end(self, rec: RecordedRequest, outcome: str) -> None:
        rec.outcome = outcome
        rec.finished_at = time.monotonic()
        turn = f" turn={rec.turn_index}:{rec.turn.kind}" if rec.turn is not None else ""
        self.server.owner.say(f"{rec.method} {rec.path}{turn} -> {outcome} "
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
        stopping = self.server.stopping
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            if stopping.is_set():
                return "server_stopped"
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            step = POLL_SECONDS if deadline is None else max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))
            try:
                readable, _, _ = select.select([self.connection], [], [], step)
                # A readable socket with nothing to read is a peer that hung up --
                # or stop() shutting the socket, which must not read as the client's doing.
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    return "server_stopped" if stopping.is_set() else "client_closed"
            except (OSError, ValueError):
                return "server_stopped" if stopping.is_set() else "client_closed"
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
            self._send_json(rec, "bad_request", 400, error_body(400, "request body is not a JSON object"))
            return
        rec.turn_index, rec.turn = self.server.owner.next_turn()
        try:
            self._answer(rec, rec.turn)
        except _ClientGone:
            self.close_connection = True
            self._end(rec, "client_closed")

    def _not_found(self, rec: RecordedRequest) -> None:
        self._send_json(rec, "not_found", 404, error_body(404, f"no route {rec.method} {rec.path}"))

    # -- answering one chat request -----------------------------------------

    def _answer(self, rec: RecordedRequest, turn: Turn) -> None:
        if turn.delay:
            why = self._wait(turn.delay)
            if why != "timeout":
                self.close_connection = True
                self._end(rec, why)
                return
        if turn.kind == "fault":
            status, body, headers = fault_reply(turn)
            self._send_json(rec, "fault", status, body, headers)
        elif turn.kind == "hang":
            why = self._wait(turn.seconds)
            self.close_connection = True  # drop the connection without a response
            self._end(rec, f"hang:{why}")
        elif turn.kind == "malformed":
            self._malformed(rec, turn)
        elif rec.stream:
            self._stream_reply(rec, turn)
        else:
            self._send_json(rec, "ok", 200, json_reply(rec, turn, self.server.owner))

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
        self._start_stream()
        for payload in stream_chunks(rec, turn, self.server.owner):
            self._sse(payload)
        self._end(rec, "ok")
        self._end_stream()

    def _malformed(self, rec: RecordedRequest, turn: Turn) -> None:
        opening = malformed_opening(rec, self.server.owner)
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
