"""task.yaml files become pytest items: one ArmItem per task x profile set x repeat (X2).

An arm item is a `pytest.Function` whose test is the arm's run: pytest resolves
its fixtures (`jaato_arm`, the project's autouse ones, `usefixtures`) exactly as
for a test function, and its `[set-rN]` suffix is a real parametrisation id, so
`--lf`, `--ff`, `--sw` and `--nf` find it again by its node id.
"""
from __future__ import annotations

import functools
import os
import platform
import re
import sys
import types
import warnings
from typing import Any, cast

import pytest

from . import outcome
from ..task import grader_files, preflight
from ..task.arms import DEFAULT_SET, Arm, arms_of
from ..engine.budget import ceiling_warning
from ..task.load import ManifestError, load_task
from .fence import MANIFEST
from .heap import HEAP_KEY
from .run import ARM_KEY, HANDLE_KEY
from .worker import Worker

try:
    from _pytest.python import CallSpec
except ImportError:  # pytest 8 names it CallSpec2
    from _pytest.python import CallSpec2 as CallSpec


@functools.lru_cache(maxsize=1024)  # the same few profile set names, once per arm
def _node_safe(text: str) -> str:
    """Node names must not contain `::` or whitespace; keep everything else readable."""
    return re.sub(r"\s+", "_", text.replace("::", ":_:"))


def arm_param_id(arm: Arm) -> str:
    """What the node id shows in brackets: `echo-r0`, or `<sample>-echo-r0` for an arm
    of a dataset's sample."""
    sample = f"{arm.sample.id}-" if arm.sample is not None else ""
    return f"{sample}{_node_safe(arm.set_name)}-r{arm.repeat}"


def identity_of_nodeid(rootpath, nodeid: str, settings,
                       regraded: dict | None = None) -> dict[str, str] | None:
    """The identity of the task.yaml arm a node id names, read again from its manifest:
    for an arm whose worker died before it sent a single report."""
    path, sep, name = nodeid.partition("::")
    if not sep or os.path.basename(path) != MANIFEST:
        return None
    try:
        task = load_task(rootpath / path)
    except Exception:  # noqa: BLE001 - changed or unreadable since collection: no identity
        return None
    for arm in task_arms(task, settings, regraded or {}):
        if name == f"{_node_safe(task.id)}[{arm_param_id(arm)}]":
            return outcome.identity(arm)
    return None


def task_arms(task, settings, regraded: dict) -> list[Arm]:
    """The task's arms (X2). A regrade collects the arms of the store it grades again: the
    profile sets and repeats its records name for the task, unless given on the command
    line."""
    sets, repeats = settings.profile_sets, settings.repeats
    if settings.regrade is not None and regraded:
        stored = [r for r in regraded.values() if r.task_id == task.id]
        if sets is None and stored:
            own = task.harness.profile_set  # jaato-eval's `default` is the task's own set
            named = sorted({own if r.set_name == DEFAULT_SET else r.set_name for r in stored},
                           key=lambda n: n or "")
            sets = None if named == [own] else named
        if repeats is None and stored:
            repeats = max(task.repeats, 1 + max(r.repeat or 0 for r in stored))
    return arms_of(task, sets, repeats, settings.samples)


class TaskFile(pytest.File):
    """One task.yaml. A bad manifest is this file's collection error: one line (M2)."""

    def collect(self):
        heap = self.config.stash.get(HEAP_KEY, None)
        if heap is not None:
            heap.pause()  # a task is collected: no collector passes until collection ends
        task = load_task(self.path)
        worker = Worker.of(self.config)
        first = worker.task_paths.setdefault(task.id, self.path)
        if first != self.path:  # M1
            raise ManifestError(self.path, "id", f"task id {task.id!r} is also declared by "
                                                 f"{first}; task ids must be unique")
        settings = worker.settings
        stored = worker.stored.resumed_hashes.get(task.id)
        if stored and stored != {task.content_hash}:  # R3: resuming a changed task mixes two
            raise ManifestError(self.path, "resume", (
                f"task {task.id!r} changed since {settings.store} was written (its manifest, "
                f"fixture or config root differs); run without --resume to start a new store"))
        warning = ceiling_warning(task.id, task.budget.limits() if task.budget else None,
                                  settings.ceiling.seconds, settings.ceiling.source)
        if warning:  # B4
            self.warn(pytest.PytestWarning(warning))
        for line in grader_files.shared_with_session(task):  # W5: before any arm costs
            self.warn(pytest.PytestWarning(f"{self.path}: {line}"))
        # Marks and keywords every arm of the task shares are the file's: arms inherit them.
        self.add_marker(jaato_mark())
        self.extra_keyword_matches.add(task.id)
        for i, (name, args) in enumerate(getattr(task, "marks", ())):
            self.add_marker(task_mark(self.path, i, name, args, self))
        name = _node_safe(task.id)
        # Every arm of a task has the same parent, marks and test function, so the same
        # fixture closure: computed for the first arm, shared by the rest (as pytest shares
        # one function's closure between its parametrised items).
        fixtureinfo = None
        regrade = settings.regrade is not None
        for arm in task_arms(task, settings, worker.stored.regraded):
            param = arm_param_id(arm)
            item = ArmItem.from_parent(
                self, name=f"{name}[{param}]", originalname=name,
                callobj=regrade_task_arm if regrade else run_task_arm,
                callspec=arm_callspec(param), arm=arm, fixtureinfo=fixtureinfo)
            fixtureinfo = getattr(item, "_fixtureinfo", None)  # pytest's own; none: each computes
            if (worker.may_start_early and arm.id not in worker.stored.done
                    and wants_own_daemon(item) and not preflight.check(task, arm.profile_set)):
                worker.start_daemon_early()
            yield item

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ManifestError):
            return str(excinfo.value)
        # Anything else (an unreadable fixture name, MemoryError) is still this file's
        # collection error, in one line, not an INTERNALERROR of the whole run.
        return f"{self.path}: cannot collect: {outcome.one_line(excinfo.exconly(), 400)}"


