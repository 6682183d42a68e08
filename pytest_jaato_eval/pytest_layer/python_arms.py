"""Arms written in Python: a test marked `@pytest.mark.jaato(...)` that takes `jaato_arm`.

The marker says what a task.yaml's environment and harness say; the test body is
the grader. The test is parametrised over profile set x repeat like a task.yaml
(`[echo-r0]`), its task id is its node id without the brackets.
"""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from ..arms import arms_of
from .collect import arm_param_id, wants_own_daemon
from ..manifest import SESSION, Task
from .run import worker_of

MARKER_KEYS = ("config_root", "fixture", "profile", "profile_set", "repeats", "agent",
               "description")
REQUIRED = ("config_root", "fixture", "profile")


def _fail(where: str, reason: str):
    pytest.fail(f"{where}: @pytest.mark.jaato: {reason}", pytrace=False)


def task_of(definition) -> Task:
    """The marker's arguments as a Task, checked with one-line errors."""
    marker = definition.get_closest_marker("jaato")
    where = definition.nodeid
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
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        _fail(where, f"repeats: expected an integer >= 1, got {repeats!r}")
    for key in ("profile_set", "agent", "description"):
        if kw.get(key) is not None and not isinstance(kw[key], str):
            _fail(where, f"{key}: expected a string, got {type(kw[key]).__name__}")
    test_file = Path(definition.path).resolve()
    return Task(
        id=where, manifest=test_file, description=kw.get("description") or "",
        fixture=dirs["fixture"], config_root=dirs["config_root"], kind=SESSION,
        profile=str(kw["profile"]), profile_set=kw.get("profile_set"), run=None, prompt=None,
        agent=kw.get("agent"), agent_params=None, params=None, graders=(), budget=None,
        repeats=repeats)  # content_hash: over the test file, fixture and config root


def parametrize(metafunc) -> None:
    """pytest_generate_tests for a Python arm: one item per profile set x repeat."""
    definition = metafunc.definition
    task = task_of(definition)
    worker = worker_of(metafunc.config)
    for done in worker.context.resumed.values():  # R3, as for a task.yaml
        if done.get("task_id") == task.id and done.get("task_hash") not in (None, task.content_hash):
            _fail(task.id, f"changed since {worker.settings.store} was written (the test file, "
                           f"fixture or config root differs); run without --resume to start a "
                           f"new store")
    arms = arms_of(task, worker.settings.profile_sets, worker.settings.repeats)
    metafunc.parametrize("jaato_arm", arms, ids=[arm_param_id(a) for a in arms], indirect=True)
    # An arm --resume will deselect never needs the daemon.
    if any(a.id not in worker.context.done for a in arms) and wants_own_daemon(definition):
        worker.start_daemon_early()
