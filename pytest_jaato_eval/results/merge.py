"""Several stores read as one: `merge OUT STORE...`, and `report`, `compare`, `validate`
given more than one store (the shards of one sweep; docs/running.md, docs/reports.md).

The rules, the same for every command:

- An arm id in several stores counts once: within a store its last record (R3), and
  between stores the record that finished later (`finished_at`); with no later
  `finished_at` to tell them apart, the store named later wins. Every such choice
  is said on stderr.
- A task with two different content hashes (`task_hash`) — a task changed between
  the shards — is refused: its arms would measure two different tasks.
- Records are copied as they are: each keeps its own `run_id`, `task_hash` and
  `provenance`, so `compare` still sees every run's pins.
"""
from __future__ import annotations

import glob
import math
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence, cast

from .commands import EXIT_OK, Unusable, _no_record, _readable, record_problems, say
from .pivot import PROVENANCE_PINS, Pivot
from .record import ArmRecord
from ..report.pins import pins
from .store import scan

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
    path = _readable(path)
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
        raise _no_record(path)
    return store


def expand(patterns: Sequence[str]) -> list[Path]:
    """Paths and glob patterns (a pattern the shell left alone, e.g. quoted) -> the stores,
    each once, in the order given (a pattern's matches sorted)."""
    out: list[Path] = []
    seen: set[str] = set()
    for pattern in patterns:
        if glob.has_magic(pattern) and not os.path.lexists(pattern):
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise Unusable(f"{pattern}: no file matches this pattern")
        else:
            matches = [pattern]
        for match in matches:
            key = os.path.realpath(match)
            if key not in seen:  # a file named twice (or by two patterns) is read once
                seen.add(key)
                out.append(Path(match))
    return out


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


def _limited(lines: list[str], what: str) -> list[str]:
    if len(lines) <= MAX_LISTED:
        return lines
    return lines[:MAX_LISTED] + [f"... and {len(lines) - MAX_LISTED} more {what}"]


@dataclass
class Merged:
    """The stores as one. Quacks like commands.StoreFile where the commands read one."""

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
        return notes + _limited(self.replaced, "arms in several stores")

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
    for index, store in enumerate(stores):
        latest: dict[str, int] = {}
        for position, (record, line) in enumerate(zip(store.records, store.line_of)):
            if record.task_hash is not None:
                hashes.setdefault(str(record.task_id), {}).setdefault(
                    str(record.task_hash), (store.path, line))
            latest.pop(record.arm_id, None)
            latest[record.arm_id] = position
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


# -- the merge command ----------------------------------------------------------------------
def _refuse_output_over_input(out: Path, inputs: list[Path]) -> None:
    for path in inputs:
        same = os.path.realpath(out) == os.path.realpath(path)
        if not same and out.exists():
            try:
                same = os.path.samefile(out, path)
            except OSError:
                pass
        if same:
            raise Refused(f"{out}: is also an input ({path}); merge never writes over an "
                          f"input: name a new OUT")


def _keep_existing(out: Path) -> Path | None:
    """An existing OUT is kept under a timestamped name, never overwritten (as a run's store)."""
    if not out.exists() and not out.is_symlink():
        return None
    if out.is_dir():
        raise Unusable(f"{out}: is a directory, expected the merged store's file name")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target, n = out.with_name(f"{out.stem}.{stamp}{out.suffix}"), 1
    while target.exists() or target.is_symlink():
        target, n = out.with_name(f"{out.stem}.{stamp}-{n}{out.suffix}"), n + 1
    out.rename(target)
    return target


def write_store(out: Path, merged: Merged) -> Path | None:
    """Write the records that count to OUT, each line exactly as its input had it, whole
    or not at all; returns where an old OUT was kept."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.merging-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            for index, store in enumerate(merged.stores):
                offsets = [store.offset_of[p] for i, p in merged.chosen if i == index]
                with open(store.path, "rb") as src:
                    for offset in offsets:
                        src.seek(offset)
                        line = src.readline()
                        fh.write(line if line.endswith(b"\n") else line + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        kept = _keep_existing(out)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return kept


def cmd_merge(args) -> int:
    out = Path(args.out)
    inputs = expand(args.stores)
    _refuse_output_over_input(out, inputs)
    stores = [read_store(p) for p in inputs]
    problems = [p for s in stores for p in s.problems]
    if problems:
        for line in _limited(problems, "problems"):
            say(f"problem: {line}", file=sys.stderr)
        raise Refused(f"{len(problems)} problem(s) in the inputs (listed above; `validate` "
                      f"shows them all): a merged store must be valid; nothing written")
    merged = combine(stores)
    merged.refuse_changed()
    for note in merged.skipped_notes():
        say(note, file=sys.stderr)
    for note in merged.pin_notes:
        say(f"warning: {note}", file=sys.stderr)
    kept = write_store(out, merged)
    total = sum(len(s.records) for s in stores)
    say(f"{out}: {len(merged.records)} arms from {len(stores)} stores ({total} records read"
        + (f", {len(merged.replaced)} arms in more than one store" if merged.replaced else "")
        + ")")
    if kept is not None:
        say(f"the previous {out.name} was kept as {kept}")
    return EXIT_OK


def validate_across(paths: Sequence[Path]) -> tuple[list[str], list[str]]:
    """(problems, warnings) `validate` adds when given several stores."""
    merged = combine([read_store(p) for p in paths])
    return merged.changed, merged.replaced + merged.pin_notes


__all__ = ["Merged", "Refused", "cmd_merge", "combine", "expand", "merged_pivot",
           "validate_across"]
