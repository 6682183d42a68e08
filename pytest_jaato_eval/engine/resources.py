"""An arm's bounded resources: the memory, disk and pids its agent may use, and what it used
up (time is the arm ceiling: engine/ceiling.py).

- Memory and pids: the cgroup its daemon's sandbox runs in (sandbox.Limits). The arm's memory
  limit is set on it before the agent starts (a private daemon runs one arm at a time), and
  the kernel's own counts of OOM kills and refused forks are read before and after.
- Disk: what the agent's files hold in the folders it may write (the workspaces' folder, the
  daemon's folder and its /tmp), watched while it runs. Every POLL seconds the file systems'
  own figures are read (a few microseconds); the folders are walked only when a file system
  grew by as much as the agent had left of its limit, or ran short, so an arm that writes
  little costs one walk of its workspace at each end. Past its limit the agent is stopped
  at once (its daemon ended: in the sandbox that ends every process of the agent's).

Exhausting one is the agent's FAIL (verdict `resources`), the cause named. The disk bound is
never more than what was free at the arm's start, less what the run keeps for its own files
(the store, the next arm's copy): a disk the agent fills is its act. A disk that runs short
while the agent is within that bound is the machine's fault: the agent is stopped all the same
(the machine must not fill up) and the arm is BLOCKED, saying so.
"""
from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from .sandbox import PIDS_MAX

if TYPE_CHECKING:
    from .sandbox import Limits

MEMORY = 8 << 30  # the defaults: room for a compiler, a test suite and jaato's own ~0.5 GiB
DISK = 10 << 30
RESERVE = 512 << 20  # free space the machine keeps, whatever an agent's limit says
SHORT_FLOOR = 64 << 20  # what an agent must hold for a short disk to be stopped on it
POLL = 0.2  # s between looks at the file systems' free space
MEMORY_KEY, DISK_KEY = "jaato_memory_limit", "jaato_disk_limit"  # the ini keys

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.I)
SIZE_PHRASE = "a size (bytes, or a number with K, M, G or T: 512M, 8G, 1.5GiB)"


