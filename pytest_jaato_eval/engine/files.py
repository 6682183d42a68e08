"""Files the agent could have touched: read bounded, regular files only, never out; and the
harness's own files, never written through anything planted at their paths.

A workspace is the agent's: any file in it may be a FIFO (an open() that never
returns), a device, a link to somewhere else, or gigabytes. The engine reads
such files only through here, and opens its own files (a daemon's log and pid file)
only through `open_own` and `write_own`.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterator, Sequence

import yaml

LOG_CAP = 16 * 1024 * 1024  # a session log or record larger than this is read in part


def yaml_loader():
    """The safe YAML loader every reader of task and profile files uses."""
    # libyaml's parser when PyYAML was built with it: the same documents, ~7x faster.
    return yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


def load_yaml(text: str):
    """A YAML document as `yaml.safe_load` reads it (jaato-eval's and jaato's reader), through
    libyaml's parser where it can: a few documents libyaml refuses (`{agent:, prompt: p}`)
    the Python parser takes, and they are read again by it."""
    loader = yaml_loader()
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        if loader is yaml.SafeLoader:
            raise
        return yaml.load(text, Loader=yaml.SafeLoader)


def inside(path: Path, root: Path) -> bool:
    """True when `path`, a path below `root`, is `root` or below it with every link resolved
    (`resolve`: the agent shapes what lies below `root`). False for a path not written
    below `root`."""
    given, top = os.fspath(path), os.fspath(root).rstrip(os.sep) or os.sep
    if given != top and not given.startswith(top.rstrip(os.sep) + os.sep):
        return False
    try:
        return resolve(top, given[len(top):])[0] == IN
    except (OSError, ValueError):
        return False


def read_bounded(path: Path, limit: int | None = None, root: Path | None = None) -> bytes | None:
    """The first `limit` bytes (LOG_CAP unless given) of a regular file, or None.

    None for anything else: missing, a FIFO, a socket, a device, a directory, a
    final link, or (with `root`) a path whose links lead outside `root`. Opened
    non-blocking, so a FIFO never makes the open wait for a writer.
    """
    if root is not None and not inside(path, root):
        return None
    limit = LOG_CAP if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    return _read_regular(fd, limit)


def _read_regular(fd: int, limit: int) -> bytes | None:
    """The first `limit` bytes of the file open on `fd` (closed here) when it is a regular
    file; None otherwise."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, True)
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_below(at: int, rel: str, limit: int) -> bytes | None:
    """The first `limit` bytes of the regular file `rel` below the folder held by `at`, each
    name opened from its folder's descriptor, never through a link (so never by a path a
    process could have changed since `at` was opened); None for anything else, and for a
    path with a link on the way (read it by its resolved path instead)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    fd = os.open(".", _DIR, dir_fd=at)
    try:
        for name in parts[:-1]:
            inner = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        given = os.open(parts[-1], os.O_RDONLY | _OWN, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _read_regular(given, limit)


def read_text_bounded(path: Path, limit: int | None = None, root: Path | None = None) -> str | None:
    raw = read_bounded(path, limit, root)
    return None if raw is None else raw.decode("utf-8", errors="replace")


_OWN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_own(path: Path, mode: int = 0o600) -> int:
    """A descriptor on the harness's own file at `path`, for appending.

    Never through a link, never a FIFO or a device: what is found there is opened without
    following a link and without waiting for a writer, kept only when it is a regular file
    of this user's; anything else is removed and the file made anew, exclusively (O_EXCL),
    so nothing can be slipped in between.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | _OWN)
    except FileNotFoundError:
        pass
    except OSError:  # a link (ELOOP), a FIFO without a reader (ENXIO), a folder...
        remove(path)
    else:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
            os.set_blocking(fd, True)
            return fd
        os.close(fd)
        remove(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | _OWN, mode)
    os.set_blocking(fd, True)
    return fd


def write_own(path: Path, text: str, mode: int = 0o600) -> None:
    """Write the harness's own small file at `path` whole: made anew beside it, exclusively,
    then renamed over whatever is there (a rename replaces a link, never follows it)."""
    part = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.part")
    remove(part)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OWN, mode)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    try:
        os.replace(part, path)
    except OSError:  # a folder there
        remove(path)
        os.replace(part, path)


def read_tail(path: Path, limit: int = 64 * 1024) -> str | None:
    """The last `limit` bytes of a regular file, as text; None for anything else (missing,
    a FIFO, a link, a device), which is never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | _OWN)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        os.lseek(fd, max(0, st.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    """Whatever is at `path` gone, as far as it can be: a file, a link (never followed), a
    FIFO, or a folder and all in it. Never raises: what stays makes the next O_EXCL fail."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except (OSError, RecursionError):
        pass


# -- a tree the agent shaped, walked and resolved without a path string the kernel would refuse
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LOOKUP = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LINKS = 40  # links followed in one lookup: the kernel's own bound (ELOOP past it)


class Entry:
    """One entry of a walked tree: its names below the root, its lstat, and its folder's
    descriptor (open only until the walk goes on)."""

    __slots__ = ("parts", "st", "folder")

    def __init__(self, parts: tuple[str, ...], st: os.stat_result, folder: int):
        self.parts, self.st, self.folder = parts, st, folder

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def rel(self) -> str:
        return os.path.join(*self.parts)


