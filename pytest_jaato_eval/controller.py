"""What only the controller does: write the store, count outcomes, print the pivot (X5, X6).

Registered only on the controller (the plain pytest process, or xdist's master),
so there is exactly one writer and one printer whatever `-n` is. It owns the
store, the records, the BLOCKED list and the exit status; what it knows of an arm
comes with that arm's reports, never from another plugin.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from . import outcome
from .run import RunContext, has_kept_workspaces

_SUMMARY_CHARS = {"f": "failed", "E": "error", "s": "skipped", "x": "xfailed",
                  "X": "xpassed", "p": "passed"}


class Controller:
    def __init__(self, context: RunContext):
        self.context = context
        self.settings = context.settings
        self._store = None
        self.records: list[dict] = []
        self.blocked: list[tuple[str, str]] = []  # (nodeid, reason)
        self.arms: dict[str, dict[str, str]] = {}  # node id -> the arm's identity, as sent
        self._worker_root: Path | None = None

    @property
    def store(self):
        if self._store is None:
            from .store import Store
            self._store = Store(self.settings.store, append=self.settings.resume)
        return self._store

    # -- xdist -------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """Every worker shares the controller's run id, and keeps its run folder under
        the controller's, so nothing a crashed worker leaves is lost track of."""
        if self._worker_root is None:
            self._worker_root = Path(tempfile.mkdtemp(prefix="jaato-eval-"))
        node.workerinput["jaato_run_id"] = self.context.run_id
        node.workerinput["jaato_run_root"] = str(self._worker_root)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """X6: a crashed xdist worker is an environment fault: its arm is BLOCKED, not FAILED."""
        arm = self.arms.get(crashitem)
        if arm is not None:  # arms only: the identity came with the arm's own reports
            outcome.block_crashed(report, crashitem, arm, self.context.run_id)

    # -- each arm ----------------------------------------------------------------
    def pytest_runtest_logreport(self, report):
        identity = outcome.arm_identity(report)
        if identity is not None:
            self.arms.setdefault(report.nodeid, identity)
        record = outcome.record_of(report)
        if record is None:
            return
        self.store.append(record)  # R1: flushed as each arm ends
        self.records.append(record)
        if outcome.is_blocked(report):
            self.blocked.append((report.nodeid, record.get("blocked_reason") or ""))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        session.exitstatus = outcome.fold_exit_status(session.exitstatus, len(self.blocked))

    def pytest_unconfigure(self, config):
        if self._store is not None:
            self._store.close()
        root, self._worker_root = self._worker_root, None
        if root is None:
            return
        from .engine.daemon import reap_orphan_daemon
        for child in root.iterdir():  # after every worker ended: sweep what a crashed one left
            reap_orphan_daemon(child / "daemon")  # a crashed worker's, dying on its own
            # A crashed worker never re-swept its discarded workspaces: unless the user
            # keeps some, nothing in its folder is wanted.
            if self.settings.keep_workspaces == "never" or not has_kept_workspaces(child):
                shutil.rmtree(child, ignore_errors=True)
        if not any(root.iterdir()):
            root.rmdir()

    # -- the summary ----------------------------------------------------------------
    def kept_note(self) -> str | None:
        kept = sorted({str(Path(r["workspace"]).parent) for r in self.records
                       if r.get("workspace")})
        return f"kept workspaces: {', '.join(kept)}" if kept else None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        tr = terminalreporter
        resumed = self.context.resumed
        if self.records or resumed:  # X1: nothing graded, nothing printed
            from .pivot import build_cells, render_pivot
            from .report.html import write_documents
            from .store import latest_by_arm
            tr.write_sep("=", "jaato-eval pivot")
            # With --resume the pivot is the whole store: the kept arms and this run's,
            # an arm run again (--retry-blocked) by its new record (R3: last wins).
            records = list(latest_by_arm(list(resumed.values()) + self.records).values())
            for line in render_pivot(build_cells(records)):
                tr.write_line(line)
            store = self.store
            tr.write_line("")
            tr.write_line(f"store: {store.path} ({store.written} records, "
                          f"run {self.context.run_id})")
            if self.context.done:
                tr.write_line(f"resumed: {len(self.context.done)} arms already in the store "
                              f"were kept, not run again")
            retried = sum(1 for r in self.records if r["arm_id"] in resumed)
            if retried:
                tr.write_line(f"retried: {retried} arms stored as BLOCKED were run again "
                              f"(--retry-blocked); their new records count")
            if store.rotated_to:
                tr.write_line(f"the previous store was kept as {store.rotated_to}")
            note = self.kept_note()
            if note:
                tr.write_line(note)
            settings = self.settings  # P4: the documents show what the pivot shows
            for line in write_documents(records, settings.html, settings.pdf, str(store.path)):
                tr.write_line(line, red=line.startswith("error:"))
        result = yield
        # Runs after pytest's own short test summary, so BLOCKED lines read as part of it.
        if self.blocked:
            from .render import safe_text
            if not any(tr.stats.get(cat) for ch, cat in _SUMMARY_CHARS.items()
                       if ch in tr.reportchars):
                tr.write_sep("=", "short test summary info", cyan=True, bold=True)
            for nodeid, reason in self.blocked:  # both may carry a grader's or daemon's text
                tr.write_line(f"{tr._tw.markup('BLOCKED', yellow=True)} "
                              f"{safe_text(nodeid, 300, collapse=False)} - "
                              f"{safe_text(reason, 200)}")
        return result