# Typed as pytest types a callspec's parts; read-only, so one can serve every arm.
_NO_PARAMS: Any = types.MappingProxyType({})


def arm_callspec(param: str):
    """An arm's parametrisation: its id and nothing else. The empty parts are one shared,
    read-only mapping and an empty tuple (pytest only reads a finished callspec, and
    copies one to extend it): at thousands of arms, three dicts and two lists less per
    arm for every pass of the garbage collector."""
    return CallSpec(params=_NO_PARAMS, indices=_NO_PARAMS, _arg2scope=_NO_PARAMS,
                    _idlist=(param,), marks=cast(list, ()))


class PreflightBlocked(Exception):
    """The arm's profile set, profile or a grader file is missing: BLOCKED before setup."""


def run_task_arm(jaato_arm) -> None:
    """The test of a task.yaml arm: its manifest's agent, then its graders."""
    jaato_arm.run_task()


def regrade_task_arm(jaato_regrade) -> None:
    """The test of a task.yaml arm under --jaato-regrade: its snapshot, its graders."""
    jaato_regrade.regrade_task()


class ArmItem(pytest.Function):
    """One arm of a task.yaml. Its test is the arm's run; its assertions are the graders."""

    def __init__(self, *, arm: Arm, **kwargs):
        super().__init__(**kwargs)
        self.arm = arm
        self.stash[ARM_KEY] = arm
        self.extra_keyword_matches.update((arm.set_name, arm.id))
        if arm.sample is not None:  # -k selects samples by id
            self.extra_keyword_matches.add(arm.sample.id)

    def setup(self) -> None:
        # Preflight before any fixture: an arm that cannot run starts no daemon.
        reason = preflight.check(self.arm.task, self.arm.profile_set)
        if reason:
            raise PreflightBlocked(reason)
        super().setup()

    @property
    def record(self) -> dict | None:
        handle = self.stash.get(HANDLE_KEY, None)
        return handle.record if handle is not None else None

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, outcome.ArmFailed):
            return outcome.verdict_table(excinfo.value.record)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, self.arm.id


@functools.cache
def jaato_mark():
    """The `jaato` mark every arm carries: one immutable mark, shared."""
    return pytest.mark.jaato


def task_mark(path, index: int, name: str, args: Any, node=None):
    """A `marks:` entry as the pytest mark it names, with pytest's own checks
    (an unregistered name warns, or fails under --strict-markers)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pytest.PytestUnknownMarkWarning)
        try:
            mark = getattr(pytest.mark, name)
        except pytest.fail.Exception as exc:
            raise ManifestError(path, f"marks[{index}]", str(exc.msg)) from None
    for w in caught:  # shown against the task.yaml, not this module
        warning = pytest.PytestUnknownMarkWarning(f"{path}: marks[{index}]: {w.message}")
        node.warn(warning) if node is not None else warnings.warn(warning, stacklevel=2)
    if args is None:
        return mark
    if isinstance(args, dict):
        return mark(**args)
    if isinstance(args, list):
        return mark(*args)
    if name in ("skip", "xfail"):  # a string is the reason (skipif's is its condition)
        return mark(reason=args)
    return mark(args)


def wants_own_daemon(node) -> bool:
    """Whether this arm will run on the plugin's own daemon: not under --co, not when
    skipped by its marks, not when a conftest overrides `jaato_daemon`."""
    if node.config.option.collectonly or will_skip(node):
        return False
    info = getattr(node, "_fixtureinfo", None)  # an override is known once collected
    defs = getattr(info, "name2fixturedefs", {}).get("jaato_daemon") if info else None
    func = getattr(defs[-1], "func", None) if defs else None
    return func is None or getattr(func, "__module__", "") == f"{__package__}.fixtures"


def will_skip(node) -> bool:
    """Whether a skip or skipif mark will skip this arm, judged as pytest judges string
    conditions; used only to start no daemon for a run whose arms are all skipped."""
    if node.get_closest_marker("skip") is not None:
        return True
    namespace = {"os": os, "sys": sys, "platform": platform, "config": node.config}
    for mark in node.iter_markers("skipif"):
        conditions = mark.args if "condition" not in mark.kwargs else (mark.kwargs["condition"],)
        for condition in conditions or (True,):
            try:
                result = eval(condition, dict(namespace)) if isinstance(condition, str) else condition
                if result:
                    return True
            except Exception:  # noqa: BLE001 - pytest reports it at setup; we just start
                continue
    return False
