"""Which profile set is better, and how sure we are: each profile set's pass rate over
the sweep, and each pair of sets run on the same tasks and samples, compared item by item
(docs/statistics.md gives every formula and its source).

The units. A **task** is a cluster. An **item** is a task × sample (a task without a
dataset is one item). An item's **repeats** are its arms. An item's score is the PASS share
of its exercised arms (BLOCKED is never in it); a task's score is the mean of its items'
scores; a profile set's rate is the mean of its tasks' scores, so every task weighs the
same however many samples and repeats it ran. Intervals take tasks as the units sampled;
a sweep of one task takes its samples, and one item its repeats (`Level`).

Pure functions over the pivot's cells (anything with `task_id`, `profile_set` and `arms`
of pivot.ArmSummary's fields): nothing here reads a store or prints.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist, fmean, variance
from typing import TYPE_CHECKING, Iterable, Mapping

from . import stats
from .stats import ALPHA, Interval
from ..verdict import FAIL, PASS

if TYPE_CHECKING:
    from .pivot import ArmSummary, Cell

# What an interval's units are, from the top of the hierarchy down: the first level with
# two units or more. Said with every interval ("over 3 tasks").
TASK, SAMPLE, ARM = "task", "sample", "arm"
# The smallest difference worth finding, declared before the data: a "to detect" line plans
# for it unless asked for another, never for the difference just seen (post-hoc power).
DEFAULT_DETECT = 0.10

# How a pair's interval and p-value were computed, said beside them.
PAIRED_T = "paired t"
NO_SPREAD = "no-spread bound"
SIGN_TEST = "exact sign test"
NEWCOMBE = "Newcombe score"


def arm_cost(a: "ArmSummary") -> tuple[float | None, bool]:
    """What an arm cost, every known part of it (its agent's, and its judge's when a judge
    graded it), and whether some part is unknown; None when no part is known."""
    cost = a.cost
    if not a.judged:  # the common arm, without the lists (once per arm of a 100k store)
        return (None, True) if cost is None else (0 + cost, False)
    parts = [cost, a.judge_cost]
    known = [x for x in parts if x is not None]
    return (sum(known) if known else None), len(known) < len(parts)


@dataclass
class Item:
    """One task × sample under one profile set: its arms' verdicts and costs."""
    passed: int = 0
    failed: int = 0
    blocked: int = 0
    spent: float = 0.0            # every known part of every arm's cost (BLOCKED ones too)
    priced: int = 0               # arms with some part of their cost known
    unpriced: int = 0             # arms with some part unknown (agent's or judge's)
    exercised_spent: float = 0.0  # the same over the exercised arms
    exercised_priced: int = 0
    exercised_unpriced: int = 0

    def add(self, a: "ArmSummary") -> None:
        if a.state == PASS:
            self.passed += 1
        elif a.state == FAIL:
            self.failed += 1
        else:  # BLOCKED, or a state nobody knows: never a verdict on the agent (P1)
            self.blocked += 1
        cost, partial = arm_cost(a)
        exercised = a.state in (PASS, FAIL)
        self.unpriced += partial
        self.exercised_unpriced += partial and exercised
        if cost is None:
            return
        self.spent += cost
        self.priced += 1
        if exercised:
            self.exercised_spent += cost
            self.exercised_priced += 1

    @property
    def exercised(self) -> int:
        return self.passed + self.failed

    @property
    def arms(self) -> int:
        return self.exercised + self.blocked

    @property
    def score(self) -> float:
        """The PASS share of the exercised arms (only asked of an exercised item)."""
        return self.passed / self.exercised

    @property
    def floor(self) -> float:
        """The PASS share of every arm: BLOCKED counted as FAIL."""
        return self.passed / self.arms

    @property
    def noise(self) -> float | None:
        """The variance of the item's score over its repeats, s²/r = p(1-p)/(r-1) (s² the
        unbiased variance of r Bernoulli outcomes); None under two repeats."""
        r = self.exercised
        return None if r < 2 else self.score * (1 - self.score) / (r - 1)


Tasks = dict[str, dict[str, Item]]   # task -> sample id ("" for a task without one) -> item


