"""Starting, finding and stopping the process trees the harness starts.

Every process is named by (pid, create time), so a PID the kernel recycled for
somebody else is never signalled. A tree is found three ways, because a child
can leave each of them on its own:

- its process group / session (we start every tree in a new session);
- its descendants, snapshotted while it runs (a child that `setsid()`s away is
  still one, until its parent dies);
- a marker variable in its environment (`JAATO_TREE_MARK=<run tag>:<tree id>`),
  inherited by every descendant that keeps its environment, so a double-forked,
  re-parented child is still found. The run tag is a digest of the run id and the tree
  id a random one: the agent's tools inherit the daemon's marker, and it tells them
  nothing of the run or of pytest.

The limit, said plainly: a process that clears its environment, leaves our
session and is re-parented between two snapshots is not found. Only a cgroup
(not available to an unprivileged pytest everywhere) closes that gap.
"""
from __future__ import annotations

import asyncio
import atexit
import hashlib
import logging
import math
import os
import select
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable

import psutil

from . import launch

log = logging.getLogger(__name__)

TREE_VAR = "JAATO_TREE_MARK"  # not JAATO_EVAL_*: that prefix is the contract's
TERM_GRACE = 2.0
HAS_PROC = os.path.isdir("/proc/self")  # Linux: process facts are read from /proc


def start_stamp(pid: int) -> float | None:
    """When `pid` started: clock ticks since boot from /proc where there is one (exact and
    stable), else psutil's wall-clock create time."""
    if HAS_PROC:
        info = stat(pid)
        return None if info is None else info[1]
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, ValueError):
        return None


def stamp_now() -> float:
    """Now, in the units of `start_stamp` (clock ticks since boot where /proc is)."""
    if HAS_PROC:
        return time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")
    return time.time()


def stat(pid: int) -> tuple[int, float, str] | None:
    """(parent pid, start stamp, state) of a live process, from one read of /proc (R, S, D,
    T stopped, Z zombie, ...); None when it is gone. Linux only."""
    try:  # os.open, not open(): read for every process on every tree clean-up
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
        finally:
            os.close(fd)
        return int(fields[1]), float(fields[19]), fields[0].decode()
    except (OSError, IndexError, ValueError):
        return None


def table() -> dict[int, tuple[int, float, str]]:
    """Every live process, read in one pass: pid -> (parent pid, start stamp, state)."""
    out: dict[int, tuple[int, float, str]] = {}
    if not HAS_PROC:
        states = {psutil.STATUS_STOPPED: "T", psutil.STATUS_ZOMBIE: "Z"}
        for proc in psutil.process_iter(["ppid", "create_time", "status"]):
            out[proc.pid] = (proc.info["ppid"] or 0, proc.info["create_time"] or 0.0,
                             states.get(proc.info["status"], "R"))
        return out
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := stat(int(name))) is not None:
            out[int(name)] = info
    return out


# Linux >= 3.5 with CONFIG_PROC_CHILDREN
HAS_CHILD_LISTS = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def children(pid: int) -> list[int]:
    """pid's children now, read from /proc's per-thread child lists: a few small reads, so a
    process living a few ms is seen. Where the kernel keeps no such lists, from a pass over
    every process."""
    if not HAS_CHILD_LISTS:
        return [kid for kid, (ppid, _, _) in table().items() if ppid == pid]
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids: list[int] = []
    for tid in threads:
        try:
            fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY)
            try:  # the kernel hands the list out a page per read: read to its end
                chunks = []
                while chunk := os.read(fd, 65536):
                    chunks.append(chunk)
                kids.extend(int(k) for k in b"".join(chunks).split())
            finally:
                os.close(fd)
        except (OSError, ValueError):
            continue
    return kids


