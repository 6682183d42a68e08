"""A task folder that holds nothing but its task: collected without a folder node.

pytest gives every folder it walks a `Dir` node of its own: a collect report, a
conftest probe, the ignore hooks over each entry. For a tree of task folders that is
as much work again as the tasks' arms (bench/RESULTS.md). A task folder whose only
entries are its task.yaml and the fixture and config root the fence keeps pytest out
of has nothing else to collect, so pytest's `Dir` is skipped: the folder's task.yaml
becomes a child of the folder above. Node ids do not change (they are paths), and
neither do the hooks a task.yaml goes through (`pytest_ignore_collect`,
`pytest_collect_file`).

Anything else in the folder (a conftest.py, an `__init__.py`, a test file, a README a
plugin may collect, a link) and the folder is left to pytest's own `Dir`, as is a
folder named on the command line or above one named there (pytest finds those by
their path).
"""
from __future__ import annotations

import os
from pathlib import Path

from .fence import DEFAULT_ROOTS, MANIFEST, fenced_names


def collect_task_folder(path: Path, parent):
    """pytest_collect_directory for a folder holding a task.yaml: its task's collector,
    or None to leave the folder to pytest."""
    if parent.session.isinitpath(path, with_parents=True):
        return None
    try:
        entries = os.listdir(path)
    except (OSError, ValueError):
        return None
    others = [name for name in entries if name != MANIFEST and name not in DEFAULT_ROOTS]
    if others:  # only then the manifest's own roots are asked for (a parse)
        fenced = fenced_names(path)
        if any(name not in fenced for name in others):
            return None
    if not _scope_conftests(path, parent.config):
        return None
    manifest = path / MANIFEST
    ihook = parent.ihook  # no conftest.py in the folder: the same hooks as its own node's
    if ihook.pytest_ignore_collect(collection_path=manifest, config=parent.config):
        return None
    found = ihook.pytest_collect_file(file_path=manifest, parent=parent)
    return found[0] if len(found) == 1 else None


def _scope_conftests(path: Path, config) -> bool:
    """Record the folder's conftest scope (its parents' conftest.py files), as pytest does
    when it collects a folder node: hooks and `collect_ignore` for the task.yaml and its
    arms are looked up by folder. pytest's own call (a private one, see
    docs/architecture.md); False where this pytest does not have it."""
    try:
        config.pluginmanager._loadconftestmodules(
            path, config.getoption("importmode"), rootpath=config.rootpath,
            consider_namespace_packages=config.getini("consider_namespace_packages"))
    except (AttributeError, TypeError):
        return False
    return True