def items_of(arms: Iterable["ArmSummary"]) -> dict[str, Item]:
    """The items of one task's arms, by sample id ("" for a task without one)."""
    items: dict[str, Item] = {}
    for a in arms:
        items.setdefault(a.sample_id or "", Item()).add(a)
    return items


def tasks_of(cells: Iterable["Cell"], profile_set: str | None = None) -> Tasks:
    """The items of the cells (of one profile set, when given). A task with one cell takes
    the cell's own items (`Cell.items`, counted once however many headlines and pairs
    read them); one with several (every set's cells) counts their arms together."""
    by_task: dict[str, list["Cell"]] = {}
    for cell in cells:
        if profile_set is None or cell.profile_set == profile_set:
            by_task.setdefault(cell.task_id, []).append(cell)
    return {task: dict(group[0].items) if len(group) == 1
            else items_of(a for cell in group for a in cell.arms)
            for task, group in by_task.items()}


def _sum(values: Iterable[int]) -> int:
    return sum(values, 0)


# -- a profile set's headline ------------------------------------------------------------------
@dataclass
class Headline:
    profile_set: str
    rate: float | None            # None: every arm BLOCKED (or none ran)
    interval: Interval | None
    level: str                    # the interval's units: TASK, SAMPLE or ARM
    units: int
    tasks: int                    # tasks with an arm, exercised or not
    items: int
    arms: int
    exercised: int
    passed: int
    blocked: int
    floor: float | None           # the same weighting, BLOCKED counted as FAIL
    spent: float | None           # every arm's reported cost; None when none reported
    unpriced: int                 # arms with some part of their cost unknown
    effective_n: float | None = None   # the arms' worth of information behind the interval

    @property
    def cost_per_pass(self) -> float | None:
        """What was spent over the PASS arms: what one PASS cost."""
        return None if self.spent is None or not self.passed else self.spent / self.passed

    @property
    def design_effect(self) -> float | None:
        """How many arms one independent arm's information took: exercised / effective n."""
        return None if not self.effective_n else self.exercised / self.effective_n


def headline(profile_set: str, tasks: Tasks, alpha: float = ALPHA) -> Headline:
    """The set's rate (tasks weighted equally), its interval (tasks as clusters), its floor."""
    items = [i for t in tasks.values() for i in t.values()]
    scores = [fmean(i.score for i in t.values() if i.exercised)
              for t in tasks.values() if any(i.exercised for i in t.values())]
    exercised = _sum(i.exercised for i in items)
    passed = _sum(i.passed for i in items)
    priced = [i for i in items if i.priced]
    h = Headline(profile_set, None, None, TASK, len(scores), len(tasks), len(items),
                 _sum(i.arms for i in items), exercised, passed,
                 _sum(i.blocked for i in items),
                 fmean(fmean(i.floor for i in t.values()) for t in tasks.values() if t)
                 if items else None,
                 sum(i.spent for i in priced) if priced else None,
                 _sum(i.unpriced for i in items))
    if not scores:
        return h
    h.rate = fmean(scores)
    if len(scores) == 1:  # one task: its samples are the units, or one item's repeats
        (task,) = [t for t in tasks.values() if any(i.exercised for i in t.values())]
        scores = [i.score for i in task.values() if i.exercised]
        if len(scores) == 1:
            h.level, h.units, h.interval = ARM, exercised, stats.wilson(passed, exercised)
            h.effective_n = float(exercised)
            return h
        h.level, h.units = SAMPLE, len(scores)
    h.interval, h.effective_n = stats.clustered_rate(scores, exercised, alpha)
    return h


def headlines(cells: list["Cell"], alpha: float = ALPHA) -> list[Headline]:
    """Every profile set's headline, by name."""
    names = sorted({c.profile_set for c in cells})
    return [headline(name, tasks_of(cells, name), alpha) for name in names]


# -- a pair of profile sets --------------------------------------------------------------------
@dataclass
class Needed:
    """How much more to run to detect `delta` at 80% power, 5% two-sided, if new units
    and repeats vary as these did."""
    delta: float
    level: str                     # the units to add (TASK, SAMPLE), or ARM: repeats per set
    units: int | None              # units needed in all; None: no spread to plan from
    units_now: int
    repeats: int | None = None     # repeats per item needed with today's units
    repeats_now: float = 0.0       # today's, per item and set, on average
    repeats_may_not: bool = False  # the data cannot tell whether more repeats alone suffice