def signal_exact(idents: Iterable["Ident"], sig: int) -> None:
    """Send `sig` to each process that is still exactly the one named (pid and start)."""
    for ident in idents:
        if start_stamp(ident.pid) == ident.started:
            try:
                os.kill(ident.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def command_line(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except (psutil.Error, ValueError):
        return f"pid {pid}"


@dataclass(frozen=True)
class Running:
    """What one process runs: its program, its arguments and its working folder."""

    exe: str
    argv: tuple[str, ...]
    cwd: str


@dataclass(frozen=True)
class Ident:
    """One process, exactly: its pid and when it started."""

    pid: int
    started: float

    @classmethod
    def of(cls, pid: int) -> "Ident | None":
        started = start_stamp(pid)
        return None if started is None else cls(pid, started)

    def process(self) -> psutil.Process | None:
        """The live process, or None once it is gone (or its PID is somebody else's)."""
        try:
            proc = psutil.Process(self.pid)
            if start_stamp(self.pid) != self.started or proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except (psutil.Error, ValueError):
            return None

    def alive(self) -> bool:
        return self.process() is not None


def descendants(pid: int) -> list[Ident]:
    """Every live process below `pid`, each as an Ident."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [i for i in (Ident.of(c.pid) for c in children) if i is not None]


def born_since(since: float | None) -> list[Ident]:
    """Live processes started at or after the stamp `since` (every one when None): a
    tree's members cannot be older than its leader, and checking a stamp is far cheaper
    than reading an environment."""
    found = []
    for pid in psutil.pids():
        ident = Ident.of(pid)
        if ident is not None and (since is None or ident.started >= since):
            found.append(ident)
    return found


def marked(prefix: str, among: list[Ident] | None = None) -> list[Ident]:
    """Live processes of this user (of `among` when given) whose environment carries
    TREE_VAR starting `prefix`."""
    me, uid, found = os.getpid(), os.getuid(), []
    for ident in born_since(None) if among is None else among:
        try:
            proc = psutil.Process(ident.pid)
            if ident.pid == me or proc.uids().real != uid:
                continue
            if proc.environ().get(TREE_VAR, "").startswith(prefix):
                found.append(ident)
        except (psutil.Error, OSError, ValueError, UnicodeError):
            continue
    return found


def group_members(pgid: int, among: list[Ident] | None = None) -> list[Ident]:
    out = []
    for ident in born_since(None) if among is None else among:
        try:
            if os.getpgid(ident.pid) == pgid:
                out.append(ident)
        except OSError:
            continue
    return out


def kill_all(idents: Iterable[Ident], grace: float = TERM_GRACE) -> None:
    """The one kill ladder: SIGTERM, up to `grace` seconds, then SIGKILL what is left.

    Only processes that are still exactly the ones named are signalled.
    """
    live = [i for i in set(idents) if i.alive()]
    if grace > 0 and live:
        _signal(live, signal.SIGTERM)
        wait_gone(live, grace)
        live = [i for i in live if i.alive()]
    if live:
        _signal(live, signal.SIGKILL)
        wait_gone(live, 1.0)


def _signal(idents: list[Ident], sig: int) -> None:
    # Never reaped here: a child's owner reaps it (psutil's wait would steal its exit code).
    for ident in idents:
        proc = ident.process()
        if proc is not None:
            try:
                proc.send_signal(sig)
            except psutil.Error:
                pass


_run_prefix = f"{uuid.uuid4().hex[:12]}:"
_live: dict[str, "Tree"] = {}
_live_lock = threading.Lock()


def set_run(run_id: str) -> None:
    """Name this process's trees after the run (workers share the controller's id), so the
    controller can still find a crashed worker's trees at the end."""
    global _run_prefix
    _run_prefix = _tag(run_id)


def run_prefix(run_id: str | None = None) -> str:
    return _tag(run_id) if run_id else _run_prefix


def _tag(run_id: str) -> str:
    """The run's part of a marker: a digest, so the value the agent's tools inherit names
    neither the run nor its folder."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:16] + ":"


@dataclass
class Tree:
    """A process tree we started: its leader and everything we have seen below it."""

    leader: Ident
    marker: str
    seen: set[Ident] = field(default_factory=set)

    def snapshot(self) -> None:
        """Note the leader's descendants now (call while it runs: an orphan loses its parent)."""
        self.seen.update(descendants(self.leader.pid))

    def members(self) -> set[Ident]:
        found = {self.leader} | self.seen | set(descendants(self.leader.pid))
        younger = born_since(self.leader.started or None)  # none is older than its leader
        found |= set(group_members(self.leader.pid, younger))  # its session's group id is its pid
        found |= set(marked(self.marker, younger))
        return {i for i in found if i.pid != os.getpid()}

    def running(self) -> list[Running]:
        """What each of its live processes runs now (those /proc no longer shows left out)."""
        found = []
        for ident in sorted(self.members(), key=lambda i: i.pid):
            proc = ident.process()
            try:
                if proc is not None:
                    with proc.oneshot():
                        found.append(Running(proc.exe(), tuple(proc.cmdline()), proc.cwd()))
            except (psutil.Error, ValueError, OSError):
                continue
        return found

    def kill(self, grace: float = TERM_GRACE) -> None:
        """End the whole tree (idempotent); the leader is reaped by its owner."""
        kill_all(self.members(), grace)
        with _live_lock:
            _live.pop(self.marker, None)


def new_tree_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """`env` plus this tree's marker; the marker returned."""
    marker = f"{_run_prefix}{uuid.uuid4().hex[:12]}"
    return {**env, TREE_VAR: marker}, marker


def adopt(pid: int, marker: str) -> Tree:
    """Track a process we just started (in a new session, with `marker` in its env)."""
    tree = Tree(Ident.of(pid) or Ident(pid, 0.0), marker)
    with _live_lock:
        _live[marker] = tree
    return tree


def kill_live_trees(grace: float = 0.5) -> None:
    """End every tree of this process that is still tracked (run end, exit, signals)."""
    with _live_lock:
        trees = list(_live.values())
    for tree in trees:
        try:
            tree.kill(grace)
        except Exception:  # noqa: BLE001 - clean-up must go on for the other trees
            log.debug("could not end tree %s", tree.marker, exc_info=True)


def kill_run_leftovers(run_id: str, grace: float = 0.5) -> int:
    """End every process any process of run `run_id` started and left (a crashed worker's)."""
    found = marked(run_prefix(run_id))
    kill_all(found, grace)
    return len(found)


atexit.register(kill_live_trees)


def wait_gone(idents: Iterable[Ident], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    idents = list(idents)
    while time.monotonic() < deadline:
        if not any(i.alive() for i in idents):
            return True
        time.sleep(0.05)
    return not any(i.alive() for i in idents)


def start(args, *, env: dict[str, str] | None = None, **popen) -> tuple[subprocess.Popen, Tree]:
    """Popen `args` as a new tree: its own session, our marker, SIGKILL if we die first
    (armed before the program runs: once this returns, the tree dies with this thread)."""
    env, marker = new_tree_env(dict(os.environ if env is None else env))
    popen.setdefault("stdin", subprocess.DEVNULL)
    proc = launch.popen(args, env=env, **popen)
    return proc, adopt(proc.pid, marker)


def wait(proc, tree: Tree, timeout: float | None, poll: float = 0.2, reading=None) -> int:
    """Wait for the leader, noting its descendants as it goes; TimeoutExpired past `timeout`.

    `reading` (an object with `fileno()`, `pump()` and `eof`): a pipe read whenever it has
    data while we wait, in this thread, so a chatty child never blocks on a full pipe.
    """
    deadline = None if not timeout else time.monotonic() + timeout
    with _ExitWatch(proc, reading) as ended:
        # Most graders end within milliseconds: no snapshot needed for those.
        if ended(min(0.02, timeout) if timeout else 0.02):
            return proc.wait()
        while True:
            tree.snapshot()
            step = poll if deadline is None else min(poll, max(0.0, deadline - time.monotonic()))
            if ended(step):
                return proc.wait()
            if deadline is not None and time.monotonic() >= deadline:
                assert timeout is not None  # the deadline is its
                raise subprocess.TimeoutExpired(proc.args, timeout)


class _ExitWatch:
    """`ended(seconds)`: whether the child has exited, waiting at most `seconds`, and
    reading the pipe given meanwhile. Woken by the kernel the moment the child exits (a
    pidfd, Linux >= 5.3) where Popen.wait(timeout) polls with growing sleeps: a 4 ms
    grader would be seen at 7.5 ms."""

    POLL_STEP = 0.01  # without a pidfd: how often the exit is checked while reading

    def __init__(self, proc: subprocess.Popen, reading=None):
        self._proc = proc
        self._reading = reading
        self._fd: int | None = None

    def __enter__(self):
        if self._proc.returncode is None and hasattr(os, "pidfd_open"):
            try:
                self._fd = os.pidfd_open(self._proc.pid)
            except OSError:  # an old kernel, or a sandbox without the call: poll instead
                self._fd = None
        return self.ended

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)

    def ended(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            reading = self._reading if self._reading is not None and not self._reading.eof \
                else None
            if self._fd is None and reading is None:
                try:
                    self._proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    return True
                except subprocess.TimeoutExpired:
                    return False
            watch = select.poll()  # not select(): no limit on the descriptor's number
            for fd in (self._fd, reading and reading.fileno()):
                if fd is not None:
                    watch.register(fd, select.POLLIN)
            step = max(0.0, deadline - time.monotonic())
            if self._fd is None:  # no pidfd: look at the exit every POLL_STEP
                step = min(step, self.POLL_STEP)
            ready = {fd for fd, _ in watch.poll(math.ceil(step * 1000))}
            if reading is not None and reading.fileno() in ready:
                reading.pump()
            if self._fd in ready or (self._fd is None and self._proc.poll() is not None):
                return True
            if time.monotonic() >= deadline:
                return False


async def start_async(cmd: str, *, env: dict[str, str], **kw):
    """asyncio's shell subprocess as a new tree (the driver's)."""
    env, marker = new_tree_env(env)
    proc = await asyncio.create_subprocess_shell(cmd, env=env, start_new_session=True,
                                                 preexec_fn=launch.die_with_parent, **kw)
    return proc, adopt(proc.pid, marker)
