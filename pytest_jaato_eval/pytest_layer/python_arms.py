"""Arms written in Python: a test marked `@pytest.mark.jaato(...)` that takes `jaato_arm`.

The marker says what a task.yaml's environment and harness say; the test body is
the grader. The test is parametrised over profile set x repeat like a task.yaml
(`[echo-r0]`), its task id is its node id without the brackets. Each parameter set
of the test's own `@pytest.mark.parametrize` is a sample (samples.py): its id is in
the node id (`[cat-echo-r0]`) and in the arm id (`task[cat]@echo#0`).

A marker mistake is that test's own collection error (`MarkerError`, turned into an
error node by plugin.py), so every mistake of a run is reported at once and the
module's other tests are still collected.
"""
from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

import pytest

from ..number import is_int
from ..task import preflight
from ..task.arms import Arm, arms_of
from .collect import PreflightBlocked, arm_param_id, wants_own_daemon
from ..task.model import SESSION, Environment, Harness, Input, Task
from ..task.samples import Sample
from ..task.tree import TaskTree, TreeError, list_tree
from .run import ARM_KEY, MarkerError, arm_of
from .worker import Worker

MARKER_KEYS = ("config_root", "fixture", "profile", "profile_set", "repeats", "agent",
               "description")
REQUIRED = ("config_root", "fixture", "profile")


def _fail(where: str, reason: str):
    raise MarkerError(f"{where}: @pytest.mark.jaato: {reason}")


def check_takes_arm(metafunc) -> None:
    """The marker on a test without `jaato_arm` would make an ordinary test that runs no
    agent and writes no record: refused."""
    if "jaato_arm" not in metafunc.fixturenames:
        _fail(metafunc.definition.nodeid, "marks an arm written in Python, but the test does "
                                          "not take the jaato_arm fixture; add jaato_arm to "
                                          "its arguments (docs/python-arms.md), or drop the mark")


def task_of(definition) -> Task:
    """The marker's arguments as a Task, checked with one-line errors."""
    marker = definition.get_closest_marker("jaato")
    where = definition.nodeid
    marks = list(definition.iter_markers("jaato"))
    if len(marks) > 1:  # pytest would take the innermost and drop the rest, silently
        _fail(where, f"found {len(marks)} marks (on the test, its class or its module); an "
                     f"arm takes exactly one: merge their arguments into one mark")
    if marker.args:
        _fail(where, "takes keyword arguments only: config_root=, fixture=, profile=, ...")
    kw = dict(marker.kwargs)
    for key in kw:
        if key not in MARKER_KEYS:
            hint = difflib.get_close_matches(key, MARKER_KEYS, n=1)
            _fail(where, f"unknown argument {key!r}{f' (did you mean {hint[0]!r}?)' if hint else ''}"
                         f"; known: {', '.join(MARKER_KEYS)}")
    for key in REQUIRED:
        if not isinstance(kw.get(key), (str, Path)) or not str(kw[key]).strip():
            _fail(where, f"{key}: expected a non-blank string or path")
    folder = Path(definition.path).parent
    dirs = {}
    for key in ("config_root", "fixture"):
        path = (folder / kw[key]).resolve()
        if not path.is_dir():
            _fail(where, f"{key}: {str(kw[key])!r} resolves to {path}, which is not a directory")
        dirs[key] = path
    repeats = kw.get("repeats", 1)
    if not is_int(repeats) or repeats < 1:
        _fail(where, f"repeats: expected an integer >= 1, got {repeats!r}")
    for key in ("profile_set", "agent", "description"):
        if kw.get(key) is not None and not isinstance(kw[key], str):
            _fail(where, f"{key}: expected a string, got {type(kw[key]).__name__}")
    test_file = Path(definition.path).resolve()
    # No task.yaml to validate: the marker's arguments, checked above, built as they are.
    task = Task.model_construct(
        id=where, description=kw.get("description") or "",
        environment=Environment.model_construct(fixture=str(kw["fixture"]),
                                                config_root=str(kw["config_root"])),
        harness=Harness.model_construct(kind=SESSION, profile=str(kw["profile"]),
                                        profile_set=kw.get("profile_set")),
        input=Input.model_construct(agent=kw.get("agent")), graders=(), repeats=repeats)
    try:  # what a task.yaml's fixture is checked for (task/tree.py), at collection too
        listing = list_tree(dirs["fixture"])
    except TreeError as exc:
        _fail(where, f"fixture: {exc}")
    # content_hash: over the test file, fixture and config root
    return task.found_at(test_file, dirs["fixture"], dirs["config_root"], tree=TaskTree(
        test_file.read_bytes(), dirs["fixture"], listing, dirs["config_root"]))


