"""Several stores read as one: `merge OUT STORE...` (merge_command.py), and `report`,
`compare`, `validate` given more than one store (the shards of one sweep; docs/running.md,
docs/reports.md).

The rules, the same for every command:

- An arm id in several stores counts once: within a store its last record (R3), and
  between stores the record that finished later (`finished_at`); with no later
  `finished_at` to tell them apart, the store named later wins. Every such choice
  is said on stderr. jaato-eval names a task's own profile set `default` (run without
  --profile-set): `t@default#0` is the same arm as `t@echo#0` when `echo` is the only
  other set any store has for `t`.
- A task with two different content hashes (`task_hash`) — a task changed between
  the shards — is refused: its arms would measure two different tasks.
- Records are copied as they are: each keeps its own `run_id`, `task_hash` and
  `provenance`, so `compare` still sees every run's pins.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence, cast

from .command_io import Unusable, no_record, readable
from .pivot import PROVENANCE_PINS, Pivot
from .record import DEFAULT_SET, ArmRecord
from ..report.pins import pins
from .store_reader import scan
from .validation import record_problems

MAX_LISTED = 20  # lines of one kind on stderr before "... and N more"


class Refused(Unusable):
    """Stores that cannot be read as one (exit 2, like any unusable input)."""


@dataclass
class StoreFile:
    """One input, whole: its records with their line numbers and byte offsets, what was
    skipped, and (checked) the problems `validate` would report."""

    path: Path
    records: list[ArmRecord] = field(default_factory=list)
    line_of: list[int] = field(default_factory=list)
    offset_of: list[int] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def skipped_notes(self) -> list[str]:
        return self.skipped


def read_store(path: str | Path) -> StoreFile:
    path = readable(path)
    store = StoreFile(path)
    try:
        for line in scan(path, check=True):
            if line.record is None:
                why = ("partial last line (a run stopped mid-write)" if line.partial
                       else line.problem)
                store.skipped.append(f"{path}:{line.number}: skipped: {why}")
                continue
            store.records.append(line.record)
            store.line_of.append(line.number)
            store.offset_of.append(line.offset)
            own = list(line.problems or []) + record_problems(line.record)[0]
            store.problems += [f"{path}:{line.number}: {line.record.arm_id}: {p}" for p in own]
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not store.records:
        raise no_record(path)
    return store


def _finished(record: ArmRecord) -> float | None:
    value = record.finished_at
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None  # absent, or nothing a clock could have said (NaN, a string)


def _when(value: float | None) -> str:
    if value is None:
        return "no finished_at"
    try:
        return datetime.fromtimestamp(value, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return repr(value)


def limited(lines: list[str], what: str) -> list[str]:
    if len(lines) <= MAX_LISTED:
        return lines
    return lines[:MAX_LISTED] + [f"... and {len(lines) - MAX_LISTED} more {what}"]


@dataclass
class Merged:
    """The stores as one. Quacks like command_io.StoreFile where the commands read one."""

    stores: list[StoreFile]
    records: list[ArmRecord] = field(default_factory=list)  # one per arm: the one that counts
    chosen: list[tuple[int, int]] = field(default_factory=list)  # (store, position) of each
    replaced: list[str] = field(default_factory=list)   # an arm in several stores: who won
    changed: list[str] = field(default_factory=list)    # a task with two content hashes
    pin_notes: list[str] = field(default_factory=list)  # inputs recorded under different pins

    @property
    def path(self) -> str:
        names = [str(s.path) for s in self.stores]
        if len(names) <= 4:
            return " + ".join(names)
        return f"{names[0]} + {len(names) - 1} more stores"

    def skipped_notes(self) -> list[str]:
        notes = [n for s in self.stores for n in s.skipped_notes()]
        return notes + limited(self.replaced, "arms in several stores")

    def refuse_changed(self) -> None:
        if self.changed:
            raise Refused("; ".join(self.changed[:3]) + (
                f" (and {len(self.changed) - 3} more tasks)" if len(self.changed) > 3 else "")
                + ": a task changed between these stores, so their arms measure different "
                  "tasks; run the changed task again in every shard")


def combine(stores: list[StoreFile]) -> Merged:
    """Read several stores as one; finds changed tasks but does not refuse them."""
    merged = Merged(stores)
    # task id -> {hash: (store, line)} over every record, winners or not.
    hashes: dict[str, dict[str, tuple[Path, int]]] = {}
    # arm id -> (store index, position in it) of the record that counts so far.
    best: dict[str, tuple[int, int]] = {}
    sets: dict[str, set[str]] = {}
    for store in stores:
        for record in store.records:
            sets.setdefault(str(record.task_id), set()).add(record.set_name)

    def same_arm(record: ArmRecord) -> str:
        named = sets.get(str(record.task_id), set()) - {DEFAULT_SET}
        if record.set_name != DEFAULT_SET or len(named) != 1:
            return record.arm_id
        return record.arm_id.replace(f"@{DEFAULT_SET}#", f"@{next(iter(named))}#", 1)

    for index, store in enumerate(stores):
        latest: dict[str, int] = {}
        for position, (record, line) in enumerate(zip(store.records, store.line_of)):
            if record.task_hash is not None:
                hashes.setdefault(str(record.task_id), {}).setdefault(
                    str(record.task_hash), (store.path, line))
            latest.pop(same_arm(record), None)
            latest[same_arm(record)] = position
        for arm, position in latest.items():
            record = store.records[position]
            if arm not in best:
                best[arm] = (index, position)
                continue
            was_index, was_position = best[arm]
            was = stores[was_index].records[was_position]
            old, new = _finished(was), _finished(record)
            newer = old is None or (new is not None and new >= old)
            winner, loser = (store, stores[was_index]) if newer else (stores[was_index], store)
            if old is not None and new is not None:
                why = (f"finished later, {_when(max(old, new))}" if old != new
                       else "the same finished_at: the store named later counts")
            elif old is None and new is None:
                why = "neither has a finished_at: the store named later counts"
            else:
                why = "the other record has no finished_at"
            if newer:
                best.pop(arm)
                best[arm] = (index, position)
            merged.replaced.append(f"{arm}: in {loser.path} and {winner.path}; "
                                   f"the record in {winner.path} counts ({why})")
    for task, seen in sorted(hashes.items()):
        if len(seen) > 1:
            where = ", ".join(f"{h[:12]} in {path}:{line}" for h, (path, line) in seen.items())
            merged.changed.append(f"task {task!r} has different task hashes: {where}")
    # Grouped by the store each record that counts came from, in the order the stores were named.
    merged.chosen = sorted(best.values())
    merged.records = [stores[i].records[p] for i, p in merged.chosen]
    merged.pin_notes = _pin_notes(stores)
    return merged


def _pin_notes(stores: list[StoreFile]) -> list[str]:
    """One line per provenance pin whose value differs between the stores."""
    per_store = [(s.path, pins(s.records)) for s in stores]
    notes = []
    for key in PROVENANCE_PINS:
        values = {tuple(p.get(key) or ()) for _, p in per_store}
        if len(values) > 1:
            where = "; ".join(f"{', '.join(p.get(key) or ['not recorded'])} ({path})"
                              for path, p in per_store)
            notes.append(f"{key} differs between the stores: {where}")
    return notes


class _MergedPivot(Pivot):
    merged: Merged

    def skipped_notes(self) -> list[str]:
        return self.merged.skipped_notes()


def merged_pivot(paths: Sequence[Path]) -> Pivot:
    """What `report` and `compare` read from several stores: one pivot (refusing a
    changed task)."""
    merged = combine([read_store(p) for p in paths])
    merged.refuse_changed()
    pivot = cast(_MergedPivot, _MergedPivot.of_records(merged.records))
    pivot.merged, pivot.source = merged, Path(merged.path)  # the label the header shows
    return pivot


def validate_across(paths: Sequence[Path]) -> tuple[list[str], list[str]]:
    """(problems, warnings) `validate` adds when given several stores."""
    merged = combine([read_store(p) for p in paths])
    return merged.changed, merged.replaced + merged.pin_notes


__all__ = ["Merged", "Refused", "combine", "limited", "merged_pivot", "read_store",
           "validate_across"]
