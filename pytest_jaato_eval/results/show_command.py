"""`show STORE [ARM_ID...] [-k EXPR]`: an arm's story in the terminal — what it was asked,
what it said, each tool call with its arguments and result, its answer, then each
grader's verdict with its evidence. Exit 0 shown, 1 no arm matched, 2 unusable input.
"""
from __future__ import annotations

from typing import Any

from . import transcripts
from .cell import money, plural
from .command_io import EXIT_OK, EXIT_PROBLEMS, Unusable, open_pivot, say
from .transcript_view import seconds, text_lines
from ..render import safe_text

EVIDENCE_LINES = 40


def add_parser(sub) -> None:
    show = sub.add_parser(
        "show", help="print arms' transcripts and verdicts (by arm id, or -k EXPR); exit 1 "
                     "when no arm matches",
        description="Print each chosen arm's transcript (prompt, messages, tool calls with "
                    "arguments and results, turns, payload) and its graders' verdicts with "
                    "their evidence. The transcript is read from the folder beside the store "
                    "(<store>.transcripts/).")
    show.add_argument("store", help="a result store")
    show.add_argument("arm_ids", nargs="*", metavar="ARM_ID", help="arm ids, exactly")
    show.add_argument("-k", dest="expr", metavar="EXPR", default=None,
                      help="pytest's -k: substrings of the arm id, task, profile set or state, "
                           "with and / or / not and parentheses (e.g. 'write and FAIL')")
    show.set_defaults(func=cmd_show)


def _matcher(expr: str | None):
    if expr is None:
        return None
    from _pytest.mark.expression import Expression  # pytest's own -k grammar
    try:
        compiled = Expression.compile(expr)
    except SyntaxError as exc:  # what pytest's parser raises (ParseError in older pytest)
        raise Unusable(f"-k {expr!r}: {getattr(exc, 'msg', None) or exc}") from None

    def matches(*words: str) -> bool:
        lowered = [w.lower() for w in words]
        def found(name: str, /, **_: Any) -> bool:
            return any(name.lower() in w for w in lowered)
        return compiled.evaluate(found)
    return matches


def cmd_show(args) -> int:
    pivot = open_pivot(args.store)
    for note in pivot.skipped_notes():
        say(note)
    matches = _matcher(args.expr)
    wanted = set(args.arm_ids)
    shown = 0
    for cell in pivot.cells:
        chosen = {a.arm_id for a in cell.arms
                  if (not wanted or a.arm_id in wanted)
                  and (matches is None or matches(a.arm_id, a.task_id, a.profile_set,
                                                  str(a.state)))}
        if not chosen:
            continue
        for record in pivot.arms(cell):
            if record.arm_id in chosen:
                if shown:
                    say("")
                for line in story(record, args.store):
                    say(line)
                shown += 1
    if not shown:
        what = ", ".join(sorted(wanted)) if wanted else (f"-k {args.expr!r}" if args.expr
                                                         else "")
        say(f"{args.store}: no arm matches {what}".rstrip())
        return EXIT_PROBLEMS
    if shown > 1:
        say("")
        say(f"{plural(shown, 'arm')} shown")
    return EXIT_OK


def story(record: Any, store: str) -> list[str]:
    """One arm: its heading, its transcript, then its verdicts and their evidence."""
    judge = record.judge_usage
    cost = money(record.cost) + (f" + judge {money(record.judge_cost)}" if judge else "")
    lines = ["=" * 78, safe_text(f"{record.arm_id}: {record.state} · {cost} · "
                                 f"{seconds(record.duration_seconds)} · turns "
                                 f"{record.turns if record.turns is not None else '—'}",
                                 400, collapse=False)]
    if record.blocked_reason:
        lines.append(f"blocked: {safe_text(record.blocked_reason, 2000)}")
    if record.error:
        lines.append(f"error: {safe_text(record.error, 2000)}")
    try:
        lines += text_lines(transcripts.read(store, record.transcript))
    except transcripts.TranscriptUnreadable as exc:
        lines.append(f"transcript: {safe_text(exc, 600)}")
    lines += ["", "verdicts:"]
    for v in record.verdicts:
        lines.append(safe_text(f"  {v.get('grader_id')}: {v.get('state')} — "
                               f"{v.get('blocked_reason') or v.get('detail') or ''}", 600,
                               collapse=False))
        evidence = [str(e) for e in v.get("evidence") or []]
        if len(evidence) > EVIDENCE_LINES:
            lines.append(f"      … {len(evidence) - EVIDENCE_LINES} earlier lines not shown")
        lines += [f"      {safe_text(e, 2000, collapse=False)}"
                  for e in evidence[-EVIDENCE_LINES:]]
    if not record.verdicts:
        lines.append("  (no grader ran)")
    return lines
