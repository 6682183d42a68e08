"""A transcript as a reader follows it: prompt, the agent's words, each tool call with its
arguments and result, the answer, turn by turn. One shape for the terminal (`show`), the
HTML report and pytest-html; every value is untrusted text, shown, never obeyed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..render import safe_text
from .pivot import money
from .record import number

LINE_CHARS = 4000   # one line of a message, as shown


@dataclass
class Step:
    """One thing that happened: `kind` is user, agent, thought, call, result, or note."""
    kind: str
    text: str
    name: str = ""          # a tool's name (call, result)
    error: bool = False     # a tool result marked as an error


@dataclass
class SessionView:
    title: str              # "agent session 2026… · echo/echo"
    facts: str              # "2 turns · 15 tokens · $0.0010 · 0.4 s"
    source: str
    steps: list[Step] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)
    payload: str = ""
    end: str = ""           # how it ended, when not cleanly


def _text(value: Any) -> str:
    """Multi-line untrusted text: each line bounded, no control character."""
    return "\n".join(safe_text(line, LINE_CHARS, collapse=False)
                     for line in str(value).split("\n"))


def _json(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"cut"} and isinstance(value["cut"], str):
        return _text(value["cut"])  # already text, cut
    try:
        return _text(json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True,
                                default=str))
    except (ValueError, RecursionError):
        return _text(repr(value))


def seconds(value: Any) -> str:
    return "—" if number(value) is None else f"{value:.1f} s"


def _steps(messages: list | None) -> list[Step]:
    if messages is None:
        return [Step("note", "no messages: this session's history was not received")]
    steps = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role"))
        for p in m.get("parts") or []:
            if not isinstance(p, dict):
                continue
            kind = p.get("type")
            if kind == "function_call":
                steps.append(Step("call", _json(p.get("args")), _text(p.get("name"))))
            elif kind == "function_response":
                steps.append(Step("result", _json(p.get("result")), _text(p.get("name")),
                                  p.get("is_error") is True))
            elif role == "cut":
                steps.append(Step("note", _text(p.get("text", ""))))
            elif "thought" in p:
                steps.append(Step("thought", _text(p["thought"])))
            elif "text" in p:
                steps.append(Step("user" if role == "user" else "agent", _text(p["text"])))
            else:
                steps.append(Step("note", _json(p.get("value", p))))
    return steps


def _turn(i: int, t: Any) -> str:
    if not isinstance(t, dict):
        return f"turn {i + 1}: {_json(t)}"
    tokens = [f"{t[k]:,} {k}" for k in ("prompt", "output", "total")
              if type(t.get(k)) is int]
    seconds = number(t.get("duration_seconds"))
    tools = [str(c.get("name")) for c in t.get("function_calls") or [] if isinstance(c, dict)]
    bits = [", ".join(tokens) + " tokens" if tokens else "",
            f"{seconds:.2f} s" if seconds is not None else "",
            f"tools: {', '.join(tools)}" if tools else ""]
    return safe_text(f"turn {i + 1}: " + " · ".join(b for b in bits if b), 400)


def sessions(transcript: dict[str, Any]) -> list[SessionView]:
    out = []
    for s in transcript.get("sessions") or []:
        if not isinstance(s, dict):
            continue
        who = str(s.get("role"))
        if s.get("grader_id"):
            who += f" ({s['grader_id']})"
        model = "/".join(str(s[k]) for k in ("provider", "model") if s.get(k))
        title = safe_text(f"{who} session {s.get('session_id') or '—'}"
                          + (f" · {model}" if model else ""), 300)
        usage = u if isinstance(u := s.get("usage"), dict) else {}
        turns = t if isinstance(t := s.get("turns"), list) else []
        tokens = number(usage.get("spend_total_tokens"))
        seconds = number(s.get("duration_seconds"))
        facts = " · ".join(b for b in (
            f"{len(turns)} turns" if turns else "",
            f"{tokens:,.0f} tokens" if tokens is not None else "",
            money(number(usage.get("cost_usd"))) + " cost",
            f"{seconds:.1f} s" if seconds is not None else "") if b)
        end = " · ".join(_text(f"{k}: {s[k]}") for k in
                         ("blocked_reason", "error", "termination_reason") if s.get(k))
        payload = s.get("payload")
        out.append(SessionView(
            title, facts, _text(s.get("source") or ""), _steps(s.get("messages")),
            [_turn(i, t) for i, t in enumerate(turns)],
            "" if payload is None else _json(payload), end))
    return out


LABEL = {"user": "user", "agent": "agent", "thought": "thinking", "note": "…"}


def _block(head: str, text: str) -> list[str]:
    """`head` and the text's first line, its other lines indented below."""
    first, *rest = text.split("\n")
    return [f"  {head} {first}"] + [f"      {line}" for line in rest]


def text_lines(transcript: dict[str, Any]) -> list[str]:
    """The transcript as terminal lines: each session, its steps, turns and payload."""
    lines = [safe_text(f"transcript of {transcript.get('arm_id')} "
                       f"(task {transcript.get('task_id')}, run {transcript.get('run_id')})",
                       400, collapse=False)]
    for s in sessions(transcript):
        lines += ["", f"== {s.title}", f"   {s.facts}", f"   from {s.source}"]
        for step in s.steps:
            if step.kind == "call":
                head = f"→ {step.name}"
            elif step.kind == "result":
                head = f"← {step.name}" + (" (error)" if step.error else "")
            else:
                head = f"{LABEL.get(step.kind, step.kind)}:"
            lines += _block(head, step.text)
        if s.turns:
            lines += ["  turns:"] + [f"    {t}" for t in s.turns]
        if s.payload:
            lines += _block("completion payload:", s.payload)
        if s.end:
            lines.append(f"  ended: {s.end}")
    cuts = [c for c in transcript.get("cuts") or [] if isinstance(c, str)]
    if cuts:
        lines += ["", "cut to keep the transcript bounded:"]
        lines += [f"  {safe_text(c, 400)}" for c in cuts]
    return lines
