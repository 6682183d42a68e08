"""What the terminal shows while a run goes on: one line per finished arm, the private
daemon's start, and what an interrupted run left to do.

pytest's own progress output stays in charge. At its default verbosity an arm's
"letter" is the arm's whole line (its outcome, how long the whole arm took, its cost when
known, why it did not pass), so pytest still counts it, colours it and puts the
percentage after it; under `-q` an arm is a dot (or `B`) like any test; under `-v`
pytest's line for the item gets the same facts after its word, and the word stays bare
where pytest's summary quotes it. Under xdist the controller prints these lines from the
arms' reports, as they come in; a worker's daemon start is xdist's affair (its workers
print nothing). That a long arm is alive is liveness.py's.
"""
from __future__ import annotations

import contextlib
import shlex
import time
import weakref
from typing import Any

from ..render import safe_text
from ..results.pivot import money
from ..results.record import ArmRecord
from ..verdict import BLOCKED, FAIL, PASS
from . import outcome
from .liveness import liveness_of
from .outcome import BLOCKED_CATEGORY, record_of

PREFIX = "jaato-eval:"
STATE_CATEGORY = {PASS: "passed", FAIL: "failed", BLOCKED: BLOCKED_CATEGORY}
WORDS = {PASS: ("PASSED", {"green": True}), FAIL: ("FAILED", {"red": True}),
         BLOCKED: ("BLOCKED", {"yellow": True})}
PROGRESS_ROOM = 10  # what pytest's " [100%]" needs at the end of a line
_WORDED: weakref.WeakSet = weakref.WeakSet()  # -v: reports whose line got the facts


def seconds(value: Any) -> str:
    return "—" if type(value) not in (int, float) else f"{value:.1f} s"


def arm_facts(record: ArmRecord) -> str:
    """`arm 3.2 s · $0.0100 (judge $0.0020)`: how long the whole arm took (setup and call,
    as pytest timed them) and, when known, what it cost. A regraded arm's agent cost
    nothing in this run: `arm 0.4 s · regraded (judge $0.0020)`."""
    facts = f"arm {seconds(record.arm_seconds)}"
    waited = record.daemon_wait_seconds
    if waited is not None:
        facts += f" (daemon start {seconds(waited)})"  # the private daemon's, waited for
    if record.regraded is not None:
        facts += " · regraded"
        if record.judge_usage is not None:
            facts += f" (judge {money(record.judge_cost)})"
    elif record.cost is not None or record.judge_cost is not None:
        facts += f" · {money(record.cost)}"
        if record.judge_usage is not None:
            facts += f" (judge {money(record.judge_cost)})"
    return facts


def arm_line(record: ArmRecord, width: int, label: str | None = None,
             why: str | None = None) -> str:
    """One finished arm: `  FAIL    write-file@echo#1  arm 3.2 s · $0.0100`, then, when
    there is room, why it did not pass (for a graded arm whose agent never signed off, S8,
    that it did not); at most `width` characters."""
    label = label or str(record.state)
    line = (f"  {safe_text(label, 14):<7} {safe_text(record.arm_id, 80, collapse=False)}"
            f"  {arm_facts(record)}")
    if why:
        line += f" · {safe_text(why, None)}"
    return safe_text(line, max(width, 40), collapse=False)


def _outcome(report: Any, record: ArmRecord) -> tuple[str, str, tuple[str, dict]]:
    """(pytest's category, the line's label, pytest's word) of an arm's report, as pytest
    judged it: an xfail mark's outcome is pytest's, whatever the verdict."""
    if hasattr(report, "wasxfail"):
        if report.skipped:
            return "xfailed", "XFAIL", ("XFAIL", {"yellow": True})
        return "xpassed", "XPASS", ("XPASS", {"yellow": True})
    if report.failed and record.state != FAIL:  # a PASS a strict xfail mark did not expect
        return "failed", "XPASS(strict)", WORDS[FAIL]
    state = record.state if record.state in WORDS else BLOCKED
    return STATE_CATEGORY[state], state, WORDS[state]


def why_not_passed(report: Any, record: ArmRecord) -> str | None:
    """What an arm's line and short summary say after its verdict: why it was BLOCKED, the
    xfail's reason, or (a graded arm whose agent never signed off) that it did not."""
    if record.state == BLOCKED:
        return record.blocked_why
    if hasattr(report, "wasxfail") or report.failed and record.state != FAIL:
        return getattr(report, "wasxfail", None) or "[XPASS(strict)]"
    if record.error:  # S8: graded, though its run ended in an error terminal
        return f"never signed off: {record.error}"
    return None


