"""`python -m pytest_jaato_eval review STORE`: the arms a judge handed to a human.

A judge that answers with a `confidence` below its grader's `needs_human_below`
leaves the arm BLOCKED "needs human review (…)": out of every pass rate, and
listed here, one block per arm, with what the judge said (its reasoning, its
answer, the defects it named) so a person can decide.

Exit codes, as the other store commands: 0 nothing awaits review, 1 some arm
does, 2 the store is unusable.
"""
from __future__ import annotations

from typing import Any

from .command_io import read_store, say
from .store_reader import latest_by_arm

EXIT_OK, EXIT_WAITING = 0, 1
NEEDS_HUMAN = "needs human review"  # the judge's blocked reason starts with it


def awaiting_review(records) -> list[tuple[Any, dict[str, Any]]]:
    """(record, verdict) for each judge verdict that asked for a human, latest record per arm."""
    out = []
    for record in latest_by_arm(records).values():
        verdicts = record.get("verdicts")
        for v in verdicts if isinstance(verdicts, list) else []:
            if isinstance(v, dict) and v.get("state") == "BLOCKED" and \
                    str(v.get("blocked_reason") or "").startswith(NEEDS_HUMAN):
                out.append((record, v))
    return out


def cmd_review(args) -> int:
    store = read_store(args.store)  # unreadable lines are skipped; `validate` names them
    waiting = awaiting_review(store.records)
    if not waiting:
        say(f"{store.path}: no arm awaits human review")
        return EXIT_OK
    say(f"{store.path}: {len(waiting)} arm(s) await human review")
    for record, verdict in waiting:
        say("")
        say(f"{record.get('arm_id')}  (task {record.get('task_id')}, profile set "
            f"{record.get('profile_set')}, model {record.get('model') or '—'})")
        say(f"  {verdict.get('grader_id')}: {verdict.get('blocked_reason')}")
        evidence = verdict.get("evidence")
        for line in evidence if isinstance(evidence, list) else []:
            say(f"    {line}")
        if record.get("workspace"):
            say(f"  workspace kept: {record['workspace']}")
    return EXIT_WAITING


def add_parser(sub) -> None:
    rev = sub.add_parser("review", help="list the arms a judge left for human review, with "
                                        "its reasoning and evidence; exit 1 when any")
    rev.add_argument("store")
    rev.set_defaults(func=cmd_review)
