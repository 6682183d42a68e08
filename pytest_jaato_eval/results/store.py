"""The JSONL result store: one record per arm, appended and flushed as each arm ends.

One writer per store path at a time (an exclusive lock beside the store, released by
the kernel if the run dies), checked before the first arm; the previous store is kept
under a fresh name by an atomic, collision-free rename (docs/reports.md, "The store").
One reader, `scan`, streams any store, ours or jaato-eval 0.3.4's, line by line.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from .record import ArmRecord, RecordError

LOCK_SUFFIX = ".lock"


class StoreError(Exception):
    """The store cannot be used; the message is the one line the user sees."""


def previous_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}.previous{path.suffix}")


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{LOCK_SUFFIX}")


def check_output(option: str, target: Path | str | None, *protected: tuple[str, Path | None]
                 ) -> str | None:
    """A one-line refusal when an output file (`--html`, `--junitxml`, ...) names the
    store or an input; None when it is fine. Paths compare after resolving links."""
    if not target:
        return None
    out = Path(target).expanduser().resolve()
    for what, path in protected:
        if path is not None and Path(path).expanduser().resolve() == out:
            return f"{option} {target}: is the {what}; writing it would destroy it"
    return None


def refuse_outputs(config, store: Path, html: Path | None, pdf: Path | None) -> str | None:
    """A run's outputs must not overwrite its store: the first refusal, as one line."""
    outputs = (("--jaato-html", html), ("--jaato-pdf", pdf),
               ("--junitxml", getattr(config.option, "xmlpath", None)),
               ("--html", getattr(config.option, "htmlpath", None)))
    for option, target in outputs:
        refusal = check_output(option, target, ("result store (--jaato-out)", store))
        if refusal:
            return refusal
    if html and pdf and Path(html).resolve() == Path(pdf).resolve():
        return f"--jaato-pdf {pdf}: is also the --jaato-html output"
    return None


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

    # -- the lock ------------------------------------------------------------------------------
    def claim(self) -> None:
        """Lock the store path for this run and check it can be written. Raises
        StoreError naming the other run (pid, host, start) when one holds it."""
        if self._lock_fd is not None:
            return
        check_writable(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _take_lock(lock_path(self.path), self.path)

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
        fh = open(self.path, "a", encoding="utf-8")
        if fh.tell() and not _ends_with_newline(self.path):
            fh.write("\n")  # a cut last line stays cut; ours starts on a fresh line
        self._fh = fh

    def _set_previous_aside(self) -> None:
        """Move a non-empty previous store out of the way, never appending to it silently
        and never letting two names collide (the lock keeps other runs out)."""
        try:
            if not self.path.stat().st_size:
                return
        except FileNotFoundError:
            return
        if self.keep_previous == "one" and self.task_ids is not None and not (
                task_ids_in(self.path) - self.task_ids):
            # The same tasks again: one copy of the last run, replaced each time.
            target = previous_path(self.path)
            os.replace(self.path, target)
            self.rotated_to = target
            return
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1000):
            suffix = f"{stamp}-{n}" if n else stamp
            target = self.path.with_name(f"{self.path.stem}.{suffix}{self.path.suffix}")
            try:  # reserve the name: O_EXCL never takes one another copy holds
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                continue
            os.replace(self.path, target)
            self.rotated_to = target
            return
        raise StoreError(f"{self.path}: no free name to keep the previous store under")

    def append(self, record: ArmRecord | dict) -> None:
        if self._fh is None:
            self._open()
        data = record.to_dict() if isinstance(record, ArmRecord) else record
        self._fh.write(json.dumps(data, default=str) + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())  # a killed run keeps every arm it finished
        self.written += 1



def _take_lock(lock: Path, store: Path) -> int:
    import fcntl
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


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


# -- reading -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Line:
    """One non-blank line of a store: its record, or why it has none."""
    number: int
    offset: int
    record: ArmRecord | None
    problem: str | None = None      # "not JSON", "not a result record (...)"
    partial: bool = False           # a cut last line: a run stopped mid-write
    problems: list[str] | None = None  # the record's own (only with check=True)


def _json_loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except UnicodeDecodeError:  # invalid UTF-8 in some text: read it, shown replaced
        return json.loads(raw.decode("utf-8", errors="replace"))


def fields_loader(names: tuple[str, ...] | None = None) -> Callable[[bytes], Any]:
    """A loader of one store line, as `json.loads(raw)` reads it: the whole line, or with
    `names`, only those top-level keys ({key: value}, absent ones None).

    msgspec parses about three times faster than `json`, and with `names` skips the other
    keys (a failed verdict's evidence is most of a line) while still checking the whole
    line is JSON: about five times faster. A line it does not take (NaN, a number out of
    range, a lone surrogate, invalid UTF-8...) is read by `json`, so every line means what
    `json.loads` says it means.
    """
    try:
        import msgspec
    except ImportError:  # a minimal install: everything is read by json
        return _json_loads
    decode: Callable[[bytes], Any]
    if names is None:
        decode = msgspec.json.decode
    else:
        head = msgspec.defstruct("StoreLineHead", [(name, Any, None) for name in names])
        decode_head, asdict = msgspec.json.Decoder(head).decode, msgspec.structs.asdict

        def decode_keys(raw: bytes) -> Any:
            return asdict(decode_head(raw))
        decode = decode_keys

    def load(raw: bytes) -> Any:
        try:
            return decode(raw)
        except msgspec.MsgspecError:
            return _json_loads(raw)
    return load


_loads = fields_loader()


def scan(path: Path | str, check: bool = False) -> Iterator[Line]:
    """Every non-blank line of a store, in order, with its record; one pass, nothing
    kept. A line that is not a record says why; a cut last line is marked partial.
    Raises OSError when the file cannot be read."""
    with open(path, "rb") as fh:
        offset = 0
        number = 0
        for raw in fh:
            number += 1
            start, offset = offset, offset + len(raw)
            if raw.isspace():
                continue
            try:
                data = _loads(raw)
            except ValueError:
                yield Line(number, start, None, "not JSON", partial=not raw.endswith(b"\n"))
                continue
            problems: list[str] | None = [] if check else None
            try:
                record = ArmRecord.from_dict(data, problems)
            except RecordError as exc:
                yield Line(number, start, None, str(exc))
                continue
            yield Line(number, start, record, problems=problems)


def read_at(path: Path | str, offsets) -> Iterator[ArmRecord]:
    """The records starting at these byte offsets (from `scan`), in the order given."""
    with open(path, "rb") as fh:
        for offset in offsets:
            fh.seek(offset)
            yield ArmRecord.from_dict(_loads(fh.readline()))


def read_records(path: Path) -> Iterator[ArmRecord]:
    """Every complete record; a partial or unreadable line is skipped."""
    return (line.record for line in scan(path) if line.record is not None)


def latest_by_arm(records) -> dict[str, ArmRecord]:
    """A repeated arm id counts once, at its last record's place (R3: the last wins)."""
    out: dict[str, ArmRecord] = {}
    for record in records:
        record = record if isinstance(record, ArmRecord) else ArmRecord.from_dict(record)
        out.pop(record.arm_id, None)
        out[record.arm_id] = record
    return out


def task_ids_in(path: Path) -> set[str]:
    """The task ids a store holds (unreadable lines skipped)."""
    ids = set()
    load = fields_loader(("task_id",))
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    task = load(raw).get("task_id")
                except (ValueError, AttributeError):
                    continue
                if type(task) is str:
                    ids.add(task)
    except OSError:
        pass
    return ids
