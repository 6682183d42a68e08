"""What only the controller does: write the store, count outcomes, print the pivot (X5, X6).

Registered only on the controller (the plain pytest process, or xdist's master),
so there is exactly one writer and one printer whatever `-n` is.
"""
from __future__ import annotations

import pytest

from . import outcome
from .collect import MANIFEST_NAME, ArmItem
from .pivot import Pivot, plural, render_pivot
from .record import ArmRecord
from .render import safe_text
from .report.html import write_documents
from .run import EvalRun
from .store import StoreError

_SUMMARY_CHARS = {"f": "failed", "E": "error", "s": "skipped", "x": "xfailed",
                  "X": "xpassed", "p": "passed"}


class Controller:
    def __init__(self, run: EvalRun):
        self.run = run
        self.notes: list[str] = []
        self.collection_failed = False

    # -- the store is claimed before the first arm, never found unusable after it ----------
    def _claim_store(self) -> None:
        store = self.run.store
        if store.task_ids is None and self.run.task_paths:
            store.task_ids = set(self.run.task_paths)
        try:
            store.claim()
        except StoreError as exc:
            raise pytest.UsageError(f"--jaato-out: {exc}") from None

    def pytest_collectreport(self, report):
        if report.failed:
            self.collection_failed = True

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        if session.config.option.collectonly:
            return
        if any(isinstance(item, ArmItem) for item in session.items):
            self._claim_store()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """Under -n the workers collect: claim once the first of them reports an arm."""
        if any(i.split("::", 1)[0].rsplit("/", 1)[-1] == MANIFEST_NAME for i in ids):
            try:
                self._claim_store()
            except pytest.UsageError as exc:
                pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)

    def pytest_runtest_logreport(self, report):
        raw = outcome.record_of(report)
        if raw is None or report.when != "call":
            return
        record = ArmRecord.from_dict(raw)
        self.run.store.append(record)  # flushed as each arm ends
        self.run.records.append(record)
        if outcome.is_blocked(report):
            self.run.blocked.append((report.nodeid, record.blocked_reason or ""))

    def _pivot(self) -> Pivot:
        """The whole store (kept arms and this run's, the latest record per arm), streamed
        from disk; from memory when there is no readable store."""
        try:
            if self.run.store.written or self.run.resumed:
                return Pivot.of_store(self.run.store.path)
        except OSError:
            pass
        return Pivot.of_records(list(self.run.resumed.values()) + self.run.records)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """X6: a crashed xdist worker is an environment fault: its arm is BLOCKED, not FAILED."""
        if crashitem.split("::", 1)[0].rsplit("/", 1)[-1] == MANIFEST_NAME:  # arms only
            outcome.block_crashed(report, crashitem, self.run.run_id)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        tr = terminalreporter
        # Nothing graded, nothing printed; nor above a refusal at collection (--resume).
        if self.run.records or (self.run.resumed and not self.collection_failed):
            tr.write_sep("=", "jaato-eval pivot")
            pivot = self._pivot()
            for line in render_pivot(pivot.cells):
                tr.write_line(line)
            store = self.run.store
            tr.write_line("")
            kept = f"; {plural(store.written, 'record')} written by this run" if (
                pivot.lines_read != store.written) else ""
            tr.write_line(f"store: {store.path} ({plural(pivot.lines_read, 'record')}{kept}; "
                          f"run {self.run.run_id})")
            if self.run.done:
                n = len(self.run.done)
                tr.write_line(f"resumed: {plural(n, 'arm')} already in the store "
                              f"{'was' if n == 1 else 'were'} kept, not run again")
            retried = sum(1 for r in self.run.records if r.arm_id in self.run.resumed)
            if retried:
                tr.write_line(f"retried: {plural(retried, 'arm')} stored as BLOCKED "
                              f"{'was' if retried == 1 else 'were'} run again (--retry-blocked); "
                              f"the new {'record counts' if retried == 1 else 'records count'}")
            if store.rotated_to:
                tr.write_line(f"the previous store was kept as {store.rotated_to}")
            for note in self.notes:
                tr.write_line(note)
            settings = self.run.settings  # P4: the documents show what the pivot shows
            for line in write_documents(pivot, settings.html, settings.pdf, str(store.path)):
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