def parse_size(value: Any) -> int | None:
    """Bytes from an int or a text like `512M`, `8G`, `1.5GiB` (powers of 1024); None when
    `value` is no size, or not above zero."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    found = _SIZE.fullmatch(value.strip())
    if found is None:
        return None
    size = int(float(found[1]) * _UNITS[found[2].upper()])
    return size if size > 0 else None


def size_text(size: int) -> str:
    """`8 GiB`, `512 MiB`, `300 KiB`, `12 B`: as a reader sizes it."""
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            value = size / factor
            return f"{value:.0f} {unit}" if value >= 10 or value.is_integer() else f"{value:.1f} {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class Bounds:
    """What one arm's agent may use: bytes of memory (its whole sandbox's, jaato's daemon
    included) and of disk (what it adds to the folders it may write)."""

    memory: int = MEMORY
    disk: int = DISK

    @classmethod
    def of(cls, resources: Any, memory: int, disk: int) -> "Bounds":
        """The task's own (`resources:` in task.yaml), else the run's (the ini keys)."""
        return cls(getattr(resources, "memory", None) or memory,
                   getattr(resources, "disk", None) or disk)


RAISE = "raise it with `resources:` in task.yaml or the ini key {key}"


class DiskWatch:
    """What the agent's files hold in the folders it may write, from the arm's start: looked
    at on a thread of its own while the agent runs (`watching`), and once more at its end."""

    def __init__(self, folders: Sequence[Path], limit: int,
                 leave_out: Sequence[Path] = (), stop: Callable[[], None] | None = None):
        self.folders = [Path(f) for f in dict.fromkeys(folders) if Path(f).is_dir()]
        # Never more than what is free at the start, less what the run keeps for its own
        # writes (its store, the next arm's copy): a disk the agent fills is its own act.
        free = self._free()
        self.limit = min(limit, max(0, free - min(RESERVE, free // 2)))
        self.asked = limit
        self.leave_out = {Path(p) for p in leave_out}
        self.stop = stop
        self.base = self._walk()
        self.held = 0  # what the agent's files held at the last walk
        self.over: str | None = None   # past its limit: the agent's FAIL
        self.short: str | None = None  # the machine ran short: BLOCKED
        self.stopped = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watching(self) -> Iterator["DiskWatch"]:
        self._thread = threading.Thread(target=self._watch, name="jaato-disk-watch", daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had: the end's look still counts
            self._thread = None
        try:
            yield self
        finally:
            self._done.set()
            if self._thread is not None:
                self._thread.join()
            if self.over is None and self.short is None:
                self._look(self._free())

    def added(self) -> list[Path]:
        """What the agent added: each entry of the watched folders that is new or grew."""
        now = self._walk()
        return [path for path, size in now.items() if size > self.base.get(path, -1)]

    def _watch(self) -> None:
        used = self._used()
        while not self._done.wait(POLL):
            now, free = self._used(), self._free()
            grown = now - used
            if grown >= self.limit - self.held or (free < RESERVE and grown >= SHORT_FLOOR // 4):
                used = now
                if self._look(free):
                    return

    def _look(self, free: int) -> bool:
        """Walk the folders; past the limit, or the disk short, say so and stop the agent."""
        now = self._walk()
        self.held = sum(max(0, size - self.base.get(path, 0)) for path, size in now.items())
        if self.held > self.limit:
            bound = (f"its limit of {size_text(self.limit)} (" + RAISE.format(key=DISK_KEY) + ")"
                     if self.limit == self.asked else
                     f"its bound of {size_text(self.limit)}: what was free when it began, less "
                     f"what the run keeps for its own files (its limit, {size_text(self.asked)}, "
                     f"is larger)")
            self.over = (f"disk: the agent's files reached {size_text(self.held)} in the folders "
                         f"it may write, past {bound}")
        elif free < RESERVE and self.held >= SHORT_FLOOR:
            self.short = (f"disk: the machine ran short ({size_text(free)} free) while the "
                          f"agent's files held {size_text(self.held)}, within its limit of "
                          f"{size_text(self.limit)}: the agent was stopped so the disk would "
                          f"not fill; free some space, or lower the task's disk limit")
        else:
            return False
        if self.stop is not None and not self.stopped:
            self.stopped = True
            self.stop()
        return True

    def _walk(self) -> dict[Path, int]:
        """Bytes allocated under each entry of the watched folders (a hard-linked file once;
        links never followed; what is left out, never entered)."""
        seen: set[tuple[int, int]] = set()
        out: dict[Path, int] = {}
        for folder in self.folders:
            try:
                with os.scandir(folder) as it:
                    entries = [Path(e.path) for e in it]
            except OSError:
                continue
            for entry in entries:
                if entry not in self.leave_out:
                    out[entry] = _allocated(entry, seen, self.leave_out)
        return out

    def _used(self) -> int:
        return sum((st.f_blocks - st.f_bfree) * st.f_frsize for st in self._stats())

    def _free(self) -> int:
        return min((st.f_bavail * st.f_frsize for st in self._stats()), default=1 << 62)

    def _stats(self) -> list[os.statvfs_result]:
        out, devices = [], set()
        for folder in self.folders:
            try:
                dev = os.stat(folder).st_dev
                if dev not in devices:
                    devices.add(dev)
                    out.append(os.statvfs(folder))
            except OSError:
                continue
        return out


def _allocated(top: Path, seen: set[tuple[int, int]], leave_out: set[Path]) -> int:
    total, todo = 0, [os.fspath(top)]
    while todo:
        path = todo.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        total += st.st_blocks * 512
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as it:
                    todo.extend(e.path for e in it if Path(e.path) not in leave_out)
            except OSError:
                continue
    return total


@dataclass
class Guard:
    """One arm's resources, from before its agent starts to after it ends."""

    bounds: Bounds
    limits: Limits | None
    disk: DiskWatch
    oom_kills: int = 0  # the cgroup's counts at the arm's start
    refused: int = 0
    said: list[str] = field(default_factory=list)  # for the record's notes

    def exhausted(self) -> str | None:
        """What the agent used up, said with its cause and where to raise it; else None."""
        if self.disk.over:
            return self.disk.over
        limits = self.limits
        if limits is not None and limits.oom_kills() > self.oom_kills:
            killed = limits.oom_kills() - self.oom_kills
            return (f"memory: the agent's processes reached their sandbox's limit of "
                    f"{size_text(self.bounds.memory)} and the kernel ended {killed} of them ("
                    + RAISE.format(key=MEMORY_KEY) + ")")
        if limits is not None and limits.refused() > self.refused:
            return (f"pids: the agent's processes filled their sandbox's limit of {PIDS_MAX} "
                    f"tasks ({limits.refused() - self.refused} fork(s) refused)")
        return None

    @property
    def short(self) -> str | None:
        return self.disk.short

    @property
    def stopped(self) -> bool:
        """Whether the guard ended the agent's daemon itself (its death is then no act of
        the agent's)."""
        return self.disk.stopped


@contextlib.contextmanager
def guarded(bounds: Bounds, limits: Limits | None, folders: Sequence[Path],
            leave_out: Sequence[Path] = (), stop: Callable[[], None] | None = None,
            ) -> Iterator[Guard]:
    """Around an agent's run: its memory limit set, its disk watched (`stop` ends it at
    once when it goes past its limit; None, a daemon not ours: it is judged at its end)."""
    guard = Guard(bounds, limits, DiskWatch(folders, bounds.disk, leave_out, stop))
    if limits is not None:
        failed = limits.set_memory(bounds.memory)
        if failed and limits.memory:
            guard.said.append(f"the memory limit of {size_text(bounds.memory)} could not be "
                              f"set on the agent's sandbox ({failed}); the previous one held")
        guard.oom_kills, guard.refused = limits.oom_kills(), limits.refused()
    with guard.disk.watching():
        yield guard
