"""The `Worker`: the side of a pytest process that runs arms (run.py has the rest).

It owns this process's daemon, task pools and workspaces, the M1 duplicate check,
and the hooks of that lifecycle; `Worker.of` makes it and registers it as a plugin
when the process collects its first arm. Only a process that found a task or an arm
loads this module (collect.py, python_arms.py, the jaato_daemon fixture), so the engine
is imported at the top; the SDK still waits for an arm to run.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from .. import processes, sweep, workspace
from ..activity import ACTIVITY
from ..contract import curated_env
from ..engine.budget import PoolError, PoolOwner
from ..engine.daemon import DaemonError, ExternalDaemon, PrivateDaemon, StartAbandoned
from ..engine.sandbox import Confinement, hideable, probe, python_folders, seal_interpreter
from . import liveness, outcome
from .body_alarm import end_guard
from .run import (CONTEXT_KEY, WORKER_KEY, RunContext, arm_of, arm_side, deselect_resumed,
                  deselect_unregraded, regrade_side)
from .progress import DaemonClock
from .sigterm import SigtermAsInterrupt
from .stored import StoredArms


BIN_WAIT = 60.0  # for the background removal of workspaces at the run's end
DISCARDED = "discarded"  # in a run folder: what its run could not remove (a later run does)


# A wait for the private daemon an arm's line says apart (shorter is its noise).
WAIT_SAID = 0.5

class Worker:
    """Runs arms: owns the daemon, the task pools and the workspaces of this process."""

    @classmethod
    def of(cls, config) -> "Worker":
        """This process's worker, made and registered when its first arm is collected."""
        worker = config.stash.get(WORKER_KEY, None)
        if worker is None:
            worker = config.stash[WORKER_KEY] = cls(config.stash[CONTEXT_KEY],
                                                    StoredArms.of(config))
            config.pluginmanager.register(worker, "jaato-eval-worker")
        return worker

    def __init__(self, context: RunContext, stored: StoredArms):
        self.context = context
        self.stored = stored
        self.settings = context.settings
        self.task_paths: dict[str, Path] = {}     # M1: task id -> manifest
        self._run_dir: Path | None = None
        self._daemon = None
        self._arm_settings = None
        self.arm_state: Any = None  # what this process's arms accumulate (arm.ArmState)
        self._pools: dict[str, tuple[str, str | None]] = {}
        self._pool_owner: Any = None
        self._bin: Any = None  # workspaces being removed in the background
        self._lock = threading.Lock()
        self._prestart: threading.Thread | None = None
        self._release = threading.Event()  # ends the thread that spawned the daemon
        self._prestart_error: BaseException | None = None
        self.clock = DaemonClock()  # says the private daemon's start on the terminal
        self.daemon_waits: dict[str, float] = {}  # arm id -> seconds it waited for the daemon
        self.sigterm = SigtermAsInterrupt()
        # Fixture errors seen in setup, by exception: names the fixture in a BLOCKED record.
        self.fixture_errors: dict[int, tuple[str, BaseException]] = {}

    # -- folders ---------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            # Short and private: a unix socket path must stay under ~100 bytes.
            self._run_dir = Path(tempfile.mkdtemp(prefix="jaato-eval-",
                                                  dir=self.context.parent_dir))
            own_folder(self._run_dir, self.context, sweep_others=self.context.parent_dir is None)
        return self._run_dir

    def arm_settings(self):
        if self._arm_settings is None:
            arm = arm_side()
            processes.set_run(self.context.run_id)  # the trees this process starts carry its name
            root = self.run_dir / "workspaces"
            if self.settings.workspaces:
                # A folder of this run's own in the one given (and one per worker in that):
                # the agents' sandbox writes it whole, so it holds nothing the run did not
                # make (no earlier run's kept workspaces, no store beside them).
                root = self.settings.workspaces / f"run-{self.context.run_id}"
                if self.context.worker_id:
                    root = root / self.context.worker_id
            root = root / workspace.AGENTS  # a kept workspace moves up, out of their sight
            self._arm_settings = arm.ArmSettings(
                workspace_root=root, keep_workspaces=self.settings.keep_workspaces,
                ceiling=self.settings.ceiling, run_id=self.context.run_id,
                transcripts=self.settings.transcripts,
                snapshots=self.settings.snapshots, grade=self.settings.grade,
                snapshot_max_mb=self.settings.snapshot_max_mb,
                staging=self.run_dir / "snapshots",
                regrade=regrade_side().RegradeSource(self.settings.regrade,
                                                     MappingProxyType(self.stored.regraded))
                if self.settings.regrade else None,
                owned_dir=self.run_dir / "owned", sandbox=self.sandbox_name(),
                confinement=self._grader_confinement(),
                lent=tuple(python_folders()),  # a venv's bin/python: no trap (special_files)
                memory_limit=self.settings.memory_limit, disk_limit=self.settings.disk_limit,
                watched=self._agent_folders(root))
            self.arm_state = arm.ArmState()
        return self._arm_settings

    def _grader_confinement(self):
        """The agents' sandbox, for the script graders and processors too (engine/sandbox.py):
        none where the agents have none."""
        if self.sandbox_name() == "none":
            return None
        sandbox, _ = probe(self.settings.sandbox)
        assert sandbox is not None
        hidden, readable = self.sandbox_folders()
        return Confinement(sandbox, hidden, readable, scratch=self.run_dir / "grader-tmp",
                           sealed=seal_interpreter(self.run_dir / "sealed", sys.executable))

    def discard(self, ws: Path) -> None:
        """An arm is done with its workspace: removed in the background; finish() waits."""
        if self._bin is None:
            self._bin = workspace.Bin()
        self._bin.put(ws)

    # -- the daemon --------------------------------------------------------------
    @property
    def daemon(self):
        if self._daemon is None:
            if self.settings.socket:
                self._daemon = ExternalDaemon(self.settings.socket)
            else:
                tmp = self.run_dir / "tmp"
                tmp.mkdir(exist_ok=True)
                # The daemon's trace folders go under TMPDIR: keep them in our run folder.
                self._daemon = PrivateDaemon(self.run_dir / "daemon",
                                             env={**self.daemon_env(), "TMPDIR": str(tmp)},
                                             **self.confinement())
        return self._daemon

    def daemon_env(self) -> dict[str, str]:
        """The private daemon's environment: all of this process's, or (jaato_daemon_env) a
        basic set, jaato's own variables and the names listed: what its runners, and so the
        agent's tools through /proc, can read (docs/security.md)."""
        names = self.settings.daemon_env
        if not names:
            return dict(os.environ)
        env = curated_env(names)
        env.update({k: v for k, v in os.environ.items() if k.startswith("JAATO_")})
        env["PATH"] = os.environ.get("PATH", os.defpath)  # the daemon's, as it was
        return env

    def _agent_folders(self, root: Path) -> tuple[Path, ...]:
        """What an agent may write on disk, whose growth its disk limit bounds
        (engine/resources.py): the arms' folder, and a private daemon's folder and TMPDIR."""
        if self.settings.socket:
            return (Path(root).resolve(),)
        return (Path(root).resolve(), (self.run_dir / "daemon").resolve(),
                (self.run_dir / "tmp").resolve())

    def sandbox_name(self) -> str:
        """What confines this process's agents: "bwrap", or "none" (a daemon that is not
        ours, --jaato-sandbox=none, or a machine without one)."""
        if self.settings.socket:
            return "none"
        sandbox, _ = probe(self.settings.sandbox)
        return "none" if sandbox is None else sandbox.name

    def confinement(self) -> dict[str, Any]:
        """The private daemon's sandbox (engine/sandbox.py): what its agents may write (the
        arms' folder) and read besides the allow-list (~/.jaato), and what stays out of
        sight even should a mount hold it (the checkout, the store, HOME, the rest of this
        run's folder)."""
        sandbox, why = probe(self.settings.sandbox)
        if sandbox is None:  # --jaato-sandbox=bwrap: no arm runs unconfined
            return {"refusal": f"sandbox: {why} (--jaato-sandbox=bwrap)"} if (
                self.settings.sandbox == "bwrap") else {}
        settings = self.arm_settings()
        settings.workspace_root.mkdir(parents=True, exist_ok=True)
        hidden, readable = self.sandbox_folders()
        return {"sandbox": sandbox, "writable": (settings.workspace_root,), "hidden": hidden,
                "readable": readable}

    def sandbox_folders(self) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
        """(what stays out of the agents' sandbox wherever a mount would show it: the
        checkout, the store, HOME, the rest of this run's folder; what it may read besides
        the allow-list: jaato's own folder, whose user profiles and provider logins the
        daemon reads, and what the daemon can see has to be)."""
        hidden = [p for p in (self.settings.rootdir, Path.cwd(), Path.home(),
                              self.settings.store.parent, self.run_dir) if p is not None]
        jaato_home = Path.home() / ".jaato"
        return tuple(hideable(hidden)), (jaato_home,) if jaato_home.is_dir() else ()

    @property
    def may_start_early(self) -> bool:
        """Whether start_daemon_early would still start anything (asked once per arm)."""
        # A regrade runs no agent: a judge's first arm starts the daemon, nothing sooner.
        return (not self.settings.socket and self._prestart is None
                and self.settings.regrade is None)

    def start_daemon_early(self) -> None:
        """Start the private daemon in the background while pytest goes on collecting.

        The process is spawned from a thread that lives until the run ends: Linux's
        parent-death signal follows the spawning thread, not the process.
        """
        if not self.may_start_early:
            return
        self.sigterm.install()
        # Made here, not in the thread, so the run can abandon the start while it boots.
        prestart = threading.Thread(target=self._keep_daemon, args=(self.daemon,),
                                    name="jaato-daemon-start", daemon=True)
        try:
            prestart.start()
        except RuntimeError:  # no thread to be had: the first arm starts the daemon itself
            return
        self._prestart = prestart

    def _keep_daemon(self, daemon) -> None:
        try:
            with self._lock:
                self.clock.starting()
                daemon.ensure()
                self.clock.ready()
        except BaseException as exc:  # noqa: BLE001 - handed to the first arm's fixture
            self._prestart_error = exc
        self._release.wait()

    def socket(self) -> str:
        """The daemon's socket, started (or waited for) now: the `jaato_daemon` default."""
        private = not self.settings.socket
        asked = time.monotonic()
        if private:
            ACTIVITY.phase("waiting for the private daemon")
            self.clock.starting()  # the early start's, or this one's
            self.clock.say_starting()
        if self._prestart is not None and self._prestart_error is None:
            with self._lock:  # the early start holds it until the daemon answers
                pass
        error, self._prestart_error = self._prestart_error, None
        if error is not None and not isinstance(error, StartAbandoned):
            raise error
        socket = self.ensure()
        if private:
            self.clock.ready()
            self.clock.say_ready()
            waited = time.monotonic() - asked
            if waited >= WAIT_SAID and ACTIVITY.now is not None:  # the arm's time holds it
                self.daemon_waits[ACTIVITY.now.arm_id] = round(waited, 3)
        return socket

    def ensure(self) -> str:
        """The daemon's socket; a private daemon that died is started again."""
        if self.daemon.private:
            self.sigterm.install()
        with self._lock:
            return self.daemon.ensure()

    def owns(self, socket: str) -> bool:
        return self._daemon is not None and self._daemon.socket_path == socket

    def stop_unused_daemon(self) -> None:
        """Collection ended with no arm left to run (deselected, interrupted)."""
        if self._prestart is not None:  # which made the daemon
            self.daemon.abandon_start()
            with self._lock:
                pass
            self.daemon.stop()

    # -- task pools (B1, B2) ----------------------------------------------------
    def pool_for(self, task) -> tuple[str | None, str | None]:
        """(cascade id, error) of the task's pool, declared once per run on first use."""
        if not task.budget:
            return None, None
        if task.id not in self._pools:
            cid = (f"jaato-eval-{self.context.run_id}-pool-"
                   f"{hashlib.sha256(task.id.encode()).hexdigest()[:10]}")
            try:
                if self._pool_owner is None:
                    self._pool_owner = PoolOwner(self.ensure(), self.run_dir)
                self._pool_owner.declare(cid, task.budget.as_dict())
                self._pools[task.id] = (cid, None)
            except (PoolError, DaemonError, TimeoutError, OSError) as exc:
                self._pools[task.id] = (cid, f"pool {cid} of task {task.id!r}: {exc}")
        return self._pools[task.id]

    def pool_reading(self, cid: str) -> dict | None:
        return self._pool_owner.reading(cid) if self._pool_owner else None

    # -- hooks -------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session) -> None:
        self.clock.config = session.config  # the terminal the daemon's start is said on

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items) -> None:
        deselect_resumed(config, items, self.stored.done)
        deselect_unregraded(config, items, self.stored.regraded)

    def pytest_collection_finish(self, session) -> None:
        # A collection error interrupts pytest, but not an xdist worker: the controller
        # still sends it the arms that were collected.
        interrupted = session.testsfailed and not (
            session.config.option.continue_on_collection_errors
            or hasattr(session.config, "workerinput"))
        if interrupted or not any(arm_of(item) is not None for item in session.items):
            self.stop_unused_daemon()

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        try:
            return (yield)
        except BaseException as exc:
            self.fixture_errors[id(exc)] = (fixturedef.argname, exc)
            raise

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        liveness.arm_begins(item)  # the arm's clock and phase, for the live line

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        arm = arm_of(item)
        if arm is not None:
            if call.when == "call":
                end_guard()  # the body's share of the arm ceiling ends with it
            outcome.label(item, arm)  # before the report copies the item's user properties
        report = yield
        if arm is not None:
            outcome.on_report(item, call, report, self)
        return report

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        end_guard()  # whatever phase armed it, nothing of the body's alarm outlives the test
        liveness.arm_ends()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session) -> None:
        self.wind_down()  # the daemon stops while pytest reports; finish() at unconfigure

    def pytest_unconfigure(self, config) -> None:
        self.finish()

    # -- the end -------------------------------------------------------------------
    def wind_down(self) -> None:
        """The last arm is over: close the pool owner and ask the daemon to go.

        At session finish; `finish` (at unconfigure) completes it. In between pytest
        prints its summary and xdist stops its workers, and the daemon's shutdown runs
        alongside instead of after them.
        """
        if self._pool_owner is not None:
            self._pool_owner.close()
            self._pool_owner = None
        if self._daemon is not None:
            self._daemon.abandon_start()  # still booting: no arm ran here (xdist gave none)
            with self._lock:
                self._daemon.request_stop()

    def finish(self) -> None:
        """Stop our daemon and remove what the run made, kept workspaces excepted.

        Idempotent: called at unconfigure, whether or not the session got as far
        as its finish. Never raises: a step that fails (no thread, process or file to be
        had) is named on stderr and the steps after it still run; what could not be
        removed stays in a run folder that names this process as its owner, which a later
        run removes (sweep.sweep_dead_runs).
        """
        for what, step in (("stopping the daemon", self._stop_daemon),
                           ("removing workspaces", self._remove_workspaces),
                           ("ending process trees", self._end_trees),
                           ("removing the run folder", self._remove_run_dir)):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the run still ends with its summary
                _say(f"{what} failed: {type(exc).__name__}: {exc}")

    def _stop_daemon(self) -> None:
        self.wind_down()
        if self._daemon is not None:
            self._daemon.stop()
        self._release.set()
        self.sigterm.restore()

    def _remove_workspaces(self) -> None:
        if self._bin is not None:
            self._bin.empty(BIN_WAIT)  # past it, the loop below removes what is left
        if self._arm_settings is not None:  # now the daemon can no longer write into them
            for ws in set(self.arm_state.made) - set(self.arm_state.kept):
                workspace.discard(ws)
            sweep.remove_session_tmp(self.arm_state.sessions)
            agents = self._arm_settings.workspace_root
            with contextlib.suppress(OSError):
                agents.rmdir()  # empty once every unkept workspace is gone
            if self.settings.workspaces:  # this run's folder in the one given, unless kept in
                folder = agents.parent
                while folder != self.settings.workspaces and folder.is_relative_to(
                        self.settings.workspaces):
                    try:
                        folder.rmdir()
                    except OSError:
                        break
                    folder = folder.parent

    def _end_trees(self) -> None:
        if self._arm_settings is not None or self._daemon is not None:
            processes.kill_live_trees()

    def _remove_run_dir(self) -> None:
        run_dir, self._run_dir = self._run_dir, None
        if run_dir is None or not run_dir.exists():
            return
        try:
            self._empty_run_dir(run_dir)
        finally:
            kept = set(self.arm_state.kept) if self.arm_state is not None else None
            _left_for_later(run_dir, self.context.run_id, kept)

    def _empty_run_dir(self, run_dir: Path) -> None:
        kept = run_dir / "workspaces"
        # What this run kept, by its own list: an external daemon may still write into a
        # discarded workspace (a session's trackers), which must not pass for a kept one.
        has_kept = any(ws.parent == kept.resolve() for ws in self.arm_state.kept) if (
            self.arm_state is not None) else has_kept_workspaces(run_dir)
        for child in list(run_dir.iterdir()):
            if child != kept or not has_kept:
                if child.is_dir() and not child.is_symlink():
                    workspace.remove_tree(child)
                else:
                    child.unlink(missing_ok=True)
        if not has_kept:
            shutil.rmtree(run_dir, ignore_errors=True)


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"jaato-eval: {line}\n")
    except (OSError, ValueError):
        pass


