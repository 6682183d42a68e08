"""A script grader's own cost: `graders/output.run_bounded` against a bare `subprocess.run` of
the same command, in one invocation, interleaved.

    ./dev python bench/bench_grader.py                 # 200 runs each, `grep -qx READY answer.txt`
    ./dev python bench/bench_grader.py --runs 500 --heap-mb 200

`run_bounded` is what every script grader goes through: a new process tree with our marker and
the parent-death signal armed before the program runs, its output drained into a bounded tail,
its exit seen, and whatever it left behind found and ended. The bare `subprocess.run` (a shell,
the same command, output captured) is the floor under all of that. Both run inside a process
holding `--heap-mb` of small Python objects, as a pytest worker does, since the cost of
starting a child grows with the parent's size where the start cannot use vfork.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import benchkit as bk

from pytest_jaato_eval.graders.output import run_bounded

COMMAND = "grep -qx READY answer.txt"


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200, help="runs per side (median reported)")
    p.add_argument("--heap-mb", type=int, default=100, help="Python objects held meanwhile")
    args = p.parse_args(argv)
    heap = [bytearray(1000) for _ in range(args.heap_mb * 1000)]
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

        sides = {"run_bounded (a script grader's process)": ours,
                 "subprocess.run of the same command": bare}
        for fn in sides.values():  # warm caches
            for _ in range(5):
                fn()
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.runs):
            for name, fn in sides.items():
                times[name].append(timed(fn))
    del heap
    med = {name: statistics.median(t) for name, t in times.items()}
    floor = med["subprocess.run of the same command"]
    print(f"\n`{COMMAND}`, {args.runs} runs each, interleaved, {args.heap_mb} MB heap, "
          f"{bk.load()}\n")
    rows = [[name, f"{1000 * med[name]:.2f}",
             f"{1000 * sorted(t)[len(t) // 10]:.2f}-{1000 * sorted(t)[len(t) * 9 // 10]:.2f}",
             f"{med[name] / floor:.2f}x"] for name, t in times.items()]
    print("\n".join(bk.table(["what", "median ms", "p10-p90 ms", "/ subprocess.run"], rows,
                             markdown=True)))
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
