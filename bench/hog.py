"""A busy machine, on purpose: CPU burners and a memory hog beside a measured run.

Every hog is bounded twice: coreutils' `timeout` ends it after `seconds` whatever happens to
this script, and the script ends it by pid (its own process tree, benchkit.spawn) when the
measured run is over. Nothing else on the machine is touched.

    with Hog(cpu=6, memory_mb=1024, seconds=60):
        ...the run to measure...
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


class Hog:
    """`cpu` busy loops (`sh -c 'while :; do :; done'`) and one process holding `memory_mb`."""

    def __init__(self, cpu: int = 6, memory_mb: int = 1024, seconds: float = 60.0) -> None:
        self.cpu, self.memory_mb, self.seconds = cpu, memory_mb, seconds
        self.running: list[tuple[Any, Any]] = []

    def __enter__(self) -> Hog:
        limit = shutil.which("timeout")
        if limit is None:
            raise SystemExit("hog: coreutils' timeout is needed to bound the hogs")
        bound = [limit, "-s", "KILL", f"{self.seconds:g}"]
        for _ in range(self.cpu):
            self.running.append(bk.spawn([*bound, "sh", "-c", "while :; do :; done"]))
        if self.memory_mb > 0:
            self.running.append(bk.spawn([*bound, sys.executable, "-c", MEMORY_HOG,
                                          str(self.memory_mb)]))
        bk.log(f"hog: {self.cpu} busy loops and {self.memory_mb} MB held, at most "
               f"{self.seconds:g} s (pids {', '.join(str(p.pid) for p, _ in self.running)})")
        return self

    def __exit__(self, *exc: Any) -> None:
        for proc, tree in self.running:
            tree.kill(0)  # the tree of this very pid: nothing else
            proc.wait()
        self.running.clear()


def describe(hog: Hog | None) -> str:
    if hog is None:
        return "idle"
    return f"{hog.cpu} busy loops + {hog.memory_mb} MB on {os.cpu_count()} CPUs"
