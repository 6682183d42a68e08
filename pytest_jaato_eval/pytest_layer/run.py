"""One pytest process's jaato state, split by who owns it.

`RunContext` (config.stash) is what every side reads and nobody changes: the
settings and the run id. The `Worker` (worker.py) is the side that runs arms; it
exists only in a process that collected an arm, made by `Worker.of`. This module
loads in every pytest run and imports nothing of ours but names; `arm_side` is where
the side that runs an arm (arm.py, and with it the SDK) loads, at an arm's first need.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from types import ModuleType

    from .options import Settings
    from .worker import Worker


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class RunContext:
    """The run's immutable facts, shared by the controller and the workers (the store's
    arms, read once a run has arms, are stored.py's)."""

    settings: Settings
    run_id: str
    parent_dir: str | None = None  # xdist worker: the controller's folder for its workers
    worker_id: str | None = None   # xdist worker: its id (gw0, ...), from this run's xdist
    started: float = field(default_factory=time.time)


class MarkerError(Exception):
    """A `@pytest.mark.jaato` mistake: the marked test's own one-line collection error."""


CONTEXT_KEY = pytest.StashKey[RunContext]()
CONTROLLER = "jaato-eval-controller"  # the controller's plugin name (arms_found.py registers it)
WORKER_KEY = pytest.StashKey["Worker"]()
# On an arm's item: its Arm (set at collection), its workspace and its jaato_arm handle.
ARM_KEY = pytest.StashKey[Any]()
WORKSPACE_KEY = pytest.StashKey[Path]()
HANDLE_KEY = pytest.StashKey[Any]()


def arm_of(item) -> Any:
    """The Arm an item runs, or None for any other test."""
    return item.stash.get(ARM_KEY, None)


def arm_side() -> "ModuleType":
    """arm.py: one arm, end to end (the engine's session side, the graders, the SDK).

    Loaded where an arm first needs it (its workspace, its run, its record): collecting
    tasks, `--collect-only`, a regrade without a judge and an `-n` controller never do.
    """
    from .. import arm  # the SDK, optional until an arm runs: ~0.5 s of imports
    return arm


def regrade_side() -> "ModuleType":
    """regrade.py (and arm.py under it): loaded where a regraded arm first needs it."""
    from .. import regrade  # arm.py's imports, as arm_side: optional until an arm regrades
    return regrade


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
