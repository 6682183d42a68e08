"""A busy machine, on purpose: CPU burners and a memory hog beside a measured run.

Every hog is bounded twice: coreutils' `timeout` ends it after `seconds` whatever happens to
this script, and the script ends it by pid (its own process tree, benchkit.spawn) when the
measured run is over. Nothing else on the machine is touched.

    with Hog(cpu=6, memory_mb=1024, seconds=60):
        ...the run to measure...

Where Linux's autogroup is on (`/proc/sys/kernel/sched_autogroup_enabled`), the scheduler
shares the CPUs between sessions first, then between the processes of each. By default each
busy loop is a session of its own, as six other users' jobs would be: a run beside it gets
one share in seven, however many processes it has (bench/hog_share.py). `sessions="one"`
starts the loops together in one session, as one other job would be (`stress -c 6` from
another terminal).
"""
from __future__ import annotations

import os
import shutil
import sys
from typing import Any

import benchkit as bk

# Touches every page once, then sleeps: resident memory the kernel must keep, no CPU.
MEMORY_HOG = ("import sys, time; b = bytearray(int(sys.argv[1]) << 20); "
              "b[::4096] = b'x' * len(b[::4096]); time.sleep(1e9)")


LOOP = "while :; do :; done"
SESSIONS = ("each", "one")


class Hog:
    """`cpu` busy loops (`sh -c 'while :; do :; done'`) and one process holding `memory_mb`."""

    def __init__(self, cpu: int = 6, memory_mb: int = 1024, seconds: float = 60.0,
                 sessions: str = "each") -> None:
        if sessions not in SESSIONS:
            raise ValueError(f"hog: sessions must be one of {', '.join(SESSIONS)}, "
                             f"not {sessions!r}")
        self.cpu, self.memory_mb, self.seconds, self.sessions = cpu, memory_mb, seconds, sessions
        self.running: list[tuple[Any, Any]] = []

    def __enter__(self) -> Hog:
        limit = shutil.which("timeout")
        if limit is None:
            raise SystemExit("hog: coreutils' timeout is needed to bound the hogs")
        bound = [limit, "-s", "KILL", f"{self.seconds:g}"]
        if self.sessions == "each":
            for _ in range(self.cpu):
                self.running.append(bk.spawn([*bound, "sh", "-c", LOOP]))
        elif self.cpu > 0:  # one shell, its loops its children: one session
            loops = " ".join([f"sh -c '{LOOP}' &"] * self.cpu)
            self.running.append(bk.spawn([*bound, "sh", "-c", f"{loops} wait"]))
        if self.memory_mb > 0:
            self.running.append(bk.spawn([*bound, sys.executable, "-c", MEMORY_HOG,
                                          str(self.memory_mb)]))
        pids = ", ".join(str(p.pid) for p, _ in self.running)
        bk.log(f"hog: {self.cpu} busy loops ({describe_sessions(self)}) and {self.memory_mb} MB "
               f"held, at most {self.seconds:g} s (pids {pids})")
        return self

    def __exit__(self, *exc: Any) -> None:
        for proc, tree in self.running:
            tree.kill(0)  # the tree of this very pid: nothing else
            proc.wait()
        self.running.clear()


def describe(hog: Hog | None) -> str:
    if hog is None:
        return "idle"
    return (f"{hog.cpu} busy loops ({describe_sessions(hog)}) + {hog.memory_mb} MB on "
            f"{os.cpu_count()} CPUs")


def describe_sessions(hog: Hog) -> str:
    return "a session each" if hog.sessions == "each" else "in one session"
