"""The JSONL result store: one record per arm, appended and flushed as each arm ends.

One writer per store path at a time (an exclusive lock beside the store, released by
the kernel if the run dies), checked before the first arm; the previous store is kept
under a fresh name by an atomic, collision-free rename (docs/reports.md, "The store").
Reading a store is stores.py.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from . import snapshots, transcripts
from .record import ArmRecord
from .stores import TAMPERED, is_evidence, task_ids_in

LOCK_SUFFIX = ".lock"


class StoreError(Exception):
    """The store cannot be used; the message is the one line the user sees."""


def previous_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}.previous{path.suffix}")


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{LOCK_SUFFIX}")


def check_writable(path: Path) -> None:
    """Raise StoreError unless a run can create or append to `path`: found before the
    first arm, never as a lost record after it."""
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, expected a JSONL result store (a file)")
    for parent in path.parents:  # the nearest ancestor that exists must be a directory
        if parent.exists():
            if not parent.is_dir():
                raise StoreError(f"{path}: {parent} is not a directory")
            break
    if path.exists():
        if not os.access(path, os.W_OK):
            raise StoreError(f"{path}: not writable")
        if not os.access(path.parent, os.W_OK | os.X_OK):  # rotation renames in the folder
            raise StoreError(f"{path}: its folder {path.parent} is not writable")
    else:
        existing = next(p for p in path.parents if p.exists())
        if not os.access(existing, os.W_OK | os.X_OK):
            raise StoreError(f"{path}: cannot be created: {existing} is not writable")


class Store:
    """The run's one writer.

    `claim()` (before the first arm) takes the lock and checks the path; the file itself
    is opened at the first record, so a run that grades nothing writes nothing.
    The previous store is never appended to or deleted. keep_previous="one": when it
    holds only tasks this run has too (an author iterating), it becomes
    `<name>.previous<ext>`, replaced by each run; when it holds another task, or the
    run's tasks are unknown, it is kept under a timestamped name. "all": always the
    timestamped name (`--jaato-keep-previous`).
    """

    def __init__(self, path: Path, append: bool = False, keep_previous: str = "one",
                 task_ids: set[str] | None = None, fsync: bool = True):
        self.path = Path(path)
        self.fsync = fsync  # off only for generated stores (bench)
        self.append_to_existing = append
        self.keep_previous = keep_previous
        self.task_ids = task_ids  # this run's tasks (for keep_previous="changed")
        self.rotated_to: Path | None = None
        self._fh: IO[str] | None = None
        self._lock_fd: int | None = None
        self.written = 0
        # What the file must hold: the bytes it had when this run claimed it (only kept
        # when appending to it), then exactly the bytes this run wrote (`changed_by_others`).
        self._base: tuple[int, str] = (0, _digest(b""))
        self._ours = hashlib.sha256()
        self._ours_size = 0

    # -- the lock ------------------------------------------------------------------------------
    def claim(self) -> None:
        """Lock the store path for this run and check it can be written. Raises
        StoreError naming the other run (pid, host, start) when one holds it."""
        if self._lock_fd is not None:
            return
        if is_evidence(self.path):
            raise StoreError(f"{self.path} is the evidence of a store written into during its "
                             f"run, kept as it was found: pick another store")
        check_writable(self.path)
        try:  # a path the checks allow and the kernel refuses (/sys, /proc, a full disk)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = _take_lock(lock_path(self.path), self.path)
            if self.append_to_existing:
                self._base = _sealed(self.path)
        except OSError as exc:
            self.close()
            raise StoreError(f"{self.path}: cannot be used as the store: "
                             f"{exc.strerror or exc}") from None

    @property
    def claimed(self) -> bool:
        return self._lock_fd is not None

    def close(self) -> None:
        """Close the file and release the lock: the run is done with the store."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            try:  # removed while still held: whoever locks next opens a fresh file
                os.unlink(lock_path(self.path))
            except OSError:
                pass
            os.close(fd)

    # -- writing -----------------------------------------------------------------------------
    def _open(self) -> None:
        self.claim()
        if not self.append_to_existing:
            self._set_previous_aside()
            self._base = _sealed(self.path)  # empty, unless somebody wrote it meanwhile
        # newline="": the bytes hashed are the bytes written, on every platform
        fh = open(self.path, "a", encoding="utf-8", newline="")
        self._fh = fh
        if fh.tell() and not _ends_with_newline(self.path):
            self._write("\n")  # a cut last line stays cut; ours starts on a fresh line

    def _set_previous_aside(self) -> None:
        """Move a non-empty previous store out of the way, never appending to it silently
        and never letting two names collide (the lock keeps other runs out)."""
        try:
            if not self.path.stat().st_size:
                return
        except FileNotFoundError:
            return
        # The same tasks again: one copy of the last run, replaced each time.
        same_tasks = self.keep_previous == "one" and self.task_ids is not None and not (
            task_ids_in(self.path) - self.task_ids)
        target = previous_path(self.path) if same_tasks else free_name(self.path)
        os.replace(self.path, target)
        self.rotated_to = target
        transcripts.follow(self.path, target)
        snapshots.follow(self.path, target)

    def append(self, record: ArmRecord) -> None:
        if self._fh is None:
            self._open()
        self._write(json.dumps(record.to_dict(), default=str) + "\n")
        if self.fsync:
            assert self._fh is not None  # opened above
            os.fsync(self._fh.fileno())  # a killed run keeps every arm it finished
        self.written += 1

    def _write(self, text: str) -> None:
        assert self._fh is not None
        self._fh.write(text)
        self._fh.flush()
        data = text.encode("utf-8")
        self._ours.update(data)
        self._ours_size += len(data)

    def set_aside_forgery(self, kept: list[ArmRecord], own: list[ArmRecord]) -> Path:
        """The file holds what this run did not write: it goes aside, untouched, as evidence
        (`NAME.tampered-STAMP.jsonl`, which no store command takes as a store), and the store
        is written afresh with what the run holds: what the file held when the run claimed it
        (its bytes, when they are intact; else the records the run read then, `kept`), then
        the run's own records. Returns the evidence's path."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        evidence = free_name(self.path, TAMPERED)
        os.replace(self.path, evidence)
        base_size, base_digest = self._base
        with open(evidence, "rb") as fh:  # what it held before the run, when still intact
            base = None
            if _digest_of(fh, base_size) == base_digest:
                fh.seek(0)
                base = fh.read(base_size)
        lines = [json.dumps(r.to_dict(), default=str)
                 for r in ([] if base is not None else kept) + list(own)]
        if base and not base.endswith(b"\n"):
            base += b"\n"
        data = (base or b"") + "".join(line + "\n" for line in lines).encode("utf-8")
        fresh = self.path.with_name(f".{self.path.name}.fresh")
        with open(fresh, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(fresh, self.path)
        self._base, self._ours = (0, _digest(b"")), hashlib.sha256(data)
        self._ours_size, self.append_to_existing = len(data), False
        return evidence

    def changed_by_others(self) -> str | None:
        """What in the file is not what this run found and wrote, or None."""
        with self.read_back() as (changed, _):
            return changed

    @contextmanager
    def read_back(self) -> Iterator[tuple[str | None, Path | None]]:
        """The file checked and held open while the run reads it back: (what in it is not
        what this run found and wrote, or None; a path to that very file).

        Anything the run started can find the store (an agent's tools run as the same
        user): a record appended or edited by somebody else would otherwise count in the
        pivot and the documents built from the file (docs/security.md). The path given is
        the open file's own (/proc/self/fd), so a file renamed over the store's path after
        the check is never the one read; elsewhere it is the store's path.
        """
        # What a run holds is checked: what it wrote, and what it found when it claimed the
        # store to append to it. A run that never claimed it (nothing left to run) found
        # nothing and wrote nothing: there is nothing to hold the file to.
        checked = bool(self.written or (self.append_to_existing and self.claimed))
        try:
            fh = open(self.path, "rb")
        except OSError as exc:
            gone = isinstance(exc, FileNotFoundError) and not self.written
            yield (None if gone or not checked else
                   f"the store {self.path} cannot be read back: {exc}"), None
            return
        with fh:
            changed = self._differs(fh) if checked else None
            own = Path(f"/proc/self/fd/{fh.fileno()}")
            yield changed, own if own.parent.is_dir() else self.path

    def _differs(self, fh) -> str | None:
        base_size, base_digest = self._base
        before = _digest_of(fh, base_size)
        ours = _digest_of(fh, self._ours_size)
        extra = len(fh.read(1))
        if before != base_digest:
            return (f"the {base_size} bytes {self.path} held before this run were changed "
                    f"while it ran")
        if ours != self._ours.hexdigest() or extra:
            return (f"{self.path} does not hold exactly the {self.written} record(s) this "
                    f"run wrote: somebody else wrote into it while the run went on")
        return None


def free_name(path: Path, what: str = "") -> Path:
    """`NAME.[what-]STAMP[-n]EXT`, reserved (O_EXCL never takes one another copy holds)."""
    stamp = f"{what}-" * bool(what) + time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        suffix = f"{stamp}-{n}" if n else stamp
        target = path.with_name(f"{path.stem}.{suffix}{path.suffix}")
        try:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            continue
        return target
    raise StoreError(f"{path}: no free name to keep the previous store under")


def _take_lock(lock: Path, store: Path) -> int:
    for _ in range(50):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                raise StoreError(f"{store}: cannot lock {lock}: {exc.strerror}") from None
            raise StoreError(f"{store}: in use by another run ({holder}); wait for it to end "
                             f"or choose another --jaato-out") from None
        try:  # the holder we waited on may have removed the file: lock the one on disk
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "started": time.time()}).encode())
        return fd
    raise StoreError(f"{store}: cannot lock {lock}: it keeps being replaced")


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info["started"])))
        return f"pid {int(info['pid'])} on {str(info['host'])[:80]}, started {started}"
    except (ValueError, KeyError, TypeError, OSError, OverflowError):
        return "holder unknown"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest_of(fh, size: int) -> str:
    """The digest of the next `size` bytes of `fh` (fewer when the file ends first)."""
    h = hashlib.sha256()
    while size > 0:
        chunk = fh.read(min(size, 1 << 20))
        if not chunk:
            h.update(b"\0short")  # a file cut short never matches
            break
        h.update(chunk)
        size -= len(chunk)
    return h.hexdigest()


def _sealed(path: Path) -> tuple[int, str]:
    """The file's size and digest now ((0, empty) when there is none)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            return size, _digest_of(fh, size)
    except FileNotFoundError:
        return 0, _digest(b"")


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"
