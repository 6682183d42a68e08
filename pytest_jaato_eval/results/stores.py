"""Reading result stores: the one reader of one store or several, ours or jaato-eval 0.3.4's.

`scan` streams a store line by line, keeping nothing; `read_store` holds one whole (its
records with their line numbers and byte offsets, what was skipped, the problems
`validate` would report); `combine` reads several as one. A store anybody may have
written is refused in one line naming the file (`Unusable`), never with a traceback.

Several stores read as one (`report`, `compare`, `validate`, `merge`) follow these
rules, the same for every command:

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

import functools
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .record import DEFAULT_SET, ArmRecord, RecordError, number, record_problems

MAX_LISTED = 20  # lines of one kind on stderr before "... and N more"
# A store is read line by line through a buffer this big: a third of the CPU the default
# 8 KiB one costs on a 300 MB store (`read_at`'s seeks keep the default: a line each).
LINE_BUFFER = 1 << 20


@dataclass(slots=True)
class Line:
    """One non-blank line of a store: its record, or why it has none."""
    number: int
    offset: int
    record: ArmRecord | None
    problem: str | None = None      # "not JSON", "not a result record (...)"
    partial: bool = False           # a cut last line: a run stopped mid-write
    problems: list[str] | None = None  # the record's own (only with check=True)


class TooDeep(ValueError):
    """A line nested deeper than a parser recurses: read as not JSON, never a traceback."""


def _int(text: str) -> int | float:
    """A JSON integer. One longer than Python converts (4,300 digits) is still a number,
    read as +/-inf (a number no reader can show: unknown), as msgspec does when it skips
    it, so the fast and the whole readers agree on which lines are records."""
    limit = sys.get_int_max_str_digits()
    if limit and len(text) - text.startswith("-") > limit:
        return float(text)
    return int(text)


def _json_loads(raw: bytes) -> Any:
    try:
        try:
            return json.loads(raw, parse_int=_int)
        except UnicodeDecodeError:  # invalid UTF-8 in some text: read it, shown replaced
            return json.loads(raw.decode("utf-8", errors="replace"), parse_int=_int)
    except RecursionError:
        raise TooDeep("nested too deeply") from None


def fields_loader(names: tuple[str, ...] | None = None) -> Callable[[bytes], Any]:
    """A loader of one store line, as `json.loads(raw)` reads it: the whole line, or with
    `names`, only those top-level keys ({key: value}, absent ones None).

    msgspec parses about three times faster than `json`, and with `names` skips the other
    keys (a failed verdict's evidence is most of a line) while still checking the whole
    line is JSON: about five times faster. A line it does not take (NaN, a number out of
    range, a lone surrogate, invalid UTF-8...) is read by `json`, so every line means what
    `json.loads` says it means (an integer of more than 4,300 digits: a number out of range,
    where `json.loads` alone would refuse the line).
    """
    try:
        import msgspec  # optional (a minimal install reads json), and only once a store is read
    except ImportError:  # a minimal install: everything is read by json
        return _json_loads
    decode: Callable[[bytes], Any]
    if names is None:
        decode = msgspec.json.decode
    else:
        head = msgspec.defstruct("StoreLineHead", [(name, Any, None) for name in names])
        decode_head, asdict = msgspec.json.Decoder(head).decode, msgspec.structs.asdict

        def decode_keys(raw: bytes) -> Any:
            return asdict(decode_head(raw))
        decode = decode_keys

    def load(raw: bytes) -> Any:
        try:
            return decode(raw)
        except msgspec.MsgspecError:
            return _json_loads(raw)
        except RecursionError:
            raise TooDeep("nested too deeply") from None
    return load


@functools.cache
def _whole_line_loader() -> Callable[[bytes], Any]:
    """`fields_loader()`, made on the first store read: every pytest run loads this
    module, and msgspec waits for a store."""
    return fields_loader()


def scan(path: Path | str, check: bool = False) -> Iterator[Line]:
    """Every non-blank line of a store, in order, with its record; one pass, nothing
    kept. A line that is not a record says why; a cut last line is marked partial.
    Raises OSError when the file cannot be read."""
    load = _whole_line_loader()
    with open(path, "rb", buffering=LINE_BUFFER) as fh:
        offset = 0
        number = 0
        for raw in fh:
            number += 1
            start, offset = offset, offset + len(raw)
            if raw.isspace():
                continue
            try:
                data = load(raw)
            except ValueError:
                yield Line(number, start, None, "not JSON", partial=not raw.endswith(b"\n"))
                continue
            problems: list[str] | None = [] if check else None
            try:
                record = ArmRecord.from_dict(data, problems)
            except RecordError as exc:
                yield Line(number, start, None, str(exc))
                continue
            yield Line(number, start, record, problems=problems)


def read_at(path: Path | str, offsets) -> Iterator[ArmRecord]:
    """The records starting at these byte offsets (from `scan`), in the order given."""
    load = _whole_line_loader()
    with open(path, "rb") as fh:
        for offset in offsets:
            fh.seek(offset)
            yield ArmRecord.from_dict(load(fh.readline()))


def read_records(path: Path) -> Iterator[ArmRecord]:
    """Every complete record; a partial or unreadable line is skipped."""
    return (line.record for line in scan(path) if line.record is not None)


def latest_by_arm(records: Iterable[ArmRecord]) -> dict[str, ArmRecord]:
    """A repeated arm id counts once, at its last record's place (R3: the last wins)."""
    out: dict[str, ArmRecord] = {}
    for record in records:
        out.pop(record.arm_id, None)
        out[record.arm_id] = record
    return out


def task_ids_in(path: Path) -> set[str]:
    """The task ids a store holds (unreadable lines skipped)."""
    ids = set()
    load = fields_loader(("task_id",))
    try:
        with open(path, "rb", buffering=LINE_BUFFER) as fh:
            for raw in fh:
                try:
                    task = load(raw).get("task_id")
                except (ValueError, AttributeError):
                    continue
                if type(task) is str:
                    ids.add(task)
    except OSError:
        pass
    return ids


# -- one store, whole ---------------------------------------------------------------------------
class Unusable(Exception):
    """Input no command can work with; the message is the one line the user sees."""


class Refused(Unusable):
    """Stores that cannot be read as one (exit 2, like any unusable input)."""


TAMPERED = "tampered"  # the evidence of a store written into during its run (store.py)


def is_evidence(path: Path) -> bool:
    """A file a run set aside because somebody else wrote into it: never read as a store."""
    return f".{TAMPERED}-" in Path(path).name


def readable(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise Unusable(f"{path}: no such file")
    if path.is_dir():
        raise Unusable(f"{path}: is a directory, expected a JSONL result store")
    if is_evidence(path):
        raise Unusable(f"{path}: the evidence of a store written into while its run went on "
                       f"(set aside by that run, which wrote the store again): not a store")
    return path


def no_record(path: Path) -> Unusable:
    return Unusable(f"{path}: no result record (expected one JSON object per line, each "
                    f"with an arm_id)")


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
    value = number(record.finished_at)  # absent, or nothing a clock could have said: None
    return None if value is None else float(value)


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
    """The stores as one."""

    stores: list[StoreFile]
    records: list[ArmRecord] = field(default_factory=list)  # one per arm: the one that counts
    chosen: list[tuple[int, int]] = field(default_factory=list)  # (store, position) of each
    replaced: list[str] = field(default_factory=list)   # an arm in several stores: who won
    changed: list[str] = field(default_factory=list)    # a task with two content hashes

    @property
    def path(self) -> str:
        names = [str(s.path) for s in self.stores]
        if len(names) <= 4:
            return " + ".join(names)
        return f"{names[0]} + {len(names) - 1} more stores"

    def skipped_notes(self) -> list[str]:
        notes = [n for s in self.stores for n in s.skipped]
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
    return merged