def walk_tree(root: Path | str | int, open_up: bool = False,
              unlisted: Callable[[str, OSError], None] | None = None) -> Iterator[Entry]:
    """Every entry below `root`, depth first, each folder just before what it holds, in name
    order; never into a link. Any depth and any path length with one descriptor open: each
    step is relative to its folder's descriptor (openat), and the walk goes back up by `..`
    of a folder it entered itself, never by a path. A folder that cannot be listed is
    yielded and not entered, and `unlisted` (when given) is told its path and why, so that
    no caller takes "not walked" for "nothing there"; with `open_up`, a folder its owner
    closed (chmod 000) is opened to its owner first. `root` a descriptor: the folder it holds, whatever its path names
    now (the descriptor is the caller's, left open)."""
    fd = reopen(root, _DIR)
    pending: list[list[str]] = []  # per level entered: the names still to yield, reversed
    try:
        pending.append(sorted(_names(fd), reverse=True))
        parts: list[str] = []
        while pending:
            if not pending[-1]:
                pending.pop()
                if pending:
                    up = os.open("..", _DIR, dir_fd=fd)
                    os.close(fd)
                    fd = up
                    parts.pop()
                continue
            name = pending[-1].pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue  # gone since its folder was listed
            here = (*parts, name)
            yield Entry(here, st, fd)
            if not stat.S_ISDIR(st.st_mode):
                continue
            try:
                inner = _enter(fd, name, st, open_up)
                try:
                    names = sorted(_names(inner), reverse=True)
                except OSError:
                    os.close(inner)
                    raise
            except FileNotFoundError:  # gone since its folder was listed
                continue
            except OSError as exc:
                if unlisted is not None:
                    unlisted(os.path.join(*here), exc)
                continue
            os.close(fd)
            fd = inner
            parts.append(name)
            pending.append(names)
    finally:
        os.close(fd)


def reopen(root: Path | str | int, flags: int = _DIR) -> int:
    """A descriptor of this walk's own on `root`: a path opened (never through a link at its
    end), or the folder a caller's descriptor holds opened again through it (never by a
    name, so a folder put at its path since is not the one opened)."""
    if isinstance(root, int):
        return os.open(".", flags, dir_fd=root)
    return os.open(root, flags)


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as listing:
        return [entry.name for entry in listing]


def _enter(fd: int, name: str, st: os.stat_result, open_up: bool) -> int:
    """A descriptor of the folder `name`, opened to its owner first when `open_up` and it is
    closed to its owner; raises OSError when it cannot be opened."""
    try:
        return os.open(name, _DIR, dir_fd=fd)
    except PermissionError:
        if not open_up:
            raise
        try:
            os.chmod(name, stat.S_IMODE(st.st_mode) | stat.S_IRWXU, dir_fd=fd,
                     follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass
        return os.open(name, _DIR, dir_fd=fd)


IN, LENT, OUT = "in", "lent", "out"


def resolve(root: Path | str, rel: str, lent: Sequence[Path | str] = (),
            at: int | None = None) -> tuple[str, int | None]:
    """Where `rel`, a path below `root`, leads once every link on the way is followed, as
    (IN / LENT / OUT, the mode of what is there or None for nothing).

    Resolved one name at a time, each looked up relative to its folder's descriptor and each
    link read and followed here, as the kernel would follow it: a tree deeper than PATH_MAX
    cannot make this give up where the kernel goes on (os.path.realpath does, then takes a
    link for a folder). IN: it ends in `root`; LENT: it ends in one of `lent` (read-only
    folders every reader is lent); OUT otherwise, and as soon as the lookup goes anywhere
    but `root`, `lent` and the folders on the way to them (so never through /proc's links,
    whose target is not their text), or follows more than MAX_LINKS links. `at`: a
    descriptor on the folder `root` named when it was made, where the lookup starts (not
    whatever stands at `root`'s path now)."""
    top = _parts(os.path.realpath(root))  # the harness's own path: realpath is safe on it
    keep = [top, *(_parts(os.path.realpath(p)) for p in lent)]
    todo = [p for p in reversed(rel.split("/")) if p]
    where: list[str] = list(top)
    fd = reopen(root if at is None else at, _LOOKUP)
    links = 0
    try:
        while todo:
            name = todo.pop()
            if name == ".":
                continue
            if name == "..":
                if where:
                    where.pop()
                    fd = _step(fd, "..")
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:  # nothing there (or nothing this process may look at)
                return _verdict(where + [name], keep), None
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_LINKS:
                    return OUT, None
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    where = []
                    fd = _step(fd, "/")
                todo.extend(p for p in reversed(target.split("/")) if p)
                continue
            where.append(name)
            if not _on_the_way(where, keep):
                return OUT, st.st_mode
            if stat.S_ISDIR(st.st_mode):
                fd = _step(fd, name)
            elif todo:
                return OUT, None  # a file taken for a folder: the lookup fails (ENOTDIR)
            else:
                return _verdict(where, keep), st.st_mode
        return _verdict(where, keep), os.fstat(fd).st_mode
    finally:
        os.close(fd)


def _step(fd: int, name: str) -> int:
    """The folder `name` (a folder just looked at, `..` or `/`) from `fd`, which is closed."""
    try:
        return os.open(name, _LOOKUP, dir_fd=fd)
    finally:
        os.close(fd)


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def _on_the_way(where: list[str], keep: list[list[str]]) -> bool:
    """`where` is below one of `keep`, or one of the folders on the way to one."""
    n = len(where)
    return any(k[:n] == where or where[:len(k)] == k for k in keep)


def _verdict(where: list[str], keep: list[list[str]]) -> str:
    if where[:len(keep[0])] == keep[0]:
        return IN
    return LENT if any(where[:len(k)] == k for k in keep[1:]) else OUT
