"""`compare BASE NEW`: two pivots group by group (task, profile set), by the arms that
flipped, and profile set by profile set, by the sweep's paired analysis (inference.py).

A regression is a drop the noise cannot explain, never a single flip: NEW − BASE has a
two-sided interval wholly below zero (or below -margin). The rule is applied to each
profile set over its tasks (`compare_sets`), and to each group within it (its samples,
or its repeats). Each is a family: the profile sets together, the groups together, each
taken at 5% by Holm's step-down (`holm_family`), so that under no change the chance of
any alarm in a family stays at most 5%.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from typing import Callable

from . import inference, stats
from .pivot import Cell, Pivot, interval_text, money, pct, plural, points
from .record import DEFAULT_SET, ArmRecord
from .stats import ALPHA
from ..verdict import BLOCKED, FAIL, PASS


@dataclass
class GroupChange:
    task_id: str
    profile_set: str
    base: Cell | None
    new: Cell | None
    down: list[str] = field(default_factory=list)       # PASS -> FAIL
    up: list[str] = field(default_factory=list)         # FAIL -> PASS
    blocked: list[str] = field(default_factory=list)    # "arm: X -> Y" where one side is BLOCKED
    # Between independent runs (not a regrade), repeat i of one run has nothing to do with
    # repeat i of the other: each item's PASS count, before and after, where it changed.
    counts: list[str] = field(default_factory=list)
    change: inference.Pair | None = None   # NEW − BASE within the group, in both stores
    regressed: bool = False                # its interval lies below -margin

    @property
    def in_both(self) -> bool:
        return self.base is not None and self.new is not None

    @property
    def same_arms(self) -> bool:
        """NEW regraded BASE's arms: a repeat in both is the same arm, so flips pair."""
        return self.new is not None and bool(self.new.arms) and self.new.regraded == len(
            self.new.arms)

    @property
    def delta(self) -> float | None:
        return None if self.change is None else self.change.diff


@dataclass
class SetChange:
    """NEW − BASE for one profile set over its tasks in either store."""
    profile_set: str
    change: inference.Pair
    regressed: bool


def holm_family(compute: list[Callable[[float], inference.Pair]],
                margin: float) -> list[tuple[inference.Pair, bool]]:
    """Each member's NEW − BASE, taken in Holm's step-down at ALPHA for the family: its
    interval at the level of its step (alpha/(m-i) for the i-th smallest p-value), and
    whether it regressed (its step rejects "no change", every earlier step did, and the
    interval lies below -margin)."""
    first = [f(ALPHA) for f in compute]
    steps = stats.holm([1.0 if c.p is None else c.p for c in first], ALPHA)
    out = []
    for f, (level, rejected) in zip(compute, steps):
        change = f(level)
        out.append((change, rejected and change.below(margin)))
    return out


def delta_text(g: GroupChange) -> str:
    """The group's paired difference with its interval: `-50 pts (-100 to +12)`."""
    c = g.change
    if c is None or c.diff is None:
        return "—"
    iv = c.interval
    return f"{points(c.diff)} pts" + ("" if iv is None else
                                     f" ({points(iv[0])} to {points(iv[1])})")


def _per_arm(total: float | None, arms: int) -> float | None:
    return None if total is None or arms <= 0 else total / arms


def cost_delta_text(g: GroupChange) -> str:
    """What an exercised arm costs now minus what it cost, agent and judge together by the
    pair lines' rule (`inference.cost_per_arm`), and the judge's part when a judge graded
    either side. Where some part of some arm is unknown on either side, the two lower bounds
    themselves (`$0.0010+ → $0.0012`): their difference would claim what nobody knows."""
    if g.base is None or g.new is None:
        return "—"
    bt, b_partial = inference.cost_per_arm(inference.tasks_of([g.base]))
    nt, n_partial = inference.cost_per_arm(inference.tasks_of([g.new]))
    if bt is None or nt is None:
        return "—"
    if b_partial or n_partial:
        return f"{money(bt, b_partial)} → {money(nt, n_partial)}"
    text = _signed(nt - bt)
    if g.base.judged or g.new.judged:
        bj = _per_arm(g.base.judge_cost, g.base.judged - g.base.judge_cost_unknown)
        nj = _per_arm(g.new.judge_cost, g.new.judged - g.new.judge_cost_unknown)
        text += " (judge " + ("—" if bj is None or nj is None else _signed(nj - bj)) + ")"
    return text


def _signed(dollars: float) -> str:
    return f"{'-' if dollars < 0 else '+'}${abs(dollars):.4f}"


def cell_text(c: Cell | None) -> str:
    if c is None:
        return "absent"
    return (f"{pct(c.pass_rate)} ({interval_text(c.interval)}) n={c.exercised}"
            + (f" +{c.blocked}B" if c.blocked else "") + f" det {c.det_text}")