def teststatus(report: Any, config: Any):
    """pytest_report_teststatus for an arm's report (None: pytest's own)."""
    record = record_of(report)
    if record is None:
        return _arm_error(report, config)
    category, label, (word, markup) = _outcome(report, record)
    verbosity = config.get_verbosity()
    if verbosity < 0:  # -q: dots, as for any test
        return (BLOCKED_CATEGORY, "B", (word, markup)) if category == BLOCKED_CATEGORY else None
    if verbosity > 0:
        # pytest writes the node id; the word carries the facts on the arm's own line, and
        # is the bare word where the summary quotes it (`FAILED <nodeid> - reason`).
        if report in _WORDED:
            return category, word[0], (word, markup)
        _WORDED.add(report)
        return category, word[0], (f"{word} ({arm_facts(record)})", markup)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    return category, _own_line(tr, arm_line(record, _width(tr), label, why_not_passed(report, record))), \
        (word, markup)


def _width(tr: Any) -> int:
    return getattr(getattr(tr, "_tw", None), "fullwidth", 80) - PROGRESS_ROOM


def _own_line(tr: Any, line: str) -> str:
    """A line of its own: after the file's name, or the arm before it."""
    if tr is not None and getattr(tr, "_width_of_current_line", True):
        return "\n" + line
    return line


def _arm_error(report: Any, config: Any):
    """An arm's teardown error at pytest's default verbosity: a line of its own naming the
    arm, not an `E` glued to the arm's line."""
    if (not report.failed or config.get_verbosity() != 0
            or (ident := outcome.arm_identity(report)) is None):
        return None
    tr = config.pluginmanager.get_plugin("terminalreporter")
    arm_id = ident["arm_id"]
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    why = getattr(crash, "message", None) or "error"
    line = safe_text(f"  {'ERROR':<7} {arm_id}  {report.when}: {why}", max(_width(tr), 40),
                     collapse=False)
    return "error", _own_line(tr, line), ("ERROR", {"red": True})


def say(config: Any, line: str, **markup: bool) -> None:
    """A line of ours between pytest's own, on the controller's terminal only. Written
    on a line of its own, without making pytest name the current file again."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or hasattr(config, "workerinput"):
        return
    capture = config.pluginmanager.get_plugin("capturemanager")
    live = liveness_of(config)
    # Said from inside a fixture's setup: past the capture, as pytest's live logging does.
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext(), \
            live.quiet() if live is not None else contextlib.nullcontext():
        tw = getattr(tr, "_tw", None)
        if tw is None:
            tr.write_line(f"{PREFIX} {line}", **markup)
            return
        if tw.width_of_current_line:
            tw.line()
        tw.line(f"{PREFIX} {line}", **markup)
    if config.get_verbosity() > 0:
        tr.currentfspath = None  # -v: pytest writes the item's node id again before its word


def resume_command(config: Any) -> str:
    """The command that runs what this run left: its own arguments and --resume."""
    args = list(config.invocation_params.args)
    if "--resume" not in args and "--retry-blocked" not in args:
        args.append("--resume")
    return shlex.join(["pytest", *args])


class DaemonClock:
    """Says when the private daemon is being started and when it answers, with the time it
    took: its start (25-40 s on a loaded machine) is otherwise a silent stretch. It is
    started in a background thread; what it says is written by the main thread, when the
    first arm asks for the daemon."""

    def __init__(self) -> None:
        self.config: Any = None   # the terminal's, once the run's loop starts
        self.started: float | None = None
        self.ready_after: float | None = None
        self._said = 0            # 1: the start was said; 2: the ready line too

    def starting(self) -> None:
        if self.started is None:
            self.started = time.monotonic()

    def ready(self) -> None:
        if self.started is not None and self.ready_after is None:
            self.ready_after = time.monotonic() - self.started

    def say_starting(self) -> None:
        if self.config is None or self.started is None or self._said:
            return
        self._said = 1
        if self.ready_after is None:
            say(self.config, f"starting the private jaato daemon "
                             f"({time.monotonic() - self.started:.1f} s so far) ...")

    def say_ready(self) -> None:
        if self.config is None or self.ready_after is None or self._said > 1:
            return
        self._said = 2
        say(self.config, f"private jaato daemon ready after {self.ready_after:.1f} s")
