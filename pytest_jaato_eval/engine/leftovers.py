"""The processes an agent's session leaves running, ended before its arm is graded.

The agent's tools run under the daemon's runner, and a background job one of them starts
outlives the tool call and the session: jaato's daemon adopts such orphans (it is a child
subreaper) and leaves them be until it stops. Alive, a leftover could rewrite the workspace
while a grader reads it, read a grader's environment, or tamper with a later arm.

On a daemon this run owns, arms run one at a time, so every process that appears below it
during an arm is the arm's, except what jaato's runner pool does meanwhile: the template
forks new runner slots, and those are children of a process that was already the daemon's
child before the arm began. Everything else new ends (SIGTERM, a short grace, SIGKILL) the
moment the agent's run is over, before any grader runs (docs/security.md). A daemon named
by --jaato-socket, or by a `jaato_daemon` fixture of a conftest, is not ours: nothing below
it is touched.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from .. import processes

GRACE = 1.0  # a runner the daemon spawned for the arm's session exits on SIGTERM at once
ROUNDS = 5  # a leftover forking as it is ended: look again, a bounded number of times
SHOWN = 3  # processes named in the record's caveat


@dataclass(frozen=True)
class Owned:
    """A daemon this run started: its pid, and the marker its processes inherit."""

    pid: int
    marker: str


@dataclass
class Leftovers:
    """What an arm's agent left running: what was ended, said for the record; and, when
    its daemon died before anything could be looked for, why the arm is not graded."""

    said: list[str] = field(default_factory=list)
    lost: str | None = None


@dataclass(frozen=True)
class Watch:
    """A daemon of ours, from the start of an arm on."""

    daemon: processes.Ident
    marker: str
    since: float  # the arm's start, in process start stamps (a whole tick: never late)

    @classmethod
    def start(cls, owned: Owned) -> "Watch | None":
        daemon = processes.Ident.of(owned.pid)
        if daemon is None:
            return None
        return cls(daemon, owned.marker, math.floor(processes.stamp_now()))

    def new(self) -> list[processes.Ident]:
        """Live processes below the daemon started since the arm began, but for runner slots
        (children of a process that was the daemon's child before: its runner template)."""
        table = processes.table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        stewards = {pid for pid in children.get(self.daemon.pid, ())
                    if table[pid][1] < self.since}
        found, below = [], list(children.get(self.daemon.pid, ()))
        while below:
            pid = below.pop()
            below.extend(children.get(pid, ()))
            ppid, started = table[pid]
            if started >= self.since and ppid not in stewards:
                found.append(processes.Ident(pid, started))
        return [i for i in found if i.alive()]  # a zombie has done all it can

    def orphans(self) -> list[processes.Ident]:
        """With the daemon gone, its processes started since the arm began are nobody's
        descendants: those still carrying its marker."""
        return processes.marked(self.marker, processes.born_since(self.since))


def end_new(watch: Watch) -> Leftovers:
    """End what appeared below the daemon since the watch began; say what was ended."""
    out, ended = Leftovers(), {}
    for _ in range(ROUNDS):
        if not watch.daemon.alive():
            # Killed (by the agent, perhaps) before its leftovers could be looked for: the
            # ones that cleared the marker are out of reach, so nothing here is graded.
            processes.kill_all(watch.orphans(), grace=0)
            out.lost = (f"daemon: pid {watch.daemon.pid} died before what the agent left "
                        f"running could be looked for; the arm is not graded")
            break
        found = watch.new()
        if not found:
            break
        ended.update({i: processes.command_line(i.pid) for i in found if i not in ended})
        processes.kill_all(found, grace=GRACE)
    if ended:
        shown = "; ".join(f"pid {i.pid}: {cmd[:160]}" for i, cmd in list(ended.items())[:SHOWN])
        more = f" and {len(ended) - SHOWN} more" if len(ended) > SHOWN else ""
        out.said.append(f"the agent's session left {len(ended)} process(es) running; ended "
                        f"before grading: {shown}{more}")
    return out


@contextmanager
def ended_after(owned: Owned | None) -> Iterator[Leftovers]:
    """Around an agent's run on a daemon we own: the Leftovers it yields are filled on the
    way out (nothing is looked for below a daemon that is not ours)."""
    watch = Watch.start(owned) if owned is not None else None
    out = Leftovers()
    try:
        yield out
    finally:
        if watch is not None:
            found = end_new(watch)
            out.said, out.lost = found.said, found.lost