def parametrize(metafunc) -> None:
    """pytest_generate_tests for a Python arm: one item per profile set x repeat."""
    definition = metafunc.definition
    task = task_of(definition)
    worker = Worker.of(metafunc.config)
    for done in worker.stored.resumed.values():  # R3, as for a task.yaml
        if done.task_id == task.id and done.task_hash not in (None, task.content_hash):
            _fail(task.id, f"changed since {worker.settings.store} was written (the test file, "
                           f"fixture or config root differs); run without --resume to start a "
                           f"new store")
    arms = arms_of(task, worker.settings.profile_sets, worker.settings.repeats)
    try:
        metafunc.parametrize("jaato_arm", arms, ids=[arm_param_id(a) for a in arms],
                             indirect=True)
    except ValueError as exc:  # e.g. the test parametrises jaato_arm itself
        _fail(task.id, str(exc))
    # An arm --resume will deselect never needs the daemon. A parametrised test's arm ids
    # (with their samples) are known once its items are: `collected` decides then.
    if (not any(definition.iter_markers("parametrize"))
            and any(a.id not in worker.stored.done for a in arms)
            and wants_own_daemon(definition)):
        worker.start_daemon_early()


def collected(item) -> None:
    """pytest_itemcollected for a Python arm: its arm, with its sample, on the item."""
    arm = item.stash[ARM_KEY] = sampled(item, item.callspec.params["jaato_arm"])
    if arm.sample is not None:
        worker = Worker.of(item.config)
        if (worker.may_start_early and arm.id not in worker.stored.done
                and wants_own_daemon(item)):
            worker.start_daemon_early()


def sampled(item, arm: Arm) -> Arm:
    """The item's arm with its sample: the parameter set pytest gave the test besides
    `jaato_arm` (its id without ours, its other parameters as the sample's fields)."""
    callspec = item.callspec
    ours = arm_param_id(arm)
    parts = callspec.id.split("-") if callspec.id else []
    mine = ours.split("-")
    for i in range(len(parts) - len(mine), -1, -1):  # ours is last, unless a later hook
        if parts[i:i + len(mine)] == mine:             # parametrised after us
            parts[i:i + len(mine)] = []
            break
    if not parts:
        return arm
    fields = {k: v for k, v in callspec.params.items() if k != "jaato_arm"}
    return dataclasses.replace(arm, sample=Sample("-".join(parts), fields))


def first_samples(config, items: list, n: int) -> None:
    """`--jaato-samples N` for arms written in Python: each test's first N samples, in
    collection order; the rest deselected (before the shard split, as on every machine)."""
    seen: dict[str, list[str]] = {}
    kept: list = []
    dropped: list = []
    for item in items:
        arm = arm_of(item)
        sample = getattr(arm, "sample", None)
        if sample is None or getattr(item, "arm", None) is not None:  # task.yaml: collected so
            kept.append(item)
            continue
        ids = seen.setdefault(arm.task.id, [])
        if sample.id not in ids and len(ids) < n:
            ids.append(sample.id)
        (kept if sample.id in ids else dropped).append(item)
    if dropped:
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)


def preflight_check(item) -> None:
    """Before any fixture of a Python arm: its profile set and profile exist, as a
    task.yaml arm's are checked (preflight.py); else the arm is BLOCKED, no session."""
    arm = arm_of(item)
    reason = preflight.check(arm.task, arm.profile_set)
    if reason:
        raise PreflightBlocked(reason)


class MarkerErrorNode(pytest.Collector):
    """A marked test whose marker is wrong: collecting it is its one-line error."""

    def __init__(self, *, message: str, **kwargs):
        super().__init__(**kwargs)
        self.message = message

    def collect(self):
        raise MarkerError(self.message)

    def repr_failure(self, excinfo, style=None):
        return self.message if isinstance(excinfo.value, MarkerError) else super().repr_failure(
            excinfo)
