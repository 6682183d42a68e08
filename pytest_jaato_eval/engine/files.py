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
    """True when `path`, every link resolved, is `root` or below it."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False


def read_bounded(path: Path, limit: int = LOG_CAP, root: Path | None = None) -> bytes | None:
    """The first `limit` bytes of a regular file, or None.

    None for anything else: missing, a FIFO, a socket, a device, a directory, a
    final link, or (with `root`) a path whose links lead outside `root`. Opened
    non-blocking, so a FIFO never makes the open wait for a writer.
    """
    if root is not None and not inside(path, root):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
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


def read_text_bounded(path: Path, limit: int = LOG_CAP, root: Path | None = None) -> str | None:
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