@dataclass
class Pair:
    """B − A: profile set `b` against `a` on the items both exercised."""
    a: str
    b: str
    level: str = TASK
    units: int = 0
    diff: float | None = None
    interval: Interval | None = None
    p: float | None = None
    better: int = 0                # items whose score is higher under b
    worse: int = 0
    same: int = 0
    left_items: int = 0            # items without an exercised arm on one side, or absent
    left_arms: int = 0             # their arms, both sides
    cost_a: float | None = None    # the mean cost of an exercised arm, over paired items
    cost_b: float | None = None
    cost_partial: bool = False     # some part of some paired arm's cost is unknown
    cost_a_partial: bool = False   # ... on A's side: `cost_a` is a lower bound
    cost_b_partial: bool = False
    needed: Needed | None = None
    diffs: list[float] = field(default_factory=list)  # each unit's difference
    alpha: float = ALPHA           # the interval is two-sided 1 - alpha
    method: str = ""               # PAIRED_T, NO_SPREAD, SIGN_TEST or NEWCOMBE
    se: float | None = None        # the paired t's standard error (its interval's, under
    df: int | None = None          # the sign test too) and its degrees of freedom

    @property
    def exact(self) -> bool:
        """The decision is the exact test's p-value, not the interval's (sparse data)."""
        return self.method == SIGN_TEST

    @property
    def decided(self) -> bool:
        """The interval leaves 0 out (and, under the exact test, p < alpha)."""
        return (self.interval is not None and (self.interval[0] > 0 or self.interval[1] < 0)
                and self._exact_agrees)

    def below(self, margin: float = 0.0) -> bool:
        """B is worse than A by more than `margin`, whatever the noise: the interval lies
        wholly under -margin (and, under the exact test, p < alpha)."""
        return self.interval is not None and self.interval[1] < -margin and self._exact_agrees

    @property
    def _exact_agrees(self) -> bool:
        return not self.exact or (self.p is not None and self.p < self.alpha)


def _mean_cost(items: Iterable[Item]) -> float | None:
    items = list(items)
    n = _sum(i.exercised_priced for i in items)
    return sum(i.exercised_spent for i in items) / n if n else None


def cost_per_arm(tasks: Tasks) -> tuple[float | None, bool]:
    """What an exercised arm cost: every known part (agent and judge) of every arm with one,
    over those arms; and whether some part of some arm is unknown (then a lower bound, `+`).
    The one rule the pair lines, `compare` and the chart share."""
    items = [i for t in tasks.values() for i in t.values()]
    return _mean_cost(items), any(i.exercised_unpriced for i in items)


