"""What a run that has arms loads: the hook table's side for task.yaml files and
`@pytest.mark.jaato` tests.

plugin.py imports this module once, at the first task.yaml or `jaato` marker it sees (a
run with neither never loads it); it and the modules below it import what they use at the
top: pydantic and the task model (collect.py, python_arms.py), and the worker, which
registers itself as a plugin at the first arm collected (`Worker.of`).
"""
from __future__ import annotations

from pathlib import Path

from .collect import TaskFile
from .python_arms import (MarkerErrorNode, check_takes_arm, collected, first_samples,
                          parametrize)

__all__ = ["collected", "first_samples", "marker_error", "parametrize_arm", "task_file"]


def task_file(parent, path: Path) -> TaskFile:
    return TaskFile.from_parent(parent, path=path)


def parametrize_arm(metafunc) -> None:
    """A `@pytest.mark.jaato` test: checked to take `jaato_arm`, then one item per arm."""
    check_takes_arm(metafunc)
    parametrize(metafunc)


def marker_error(collector, name: str, message: str) -> MarkerErrorNode:
    """A marker mistake: that test's collection error; the module's other tests still collect."""
    return MarkerErrorNode.from_parent(collector, name=name, message=message)
