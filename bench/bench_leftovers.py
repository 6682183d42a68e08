"""What looking for an agent's leftover processes costs each arm: `engine/leftovers` against
psutil's `children(recursive=True)` of the same process (the obvious way to list a tree, one
pass over every process), in one invocation, interleaved.

    ./dev python bench/bench_leftovers.py                  # 300 runs each, 20 processes below
    ./dev python bench/bench_leftovers.py --below 60 --runs 500

A stand-in "daemon" (this process) gets `--below` sleeping children started after the watch
began. Measured: one walk below the daemon (`Watch.hunt(stop=False)`: /proc's per-thread
child lists, then one stat read per process found); and, with `--below 0`, the whole check an
arm that left nothing pays (`end_new`: walks until two in a row find nothing running, 0.5 ms
apart), the common case.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

import psutil

import benchkit as bk

from pytest_jaato_eval.engine.leftovers import Owned, Watch, end_new


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--below", type=int, default=20, help="processes below the stand-in daemon")
    args = p.parse_args(argv)
    watch = Watch.start(Owned(os.getpid(), "bench"))
    assert watch is not None
    time.sleep(0.05)  # a whole clock tick: the children are younger than the watch
    kids = [subprocess.Popen(["sleep", "600"]) for _ in range(args.below)]
    try:
        sides = {"one walk (Watch.hunt)": lambda: watch.hunt(stop=False),
                 "psutil children(recursive=True)":
                     lambda: psutil.Process(os.getpid()).children(recursive=True)}
        if not args.below:
            sides["the whole check of a clean arm (end_new)"] = lambda: end_new(watch)
        assert len(watch.hunt(stop=False)) == args.below
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.runs):
            for name, fn in sides.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    finally:
        for kid in kids:
            kid.kill()
            kid.wait()
    med = {name: statistics.median(t) for name, t in times.items()}
    floor = med["psutil children(recursive=True)"]
    print(f"\n{args.runs} runs each, interleaved; {len(psutil.pids())} processes on the machine, "
          f"{args.below} below the stand-in daemon; {bk.load()}\n")
    rows = [[name, f"{1000 * m:.2f}", f"{m / floor:.2f}x"] for name, m in med.items()]
    print("\n".join(bk.table(["what", "median ms", "/ psutil"], rows, markdown=True)))
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