def pair(a_name: str, a: Tasks, b_name: str, b: Tasks, alpha: float = ALPHA,
         detect: float | None = None) -> Pair:
    """B − A over the items both sets exercised (tasks as clusters); the items only one
    side exercised are left out and counted."""
    out = Pair(a_name, b_name, alpha=alpha)
    paired: dict[str, list[tuple[Item, Item]]] = {}
    for task in sorted(set(a) | set(b)):
        ia, ib = a.get(task, {}), b.get(task, {})
        for key in sorted(set(ia) | set(ib)):
            x, y = ia.get(key), ib.get(key)
            if x is not None and y is not None and x.exercised and y.exercised:
                paired.setdefault(task, []).append((x, y))
                out.better += y.score > x.score
                out.worse += y.score < x.score
                out.same += y.score == x.score
            else:
                out.left_items += 1
                out.left_arms += (x.arms if x else 0) + (y.arms if y else 0)
    couples = [c for cs in paired.values() for c in cs]
    out.cost_a = _mean_cost(x for x, _ in couples)
    out.cost_b = _mean_cost(y for _, y in couples)
    out.cost_a_partial = any(x.exercised_unpriced for x, _ in couples)
    out.cost_b_partial = any(y.exercised_unpriced for _, y in couples)
    out.cost_partial = out.cost_a_partial or out.cost_b_partial
    if not couples:
        return out
    if len(paired) >= 2:
        units = list(paired.values())
    elif len(couples) >= 2:
        out.level, units = SAMPLE, [[c] for c in couples]
    else:
        ((x, y),) = couples
        out.level, out.units, out.method = ARM, x.exercised + y.exercised, NEWCOMBE
        out.diff, out.interval = stats.newcombe_difference(
            x.passed, x.exercised, y.passed, y.exercised, NormalDist().inv_cdf(1 - alpha / 2))
        out.p = stats.newcombe_p(x.passed, x.exercised, y.passed, y.exercised)
        if not out.decided:
            out.needed = _needed_arms(out, x, y, detect)
        return out
    out.units = len(units)
    out.diffs = [fmean(y.score for _, y in cs) - fmean(x.score for x, _ in cs) for cs in units]
    out.diff, out.interval, out.p = stats.paired_difference(out.diffs, alpha)
    spread = variance(out.diffs)
    out.method = PAIRED_T if spread > 0 else NO_SPREAD
    if out.method == PAIRED_T:
        out.se, out.df = math.sqrt(spread / out.units), out.units - 1
    if spread > 0 and all(len(cs) == 1 and x.exercised == 1 == y.exercised
                          for cs in units for x, y in cs):
        # Every unit a single coin each side (one item, one repeat): the differences are
        # -1, 0, +1, where the t's normal shape does not hold; the exact test does.
        # The interval stays the t's, and so its se and df; the p-value and the decision
        # are the exact test's.
        out.method = SIGN_TEST
        out.p = stats.sign_test_p(out.diffs.count(1.0), out.diffs.count(-1.0))
    if not out.decided:
        out.needed = _needed_units(out, units, detect)
    return out


def _delta(detect: float | None) -> float:
    """The difference to plan for: the one asked, else the declared DEFAULT_DETECT."""
    return DEFAULT_DETECT if detect is None else detect


def _needed_units(p: Pair, units: list[list[tuple[Item, Item]]],
                  detect: float | None) -> Needed:
    delta = _delta(detect)
    total = variance(p.diffs)
    repeats_now = fmean((x.exercised + y.exercised) / 2 for cs in units for x, y in cs)
    need = Needed(delta, p.level, stats.units_needed(total, delta), p.units,
                  repeats_now=repeats_now)
    if total <= 0:
        return need
    # Each unit's difference is a mean of item scores: its variance from the repeats alone
    # is the items' noise over the unit's items squared (both sides independent).
    noises = [[x.noise, y.noise] for cs in units for x, y in cs]
    if any(n is None for ns in noises for n in ns):
        return need  # one repeat somewhere: the repeats' share of the spread is unknown
    within = fmean(sum((x.noise or 0.0) + (y.noise or 0.0) for x, y in cs) / len(cs) ** 2
                   for cs in units)  # (none is None: `or` only tells the type checker)
    factor = stats.repeats_factor(total, within, p.units, delta)
    if factor is None:
        # The split of the spread into tasks' and repeats' parts is a noisy estimate: it
        # cannot show that no number of repeats would do, only that it may not.
        need.repeats_may_not = True
    else:
        need.repeats = max(1, math.ceil(factor * repeats_now))
    return need


def _needed_arms(p: Pair, x: Item, y: Item, detect: float | None) -> Needed:
    delta = _delta(detect)
    return Needed(delta, ARM, None, 0,
                  repeats=stats.two_sample_size(x.score, y.score, delta),
                  repeats_now=(x.exercised + y.exercised) / 2)


def pairs(cells: list["Cell"], alpha: float = ALPHA, detect: float | None = None) -> list[Pair]:
    """Every pair of profile sets, B − A with A the first by name."""
    names = sorted({c.profile_set for c in cells})
    tasks = {name: tasks_of(cells, name) for name in names}
    return [pair(a, tasks[a], b, tasks[b], alpha, detect)
            for i, a in enumerate(names) for b in names[i + 1:]]


def of_cells(base: Mapping[str, "Cell"], new: Mapping[str, "Cell"], name: str,
             alpha: float = ALPHA, detect: float | None = None) -> Pair:
    """NEW − BASE for one profile set across two stores: `base` and `new` map each task to
    its cell of that set."""
    return pair(name, tasks_of(base.values()), name, tasks_of(new.values()), alpha, detect)