def _left_for_later(run_dir: Path, run_id: str, kept: set[Path] | None) -> None:
    """What of a run folder could not be removed is named, and handed to a later run.

    The folder gets back the owner file a later run sweeps it by once this process is
    gone; an unkept workspace moves out of `workspaces/` (which the sweep leaves alone:
    kept workspaces are the user's) into `discarded/`, which it removes.
    """
    if not run_dir.exists():
        return
    workspaces = run_dir / "workspaces"
    left = [p for p in run_dir.iterdir() if p != workspaces and p.name != sweep.OWNER_FILE]
    if workspaces.is_dir() and kept is not None:
        kept_here = {Path(ws).resolve() for ws in kept}
        # A kept workspace keeps the daemon's state folders beside it (workspace.discard).
        beside = tuple(f".{ws.name}-" for ws in kept_here)
        for ws in [p for p in workspaces.iterdir() if p.resolve() not in kept_here
                   and not (p.name.startswith(beside) and p.name.endswith("-state"))]:
            (run_dir / DISCARDED).mkdir(exist_ok=True)
            try:
                ws.rename(run_dir / DISCARDED / ws.name)
            except OSError:
                pass
            left.append(ws)
    if not left:
        return
    sweep.write_owner(run_dir, run_id)
    shown = ", ".join(str(p) for p in left[:3]) + (f" (+{len(left) - 3} more)" if len(left) > 3 else "")
    _say(f"could not remove {shown}; a later run removes it")


def own_folder(folder: Path, context: RunContext, sweep_others: bool) -> None:
    """Name this run as the folder's owner; the run's first folder sweeps what dead runs
    left beside it (a worker's folders are inside the controller's, never swept by it)."""
    processes.set_run(context.run_id)
    sweep.write_owner(folder, context.run_id)
    if sweep_others:
        sweep.sweep_dead_runs(folder.parent, keep=(folder,))


def has_kept_workspaces(run_dir: Path) -> bool:
    kept = run_dir / "workspaces"
    return kept.is_dir() and any(p.name != workspace.AGENTS for p in kept.iterdir())
