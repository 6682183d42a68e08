"""Reading files the agent could have written: bounded, regular files only, never out.

A workspace is the agent's: any file in it may be a FIFO (an open() that never
returns), a device, a link to somewhere else, or gigabytes. The engine reads
such files only through here.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

LOG_CAP = 16 * 1024 * 1024  # a session log or record larger than this is read in part


def yaml_loader():
    """The safe YAML loader every reader of task and profile files uses."""
    import yaml  # tens of ms, which every pytest run would pay: only once a task is read
    # libyaml's parser when PyYAML was built with it: the same documents, ~7x faster.
    return yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


def load_yaml(text: str):
    """A YAML document as `yaml.safe_load` reads it (jaato-eval's and jaato's reader), through
    libyaml's parser where it can: a few documents libyaml refuses (`{agent:, prompt: p}`)
    the Python parser takes, and they are read again by it."""
    import yaml
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
