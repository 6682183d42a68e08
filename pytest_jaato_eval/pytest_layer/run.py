"""One pytest process's jaato state, split by who owns it.

`RunContext` (config.stash) is what every side reads and nobody changes: the
settings, the run id, the store's arms when resuming. The `Worker` (worker.py) is
the side that runs arms; it exists only in a process that collected an arm, made
by `Worker.of`. Nothing here imports the SDK until an arm needs it, so a pytest
run that collects no task is untouched (X1).
"""
from __future__ import annotations

import functools
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..results.record import ArmRecord
from ..results.stores import latest_by_arm, read_records
from ..verdict import BLOCKED

if TYPE_CHECKING:
    from .options import Settings
    from .worker import Worker


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class RunContext:
    """The run's immutable facts, shared by the controller and the workers."""

    settings: Settings
    run_id: str
    parent_dir: str | None = None  # xdist worker: the controller's folder for its workers
    worker_id: str | None = None   # xdist worker: its id (gw0, ...), from this run's xdist
    started: float = field(default_factory=time.time)

    @functools.cached_property
    def resumed(self) -> dict[str, ArmRecord]:
        """R3: with --resume, every stored arm, its latest record (a repeated id counts
        once); read once, on first use."""
        store = self.settings.store
        if not self.settings.resume or not store.exists():
            return {}
        return latest_by_arm(read_records(store))

    @functools.cached_property
    def done(self) -> dict[str, ArmRecord]:
        """The stored arms not to run again: all of them, or with --retry-blocked those whose
        latest record is not BLOCKED (a BLOCKED arm taught us nothing about the agent)."""
        if not self.settings.retry_blocked:
            return self.resumed
        return {arm: r for arm, r in self.resumed.items() if r.state != BLOCKED}

    @functools.cached_property
    def regraded(self) -> dict[str, ArmRecord]:
        """With --jaato-regrade, the arms of the store graded again: each arm's latest
        record; read once, on first use."""
        if self.settings.regrade is None:
            return {}
        return latest_by_arm(read_records(self.settings.regrade))

    @functools.cached_property
    def resumed_hashes(self) -> dict[str, set[str]]:
        """Task id -> the task hashes its stored arms carry: R3's check, one lookup per
        task instead of a pass over the whole store per task."""
        out: dict[str, set[str]] = {}
        for record in self.resumed.values():
            if record.task_id is not None and record.task_hash is not None:
                out.setdefault(record.task_id, set()).add(record.task_hash)
        return out


class MarkerError(Exception):
    """A `@pytest.mark.jaato` mistake: the marked test's own one-line collection error."""


CONTEXT_KEY = pytest.StashKey[RunContext]()
WORKER_KEY = pytest.StashKey["Worker"]()
# On an arm's item: its Arm (set at collection), its workspace and its jaato_arm handle.
ARM_KEY = pytest.StashKey[Any]()
WORKSPACE_KEY = pytest.StashKey[Path]()
HANDLE_KEY = pytest.StashKey[Any]()


def arm_of(item) -> Any:
    """The Arm an item runs, or None for any other test."""
    return item.stash.get(ARM_KEY, None)


def worker_of(config) -> "Worker":
    """This process's worker: `Worker.of` made it when the process collected its first
    arm, so an arm's fixtures find it here."""
    return config.stash[WORKER_KEY]


def deselect_resumed(config, items, done: dict) -> None:
    """R3: with --resume, arms already in the store are deselected, not run again."""
    if not done:
        return
    kept: list = []
    dropped: list = []
    for item in items:
        arm = arm_of(item)
        (dropped if arm is not None and any(i in done for i in arm.ids) else kept).append(item)
    if dropped:
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)


def deselect_unregraded(config, items, regraded: dict) -> None:
    """With --jaato-regrade, only the task.yaml arms the store holds are graded again: the
    others are deselected (said by pytest as deselected)."""
    if not config.option.jaato_regrade:
        return
    kept: list = []
    dropped: list = []
    for item in items:
        arm = arm_of(item)
        # An arm written in Python is graded by its test body, which runs its agent.
        unregraded = arm is not None and (not arm.task.graders
                                          or not any(i in regraded for i in arm.ids))
        (dropped if unregraded else kept).append(item)
    if dropped:
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)


def own_folder(folder: Path, context: RunContext, sweep_others: bool) -> None:
    """Name this run as the folder's owner; the run's first folder sweeps what dead runs
    left beside it (a worker's folders are inside the controller's, never swept by it)."""
    from .. import processes, sweep  # psutil: only once a run folder is made
    processes.set_run(context.run_id)
    sweep.write_owner(folder, context.run_id)
    if sweep_others:
        sweep.sweep_dead_runs(folder.parent, keep=(folder,))


def has_kept_workspaces(run_dir: Path) -> bool:
    kept = run_dir / "workspaces"
    return kept.is_dir() and any(kept.iterdir())
