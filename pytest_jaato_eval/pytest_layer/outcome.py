"""How an arm's verdict becomes a pytest outcome (X3, X4, X7).

PASS passes. FAIL fails with the verdict table as its text. BLOCKED stays a
`skipped` report underneath, so JUnit, pytest-html and every other reporter
still understand it, but is marked and counted as its own category:
`B` / `BLOCKED` / `N blocked`, and exit status 2 when nothing failed.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import os
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from xml.etree import ElementTree

import pytest
from _pytest.skipping import xfailed_key  # where pytest keeps the evaluated xfail mark

from ..engine.agent_run import AgentRun
from ..redact import Redactor
from ..render import safe_text
from ..results.pivot import table_lines
from ..results.record import ArmRecord, build_record
from ..verdict import BLOCKED, FAIL, Verdict, failed_grader
from .run import HANDLE_KEY, WORKSPACE_KEY, arm_of, arm_side

if TYPE_CHECKING:
    from ..task.arms import Arm
    from .fixtures import ArmHandle
    from .worker import Worker

BLOCKED_CATEGORY = "blocked"
EXIT_BLOCKED = 2
EXIT_STORE_FORGED = 6  # the store was written into during the run: set aside, written afresh
RECORD_ATTR = "jaato_record"
TRANSCRIPT_ATTR = "jaato_transcript"
SNAPSHOT_ATTR = "jaato_snapshot"
EVIDENCE_LINES = 40  # per verdict in the failure text: the tail is where a failure shows


class ArmFailed(Exception):
    """An arm whose roll-up is FAIL; rendered as the verdict table, not a traceback."""

    def __init__(self, record: ArmRecord):
        self.record = record
        super().__init__(f"{record.arm_id} FAILED")


class ArmBlocked(Exception):
    """An arm whose roll-up is BLOCKED: an environment fault, not a verdict on the agent."""

    def __init__(self, record: ArmRecord):
        self.record = record
        super().__init__(f"BLOCKED: {record.blocked_why}")


def raise_for(record: ArmRecord) -> None:
    if record.state == FAIL:
        raise ArmFailed(record)
    if record.state == BLOCKED:
        raise ArmBlocked(record)


def one_line(text: object, width: int = 300) -> str:
    """Untrusted text (a reason, a detail) as one bounded line with no escape sequence."""
    return safe_text(text, width)


def _id(text: object, width: int = 60) -> str:
    """An id (grader, arm, session) as written, spacing kept, control characters shown."""
    return safe_text(text, width, collapse=False)


def verdict_table(record: ArmRecord) -> str:
    """X3: a readable failure text: why, in one line (the failing grader and its detail:
    what pytest's short summary quotes), then grader, state, detail, and each verdict's
    evidence."""
    verdicts = record.verdicts
    why = failed_grader(verdicts) or record.error or record.blocked_why or record.state
    lines = [one_line(why),
             f"arm {_id(record.arm_id, 200)}: {record.state}"
             f" (model {_id(record.model or '—')},"
             f" session {_id(record.session_id or '—')})"]
    if record.error:
        lines.append(f"error: {one_line(record.error)}")
    lines += table_lines(("grader", "state", "detail"),
                         [(_id(v["grader_id"]), v["state"], one_line(v["detail"], 120))
                          for v in verdicts])
    for v in verdicts:
        if v.get("evidence"):
            lines.append(f"--- evidence of {_id(v['grader_id'])} ---")
            evidence = [str(line) for line in v["evidence"]]
            if len(evidence) > EVIDENCE_LINES:
                lines.append(f"  … {len(evidence) - EVIDENCE_LINES} earlier lines not shown")
            lines += [f"  {_id(line, 400)}" for line in evidence[-EVIDENCE_LINES:]]
    return "\n".join(lines)


def junit_properties(record: ArmRecord) -> list[tuple[str, str]]:
    """X7: per-arm testcase properties (strings; JUnit has no other type)."""
    cost = record.usage.get("cost_usd")
    props = [
        ("jaato_state", record.state or ""),
        ("jaato_model", record.model or ""),
        ("jaato_provider", record.provider or ""),
        ("jaato_session_id", record.session_id or ""),
        ("jaato_cost_usd", "" if cost is None else str(cost)),
        ("jaato_turns", str(record.turns)),
        # the two durations every view shows, labelled: the whole arm, the agent's session
        ("jaato_arm_seconds", _seconds(record.arm_seconds)),
        ("jaato_session_seconds", _seconds(record.duration_seconds)),
    ]
    if record.state == BLOCKED and record.blocked_why:  # a FAIL's gated-off judge is no block
        props.append(("jaato_blocked_reason", one_line(record.blocked_why)))
    # pytest escapes property values for XML, not names: a NUL in a grader id would
    # otherwise make the whole JUnit file unreadable.
    props += [(f"jaato_verdict[{_id(v['grader_id'], 200)}]", v["state"])
              for v in record.verdicts]
    return props


def blocked_as_errors(path: Path) -> int:
    """X7, for dashboards that should go red on a blocked run (--jaato-junit-blocked=error):
    in the JUnit file pytest wrote, each BLOCKED arm's <skipped> becomes an <error> with the
    same message, and the suites' counts follow. Returns how many were changed."""
    tree = ElementTree.parse(path)  # pytest's own output: no entity of anybody else's
    changed = 0
    for suite in tree.iter("testsuite"):
        moved = 0
        for case in suite.iter("testcase"):
            skipped = case.find("skipped")
            if skipped is None or not skipped.get("message", "").startswith("BLOCKED:"):
                continue
            index = list(case).index(skipped)
            error = ElementTree.Element("error", message=skipped.get("message", ""),
                                        type="jaato.BLOCKED")
            error.text = skipped.text
            case.remove(skipped)
            case.insert(index, error)
            moved += 1
        for key, delta in (("skipped", -moved), ("errors", moved)):
            suite.set(key, str(int(suite.get(key, "0") or 0) + delta))
        changed += moved
    if changed:
        partial = path.with_name(f".{path.name}.partial")
        tree.write(partial, encoding="utf-8", xml_declaration=True)
        os.replace(partial, path)
    return changed


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def mark_report(report: pytest.TestReport, item: pytest.Item, record: ArmRecord) -> None:
    """Attach the record to the report and turn BLOCKED into a marked skip."""
    # The store's line, a copy of its own: xdist-safe, and nothing shares the record's lists.
    setattr(report, RECORD_ATTR, json.loads(json.dumps(record.to_dict(), default=str)))
    if record.state == BLOCKED:
        _, lineno, _ = item.location  # 0-based, as pytest's; a skip's line is 1-based
        report.outcome = "skipped"
        report.longrepr = (str(item.path), (lineno or 0) + 1,
                           f"BLOCKED: {one_line(record.blocked_why)}")
        if hasattr(report, "wasxfail"):  # an environment fault is no expected failure
            del report.wasxfail


# The arm's identity rides on every report of its item as user properties, so the
# controller knows it even for an arm whose worker died (never rebuilt from a node id).
IDENTITY = (("jaato_arm_id", "arm_id"), ("jaato_task_id", "task_id"),
            ("jaato_profile_set", "profile_set"), ("jaato_repeat", "repeat"),
            ("jaato_sample_id", "sample_id"))  # the sample: only an arm that has one


def identity(arm: Arm) -> dict[str, str]:
    """What the controller knows an arm by (it never sees the Arm itself under -n)."""
    return {"arm_id": arm.id, "task_id": arm.task.id, "profile_set": arm.set_name,
            "repeat": str(arm.repeat), "sample_id": getattr(arm, "sample_id", None) or ""}


def identity_properties(arm: Arm) -> list[tuple[str, str]]:
    values = identity(arm)
    return [(prop, values[key]) for prop, key in IDENTITY if values[key] or key != "sample_id"]


_LABELLED = pytest.StashKey[bool]()
SETUP_SECONDS = pytest.StashKey[float]()


def label(item: pytest.Item, arm: Arm) -> None:
    """The arm's identity as its item's user properties, which every report of it copies
    (JUnit, pytest-html, the controller under -n). Added once, at the first report, not
    at collection: `--co` of thousands of arms never needs them."""
    if not item.stash.get(_LABELLED, False):
        item.stash[_LABELLED] = True
        item.user_properties.extend(identity_properties(arm))


def arm_identity(report: pytest.TestReport) -> dict[str, str] | None:
    props = {}
    for entry in getattr(report, "user_properties", None) or ():
        try:
            name, value = entry
        except (TypeError, ValueError):
            continue
        props[name] = value
    if "jaato_arm_id" not in props:
        return None
    return {key: str(props.get(prop, "")) for prop, key in IDENTITY}


def block_crashed(report: pytest.TestReport, nodeid: str, arm: dict[str, str], run_id: str,
                  redact: Redactor | None = None) -> None:
    """Turn xdist's FAILED crash report into a BLOCKED arm with a record of its own.

    The crash text is the worker's last words (a traceback, its stderr), so it goes
    through the same masker as every other record before the store or JUnit sees it.
    """
    redact = redact or Redactor.from_environ()
    try:
        repeat = int(arm.get("repeat") or 0)
    except ValueError:
        repeat = 0
    reason = redact.text(f"worker crashed: {one_line(report.longrepr)} (the arm's process "
                         f"died; the arm taught us nothing)")
    record = build_record(
        arm_id=arm["arm_id"], task_id=arm.get("task_id") or arm["arm_id"],
        profile_set=arm.get("profile_set") or "default", repeat=repeat,
        state=BLOCKED, blocked_reason=reason, verdicts=[], run=AgentRun(), notes=[
            "synthesised by the controller: the worker running this arm crashed"],
        completion_nudges=None, extra={"run_id": run_id, "task_hash": None, "workspace": None,
                                       "finished_at": time.time(),
                                       **({"sample_id": arm["sample_id"]}
                                          if arm.get("sample_id") else {})}, mask=redact)
    report.when = "call"
    report.outcome = "skipped"
    report.longrepr = (nodeid.split("::")[0], 1, f"BLOCKED: {reason}")
    setattr(report, RECORD_ATTR, record.to_dict())


# report -> (the line it carries, the record read from it): the terminal's line and the
# store's writer read one report's record once between them.
_READ: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record_of(report: pytest.TestReport) -> ArmRecord | None:
    """The arm's record its report carries (as JSON, across xdist's channel), or None."""
    data = getattr(report, RECORD_ATTR, None)
    if data is None:
        return None
    try:
        read = _READ.get(report)
    except TypeError:  # a report that takes no weak reference: read, not kept
        return ArmRecord.from_dict(data)
    if read is None or read[0] is not data:
        read = _READ[report] = (data, ArmRecord.from_dict(data))
    return read[1]



def fold_exit_status(exitstatus: int, blocked: int, failed: int = 0,
                     collection_errors: int = 0) -> int:
    """X4: any FAIL -> 1 (pytest's own); else any BLOCKED -> 2; pytest's other codes stay.
    A run whose only failures are collection errors (--continue-on-collection-errors: pytest
    says 1) exits 2, as it does when they stop it: no arm failed. `failed`: the failed test
    reports of the run (arms and plain tests, any phase)."""
    if exitstatus == 0 and blocked:
        return EXIT_BLOCKED
    if exitstatus == pytest.ExitCode.TESTS_FAILED and not failed and collection_errors:
        return EXIT_BLOCKED
    return exitstatus


# -- an arm's reports -----------------------------------------------------------

PYTHON_CLAIM = "the test's assertions about what the agent left hold"


def on_report(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport,
              worker: Worker) -> None:
    """Give an arm's setup error or call its one record, and its pytest outcome.

    A fixture that errs in setup (ours or the project's) is an environment fault:
    BLOCKED, naming the fixture. A teardown error is pytest's to report; the
    stored verdict stands.
    """
    if report.when == "setup":
        item.stash[SETUP_SECONDS] = report.duration
    if call.excinfo is not None and _skipped(call.excinfo):
        return  # a skipped arm writes no record
    arm = arm_of(item)
    if report.when == "setup" and report.failed:
        assert call.excinfo is not None  # a setup fails by raising
        record = _record(arm, worker, _setup_reason(call.excinfo, worker),
                         item.stash.get(WORKSPACE_KEY, None))
    elif report.when == "call":
        handle = item.stash.get(HANDLE_KEY, None)
        kept: ArmRecord | None = getattr(handle, "record", None)
        if handle is not None and kept is None and type(item).__name__ != "ArmItem":
            record = _python_record(arm, worker, handle, call.excinfo)
        elif kept is not None:
            record = kept
        else:  # the harness itself broke: still one record for the arm
            record = _record(arm, worker, "the harness failed running the arm: "
                             + one_line(call.excinfo.exconly() if call.excinfo else "no record"),
                             item.stash.get(WORKSPACE_KEY, None))
    else:
        return
    expectation = xfail_of(item)
    if expectation is not None:  # `report` on the store then exits as this run did
        record = dataclasses.replace(record, extra={**record.extra, "xfail": expectation})
    # The whole arm, as pytest timed its setup and call: every view's "arm" duration.
    setup = item.stash.get(SETUP_SECONDS, 0.0) if report.when == "call" else 0.0
    record = dataclasses.replace(record, arm_seconds=round(setup + report.duration, 3))
    waited = worker.daemon_waits.pop(record.arm_id, None)
    if waited is not None:  # the first arm's time holds the private daemon's start
        record = dataclasses.replace(record, daemon_wait_seconds=waited)
    item.user_properties.extend(junit_properties(record))  # JUnit reads them at teardown (X7)
    mark_report(report, item, record)
    mask_report(report, worker.arm_settings().redact.text)
    carry_transcript(report, worker, record.arm_id)
    carry_snapshot(report, worker, record.arm_id)


def mask_report(report: pytest.TestReport, mask: Callable[[str], str]) -> None:
    """pytest's own text of an arm's report (an assertion's repr, a traceback, what the test
    printed) with every credential masked, as its record is: the terminal, JUnit and
    pytest-html print it."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip's (path, line, reason)
        report.longrepr = (*longrepr[:2], mask(str(longrepr[2])))
    elif longrepr is not None:
        text = str(longrepr)
        masked = mask(text)
        if masked != text:
            report.longrepr = masked
    report.sections = [(title, mask(body)) for title, body in report.sections]


def carry_transcript(report: pytest.TestReport, worker: Worker, arm_id: str) -> None:
    """The arm's transcript rides on its report to the store's writer (the controller,
    in this process or across xdist's channel): its file name and compressed bytes."""
    worker.arm_settings()  # the worker's state is made with its settings
    pending = worker.arm_state.pending_transcripts.pop(arm_id, None)
    if pending is not None:
        setattr(report, TRANSCRIPT_ATTR, {"name": pending[0],
                                          "data": base64.b64encode(pending[1]).decode()})


def transcript_of(report: pytest.TestReport) -> tuple[str, bytes] | None:
    """(file name, compressed transcript) carried by an arm's report, or None."""
    carried = getattr(report, TRANSCRIPT_ATTR, None)
    if not isinstance(carried, dict) or not isinstance(carried.get("data"), str):
        return None
    try:
        return str(carried.get("name")), base64.b64decode(carried["data"], validate=True)
    except (binascii.Error, ValueError):
        return None


def carry_snapshot(report: pytest.TestReport, worker: Worker, arm_id: str) -> None:
    """Where the arm's snapshot waits (a file this run's worker staged, or for a regrade the
    graded store's): its report names it to the store's writer, who brings it beside the
    store. A name and a path, never the bytes: a report is kept until the run ends."""
    worker.arm_settings()
    pending = worker.arm_state.pending_snapshots.pop(arm_id, None)
    if pending is not None:
        setattr(report, SNAPSHOT_ATTR, {"name": pending[0], "path": str(pending[1]),
                                        "move": bool(pending[2])})


def snapshot_of(report: pytest.TestReport) -> tuple[str, str, bool] | None:
    """(file name, where it is, whether it is moved) carried by an arm's report, or None."""
    carried = getattr(report, SNAPSHOT_ATTR, None)
    if not isinstance(carried, dict) or not isinstance(carried.get("path"), str):
        return None
    return str(carried.get("name")), carried["path"], carried.get("move") is True


def xfail_of(item: pytest.Item) -> dict[str, str | bool] | None:
    """The xfail mark the arm ran under, as pytest evaluated it (its condition held):
    `{"reason": ..., "strict": ...}`, or None."""
    xfailed = item.stash.get(xfailed_key, None)
    if xfailed is None:
        return None
    return {"reason": str(getattr(xfailed, "reason", "") or ""),
            "strict": bool(getattr(xfailed, "strict", False))}


def _skipped(excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    return isinstance(excinfo.value, pytest.skip.Exception)


def _setup_reason(excinfo: pytest.ExceptionInfo[BaseException], worker: Worker) -> str:
    exc = excinfo.value
    named = worker.fixture_errors.get(id(exc))
    if type(exc).__name__ in ("DaemonError", "WorkspaceError", "PreflightBlocked"):
        return one_line(exc)  # our own faults say what failed ("daemon: ...", "fixture: ...")
    if named is not None:
        return f"fixture {named[0]!r} failed in setup: {type(exc).__name__}: {one_line(exc)}"
    argname, msg = getattr(exc, "argname", None), getattr(exc, "msg", None)
    if argname and msg:  # FixtureLookupError
        return f"fixture {argname!r}: {one_line(msg)}"
    return f"setup failed: {one_line(excinfo.exconly())}"


def _record(arm: Arm, worker: Worker, reason: str, ws: Path | None,
            verdicts: tuple[Verdict, ...] | list[Verdict] = (), run: AgentRun | None = None,
            ) -> ArmRecord:
    run = run or AgentRun()
    if not verdicts and not run.blocked_reason:
        run.blocked_reason = reason
    side = arm_side()
    one = side.ArmRun(arm, worker.arm_settings(), worker.arm_state, ws=ws, run=run)
    return side.arm_record(one, list(verdicts), [], discard=False)


def _python_record(arm: Arm, worker: Worker, handle: ArmHandle,
                   excinfo: pytest.ExceptionInfo[BaseException] | None) -> ArmRecord:
    """A Python arm's record: its run's facts, its test body's verdict."""
    run = handle.agent_run
    grader = f"python:{arm.task.id.rsplit('::', 1)[-1]}"
    act = getattr(handle, "agent_verdict", None)
    if act is not None:  # the agent's own act (arm.agent_act): its FAIL, whatever the test did
        return _record(arm, worker, "", handle.workspace, verdicts=[act], run=run)
    if run is not None and run.blocked_reason:
        return _record(arm, worker, run.blocked_reason, handle.workspace, run=run)
    if excinfo is not None and not is_assertion(excinfo.value):
        # A bug in the test (or the harness's own refusal), not the agent's failure.
        reason = (f"the test raised {one_line(excinfo.exconly(), 240)}: an error in the test, "
                  f"not a verdict on the agent")
        verdict = Verdict.blocked(grader, PYTHON_CLAIM, reason, traceback_lines(excinfo))
        return _record(arm, worker, "", handle.workspace, verdicts=[verdict],
                       run=run if run is not None else _never_ran(reason))
    if run is None:
        why = f" ({one_line(excinfo.exconly(), 200)})" if excinfo is not None else ""
        return _record(arm, worker, f"the test never called jaato_arm.run(prompt){why}: its "
                                    f"agent never ran, so the arm taught us nothing",
                       handle.workspace)
    if excinfo is not None:
        evidence = excinfo.exconly().splitlines()[:200]
        verdict = Verdict.failed(grader, PYTHON_CLAIM, one_line(evidence[0] if evidence else ""),
                                 evidence)
    else:
        verdict = Verdict.passed(grader, PYTHON_CLAIM)
    return _record(arm, worker, "", handle.workspace, verdicts=[verdict], run=run)


def is_assertion(exc: BaseException) -> bool:
    """What a test body says about the agent: `assert` and `pytest.fail` (FAIL); any other
    exception is an error in the test (BLOCKED)."""
    return isinstance(exc, (AssertionError, pytest.fail.Exception))


def traceback_lines(excinfo: pytest.ExceptionInfo[BaseException], limit: int = 200) -> list[str]:
    """The exception's short traceback, the evidence of a test's error (its last lines)."""
    try:
        text = str(excinfo.getrepr(style="short", chain=False))
    except Exception:  # noqa: BLE001 - a repr that breaks still leaves the exception's line
        text = excinfo.exconly()
    return text.splitlines()[-limit:]


def _never_ran(reason: str):
    return AgentRun(blocked_reason=reason)
