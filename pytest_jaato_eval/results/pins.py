"""Run pins: what must be equal for two runs to be comparable.

A record carries the harness and SDK it ran under (`provenance`), its `run_id`,
and the content hash of its task (`task_hash`). Stores written by jaato-eval 0.3.4
carry only the SDK pins; a pin nobody recorded is unknown, not a difference.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..parts import GRADER_PARTS, said
from .pivot import PROVENANCE_PINS, ArmSummary, Pivot, summarise
from .record import ArmRecord
from .stores import StoreFile


def pins(records: Iterable[ArmRecord]) -> dict[str, Any]:
    """{pin: sorted distinct values}, plus `task_hash` as {task id: sorted distinct hashes}
    and `run_id` as the distinct run ids. Unrecorded values are left out."""
    return _pins(summarise(r) for r in records)


def pins_of(pivot: Pivot) -> dict[str, Any]:
    """The pins of a pivot's arms (the latest record per arm), without re-reading them."""
    return _pins(a for c in pivot.cells for a in c.arms)


def _pins(arms: Iterable[ArmSummary]) -> dict[str, Any]:
    out: dict[str, set] = defaultdict(set)
    tasks: dict[str, set] = defaultdict(set)
    for a in arms:
        for key, value in zip(PROVENANCE_PINS, a.provenance or ()):
            if value is not None:
                out[key].add(value)
        if a.run_id is not None:
            out["run_id"].add(a.run_id)
        if a.task_hash is not None:
            tasks[a.task_id].add(a.task_hash)
    result: dict[str, Any] = {k: sorted(v) for k, v in out.items()}
    result["task_hash"] = {t: sorted(h) for t, h in sorted(tasks.items())}
    return result


# The agent-side parts whose change is what a comparison of profile sets is made for.
COMPARED_PARTS = frozenset({"profile"})


@dataclass
class TaskChange:
    """What changed of a task between two stores, read from the sides (`agent_side`,
    `grader_side`) of the arms both hold."""
    agent: set[str] = field(default_factory=set)
    graders: set[str] = field(default_factory=set)
    sets: set[str] = field(default_factory=set)   # the profile sets whose arms changed

    @property
    def compared(self) -> bool:
        """Only a profile changed: the comparison `compare` exists for, not another task."""
        return bool(self.agent) and self.agent <= COMPARED_PARTS and not self.graders

    def said(self) -> str:
        words = [said(sorted(self.agent))] if self.agent else []
        words += [said(sorted(self.graders), GRADER_PARTS)] if self.graders else []
        return " and ".join(words)


def changed_tasks(base: dict[str, Any], new: dict[str, Any]) -> set[str]:
    """The tasks both stores hold whose task hashes differ."""
    bt, nt = base.get("task_hash", {}), new.get("task_hash", {})
    return {t for t in set(bt) & set(nt) if bt[t] != nt[t]}


def side_changes(base: Pivot, new: Pivot, tasks: set[str]) -> dict[str, TaskChange]:
    """Task id -> what changed of it, for `tasks`, from the arms both stores hold (their
    whole records re-read); a task whose records kept no sides (jaato-eval's) is left out."""
    def sides(pivot: Pivot) -> dict[str, tuple[str, str, Any, Any]]:
        return {r.arm_id: (cell.task_id, cell.profile_set, r.agent_side, r.grader_side)
                for cell in pivot.cells if cell.task_id in tasks
                for r in pivot.arms(cell)}

    def differ(a: dict, b: dict) -> set[str]:
        return {p for p in set(a) | set(b) if a.get(p) != b.get(p)}

    then, now = sides(base), sides(new)
    out: dict[str, TaskChange] = {}
    for arm_id in sorted(set(then) & set(now)):
        task, set_name, agent_then, graders_then = then[arm_id]
        agent_now, graders_now = now[arm_id][2:]
        if not all(isinstance(s, dict) for s in (agent_then, agent_now, graders_then, graders_now)):
            continue
        change = out.setdefault(task, TaskChange())
        agent, graders = differ(agent_then, agent_now), differ(graders_then, graders_now)
        change.agent |= agent
        change.graders |= graders
        if agent or graders:
            change.sets.add(set_name)
    return {t: c for t, c in out.items() if c.agent or c.graders}


