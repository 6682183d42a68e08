"""The processes an agent's session leaves running, ended before its arm is graded.

The agent's tools run under the daemon's runner, and a background job one of them starts
outlives the tool call and the session: jaato's daemon adopts such orphans (it is a child
subreaper) and leaves them be until it stops. Alive, a leftover could rewrite the workspace
while a grader reads it, read a grader's environment, or tamper with a later arm.

On a daemon this run owns, arms run one at a time, so every process that appears below it
during an arm is the arm's, except what jaato's runner pool does meanwhile: the template
forks new runner slots, and those are children of a process that was already the daemon's
child before the arm began. Everything else new is stopped (SIGSTOP: it can neither fork
nor catch it) and killed the moment the agent's run is over, before any grader runs
(docs/security.md). A daemon named
by --jaato-socket, or by a `jaato_daemon` fixture of a conftest, is not ours: nothing below
it is touched.
"""
from __future__ import annotations

import math
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .. import processes
from .sandbox import Limits

FREEZE_WAIT = 3.0  # s: a tree that still starts processes after this many is given up on
QUIET = 2  # walks in a row that find nothing new or running end the hunt ...
QUIET_GAP = 0.0005  # ... with this many seconds between them
ROUNDS = 5  # kill passes over what was stopped and whatever is still found below
SHOWN = 3  # processes named in the record's caveat
STILL = "TtD"  # states that start nothing: stopped, traced, uninterruptible sleep
TEMPLATE = "--template-mode"  # the runner template's argument: the process runner slots fork from


@dataclass(frozen=True)
class Owned:
    """A daemon this run started: its pid, the marker its processes inherit, the cgroup
    that bounds its pids and memory (None: none; engine/resources.py reads it), and how to
    tell its owner that it was ended under it (its next `ensure` then starts it afresh,
    not trusting a process that may take a while to be gone)."""

    pid: int
    marker: str
    limits: Limits | None = None
    restart: Callable[[], None] | None = field(default=None, compare=False)


@dataclass
class Leftovers:
    """What an arm's agent left running: what was ended, said for the record; and, when
    its daemon died before anything could be looked for, why the arm is not graded."""

    said: list[str] = field(default_factory=list)
    lost: str | None = None
    watch: "Watch | None" = None  # to hunt again, from the same start (arm.py)


@dataclass(frozen=True)
class Watch:
    """A daemon of ours, from the start of an arm on."""

    daemon: processes.Ident
    marker: str
    since: float  # the arm's start, in process start stamps (a whole tick: never late)
    stewards: tuple[processes.Ident, ...] = ()  # the daemon's runner template then

    @classmethod
    def start(cls, owned: Owned) -> "Watch | None":
        daemon = processes.Ident.of(owned.pid)
        if daemon is None:
            return None
        stewards = tuple(i for i in map(processes.Ident.of, processes.children(owned.pid))
                         if i is not None and TEMPLATE in processes.command_line(i.pid))
        return cls(daemon, owned.marker, math.floor(processes.stamp_now()), stewards)

    def hunt(self, stop: bool = True) -> dict[processes.Ident, str]:
        """One walk below the daemon: the live processes started since the arm began, with
        their state when seen, but for runner slots (children of a process that was the
        daemon's child before the arm: its runner template). With `stop`, each one seen
        running is stopped (SIGSTOP) at sight, before the walk goes on: a process that
        forks as it is hunted cannot outrun a walk that freezes it where it stands."""
        if not self.daemon_alive():
            return {}
        if processes.HAS_CHILD_LISTS:
            kids_of, info_of = processes.children, processes.stat
        else:  # one snapshot per walk
            snapshot = processes.table()
            kids_of = lambda pid: [k for k, v in snapshot.items() if v[0] == pid]  # noqa: E731
            info_of = lambda pid: snapshot.get(pid)  # noqa: E731
        found: dict[processes.Ident, str] = {}
        below = [(self.daemon.pid, False)]  # (pid, whether its children are runner slots)
        while below:
            parent, slots = below.pop()
            for pid in kids_of(parent):
                info = info_of(pid)
                if info is None:
                    continue
                _, started, state = info
                ident = processes.Ident(pid, started)
                if started >= self.since and not slots and state not in "ZX":
                    found[ident] = state  # a zombie has done all it can
                    if stop and state not in "Tt":
                        processes.signal_exact([ident], signal.SIGSTOP)
                steward = parent == self.daemon.pid and started < self.since
                below.append((pid, steward))
        return found

    def daemon_alive(self) -> bool:
        info = processes.stat(self.daemon.pid) if processes.HAS_CHILD_LISTS else None
        if info is None:  # gone, or no /proc: ask psutil
            return self.daemon.alive()
        return info[1] == self.daemon.started and info[2] not in "ZX"

    def orphans(self) -> list[processes.Ident]:
        """With the daemon gone, its processes started since the arm began are nobody's
        descendants: those still carrying its marker."""
        return processes.marked(self.marker, processes.born_since(self.since))


