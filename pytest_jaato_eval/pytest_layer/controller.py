"""What only the controller does: write the store, count outcomes, print the pivot (X5, X6).

Registered only on the controller (the plain pytest process, or xdist's master),
so there is exactly one writer and one printer whatever `-n` is: by the lazy load
(arms_found.py) at the run's first task or arm, or at configure when xdist distributes
(its workers collect; this process learns of arms from their reports). It owns the
store, the records, the BLOCKED list and the exit status; what it knows of an arm
comes with that arm's reports, never from another plugin.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from _pytest.pathlib import bestrelpath

from .. import processes, sweep
from ..engine.daemon import reap_orphan_daemon
from ..engine.sandbox import probe
from ..render import safe_text
from ..report.html import write_documents
from ..results import snapshots, transcripts
from ..results.account import Account, account
from ..results.formats import document
from ..results.pivot import Pivot, plural, render_pivot
from ..results.store import Store, StoreError
from ..verdict import BLOCKED
from ..workspace import remove_tree
from . import outcome
from .collect import identity_of_nodeid
from .fence import MANIFEST
from .progress import resume_command, teststatus
from .run import RunContext, arm_of
from .sigterm import SigtermAsInterrupt
from .stored import StoredArms
from .worker import has_kept_workspaces, own_folder

_SUMMARY_CHARS = {"f": "failed", "E": "error", "s": "skipped", "x": "xfailed",
                  "X": "xpassed", "p": "passed"}


STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def append_step_summary(path: Path, acc: Account, source: str) -> str:
    """Append the Markdown pivot, and the arms that did not pass, to GitHub's step summary
    file; the line that says so."""
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(document(acc, "markdown", source=source) + "\n")
    except OSError as exc:
        return f"error: ${STEP_SUMMARY}: {path}: {exc.strerror or exc}"
    return f"pivot appended to ${STEP_SUMMARY} ({path})"


def cwd_relative(config, nodeid: str) -> str:
    """A node id as pytest's short summary writes its FAILED lines: its path relative to
    where pytest was started, so it can be pasted back."""
    path, sep, rest = nodeid.partition("::")
    if config.invocation_params.dir != config.rootpath:
        path = bestrelpath(config.invocation_params.dir, config.rootpath / path)
    return path + sep + rest


class Controller:
    def __init__(self, context: RunContext, stored: StoredArms):
        self.context = context
        self.stored = stored
        self.settings = context.settings
        self._store = None
        self.records: list = []                   # ArmRecord, in finish order
        self.forgery: str | None = None  # the store was written into: what was done about it
        self.blocked: list[tuple[str, str]] = []  # (nodeid, reason)
        self.arms: dict[str, dict[str, str]] = {}  # node id -> the arm's identity, as sent
        self.collection_failed = False
        self.collection_errors = 0
        self.failed_reports = 0           # failed test reports, arms' and plain tests'
        self._told: tuple | None = None   # (the account, the summary's lines), made once
        self.junit_error: str | None = None
        self.expected: set[str] = set()   # node ids of the arms collected to run
        self.finished: set[str] = set()   # node ids of the arms that wrote their record
        self.stopped = False              # interrupted, or stopped early (-x, --maxfail)
        self.transcript_errors: list[str] = []  # transcripts that could not be written
        self.snapshot_errors: list[str] = []  # snapshots that could not be brought beside it
        self._worker_root: Path | None = None
        self.sigterm = SigtermAsInterrupt()  # under -n: the workers' folders are swept at the end

    @property
    def store(self):
        if self._store is None:
            # A narrowed run (-k, --lf, ...) adds its arms to the store it narrows, as
            # --resume does: the sweep's other arms keep their records.
            self._store = Store(self.settings.store,
                                append=self.settings.resume or bool(self.settings.narrowed),
                                keep_previous=self.settings.keep_previous)
        return self._store

    # -- the store is claimed before the first arm, never found unusable after it ----------
    def _claim_store(self, task_ids: set[str] | None) -> None:
        # What --resume keeps is what the store held before this run's first record (under
        # -n the controller collects nothing, and would read it only at the summary).
        self.stored.done  # noqa: B018
        store = self.store
        if store.task_ids is None and task_ids:
            store.task_ids = task_ids
        try:
            store.claim()
        except StoreError as exc:
            raise pytest.UsageError(f"--jaato-out: {exc}") from None

    def pytest_collectreport(self, report):
        if report.failed:
            self.collection_failed = True
            self.collection_errors += 1

    def pytest_report_collectionfinish(self, config, items):
        """Said once, before the first arm: what confines the agents of this run."""
        if not config.option.collectonly and any(arm_of(item) for item in items):
            return [sandbox_line(self.settings), *pool_advice(config, self.settings)]
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        if session.config.option.collectonly:
            return
        arms = [arm_of(item) for item in session.items]
        self.expected |= {item.nodeid for item, arm in zip(session.items, arms) if arm is not None}
        if any(arm is not None for arm in arms):
            self._claim_store({arm.task.id for arm in arms if arm is not None})

    # -- xdist -------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """Under -n the workers collect: claim once the first of them reports an arm."""
        arms = {i for i in ids if i.split("::", 1)[0].rsplit("/", 1)[-1] == MANIFEST}
        self.expected |= arms  # every worker collects the same; task.yaml arms are known here
        if arms:
            self.sigterm.install()
            try:
                self._claim_store(None)
            except pytest.UsageError as exc:
                pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)

    def workers_folder(self) -> Path | None:
        """Under -n, the folder holding every worker's run folder (None: no worker yet)."""
        return self._worker_root

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """Every worker shares the controller's run id, and keeps its run folder under
        the controller's, so nothing a crashed worker leaves is lost track of."""
        if self._worker_root is None:
            self._worker_root = Path(tempfile.mkdtemp(prefix="jaato-eval-"))
            own_folder(self._worker_root, self.context, sweep_others=True)
        node.workerinput["jaato_run_id"] = self.context.run_id
        node.workerinput["jaato_run_root"] = str(self._worker_root)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """X6: a crashed xdist worker is an environment fault: its arm is BLOCKED, not FAILED."""
        arm = self.arms.get(crashitem)  # the identity that came with the arm's own reports
        if arm is None:  # it died before its first report: a task.yaml arm is found again
            arm = identity_of_nodeid(sched.config.rootpath, crashitem, self.settings,
                                     self.stored.regraded)
        if arm is not None:  # arms only
            outcome.block_crashed(report, crashitem, arm, self.context.run_id)

    # -- each arm ----------------------------------------------------------------
    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed_reports += 1
        identity = outcome.arm_identity(report)
        if identity is not None:
            self.arms.setdefault(report.nodeid, identity)
            self.sigterm.install()  # an arm written in Python is known only by its reports
        record = outcome.record_of(report)
        if record is None:
            return
        self.store.append(record)  # flushed as each arm ends
        self.records.append(record)
        self.finished.add(report.nodeid)
        carried = outcome.transcript_of(report)
        if carried is not None:
            self._write_transcript(record, *carried)
        snapshot = outcome.snapshot_of(report)
        if snapshot is not None:
            self._put_snapshot(record, *snapshot)
        if record.state == BLOCKED:
            self.blocked.append((report.nodeid, record.blocked_why or ""))

    def _write_transcript(self, record, name: str, data: bytes) -> None:
        """Beside the store, after its record (the store set aside its previous copy, and
        that copy's transcripts, at its first record). A file that cannot be written is
        said at the end, never a lost arm."""
        try:
            if name != record.transcript:
                raise ValueError(f"the report's transcript {name!r} is not the record's")
            transcripts.write(self.store.path, name, data)
        except (OSError, ValueError) as exc:
            self.transcript_errors.append(f"{record.arm_id}: {exc}")

    def _put_snapshot(self, record, name: str, path: str, move: bool) -> None:
        """Beside the store, after its record, as a transcript is; a snapshot that cannot
        be brought there is said at the end, never a lost arm."""
        try:
            if name != record.snapshot:
                raise ValueError(f"the report's snapshot {name!r} is not the record's")
            snapshots.put(self.store.path, name, Path(path), move)
        except (OSError, ValueError) as exc:
            self.snapshot_errors.append(f"{record.arm_id}: {exc}")

    @pytest.hookimpl(trylast=True)  # after junitxml wrote its file
    def pytest_sessionfinish(self, session, exitstatus):
        xml = getattr(session.config.option, "xmlpath", None)
        if xml and self.blocked and self.settings.junit_blocked == "error":
            try:
                outcome.blocked_as_errors(Path(xml))
            except (OSError, SyntaxError) as exc:  # ParseError is a SyntaxError
                self.junit_error = f"error: --jaato-junit-blocked=error: {xml}: {exc}"
        self._count_missed(session.config)
        self.stopped = exitstatus == pytest.ExitCode.INTERRUPTED or bool(
            session.shouldstop or session.shouldfail)
        session.exitstatus = outcome.fold_exit_status(
            session.exitstatus, len(self.blocked), self.failed_reports, self.collection_errors)
        if (exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and self.stored.done
                and not self.records and self.has_summary(session.config)):
            # R3: a resume with nothing left to run exits as `report` on its store does.
            told = self.account(session.config)
            if told is not None:
                session.exitstatus = told.exit_status
        if self.records:  # before the summary reads it: a forged store is never what counts
            changed = self.store.changed_by_others()
            if changed:
                evidence = self.store.set_aside_forgery(list(self.stored.resumed.values()),
                                                        self.records)
                self.forgery = (f"error: {changed}; that file was set aside as {evidence}, and "
                                f"the store written again with the records this run holds")
                session.exitstatus = outcome.EXIT_STORE_FORGED

    def _count_missed(self, config) -> None:
        """Registered at the run's first task or arm, this plugin may have missed collection
        errors (and failures) reported before it: the terminal reporter keeps every report."""
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        reports = [r for kept in tr.stats.values() for r in kept]
        broken = sum(1 for r in reports if isinstance(r, pytest.CollectReport) and r.failed)
        failed = sum(1 for r in reports if isinstance(r, pytest.TestReport) and r.failed)
        self.collection_errors = max(self.collection_errors, broken)
        self.collection_failed = self.collection_failed or broken > 0
        self.failed_reports = max(self.failed_reports, failed)

    def pytest_report_teststatus(self, report, config):
        return teststatus(report, config)  # an arm's line, its verdict, cost and time; else None

    def pytest_unconfigure(self, config):
        self.sigterm.restore()
        if self._store is not None:
            self._store.close()
        root, self._worker_root = self._worker_root, None
        if root is None and not self.records:
            return  # no arm ran here or in a worker: nothing of ours can be left
        # Every worker has ended: whatever any process of this run started and left ends too.
        processes.kill_run_leftovers(self.context.run_id)
        if root is None:
            return
        for child in root.iterdir():  # after every worker ended: sweep what a crashed one left
            reap_orphan_daemon(child / "daemon",  # a crashed worker's, dying on its own
                               processes.run_prefix(self.context.run_id))
            # A crashed worker never re-swept its discarded workspaces: unless the user
            # keeps some, nothing in its folder is wanted.
            if self.settings.keep_workspaces == "never" or not has_kept_workspaces(child):
                remove_tree(child)
        if [p.name for p in root.iterdir()] in ([], [sweep.OWNER_FILE]):
            shutil.rmtree(root, ignore_errors=True)

    # -- the summary ----------------------------------------------------------------
    def kept_note(self) -> str | None:
        kept = sorted({str(Path(r.workspace).parent) for r in self.records if r.workspace})
        return f"kept workspaces: {', '.join(kept)}" if kept else None

    def _pivot(self, readable: Path | None):
        """The whole store (kept arms and this run's, the latest record per arm), streamed
        from `readable` (the checked file, held open); from memory (the stored arms as read
        before any arm ran, and this run's) when there is no readable store or somebody
        else wrote into it."""
        resumed = self.stored.resumed
        try:
            if readable is not None and (self.store.written or resumed):
                return Pivot.of_store(readable, name=self.store.path)
        except OSError:
            pass
        return Pivot.of_records(list(resumed.values()) + self.records)

    def has_summary(self, config) -> bool:
        """Whether the run ends with a pivot: it graded an arm, or resumed a store (and was
        not refused at collection); never for --collect-only."""
        if config.option.collectonly:
            return False
        self._count_missed(config)
        return bool(self.records) or bool(self.stored.resumed and not self.collection_failed)

    def account(self, config) -> Account | None:
        """The run's one account (results/account.py), made once, from the store as read
        back and checked, at the first view that asks (pytest-html's summary or the
        terminal's): every view then says the same. Writes the documents and the step
        summary from the same pivot."""
        if self._told is None and self.has_summary(config):
            # The file is checked, then read through the very file checked, until the
            # documents are written.
            with self.store.read_back() as (changed, readable):
                self._told = self._conclude(config, changed, None if changed else readable)
        return self._told[0] if self._told else None

    def _conclude(self, config, changed: str | None, readable: Path | None):
        """(the account, the lines the terminal prints under the pivot's heading)."""
        pivot = self._pivot(readable)
        acc = account(pivot)
        tr = config.pluginmanager.get_plugin("terminalreporter")
        width = getattr(getattr(tr, "_tw", None), "fullwidth", 80)
        every = self.settings.pivot == "all" or config.get_verbosity() > 0
        said: list[tuple[str, dict]] = [(line, {}) for line in render_pivot(
            pivot.cells, width=width, every_column=every, detect=self.settings.detect)]
        say = lambda line, **markup: said.append((line, markup))  # noqa: E731
        resumed, store = self.stored.resumed, self.store
        say("")
        kept = f"; {plural(store.written, 'record')} written by this run" if (
            pivot.lines_read != store.written) else ""
        say(f"store: {store.path} ({plural(pivot.lines_read, 'record')}{kept}; "
            f"run {self.context.run_id})")
        done = self.stored.done
        if done:
            n = len(done)
            say(f"resumed: {plural(n, 'arm')} already in the store "
                f"{'was' if n == 1 else 'were'} kept, not run again")
        if self.settings.narrowed and not resumed:
            say(f"narrowed run ({self.settings.narrowed}): "
                f"{plural(store.written, 'record')} added to the store; every other "
                f"arm keeps its record, the latest record of an arm counts")
        retried = sum(1 for r in self.records if r.arm_id in resumed)
        if retried:
            say(f"retried: {plural(retried, 'arm')} stored as BLOCKED "
                f"{'was' if retried == 1 else 'were'} run again (--retry-blocked); "
                f"the new {'record counts' if retried == 1 else 'records count'}")
        if self.records:
            say(sandbox_line(self.settings, {r.sandbox for r in self.records}))
        if changed:
            say(f"error: {changed}; the pivot above, and the documents, count "
                f"only the records this run wrote and found", red=True)
        if store.rotated_to:
            say(f"the previous store was kept as {store.rotated_to}")
        note = self.kept_note()
        if note:
            say(note)
        if self.transcript_errors:
            errors = self.transcript_errors
            say(f"error: {len(errors)} transcript(s) not written, e.g. {errors[0]}", red=True)
        if self.snapshot_errors:
            errors = self.snapshot_errors
            say(f"error: {len(errors)} snapshot(s) not kept beside the store, e.g. "
                f"{errors[0]}", red=True)
        settings = self.settings  # P4: the documents show what the pivot shows
        for line in write_documents(pivot, settings.html, settings.pdf, str(store.path)):
            say(line, red=line.startswith("error:"))
        summary = os.environ.get(STEP_SUMMARY)
        if summary:  # GitHub Actions shows this file on the run's page
            line = append_step_summary(Path(summary), acc, str(store.path))
            say(line, red=line.startswith("error:"))
        return acc, said

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        tr = terminalreporter
        self.account(config)
        if self._told is not None:  # nothing graded, nothing printed; nor under a refusal
            tr.write_sep("=", "jaato-eval pivot")
            for line, markup in self._told[1]:
                tr.write_line(line, **markup)
            if self.forgery:
                tr.write_line(self.forgery, red=True)
        if self.junit_error:
            tr.write_line(self.junit_error, red=True)
        left = len(self.expected - self.finished) if self.stopped else 0
        if left and self.collection_failed and not self.finished:
            tr.write_line(f"{plural(left, 'arm')} did not run: pytest stopped at the collection "
                          f"errors above; fix them, or run the rest with "
                          f"--continue-on-collection-errors", yellow=True, bold=True)
        elif left:  # what the run did not get to, and how to run just that
            tr.write_line(f"{plural(left, 'arm')} did not run; {'it runs' if left == 1 else 'they run'}"
                          f" with: {resume_command(config)}", yellow=True, bold=True)
        result = yield
        # Runs after pytest's own short test summary, so BLOCKED lines read as part of it.
        if self.blocked:
            if not any(tr.stats.get(cat) for ch, cat in _SUMMARY_CHARS.items()
                       if ch in tr.reportchars):
                tr.write_sep("=", "short test summary info", cyan=True, bold=True)
            for nodeid, reason in self.blocked:  # both may carry a grader's or daemon's text
                tr.write("BLOCKED", yellow=True)
                tr.write_line(f" {safe_text(cwd_relative(config, nodeid), 300, collapse=False)} - "
                              f"{safe_text(reason, 200)}")
        return result


def sandbox_line(settings, seen: set | None = None) -> str:
    """`sandbox: ...`: what confined the agents (engine/sandbox.py), or why nothing did."""
    if settings.socket:
        return ("sandbox: none: the daemon at --jaato-socket is not this run's, so nothing "
                "confines its agents: they run as its user, you if you started it "
                "(docs/security.md)")
    sandbox, line = probe(settings.sandbox)
    if seen and "none" in seen and sandbox is not None:
        return f"sandbox: {line}; some arms ran on a daemon that is not this run's: none"
    return f"sandbox: {line}"


def pool_advice(config, settings) -> list[str]:
    """With --jaato-socket and -n N, N arms at once share a daemon the run did not start:
    each needs a warm runner slot of its own, which that daemon keeps only when it was
    started with JAATO_RUNNER_POOL_SIZE >= N (else an arm cold-spawns its runner)."""
    workers = getattr(config.option, "numprocesses", None)
    if not settings.socket or not isinstance(workers, int) or workers < 2:
        return []
    return [f"advice: {workers} workers share the daemon at {settings.socket}: start it with "
            f"JAATO_RUNNER_POOL_SIZE>={workers} so each arm claims a warm runner slot instead "
            f"of starting one cold"]
