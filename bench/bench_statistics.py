"""The statistics of `compare` and the pivot, simulated with a known truth: the gate's false
alarms under no change, its power against the planning formula, and the coverage of a dataset
cell's interval. The suite runs a small seeded form of the first and the last
(tests/unit/test_statistics_simulation.py); this runs many more draws over more designs.

    ./dev python bench/bench_statistics.py              # the three tables, Markdown
    ./dev python bench/bench_statistics.py --draws 400 --seed 7

Each table row is one design; `draws` pairs of stores (or cells) per row.
"""
from __future__ import annotations

import argparse
import random
import statistics

from pytest_jaato_eval.results import inference, stats
from pytest_jaato_eval.results.compare import holm_family
from pytest_jaato_eval.results.inference import Item, Tasks

SETS = 3


def _item(rng: random.Random, rate: float, repeats: int, blocked: float = 0.0) -> Item:
    item = Item()
    for _ in range(repeats):
        if rng.random() < blocked:
            item.blocked += 1
        elif rng.random() < rate:
            item.passed += 1
        else:
            item.failed += 1
    if not item.exercised:  # an item BLOCKED on every repeat is left out, as compare does
        item.failed = 1
    return item


def _store(rng: random.Random, rates: list[list[float]], repeats: int,
           blocked: float) -> Tasks:
    return {f"t{t}": {f"s{k}": _item(rng, r, repeats, blocked) for k, r in enumerate(samples)}
            for t, samples in enumerate(rates)}


def _rates(rng: random.Random, tasks: int, samples: int, a: float, b: float,
           shift: float = 0.0) -> list[list[float]]:
    return [[min(1.0, max(0.0, rng.betavariate(a, b) + shift)) for _ in range(samples)]
            for _ in range(tasks)]


def false_alarms(rng: random.Random, draws: int) -> list[str]:
    """Three unchanged profile sets: how often exit 1 (any set regressed) and any set called
    changed, with Holm over the sets, and each set alone at 5% without a family."""
    lines = ["| tasks | samples | repeats | rates Beta(a, b) | BLOCKED | exit 1 (Holm) | any change "
             "(Holm) | any change (each at 5%) |", "|---|---|---|---|---|---|---|---|"]
    designs = [(3, 1, 5, (4, 1), 0.0), (5, 1, 1, (8, 1), 0.0), (5, 1, 3, (2, 2), 0.0),
               (10, 1, 3, (4, 1), 0.1), (10, 4, 2, (1, 1), 0.0), (30, 1, 1, (20, 1), 0.0),
               (30, 1, 10, (4, 1), 0.0), (200, 1, 1, (4, 1), 0.05)]
    for tasks, samples, repeats, (a, b), blocked in designs:
        regressed = changed = alone = 0
        for _ in range(draws):
            pairs = []
            for _s in range(SETS):
                truth = _rates(rng, tasks, samples, a, b)
                base = _store(rng, truth, repeats, blocked)
                new = _store(rng, truth, repeats, blocked)
                pairs.append((base, new))
            family = holm_family([_pair(base, new) for base, new in pairs], 0.0)
            regressed += any(r for _, r in family)
            each = [inference.pair("b", base, "n", new) for base, new in pairs]
            changed += any(r for _, r in stats.holm([1.0 if c.p is None else c.p for c in each]))
            alone += any(c.decided for c in each)
        lines.append(f"| {tasks} | {samples} | {repeats} | ({a}, {b}) | {blocked:.0%} | "
                     f"{regressed / draws:.1%} | {changed / draws:.1%} | {alone / draws:.1%} |")
    return lines


def _pair(base: Tasks, new: Tasks):
    return lambda alpha: inference.pair("b", base, "n", new, alpha)


def power(rng: random.Random, draws: int) -> list[str]:
    """One set whose every task drops by `delta`: the tasks the planning formula asks for
    (from the spread of a large pilot), and the share of draws the gate then catches."""
    lines = ["| delta | repeats | rates Beta(a, b) | tasks planned | power planned | "
             "power simulated |", "|---|---|---|---|---|---|"]
    for delta, repeats, (a, b) in [(0.10, 3, (4, 1)), (0.15, 1, (8, 2)), (0.20, 5, (2, 2)),
                                   (0.30, 2, (1, 1))]:
        pilot = []
        for _ in range(20000):  # a large pilot: its mean and spread are the truth
            truth = _rates(rng, 1, 1, a, b)
            base = _store(rng, truth, repeats, 0.0)
            new = _store(rng, [[max(0.0, r - delta) for r in s] for s in truth], repeats, 0.0)
            pilot.append(new["t0"]["s0"].score - base["t0"]["s0"].score)
        planned = stats.units_needed(statistics.variance(pilot), abs(statistics.fmean(pilot)))
        caught = 0
        for _ in range(draws):
            truth = _rates(rng, planned, 1, a, b)
            base = _store(rng, truth, repeats, 0.0)
            new = _store(rng, [[max(0.0, r - delta) for r in s] for s in truth], repeats, 0.0)
            caught += inference.pair("b", base, "n", new).below()
        lines.append(f"| {delta:.0%} (true mean {abs(statistics.fmean(pilot)):.1%}) | {repeats} "
                     f"| ({a}, {b}) | {planned} | 80% | {caught / draws:.1%} |")
    return lines


def coverage(rng: random.Random, draws: int) -> list[str]:
    """A dataset task's cell: how often its interval covers the task's rate (the mean of
    its samples' rates in the population), over its samples, and arms taken as coins."""
    lines = ["| samples | repeats | rates Beta(a, b) | over samples | arms as coins |",
             "|---|---|---|---|---|"]
    for samples, repeats, (a, b) in [(3, 5, (1, 1)), (5, 3, (0.5, 0.25)), (10, 4, (0.5, 0.25)),
                                     (20, 2, (2, 1)), (50, 3, (0.3, 0.1))]:
        truth_mean = a / (a + b)
        over = coins = 0
        for _ in range(draws):
            store = _store(rng, _rates(rng, 1, samples, a, b), repeats, 0.0)
            h = inference.headline("x", store)
            lo, hi = h.interval
            over += lo <= truth_mean <= hi
            lo, hi = stats.wilson(h.passed, h.exercised)
            coins += lo <= truth_mean <= hi
        lines.append(f"| {samples} | {repeats} | ({a}, {b}) | {over / draws:.1%} | "
                     f"{coins / draws:.1%} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=46)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for title, table in (("False alarms, three unchanged profile sets", false_alarms),
                         ("Power against the planning formula", power),
                         ("Coverage of a dataset cell's 95% interval", coverage)):
        print(f"### {title} ({args.draws} draws a row, seed {args.seed})\n")
        print("\n".join(table(rng, args.draws)) + "\n")


if __name__ == "__main__":
    main()