def _defaults_paired(cells: dict, other: dict) -> list[str]:
    """jaato-eval names a task's own profile set `default` when run without --profile-set.
    A task whose only group is `default` on one side and one named set on the other is one
    group: keyed here by the named set. Returns what was paired, said."""
    said = []
    for task in sorted({t for t, s in cells if s == DEFAULT_SET}):
        mine = [s for t, s in cells if t == task]
        theirs = [s for t, s in other if t == task]
        if mine == [DEFAULT_SET] and len(theirs) == 1 and theirs[0] != DEFAULT_SET:
            cells[(task, theirs[0])] = cells.pop((task, DEFAULT_SET))
            said.append(f"{task} @ {DEFAULT_SET} is paired with {task} @ {theirs[0]} "
                        f"(jaato-eval's name for a task's own profile set)")
    return said


def compare_groups(base: list[Cell], new: list[Cell], paired: list[str] | None = None,
                   margin: float = 0.0, detect: float | None = None) -> list[GroupChange]:
    bcells = {(c.task_id, c.profile_set): c for c in base}
    ncells = {(c.task_id, c.profile_set): c for c in new}
    said = _defaults_paired(bcells, ncells) + _defaults_paired(ncells, bcells)
    if paired is not None:
        paired.extend(said)
    changes = []
    for key in sorted(set(bcells) | set(ncells)):
        g = GroupChange(*key, bcells.get(key), ncells.get(key))
        # Arms pair by (sample, repeat): within a group that is the arm, whatever its id says.
        barms = {(a.sample_id or "", a.repeat): a for a in (g.base.arms if g.base else [])}
        narms = {(a.sample_id or "", a.repeat): a for a in (g.new.arms if g.new else [])}
        if g.in_both and not g.same_arms:
            g.counts = _item_counts(g)
        for slot in sorted(set(barms) & set(narms)):
            arm = narms[slot].arm_id
            b, n = barms[slot].state, narms[slot].state
            if (b, n) == (PASS, FAIL) and g.same_arms:
                g.down.append(arm)
            elif (b, n) == (FAIL, PASS) and g.same_arms:
                g.up.append(arm)
            elif b != n and BLOCKED in (b, n):
                reason = narms[slot].blocked_reason if n == BLOCKED else None
                g.blocked.append(f"{arm}: {b} → {n}" + (
                    f" ({' '.join(str(reason).split())[:120]})" if reason else ""))
        changes.append(g)
    both = [g for g in changes if g.in_both]
    family = holm_family([_group_change(g, detect) for g in both], margin)
    for g, (change, regressed) in zip(both, family):
        g.change, g.regressed = change, regressed
    return changes


def _item_counts(g: GroupChange) -> list[str]:
    """`task[sample]: PASS 3 of 3 → 1 of 3` for each item whose PASS count or share
    changed between two independent runs."""
    def tally(cell: Cell | None) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for a in cell.arms if cell else []:
            passed, exercised = out.get(a.sample_id or "", (0, 0))
            if a.state in (PASS, FAIL):
                out[a.sample_id or ""] = (passed + (a.state == PASS), exercised + 1)
        return out
    before, after = tally(g.base), tally(g.new)
    lines = []
    for key in sorted(set(before) & set(after)):
        (bp, bn), (np_, nn) = before[key], after[key]
        if bp * nn != np_ * bn:
            where = f"{g.task_id}[{key}]" if key else g.task_id
            lines.append(f"{where} @ {g.profile_set}: PASS {bp} of {bn} → {np_} of {nn}")
    return lines


def _group_change(g: GroupChange, detect: float | None) -> Callable[[float], inference.Pair]:
    base, new = g.base, g.new
    assert base is not None and new is not None  # a group in both stores
    return lambda alpha: inference.of_cells({g.task_id: base}, {g.task_id: new},
                                            g.profile_set, alpha, detect)


def _set_change(name: str, base: dict[str, Cell], new: dict[str, Cell],
                detect: float | None) -> Callable[[float], inference.Pair]:
    return lambda alpha: inference.of_cells(base, new, name, alpha, detect)


def compare_sets(changes: list[GroupChange], margin: float = 0.0,
                 detect: float | None = None) -> list[SetChange]:
    """Each profile set with a group in both stores: NEW − BASE over all its tasks (those
    in one store only are left out of the pairing, and counted)."""
    sides: dict[str, tuple[dict[str, Cell], dict[str, Cell]]] = {}
    for g in changes:
        base, new = sides.setdefault(g.profile_set, ({}, {}))
        if g.base is not None:
            base[g.task_id] = g.base
        if g.new is not None:
            new[g.task_id] = g.new
    names = [name for name, (base, new) in sorted(sides.items()) if set(base) & set(new)]
    family = holm_family([_set_change(n, *sides[n], detect) for n in names], margin)
    return [SetChange(n, change, regressed) for n, (change, regressed) in zip(names, family)]


# -- grader by grader: what a grader change did (a regrade, docs/regrading.md) ---------------
@dataclass
class ArmFlip:
    """One paired arm whose state, or some grader's verdict, differs between the stores:
    every grader's verdict before and after (None: that side has no such grader)."""

    arm_id: str
    before: str | None
    after: str | None
    graders: list[tuple[str, dict | None, dict | None]] = field(default_factory=list)

    @property
    def changed(self) -> list[str]:
        """The graders whose state differs."""
        return [gid for gid, b, n in self.graders
                if (b or {}).get("state") != (n or {}).get("state")]


