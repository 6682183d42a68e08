"""One pytest run's jaato state: settings, the lazily started daemon, the store.

Lives in config.stash. Nothing here starts or writes anything until the first
arm runs, so a pytest run that collects no task is untouched (X1).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from . import workspace
from .arm import ArmSettings
from .engine.budget import PoolError, PoolOwner
from .engine.daemon import DaemonError, ExternalDaemon, PrivateDaemon, reap_orphan_daemon
from .options import Settings
from .store import Store, latest_by_arm, read_records
from .verdict import BLOCKED


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def resume_index(settings: Settings) -> dict:
    """R3: with --resume, the arms already in the store (a repeated id counts once)."""
    if not settings.resume or not settings.store.exists():
        return {}
    return latest_by_arm(read_records(settings.store))


def done_arms(resumed: dict[str, dict], retry_blocked: bool) -> dict[str, dict]:
    """The stored arms not to run again: all of them, or with --retry-blocked those whose
    latest record is not BLOCKED (a BLOCKED arm taught us nothing about the agent)."""
    if not retry_blocked:
        return resumed
    return {arm: r for arm, r in resumed.items() if r.get("state") != BLOCKED}


class EvalRun:
    def __init__(self, settings: Settings, run_id: str, controller: bool,
                 parent_dir: str | None = None):
        self.settings = settings
        self.parent_dir = parent_dir  # xdist: the controller's folder for its workers' runs
        self._worker_root: Path | None = None
        self.run_id = run_id
        self.controller = controller
        self.store = Store(settings.store, append=settings.resume,
                           keep_previous=settings.keep_previous) if controller else None
        self.resumed: dict[str, dict] = resume_index(settings)  # every stored arm, latest
        self.done: dict[str, dict] = done_arms(self.resumed, settings.retry_blocked)
        self.records: list[dict] = []       # controller: every arm's record, in finish order
        self.blocked: list[tuple[str, str]] = []  # (nodeid, reason)
        self.task_paths: dict[str, Path] = {}     # M1: task id -> manifest
        self._run_dir: Path | None = None
        self._daemon = None
        self._arm_settings: ArmSettings | None = None
        self.started = time.time()
        self._pools: dict[str, tuple[str, str | None]] = {}
        self._pool_owner: PoolOwner | None = None
        self._swept = False

    # -- lazily made ---------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            # Short and private: a unix socket path must stay under ~100 bytes.
            self._run_dir = Path(tempfile.mkdtemp(prefix="jaato-eval-", dir=self.parent_dir))
            self._own(self._run_dir)
        return self._run_dir

    def worker_root(self) -> str:
        """xdist: one folder holding every worker's run folder, so a crashed worker's
        leftovers are still found and removed by the controller at the end."""
        if self._worker_root is None:
            self._worker_root = Path(tempfile.mkdtemp(prefix="jaato-eval-"))
            self._own(self._worker_root)
        return str(self._worker_root)

    def _own(self, folder: Path) -> None:
        """Name this process as the folder's owner; a run's first folder sweeps dead runs'."""
        from . import processes, sweep
        processes.set_run(self.run_id)
        sweep.write_owner(folder, self.run_id)
        if self.parent_dir is None and not self._swept:  # workers' folders are the controller's
            self._swept = True
            sweep.sweep_dead_runs(folder.parent, keep=(folder,))

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
                                             env={**os.environ, "TMPDIR": str(tmp)})
        return self._daemon

    # -- task pools (B1, B2) ----------------------------------------------------
    def pool_for(self, task) -> tuple[str | None, str | None]:
        """(cascade id, error) of the task's pool, declared once per run on first use."""
        if not task.budget:
            return None, None
        if task.id not in self._pools:
            cid = f"jaato-eval-{self.run_id}-pool-{hashlib.sha256(task.id.encode()).hexdigest()[:10]}"
            try:
                if self._pool_owner is None:
                    self._pool_owner = PoolOwner(self.daemon.ensure(), self.run_dir)
                self._pool_owner.declare(cid, dict(task.budget))
                self._pools[task.id] = (cid, None)
            except (PoolError, DaemonError, TimeoutError, OSError) as exc:
                self._pools[task.id] = (cid, f"pool {cid} of task {task.id!r}: {exc}")
        return self._pools[task.id]

    def pool_reading(self, cid: str) -> dict | None:
        return self._pool_owner.reading(cid) if self._pool_owner else None

    def arm_settings(self) -> ArmSettings:
        if self._arm_settings is None:
            from . import processes
            processes.set_run(self.run_id)  # the trees this process starts carry the run's name
            root = self.settings.workspaces or (self.run_dir / "workspaces")
            self._arm_settings = ArmSettings(
                workspace_root=root, keep_workspaces=self.settings.keep_workspaces,
                ceiling=self.settings.ceiling, run_id=self.run_id)
        return self._arm_settings

    # -- the end ---------------------------------------------------------------
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
            self._daemon.request_stop()

    def kept_folder(self) -> Path | None:
        """Where this process's kept workspaces are (None when it kept none)."""
        if self._arm_settings is None or not self._arm_settings.kept:
            return None
        return Path(self._arm_settings.workspace_root)

    def finish(self) -> None:
        """Stop our daemon and remove what the run made, kept workspaces excepted.

        Idempotent: called at unconfigure, whether or not the session got as far
        as its finish.
        """
        from . import processes, sweep
        self.wind_down()
        if self._daemon is not None:
            self._daemon.stop()
        if self._arm_settings is not None:  # now the daemon can no longer write into them
            for ws in set(self._arm_settings.made) - set(self._arm_settings.kept):
                workspace.discard(ws)
            sweep.remove_session_tmp(self._arm_settings.sessions)
        if self._arm_settings is not None or self._daemon is not None:
            processes.kill_live_trees()
            if self.controller:  # every worker has ended: what any of them left is ended too
                processes.kill_run_leftovers(self.run_id)
        if self.store is not None:
            self.store.close()
        root, self._worker_root = self._worker_root, None
        if root is not None:  # after every worker ended: sweep what a crashed one left
            for child in root.iterdir():
                reap_orphan_daemon(child / "daemon")  # a crashed worker's, dying on its own
                # A crashed worker never re-swept its discarded workspaces: unless the user
                # keeps some, nothing in its folder is wanted.
                if self.settings.keep_workspaces == "never" or not _has_kept_workspaces(child):
                    shutil.rmtree(child, ignore_errors=True)
            if [p.name for p in root.iterdir()] in ([], [sweep.OWNER_FILE]):
                shutil.rmtree(root, ignore_errors=True)
        run_dir, self._run_dir = self._run_dir, None
        if run_dir is None or not run_dir.exists():
            return
        kept = run_dir / "workspaces"
        has_kept = _has_kept_workspaces(run_dir)
        for child in list(run_dir.iterdir()):
            if child != kept or not has_kept:
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        if not has_kept:
            shutil.rmtree(run_dir, ignore_errors=True)


def _has_kept_workspaces(run_dir: Path) -> bool:
    kept = run_dir / "workspaces"
    return kept.is_dir() and any(kept.iterdir())
