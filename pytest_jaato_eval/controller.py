"""What only the controller does: write the store, count outcomes, print the pivot (X5, X6).

Registered only on the controller (the plain pytest process, or xdist's master),
so there is exactly one writer and one printer whatever `-n` is.
"""
from __future__ import annotations

import pytest

from . import outcome
from .collect import MANIFEST_NAME
from .pivot import build_cells, render_pivot
from .render import safe_text
from .report.html import write_documents
from .run import EvalRun
from .store import latest_by_arm

_SUMMARY_CHARS = {"f": "failed", "E": "error", "s": "skipped", "x": "xfailed",
                  "X": "xpassed", "p": "passed"}


class Controller:
    def __init__(self, run: EvalRun):
        self.run = run
        self.notes: list[str] = []

    def pytest_runtest_logreport(self, report):
        record = outcome.record_of(report)
        if record is None or report.when != "call":
            return
        self.run.store.append(record)  # R1: flushed as each arm ends
        self.run.records.append(record)
        if outcome.is_blocked(report):
            self.run.blocked.append((report.nodeid, record.get("blocked_reason") or ""))

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """X6: a crashed xdist worker is an environment fault: its arm is BLOCKED, not FAILED."""
        if crashitem.split("::", 1)[0].rsplit("/", 1)[-1] == MANIFEST_NAME:  # arms only
            outcome.block_crashed(report, crashitem, self.run.run_id)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        tr = terminalreporter
        if self.run.records or self.run.resumed:  # X1: nothing graded, nothing printed
            tr.write_sep("=", "jaato-eval pivot")
            # With --resume the pivot is the whole store: the kept arms and this run's,
            # an arm run again (--retry-blocked) by its new record (R3: last wins).
            records = list(latest_by_arm(list(self.run.resumed.values()) + self.run.records)
                           .values())
            for line in render_pivot(build_cells(records)):
                tr.write_line(line)
            store = self.run.store
            tr.write_line("")
            tr.write_line(f"store: {store.path} ({store.written} records, run {self.run.run_id})")
            if self.run.done:
                tr.write_line(f"resumed: {len(self.run.done)} arms already in the store were "
                              f"kept, not run again")
            retried = sum(1 for r in self.run.records if r["arm_id"] in self.run.resumed)
            if retried:
                tr.write_line(f"retried: {retried} arms stored as BLOCKED were run again "
                              f"(--retry-blocked); their new records count")
            if store.rotated_to:
                tr.write_line(f"the previous store was kept as {store.rotated_to}")
            for note in self.notes:
                tr.write_line(note)
            settings = self.run.settings  # P4: the documents show what the pivot shows
            for line in write_documents(records, settings.html, settings.pdf, str(store.path)):
                tr.write_line(line, red=line.startswith("error:"))
        result = yield
        # Runs after pytest's own short test summary, so BLOCKED lines read as part of it.
        if self.run.blocked:
            if not any(tr.stats.get(cat) for ch, cat in _SUMMARY_CHARS.items()
                       if ch in tr.reportchars):
                tr.write_sep("=", "short test summary info", cyan=True, bold=True)
            for nodeid, reason in self.run.blocked:  # both may carry a grader's or daemon's text
                tr.write_line(f"{tr._tw.markup('BLOCKED', yellow=True)} "
                              f"{safe_text(nodeid, 300, collapse=False)} - "
                              f"{safe_text(reason, 200)}")
        return result
