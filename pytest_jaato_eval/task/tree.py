"""The files a task is made of: listed once when the task is read, hashed when first asked.

The fixture's listing, made when the task is read, refuses what no fixture should hold
— a FIFO, a socket, a device node — by its type from the directory entry or lstat, so
nothing is ever opened to find out, and it stops at MAX_ENTRIES. Symlinks are listed as
links: never followed, in or out of the tree. Every arm copies the fixture, so this is
where a special file must be stopped.

The content hash (what `--resume` compares and every record carries) is computed the
first time it is read: `pytest --co` hashes nothing, a run hashes each task once. The
config root is listed then, by the same rules, and no read can block or fill memory
(regular files only, opened non-blocking, streamed). A config root that cannot be listed
hashes as its reason: the hash is a fingerprint, never a reason to stop an arm.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

# Far above any fixture worth copying per arm; far below `fixture: /`.
MAX_ENTRIES = 100_000
_SKIPPED_NAMES = {".git", "__pycache__", ".DS_Store"}
_CHUNK = 1 << 20
_SPECIAL = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
            (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
    getattr(os, "O_CLOEXEC", 0)


def skipped_in_fixture(name: str) -> bool:
    """W1: what a workspace copy leaves out (and so the listing and the hash)."""
    return name in _SKIPPED_NAMES or name.endswith(".pyc")


class TreeError(Exception):
    """A tree no task may hold; the message names the entry."""


def _kind(entry: os.DirEntry) -> str:
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return "file that cannot be inspected"
    return next((name for test, name in _SPECIAL if test(mode)), "special file")


def list_tree(base: Path, limit: int = MAX_ENTRIES, *,
              refuse_special: bool = True) -> list[tuple[str, str]]:
    """(relative path, "file" | "link" | "special" | "unreadable dir") in the hash's
    order: a folder's files sorted by name, then its folders, depth first. Raises
    TreeError past `limit` entries, and, when `refuse_special` (a fixture), on a special
    file or a link that leaves the tree."""
    out: list[tuple[str, str]] = []
    real_base = os.path.realpath(base)
    seen = 0
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            with os.scandir(os.path.join(base, rel) if rel else base) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            out.append((rel, "unreadable dir"))
            continue
        folders = []
        for entry in entries:
            if skipped_in_fixture(entry.name):
                continue
            seen += 1
            if seen > limit:
                raise TreeError(f"holds more than {limit} files and folders; a fixture is "
                                f"copied for every arm, so point it at the task's own folder")
            path = os.path.join(rel, entry.name) if rel else entry.name
            if entry.is_symlink():
                if refuse_special:
                    _stays_inside(entry.path, path, real_base)
                out.append((path, "link"))
            elif entry.is_dir(follow_symlinks=False):
                folders.append(path)
            elif entry.is_file(follow_symlinks=False):
                out.append((path, "file"))
            elif not refuse_special:
                out.append((path, "special"))
            else:
                shown = os.fsdecode(path).encode("utf-8", "backslashreplace").decode()
                raise TreeError(f"{shown!r} is a {_kind(entry)}: a task's folders may hold "
                                f"only files, folders and symlinks (special files are never "
                                f"opened, copied or hashed)")
        todo.extend(reversed(folders))
    return out


def _stays_inside(link: str, rel: str, real_base: str) -> None:
    """A fixture's link is copied as a link into every arm's workspace: one that leads out
    of the fixture would lead out of the workspace there, which is a trap (an agent's) for
    the graders; so the author's is refused here, where it is the author's to fix."""
    try:
        target = os.readlink(link)
    except OSError:
        return
    shown = os.fsdecode(rel).encode("utf-8", "backslashreplace").decode()
    if os.path.isabs(target):
        raise TreeError(f"{shown!r} is a link to the absolute path {target!r}: in each arm's "
                        f"workspace it would still lead there; expected a relative link that "
                        f"stays inside the fixture")
    real = os.path.realpath(link)
    if real != real_base and not real.startswith(real_base.rstrip(os.sep) + os.sep):
        raise TreeError(f"{shown!r} is a link to {target!r}, which leaves the fixture; "
                        f"expected a relative link that stays inside it (a workspace holds "
                        f"only what the fixture holds)")


class TaskTree:
    """The manifest's bytes, the fixture's listing, and where the config root is."""

    def __init__(self, manifest_bytes: bytes, fixture: Path,
                 fixture_listing: list[tuple[str, str]], config_root: Path):
        self._head = hashlib.sha256(manifest_bytes)
        self._fixture = (fixture, fixture_listing)
        self._config_root = config_root
        self._digest: str | None = None

    @classmethod
    def of(cls, manifest_bytes: bytes, fixture: Path, config_root: Path) -> "TaskTree":
        return cls(manifest_bytes, fixture, list_tree(fixture), config_root)

    def digest(self) -> str:
        """sha256 over the manifest, then each listed entry's path and content (R3)."""
        if self._digest is None:
            h = self._head.copy()
            try:
                config = list_tree(self._config_root, refuse_special=False)
            except TreeError as exc:
                config = []
                h.update(f"<config root: {exc}>".encode("utf-8", "backslashreplace"))
            for base, entries in (self._fixture, (self._config_root, config)):
                for rel, kind in entries:
                    if kind == "unreadable dir":
                        continue
                    h.update(os.fsencode(rel) + b"\0")
                    _feed(h, os.path.join(base, rel), kind)
            self._digest = h.hexdigest()
        return self._digest


def _feed(h, path: str, kind: str) -> None:
    if kind == "special":
        h.update(b"<special file>")
        return
    try:
        if kind == "link":
            h.update(os.fsencode(os.readlink(path)))
            return
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        h.update(b"<unreadable>")
        return
    with os.fdopen(fd, "rb", buffering=0) as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since it was listed
                h.update(b"<not a regular file>")
                return
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        except OSError:
            h.update(b"<unreadable>")


def tree_digest(base: Path, leave_out: frozenset[str] = frozenset()) -> str:
    """sha256 of a folder by the content hash's rules (each listed entry's path, then its
    content; a link's target, never what it points at), without the entries whose path
    relative to `base` is in `leave_out` (a folder left out leaves out all it holds). A
    folder that cannot be listed hashes as its reason."""
    h = hashlib.sha256()
    try:
        entries = list_tree(base, refuse_special=False)
    except TreeError as exc:
        h.update(f"<{exc}>".encode("utf-8", "backslashreplace"))
        return h.hexdigest()
    for rel, kind in entries:
        if kind == "unreadable dir" or _under(os.path.normpath(rel), leave_out):
            continue
        h.update(os.fsencode(rel) + b"\0")
        _feed(h, os.path.join(base, rel), kind)
    return h.hexdigest()


def _under(rel: str, folders: frozenset[str]) -> bool:
    """`rel` is one of `folders` or below one."""
    while rel:
        if rel in folders:
            return True
        rel = os.path.dirname(rel)
    return False


def files_digest(base: Path, names: list[str]) -> str:
    """sha256 of the named files under `base` (paths relative to it), each by name then
    content; a missing one counts as missing."""
    h = hashlib.sha256()
    for rel in sorted(names):
        path = os.path.join(base, rel)
        h.update(os.fsencode(rel) + b"\0")
        if os.path.islink(path):
            _feed(h, path, "link")
        elif os.path.isfile(path):
            _feed(h, path, "file")
        else:
            h.update(b"<missing>")
    return h.hexdigest()
