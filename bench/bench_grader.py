"""A script grader's own cost: `graders/output.run_bounded` against a bare `subprocess.run` of
the same command, in one invocation, interleaved.

    ./dev python bench/bench_grader.py                 # 200 runs each, `grep -qx READY answer.txt`
    ./dev python bench/bench_grader.py --runs 500 --heap-mb 200
    ./dev python bench/bench_grader.py --before HEAD~1 --load 4   # this code against REF, on a busy machine

`run_bounded` is what every script grader goes through: a new process tree with our marker and
the parent-death signal armed before the program runs, its output drained into a bounded tail,
its exit seen, and whatever it left behind found and ended. The bare `subprocess.run` (a shell,
the same command, output captured) is the floor under all of that. Both run inside a process
holding `--heap-mb` of small Python objects, as a pytest worker does, since the cost of
starting a child grows with the parent's size where the start cannot use vfork.

`--before REF` runs the same measurement on the package as of REF, in alternating child
processes (blocks of `--block` runs), each side against its own floor. `--load N` keeps N
busy-looping processes running meanwhile: `-n 4` on 2 cores is a machine where every
wake-up waits for a core, and that is where a grader's steps cost the most.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import benchkit as bk

COMMAND = "grep -qx READY answer.txt"
OURS, BARE = "run_bounded (a script grader's process)", "subprocess.run of the same command"


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(runs: int, heap_mb: int) -> dict[str, list[float]]:
    """`runs` of each side, interleaved, in this process (with whatever package it imports)."""
    from pytest_jaato_eval.graders.output import run_bounded
    heap = [bytearray(1000) for _ in range(heap_mb * 1000)]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"}
    with bk.scratch("jaato-bench-grader-", False) as ws:
        (ws / "answer.txt").write_text("READY\n")

        def ours() -> None:
            done = run_bounded(COMMAND, timeout=60, shell=True, cwd=ws, env=env)
            assert done.code == 0, done.out.tail()

        def bare() -> None:
            done = subprocess.run(COMMAND, shell=True, cwd=ws, env=env, capture_output=True,
                                  stdin=subprocess.DEVNULL)
            assert done.returncode == 0, done.stdout

        sides = {OURS: ours, BARE: bare}
        for fn in sides.values():  # warm caches
            for _ in range(5):
                fn()
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(runs):
            for name, fn in sides.items():
                times[name].append(timed(fn))
    del heap
    return times


def child(python: str, pythonpath: str | None, runs: int, heap_mb: int) -> dict[str, list[float]]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    out = subprocess.run([python, __file__, "--child", "--runs", str(runs), "--heap-mb",
                          str(heap_mb)], env=env, capture_output=True, text=True, check=True,
                         timeout=600)
    return json.loads(out.stdout)


class Load:
    """N busy-looping processes of ours while the measurement runs, ended by PID after."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        for _ in range(self.n):
            self.procs.append(bk.spawn([sys.executable, "-c", "while True: pass"]))
        return self

    def __exit__(self, *exc) -> None:
        for proc, tree in self.procs:
            tree.kill(grace=0)
            proc.wait()


def rows_of(label: str, times: dict[str, list[float]]) -> list[list[str]]:
    floor = statistics.median(times[BARE])
    rows = []
    for name, t in times.items():
        s, med = sorted(t), statistics.median(t)
        rows.append([f"{label}{name}", f"{1000 * med:.2f}",
                     f"{1000 * s[len(s) // 10]:.2f}-{1000 * s[len(s) * 9 // 10]:.2f}",
                     f"{med / floor:.2f}x"])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200, help="runs per side (median reported)")
    p.add_argument("--heap-mb", type=int, default=100, help="Python objects held meanwhile")
    p.add_argument("--before", default=None, metavar="REF",
                   help="also measure the package as of this git ref, alternating with this code")
    p.add_argument("--block", type=int, default=25, help="with --before: runs per child process")
    p.add_argument("--load", type=int, default=0, help="busy-looping processes meanwhile")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.runs, args.heap_mb)))
        return 0
    with Load(args.load), bk.scratch("jaato-bench-grader-old-", False) as scratch:
        start_load = bk.load()
        if args.before is None:
            sides = {"": measure(args.runs, args.heap_mb)}
        else:
            old = str(bk.git_export(args.before, Path(scratch) / "old"))
            sides = {"": {OURS: [], BARE: []}, f"{args.before}: ": {OURS: [], BARE: []}}
            done = 0
            while done < args.runs:
                n = min(args.block, args.runs - done)
                for label, path in (("", None), (f"{args.before}: ", old)):
                    for name, t in child(sys.executable, path, n, args.heap_mb).items():
                        sides[label][name] += t
                done += n
    print(f"\n`{COMMAND}`, {args.runs} runs each, interleaved, {args.heap_mb} MB heap, "
          f"{args.load} busy processes beside; at the start: {start_load}\n")
    rows = [row for label, times in sides.items() for row in rows_of(label, times)]
    print("\n".join(bk.table(["what", "median ms", "p10-p90 ms", "/ subprocess.run"], rows,
                             markdown=True)))
    if args.before is not None:
        now, then = (statistics.median(t[OURS]) for t in sides.values())
        print(f"\nrun_bounded now / as of {args.before}: {now / then:.2f}x")
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
