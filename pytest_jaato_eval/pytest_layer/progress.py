"""What the terminal shows while a run goes on: one line per finished arm, the private
daemon's start, and what an interrupted run left to do.

pytest's own progress output stays in charge. At its default verbosity an arm's
"letter" is the arm's whole line (its verdict, cost and time), so pytest still counts
it, colours it and puts the percentage after it; under `-q` an arm is a dot (or `B`)
like any test; under `-v` pytest's line for the item gets the cost and time after its
word. Under xdist the controller prints these lines from the arms' reports, as they
come in; a worker's daemon start is xdist's affair (its workers print nothing).
"""
from __future__ import annotations

import contextlib
import shlex
import time
from typing import Any

from ..render import safe_text
from ..results.pivot import money
from ..results.record import ArmRecord
from ..verdict import BLOCKED, FAIL, PASS
from .outcome import BLOCKED_CATEGORY, record_of

PREFIX = "jaato-eval:"
STATE_CATEGORY = {PASS: "passed", FAIL: "failed", BLOCKED: BLOCKED_CATEGORY}
WORDS = {PASS: ("PASSED", {"green": True}), FAIL: ("FAILED", {"red": True}),
         BLOCKED: ("BLOCKED", {"yellow": True})}
PROGRESS_ROOM = 10  # what pytest's " [100%]" needs at the end of a line


def seconds(value: Any) -> str:
    return "—" if type(value) not in (int, float) else f"{value:.1f} s"


def arm_facts(record: ArmRecord, duration: float | None) -> str:
    """`$0.0100 (judge $0.0020) · 3.2 s`: what an arm cost and how long it took."""
    cost = money(record.cost)
    if record.judge_usage is not None:
        cost += f" (judge {money(record.judge_cost)})"
    return f"{cost} · {seconds(duration)}"


def arm_line(record: ArmRecord, duration: float | None, width: int) -> str:
    """One finished arm: `  FAIL  write-file@echo#1  $0.0100 · 3.2 s`, then, when there is
    room, why it was blocked, or why the agent never signed off (S8: graded all the same); at
    most `width` characters."""
    state = record.state
    line = (f"  {safe_text(state, 8):<7} {safe_text(record.arm_id, 80, collapse=False)}"
            f"  {arm_facts(record, duration)}")
    reason = record.blocked_why
    if state == BLOCKED and reason:
        line += f" · {safe_text(reason, None)}"
    elif record.error:  # S8: graded, though its run ended in an error terminal
        line += f" · never signed off: {safe_text(record.error, None)}"
    return safe_text(line, max(width, 40), collapse=False)


def teststatus(report: Any, config: Any):
    """pytest_report_teststatus for an arm's report (None: pytest's own)."""
    record = record_of(report)
    if record is None or hasattr(report, "wasxfail"):
        return None  # an xfail arm is pytest's own `x` / `X` (its record keeps the mark)
    state = record.state
    category = STATE_CATEGORY.get(state, BLOCKED_CATEGORY)
    word, markup = WORDS.get(state, WORDS[BLOCKED])
    verbosity = config.get_verbosity()
    if verbosity < 0:  # -q: dots, as for any test
        return (BLOCKED_CATEGORY, "B", (word, markup)) if category == BLOCKED_CATEGORY else None
    duration = getattr(report, "duration", None)
    if verbosity > 0:  # pytest writes the node id; the word carries the facts
        return category, word[0], (f"{word} {arm_facts(record, duration)}", markup)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    width = getattr(getattr(tr, "_tw", None), "fullwidth", 80) - PROGRESS_ROOM
    line = arm_line(record, duration, width)
    # A line of its own: after the file's name, or the arm before it.
    if tr is not None and getattr(tr, "_width_of_current_line", True):
        line = "\n" + line
    return category, line, (word, markup)


def say(config: Any, line: str, **markup: bool) -> None:
    """A line of ours between pytest's own, on the controller's terminal only."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or hasattr(config, "workerinput"):
        return
    capture = config.pluginmanager.get_plugin("capturemanager")
    # Said from inside a fixture's setup: past the capture, as pytest's live logging does.
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        tr.write_line(f"{PREFIX} {line}", **markup)
    tr.currentfspath = None  # pytest writes the file's (or item's) name again after it


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
