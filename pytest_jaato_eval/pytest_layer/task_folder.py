"""A task folder that holds nothing but its task: collected without a folder node.

pytest gives every folder it walks a `Dir` node of its own: a collect report, a
conftest probe, the ignore hooks over each entry. For a tree of task folders that is
as much work again as the tasks' arms (bench/JOURNAL.md). A task folder whose only
entries are its task.yaml and the fixture and config root the fence keeps pytest out
of has nothing else to collect, so pytest's `Dir` is skipped: the folder's task.yaml
becomes a child of the folder above. Node ids do not change (they are paths), and the
task.yaml goes through the same hooks (`pytest_ignore_collect`, `pytest_collect_file`).

The folder is left to pytest's own `Dir` whenever skipping it could change what is
collected: anything else in it (a conftest.py, an `__init__.py`, a test file, a README
a plugin may collect, a link); a folder named on the command line or above one named
there (pytest finds those by their path); a plugin or conftest.py other than pytest's
own and this one that collects files (it might want the task.yaml too); one that
answers `pytest_ignore_collect` and does not ignore the fixture or config root. A
conftest.py or plugin that makes folder nodes (`pytest_collect_directory`) is asked
before this hook.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ..engine.files import read_bounded
from ..task.load import parse_for_collection
from .fence import DEFAULT_ROOTS, MANIFEST, MANIFEST_CAP, fenced_names


class EmptyTaskFolder(pytest.Directory):
    """A task folder whose task.yaml is ignored (`--ignore`, `collect_ignore`): nothing
    in it is collected, as with pytest's own `Dir`, without asking its hooks twice."""

    def collect(self):
        return []


def collect_task_folder(path: Path, parent):
    """pytest_collect_directory for a folder holding a task.yaml: its task's collector,
    or None to leave the folder to pytest."""
    if parent.session.isinitpath(path, with_parents=True):
        return None
    try:
        entries = os.listdir(path)
    except (OSError, ValueError):
        return None
    roots = [name for name in entries if name != MANIFEST]
    if any(name not in DEFAULT_ROOTS for name in roots):  # only then is the manifest parsed
        fenced = fenced_names(path, declared_roots)
        if any(name not in fenced for name in roots):
            return None
    config, ihook = parent.config, parent.ihook  # no conftest.py in the folder: its own hooks
    if _others_implement(ihook.pytest_collect_file) or not _scope_conftests(path, config):
        return None
    if _others_implement(ihook.pytest_ignore_collect) and not all(
            ihook.pytest_ignore_collect(collection_path=path / name, config=config)
            for name in roots):
        return None  # someone wants a fixture or config root collected: pytest's Dir does it
    manifest = path / MANIFEST
    if ihook.pytest_ignore_collect(collection_path=manifest, config=config):
        return EmptyTaskFolder.from_parent(parent, path=path)
    found = ihook.pytest_collect_file(file_path=manifest, parent=parent)
    return found[0] if len(found) == 1 else None  # another collector too: a --doctest-glob


def _others_implement(hook) -> bool:
    """Whether a plugin or conftest.py other than pytest's own modules and this plugin
    implements the hook (cheap: the implementations' modules, no call)."""
    ours = sys.modules[__package__.rpartition(".")[0] + ".plugin"]
    for impl in hook.get_hookimpls():
        plugin = impl.plugin
        module = getattr(plugin, "__name__", None) if isinstance(plugin, type(sys)) else \
            type(plugin).__module__
        if plugin is not ours and not (module or "").startswith("_pytest."):
            return True
    return False


def _scope_conftests(path: Path, config) -> bool:
    """Record the folder's conftest scope (its parents' conftest.py files), as pytest does
    when it collects a folder node: hooks and `collect_ignore` for the task.yaml and its
    arms are looked up by folder. pytest's own call (a private one, see
    docs/architecture.md); False where this pytest does not have it as we know it.

    The folder holds no conftest.py (the fast path's condition), so its scope is its
    parent's: where pytest has already recorded the parent's, it is shared, which spares
    looking for a conftest.py in every folder up to the root again, once per task."""
    pm = config.pluginmanager
    known = getattr(pm, "_dirpath2confmods", None)
    if isinstance(known, dict) and path.parent in known:
        known[path] = list(known[path.parent])  # its own list: pytest appends to each
        return True
    try:
        pm._loadconftestmodules(
            path, config.getoption("importmode"), rootpath=config.rootpath,
            consider_namespace_packages=config.getini("consider_namespace_packages"))
    except (AttributeError, TypeError, ValueError):  # pytest 8.0: no such ini key
        return False
    return True


def declared_roots(task_dir: Path) -> list[str]:
    """The manifest's environment.fixture / config_root, read defensively (never raises):
    what fence.py keeps pytest out of, besides the default roots."""
    raw = read_bounded(task_dir / MANIFEST, MANIFEST_CAP)
    if raw is None:
        return []
    try:
        data = parse_for_collection(raw)
    except Exception:  # noqa: BLE001 - a bad manifest is reported by its collector, not here
        return []
    env = data.get("environment") if isinstance(data, dict) else None
    if not isinstance(env, dict):
        return []
    return [v for v in (env.get("fixture"), env.get("config_root")) if isinstance(v, str) and v]