def grader_flips(base: Pivot, new: Pivot, changes: list[GroupChange]) -> list[ArmFlip]:
    """The paired arms whose state flipped, and (when NEW holds regraded arms, whose
    graders are the point) those whose graders' verdicts changed under the same state,
    each with every grader's old and new verdict. Reads the whole records of those
    groups' arms only."""
    out = []
    for g in changes:
        if g.base is None or g.new is None:
            continue
        barms = {(a.sample_id or "", a.repeat): a for a in g.base.arms}
        narms = {(a.sample_id or "", a.repeat): a for a in g.new.arms}
        slots = sorted(set(barms) & set(narms))
        flipped = {s for s in slots if barms[s].state != narms[s].state}
        if not g.same_arms:  # independent runs: repeat i is no pair (the counts say it)
            continue
        wanted = set(slots) if g.new.regraded else flipped
        if not wanted:
            continue
        bids, nids = {barms[s].arm_id for s in wanted}, {narms[s].arm_id for s in wanted}
        brecs = {r.arm_id: r for r in base.arms(g.base) if r.arm_id in bids}
        nrecs = {r.arm_id: r for r in new.arms(g.new) if r.arm_id in nids}
        for slot in sorted(wanted):
            b, n = brecs.get(barms[slot].arm_id), nrecs.get(narms[slot].arm_id)
            if b is None or n is None:
                continue
            flip = ArmFlip(n.arm_id, b.state, n.state, _paired_verdicts(b, n))
            if slot in flipped or flip.changed:
                out.append(flip)
    return out


def _paired_verdicts(b: ArmRecord, n: ArmRecord) -> list[tuple[str, dict | None, dict | None]]:
    before = {v["grader_id"]: v for v in b.verdicts}
    after = {v["grader_id"]: v for v in n.verdicts}
    ids = list(after) + [gid for gid in before if gid not in after]
    return [(gid, before.get(gid), after.get(gid)) for gid in ids]


# -- the decisions as a document (`compare --format json|markdown`) ----------------------------
def change_json(c: inference.Pair | None) -> dict:
    """A difference with everything behind its decision: interval and its level, se, df,
    method and p-value."""
    if c is None or c.diff is None:
        return {"difference": None}
    return {"difference": c.diff, "ci": None if c.interval is None else list(c.interval),
            "level": 1 - c.alpha, "se": c.se, "df": c.df, "method": c.method,
            "p_value": c.p, "decided": c.decided, "unit": c.level, "units": c.units}


def compare_document(changes: list[GroupChange], sets: list[SetChange], margin: float,
                     status: int) -> dict:
    both = sum(g.in_both for g in changes)
    return {
        "exit_status": status, "margin": margin,
        "families": {
            "profile_sets": f"Holm's step-down over {plural(len(sets), 'profile set')}, 5% "
                            f"two-sided for the family",
            "groups": f"Holm's step-down over {plural(both, 'group')}, 5% two-sided for the "
                      f"family"},
        "profile_sets": [{"profile_set": sc.profile_set, **change_json(sc.change),
                          "regressed": sc.regressed} for sc in sets],
        "groups": [{"task_id": g.task_id, "profile_set": g.profile_set,
                    "in": "both" if g.in_both else "base" if g.new is None else "new",
                    **change_json(g.change), "regressed": g.regressed,
                    "pass_to_fail": len(g.down), "fail_to_pass": len(g.up),
                    "items_changed": g.counts}
                   for g in changes]}


def compare_markdown(doc: dict) -> str:
    """The document's two tables, each under the family it was taken in."""
    def row(name: str, d: dict) -> str:
        if d.get("difference") is None:
            return f"| {name} | — | — | — | — | — | — | — | {d['regressed']} |"
        lo, hi = d["ci"] or (None, None)
        ci = "—" if lo is None or hi is None else f"{points(lo)} to {points(hi)}"
        se = "—" if d["se"] is None else f"{100 * d['se']:.1f}"
        return (f"| {name} | {points(d['difference'])} | {ci} | {100 * d['level']:.4g}% | {se} "
                f"| {'—' if d['df'] is None else d['df']} | {d['method']} "
                f"| {'—' if d['p_value'] is None else format(d['p_value'], '.3g')} "
                f"| {d['regressed']} |")
    head = ("| {} | Δ pts | CI pts | level | se pts | df | method | p | regressed |\n"
            "|---|---|---|---|---|---|---|---|---|")
    out = [f"## Profile sets (new − base)\n\n{doc['families']['profile_sets']}.\n",
           head.format("profile set"),
           *(row(d["profile_set"], d) for d in doc["profile_sets"]),
           f"\n## Groups (task @ profile set)\n\n{doc['families']['groups']}.\n",
           head.format("group"),
           *(row(f"{d['task_id']} @ {d['profile_set']}", d) for d in doc["groups"]),
           f"\nexit status: {doc['exit_status']}"]
    return "\n".join(out)