def end_new(watch: Watch) -> Leftovers:
    """Stop, then kill, what appeared below the daemon since the watch began.

    Walks stop what they see (SIGSTOP: no handler, no fork) until QUIET walks in a row
    find nothing new and nothing left running, so a tree that forks as it is hunted, or
    forks a successor on SIGTERM, is caught whole; then all of it is killed.
    """
    out, frozen = Leftovers(), {}
    deadline, quiet = time.monotonic() + FREEZE_WAIT, 0
    while True:
        if not watch.daemon_alive():
            # Killed (by the agent, perhaps) before its leftovers could be looked for: the
            # ones that cleared the marker are out of reach, so nothing here is graded.
            for _ in range(ROUNDS):
                orphans = watch.orphans()
                if not orphans:
                    break
                processes.kill_all(orphans, grace=0)
            out.lost = (f"daemon: pid {watch.daemon.pid} died before what the agent left "
                        f"running could be looked for; the arm is not graded")
            break
        found = watch.hunt()  # stopped ones too: a later arm's agent could resume them
        new = [i for i in found if i not in frozen]
        frozen.update({i: processes.command_line(i.pid) for i in new})
        # Neither a stopped process nor one in uninterruptible sleep ('D', its stop pending
        # from this walk) can fork; and a shell that vforked a child this walk stopped before
        # its exec stays in 'D' until it is killed.
        running = new or [i for i, state in found.items() if state not in STILL]
        quiet = 0 if running else quiet + 1
        if quiet >= QUIET:
            break
        if time.monotonic() > deadline:
            out.lost = (f"the agent's leftovers kept starting processes for {FREEZE_WAIT:g} s "
                        f"after its run; the arm is not graded")
            break
        if quiet:
            time.sleep(QUIET_GAP)
    if frozen:
        for _ in range(ROUNDS):
            processes.kill_all({*frozen, *watch.hunt()}, grace=0)
            if not watch.hunt(stop=False):
                break
        else:
            out.lost = out.lost or (f"{len(watch.hunt(stop=False))} process(es) the agent "
                                    f"left running could not be ended; the arm is not graded")
        shown = "; ".join(f"pid {i.pid}: {cmd[:160]}" for i, cmd in list(frozen.items())[:SHOWN])
        more = f" and {len(frozen) - SHOWN} more" if len(frozen) > SHOWN else ""
        out.said.append(f"the agent's session left {len(frozen)} process(es) running; ended "
                        f"before grading: {shown}{more}")
    return out


@contextmanager
def ended_after(owned: Owned | None) -> Iterator[Leftovers]:
    """Around an agent's run on a daemon we own: the Leftovers it yields are filled on the
    way out (nothing is looked for below a daemon that is not ours)."""
    watch = Watch.start(owned) if owned is not None else None
    out = Leftovers(watch=watch)
    try:
        yield out
    finally:
        if watch is not None:
            found = end_new(watch)
            out.said, out.lost = found.said, found.lost
