"""How an arm's verdict becomes a pytest outcome (X3, X4, X7).

PASS passes. FAIL fails with the verdict table as its text. BLOCKED stays a
`skipped` report underneath, so JUnit, pytest-html and every other reporter
still understand it, but is marked and counted as its own category:
`B` / `BLOCKED` / `N blocked`, and exit status 2 when nothing failed.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any

from .engine.session import AgentRun
from .record import build_record
from .redact import Redactor
from .render import safe_text
from .verdict import BLOCKED, FAIL

BLOCKED_CATEGORY = "blocked"
EXIT_BLOCKED = 2
RECORD_ATTR = "jaato_record"
EVIDENCE_LINES = 40  # per verdict in the failure text: the tail is where a failure shows


class ArmFailed(Exception):
    """An arm whose roll-up is FAIL; rendered as the verdict table, not a traceback."""

    def __init__(self, record: dict[str, Any]):
        self.record = record
        super().__init__(f"{record['arm_id']} FAILED")


class ArmBlocked(Exception):
    """An arm whose roll-up is BLOCKED: an environment fault, not a verdict on the agent."""

    def __init__(self, record: dict[str, Any]):
        self.record = record
        super().__init__(f"BLOCKED: {record.get('blocked_reason')}")


def raise_for(record: dict[str, Any]) -> None:
    if record["state"] == FAIL:
        raise ArmFailed(record)
    if record["state"] == BLOCKED:
        raise ArmBlocked(record)


def one_line(text: Any, width: int = 300) -> str:
    """Untrusted text (a reason, a detail) as one bounded line with no escape sequence."""
    return safe_text(text, width)


def _id(text: Any, width: int = 60) -> str:
    """An id (grader, arm, session) as written, spacing kept, control characters shown."""
    return safe_text(text, width, collapse=False)


def verdict_table(record: dict[str, Any]) -> str:
    """X3: a readable failure text: grader, state, detail, then each verdict's evidence."""
    verdicts = record.get("verdicts") or []
    rows = [("grader", "state", "detail")] + [
        (_id(v["grader_id"]), v["state"], one_line(v.get("detail") or "", 120))
        for v in verdicts]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"arm {_id(record['arm_id'], 200)}: {record['state']}"
             f" (model {_id(record.get('model') or '—')},"
             f" session {_id(record.get('session_id') or '—')})"]
    if record.get("error"):
        lines.append(f"error: {one_line(record['error'])}")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for v in verdicts:
        if v.get("evidence"):
            lines.append(f"--- evidence of {_id(v['grader_id'])} ---")
            evidence = [str(line) for line in v["evidence"]]
            if len(evidence) > EVIDENCE_LINES:
                lines.append(f"  … {len(evidence) - EVIDENCE_LINES} earlier lines not shown")
            lines += [f"  {_id(line, 400)}" for line in evidence[-EVIDENCE_LINES:]]
    return "\n".join(lines)


def junit_properties(record: dict[str, Any]) -> list[tuple[str, str]]:
    """X7: per-arm testcase properties (strings; JUnit has no other type)."""
    usage = record.get("usage") or {}
    props = [
        ("jaato_state", record["state"]),
        ("jaato_arm_id", record["arm_id"]),
        ("jaato_model", record.get("model") or ""),
        ("jaato_provider", record.get("provider") or ""),
        ("jaato_session_id", record.get("session_id") or ""),
        ("jaato_cost_usd", "" if usage.get("cost_usd") is None else str(usage["cost_usd"])),
        ("jaato_turns", str(record.get("turns"))),
    ]
    if record.get("blocked_reason"):
        props.append(("jaato_blocked_reason", one_line(record["blocked_reason"])))
    # pytest escapes property values for XML, not names: a NUL in a grader id would
    # otherwise make the whole JUnit file unreadable.
    props += [(f"jaato_verdict[{_id(v['grader_id'], 200)}]", v["state"])
              for v in record.get("verdicts") or []]
    return props


def mark_report(report: Any, item: Any, record: Any) -> None:
    """Attach the record to the call report and turn BLOCKED into a marked skip."""
    setattr(report, RECORD_ATTR, json.loads(json.dumps(record.to_dict(), default=str)))  # xdist-safe
    if record["state"] == BLOCKED:
        _, lineno, _ = item.location
        report.outcome = "skipped"
        report.longrepr = (str(item.path), lineno, f"BLOCKED: {one_line(record['blocked_reason'])}")


# xdist's loadgroup appends `@<group>` to a grouped item's node id.
_ARM_NAME = re.compile(r"^(?P<task>.*)\[(?P<set>.*)-r(?P<repeat>\d+)\](@.*)?$")


def block_crashed(report: Any, nodeid: str, run_id: str, redact: Redactor | None = None) -> None:
    """Turn xdist's FAILED crash report into a BLOCKED arm with a record of its own.

    The crash text is the worker's last words (a traceback, its stderr), so it goes
    through the same masker as every other record before the store or JUnit sees it.
    """
    redact = redact or Redactor.from_environ()
    name = nodeid.rsplit("::", 1)[-1]
    m = _ARM_NAME.match(name)
    task, pset, repeat = (m["task"], m["set"], int(m["repeat"])) if m else (name, "default", 0)
    reason = redact.text(f"worker crashed: {one_line(report.longrepr)} (the arm's process "
                         f"died; the arm taught us nothing)")
    record = redact(build_record(
        arm_id=f"{task}@{pset}#{repeat}", task_id=task, profile_set=pset, repeat=repeat,
        state=BLOCKED, blocked_reason=reason, verdicts=[], run=AgentRun(), caveats=[
            "synthesised by the controller: the worker running this arm crashed"],
        completion_nudges=None, extra={"run_id": run_id, "task_hash": None, "workspace": None,
                                       "finished_at": time.time()}))
    report.when = "call"
    report.outcome = "skipped"
    report.longrepr = (nodeid.split("::")[0], 0, f"BLOCKED: {reason}")
    setattr(report, RECORD_ATTR, record.to_dict())


def record_of(report: Any) -> dict[str, Any] | None:
    return getattr(report, RECORD_ATTR, None)


def is_blocked(report: Any) -> bool:
    record = record_of(report)
    return report.when == "call" and record is not None and record["state"] == BLOCKED


def report_status(report: Any):
    """X3: ('blocked', 'B', 'BLOCKED') for a blocked arm's call report."""
    if is_blocked(report):
        return BLOCKED_CATEGORY, "B", ("BLOCKED", {"yellow": True})
    return None


def fold_exit_status(exitstatus: int, blocked: int) -> int:
    """X4: any FAIL -> 1 (pytest's own); else any BLOCKED -> 2; pytest's other codes stay."""
    if exitstatus == 0 and blocked:
        return EXIT_BLOCKED
    return exitstatus
