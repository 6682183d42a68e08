"""What pytest must never collect: a task's fixture and config root.

A fixture is the agent's starting repository: it routinely holds its own tests, a
conftest.py (code pytest would import at collection), even a task.yaml of its own,
links to anywhere (`/`), FIFOs. A config root holds graders and profiles. Neither is
part of the suite being run. So, in a directory holding a task.yaml, the fixture and
config root the manifest declares (and the default `fixture/` and `.jaato/`) are
never entered, and no directory link leading into them (or out of the task, to `/`)
is followed. Ignoring the directory also keeps pytest from importing its conftest.py:
pytest loads a directory's conftest only when it collects that directory.

This module loads in every pytest run, so it reads no manifest itself: a task folder's
declared roots come from `declared_roots` (task_folder.py, loaded once a task is found),
which the caller hands in.
"""
from __future__ import annotations

import errno
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Callable

MANIFEST = "task.yaml"
DEFAULT_ROOTS = ("fixture", ".jaato")
MANIFEST_CAP = 1024 * 1024

# A task folder -> the fixture and config root its manifest declares (never raises).
DeclaredRoots = Callable[[Path], list[str]]
_ANCESTORS = 64  # how far up a link target is searched for the task that owns it


def ignored(path: Path, declared_roots: DeclaredRoots) -> bool:
    """True when collection must not enter `path` (a directory, or a file inside one).

    Asked by pytest for every path it meets, in every run: plain `os` calls on strings,
    one stat of the parent's task.yaml and one lstat of the path in the common case.
    """
    name = os.fspath(path)
    parent = os.path.dirname(name)
    stamp = _manifest_stamp(parent)
    if stamp is None:
        return _link_into_fenced(Path(name), declared_roots) if _is_dir_link(name) else False
    if _is_dir_link(name):
        return True  # a task folder's own links are never followed (`fixture/../x -> /`)
    base = os.path.basename(name)
    if base == MANIFEST:
        return False  # the task itself (a root is a folder, never its manifest): no parse
    return base in _fenced_names(parent, stamp, declared_roots)


# What pathlib's is_symlink()/is_dir()/is_file() read as "no": the path is simply not there.
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def _is_dir_link(path: str) -> bool:
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return False
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as exc:
        # A link that cannot even be resolved is not walked either.
        return exc.errno not in _ABSENT
    except ValueError:
        return False


def _manifest_stamp(directory: str) -> int | None:
    """The mtime of the directory's task.yaml when it is a regular file (a task folder)."""
    try:
        st = os.stat(os.path.join(directory, MANIFEST))
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns if stat.S_ISREG(st.st_mode) else None


def is_task_dir(directory: Path) -> bool:
    """Whether the folder holds a task.yaml (one stat)."""
    return _manifest_stamp(os.fspath(directory)) is not None


def fenced_names(task_dir: Path, declared_roots: DeclaredRoots) -> frozenset[str]:
    """Names of the task folder's children never collected: declared and default roots."""
    stamp = _manifest_stamp(os.fspath(task_dir))
    if stamp is None:
        return frozenset(DEFAULT_ROOTS)
    return _fenced_names(os.fspath(task_dir), stamp, declared_roots)


@lru_cache(maxsize=256)
def _fenced_names(task_dir: str, _stamp: int, declared_roots: DeclaredRoots) -> frozenset[str]:
    names = set(DEFAULT_ROOTS)
    for declared in declared_roots(Path(task_dir)):
        first = Path(declared).parts[:1]
        if first and not Path(declared).is_absolute() and first[0] not in (".", ".."):
            names.add(first[0])  # `env/fixture` fences `env`: its top folder is the task's
    return frozenset(names)


def _link_into_fenced(link: Path, declared_roots: DeclaredRoots) -> bool:
    """A directory link anywhere that leads into some task's fixture or config root."""
    try:
        target = Path(os.path.realpath(link))
    except (OSError, ValueError):
        return True
    if target == Path(target.anchor):
        return True  # a link to `/` is never walked
    child, up = target, target.parent
    for _ in range(_ANCESTORS):
        if is_task_dir(up) and child.name in fenced_names(up, declared_roots):
            return True
        if up == up.parent:
            break
        child, up = up, up.parent
    return False