def compared_lines(changes: dict[str, TaskChange]) -> list[str]:
    """A note for each task whose only change is a profile: what the comparison is of."""
    return [f"task {task} changed between the runs only in {change.said()} "
            f"(profile set {', '.join(sorted(change.sets))}): the same task, "
            f"run on another profile, which is what this comparison measures"
            for task, change in sorted(changes.items()) if change.compared]


def pin_differences(base: dict[str, Any], new: dict[str, Any],
                    regraded: Iterable[str] = (),
                    changes: dict[str, TaskChange] | None = None) -> list[str]:
    """Warnings, one line each, for pins that differ between two stores. `regraded`: the
    tasks whose arms in the new store graded the base's agents' runs again (a changed
    task hash there is a grader change, which is what the regrade is for). `changes`:
    what changed of each changed task (`side_changes`); a profile's change alone is no
    warning (`compared_lines` says it)."""
    regraded = set(regraded)
    changes = changes or {}
    lines = []
    for key in PROVENANCE_PINS:
        b, n = base.get(key), new.get(key)
        if b and n and b != n:
            lines.append(f"{key} differs: {', '.join(b)} (base) vs {', '.join(n)} (new)")
        elif bool(b) != bool(n):
            lines.append(f"{key} recorded in only one store: "
                         f"{', '.join(b or n or ())} ({'base' if b else 'new'}); "
                         f"cannot tell if it changed")
    bt, nt = base.get("task_hash", {}), new.get("task_hash", {})
    for task in sorted(set(bt) & set(nt)):
        if bt[task] != nt[task] and task in regraded:
            lines.append(f"task {task} changed between the runs; the new store is a regrade "
                         f"of the base's runs (--jaato-regrade): an arm graded again kept "
                         f"its agent's run, only its graders differ")
        elif bt[task] != nt[task] and task in changes and changes[task].compared:
            continue
        elif bt[task] != nt[task] and task in changes:
            lines.append(f"task {task} changed between the runs ({changes[task].said()} "
                         f"changed; task_hash {', '.join(h[:12] for h in bt[task])} → "
                         f"{', '.join(h[:12] for h in nt[task])}): "
                         f"its arms measure different tasks")
        elif bt[task] != nt[task]:
            lines.append(f"task {task} changed between the runs (task_hash "
                         f"{', '.join(h[:12] for h in bt[task])} → "
                         f"{', '.join(h[:12] for h in nt[task])}): "
                         f"its arms measure different tasks")
    return lines


def pin_notes(stores: list[StoreFile]) -> list[str]:
    """One line per provenance pin whose value differs between stores read as one."""
    per_store = [(s.path, pins(s.records)) for s in stores]
    notes = []
    for key in PROVENANCE_PINS:
        values = {tuple(p.get(key) or ()) for _, p in per_store}
        if len(values) > 1:
            where = "; ".join(f"{', '.join(p.get(key) or ['not recorded'])} ({path})"
                              for path, p in per_store)
            notes.append(f"{key} differs between the stores: {where}")
    return notes


def pins_summary(p: dict[str, Any]) -> list[str]:
    """Human lines for a report header."""
    def one(key):
        return ", ".join(p.get(key) or []) or "—"
    harness = " ".join(", ".join(p[k]) for k in ("harness", "harness_version") if p.get(k))
    return [
        f"harness: {harness or '— (not recorded)'}",
        f"jaato-sdk: {one('jaato_sdk_version')} ({one('jaato_sdk_path')})",
        f"runs: {one('run_id')}",
    ]
