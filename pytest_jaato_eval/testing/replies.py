"""What the scripted model says for one turn: the OpenAI-compatible JSON bodies and
stream chunks, as plain values (handler.py puts them on the wire).
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any, Iterator

from .recorded import RecordedRequest
from .script import Turn, Usage, wire_tool_name

if TYPE_CHECKING:
    from .server import ScriptedModel


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            429: "rate_limit_error"}.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": status},
            "object": "error", "message": message, "type": kind, "code": status}


def fault_reply(turn: Turn) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, body, headers) of a scripted fault."""
    headers: dict[str, str] = {}
    if turn.retry_after is not None:
        headers["Retry-After"] = f"{turn.retry_after:g}"
    if turn.should_retry is not None:
        headers["x-should-retry"] = "true" if turn.should_retry else "false"
    status = int(turn.status or 500)
    message = turn.message or f"scripted fault: HTTP {status}"
    return status, error_body(status, message), headers


def wire_names(rec: RecordedRequest, turn: Turn, mode: str) -> list[str]:
    offered = set(rec.tool_names)
    names = []
    for call in turn.tool_calls:
        hashed = wire_tool_name(call.name)
        use_hash = mode == "wire" or (mode == "auto" and hashed in offered)
        names.append(hashed if use_hash else call.name)
    return names


def usage_of(rec: RecordedRequest, turn: Turn) -> Usage:
    if turn.usage is not None:
        return turn.usage
    # Deterministic estimate (~4 characters a token) so budgets see non-zero use.
    prompt_chars = len(json.dumps(rec.messages)) + len(json.dumps((rec.body or {}).get("tools") or []))
    reply_chars = len(turn.content) + sum(len(c.name) + len(c.arguments_json()) for c in turn.tool_calls)
    return Usage(max(1, math.ceil(prompt_chars / 4)), max(1, math.ceil(reply_chars / 4)))


def finish_reason(turn: Turn) -> str:
    if turn.finish_reason is not None and not (turn.tool_calls and turn.finish_reason == "stop"):
        return turn.finish_reason
    return "tool_calls" if turn.tool_calls else "stop"


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start:start + size]


def stream_chunks(rec: RecordedRequest, turn: Turn, owner: ScriptedModel) -> Iterator[dict[str, Any]]:
    """The SSE payloads of a streamed reply, in order ([DONE] is the handler's)."""
    chunk_id = f"chatcmpl-scripted-{rec.turn_index}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                "model": owner.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(turn.content, owner.chunk_chars):
        yield chunk({"content": piece})
    for i, (call, name) in enumerate(zip(turn.tool_calls, wire_names(rec, turn, owner.tool_names))):
        # The opening delta carries id, type and name; arguments follow in pieces.
        yield chunk({"tool_calls": [{"index": i, "id": f"call_{rec.turn_index}_{i}",
                                     "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        for piece in _pieces(call.arguments_json(), owner.chunk_chars):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, finish_reason(turn))
    options = rec.body.get("stream_options") or {}
    if options.get("include_usage"):
        yield {"id": chunk_id, "object": "chat.completion.chunk", "created": created,
               "model": owner.model, "choices": [], "usage": usage_of(rec, turn).to_wire()}


def json_reply(rec: RecordedRequest, turn: Turn, owner: ScriptedModel) -> dict[str, Any]:
    """The body of a non-streamed reply."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{rec.turn_index}_{i}", "type": "function",
             "function": {"name": name, "arguments": call.arguments_json()}}
            for i, (call, name) in enumerate(zip(turn.tool_calls,
                                                 wire_names(rec, turn, owner.tool_names)))
        ]
    return {
        "id": f"chatcmpl-scripted-{rec.turn_index}", "object": "chat.completion",
        "created": int(time.time()), "model": owner.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(turn)}],
        "usage": usage_of(rec, turn).to_wire(),
    }


def malformed_opening(rec: RecordedRequest, owner: ScriptedModel) -> dict[str, Any]:
    """The one sound chunk a malformed stream starts with."""
    return {"id": f"chatcmpl-scripted-{rec.turn_index}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": owner.model,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "partial "},
                         "finish_reason": None}]}
