"""The pivot: pass rate per task x profile set, its uncertainty, what was blocked and why (P1-P3).

Cells (cell.py) are per-cell aggregates of the latest record per arm id (R3). They are
built in one pass over a store (`Pivot.of_store`, which keeps a small summary per arm,
never whole records, and reads only the keys it needs of each line) or over records in
memory (`Pivot.of_records`); both give the same cells. pivot_text.py renders them for
the terminal, report/html.py as HTML, through the same formatters.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator

from .cell import ArmSummary, Cell, plural
from .record import ArmRecord, RecordError, coerce, fields_reader
from .record_values import number_or_none
from .store_reader import fields_loader, read_at
from ..verdict import BLOCKED, blocked_grader


# What the pivot reads of a record, decided by the record's own checks (the usage
# numbers by the same rule, read without copying the rest of `usage`).
_FIELDS = ("arm_id", "task_id", "profile_set", "repeat", "state", "blocked_reason",
           "payload_hash", "run_id", "task_hash")
_read = fields_reader(_FIELDS)
_LINE_FIELDS = _FIELDS + ("usage", "judge_usage", "provenance", "xfail",
                          "sample_id")  # all `_summary` reads
_read_provenance = fields_reader(("arm_id", "provenance"))
PROVENANCE_PINS = ("harness", "harness_version", "jaato_sdk_version", "jaato_sdk_path")


class _Interned:
    """One tuple of pins per distinct provenance, shared by every arm that has it; the
    record's own check runs once per distinct value, not once per line."""

    def __init__(self):
        self._seen: dict[Any, tuple | None] = {}

    def __call__(self, data: dict) -> tuple | None:
        raw = data.get("provenance")
        if not raw:
            return None
        try:
            key: Any = tuple(raw.items()) if type(raw) is dict else raw
            return self._seen[key]
        except (KeyError, TypeError):  # new, or unhashable as read
            pass
        prov = _read_provenance(data)[1]
        pins = None if not prov else tuple(
            None if prov.get(k) is None else str(prov.get(k)) for k in PROVENANCE_PINS)
        try:
            self._seen[key] = pins
        except TypeError:
            pass
        return pins


def _summary(data: dict, offset: int | None, intern: _Interned) -> ArmSummary:
    """Raises RecordError when `data` is not a record."""
    arm_id, task, pset, repeat, state, reason, phash, run_id, thash = _read(data)
    if state == BLOCKED and not reason:
        reason = blocked_grader(data.get("verdicts"))
    usage = data.get("usage")
    cost = tokens = None
    if type(usage) is dict:
        cost = number_or_none(usage.get("cost_usd"))
        tokens = number_or_none(usage.get("spend_total_tokens"))
    judge = data.get("judge_usage")
    judged = type(judge) is dict
    judge_cost = number_or_none(judge.get("cost_usd")) if judged else None
    xfail = data.get("xfail")
    sample = data.get("sample_id")
    return ArmSummary(arm_id, str(task), pset or "default", repeat if repeat is not None else 0,
                      state, reason, phash, cost, tokens, run_id, thash, intern(data), offset,
                      judged, judge_cost,
                      xfail=("strict" if xfail.get("strict") else "xfail")
                      if type(xfail) is dict else None,
                      sample_id=sample if type(sample) is str else None)


def summarise(record: ArmRecord | dict, offset: int | None = None,
              intern: _Interned | None = None) -> ArmSummary:
    return _summary(coerce(record).to_dict(), offset, intern or _Interned())


class Pivot:
    """The cells of a store or of records, the latest record per arm id counted once.

    `arms(cell)` yields that cell's whole records (re-read from the store by offset, or
    from memory), so a renderer holds one cell's records at a time, never the store.
    """

    def __init__(self, summaries: dict[str, ArmSummary], *, source: Path | None = None,
                 records: dict[str, ArmRecord] | None = None):
        self.source = source
        self.name = source  # what notes call the store
        self._records = records
        cells: dict[tuple[str, str], Cell] = {}
        for a in summaries.values():
            key = (a.task_id, a.profile_set)
            cell = cells.get(key)
            if cell is None:
                cell = cells[key] = Cell(*key)
            cell.add(a)
        for cell in cells.values():
            cell.arms.sort(key=lambda a: (a.repeat, a.arm_id))
        self.cells = [cells[k] for k in sorted(cells)]
        self.lines_read = 0          # records read, superseded ones included
        self.skipped: list[tuple[int, str]] = []   # (line, why) of lines with no record
        self.partial_last: int | None = None       # a cut last line (a run stopped mid-write)

    # -- building --------------------------------------------------------------------------------
    @classmethod
    def of_records(cls, records: Iterable[ArmRecord | dict]) -> "Pivot":
        latest: dict[str, ArmRecord] = {}
        n = 0
        for r in records:
            r = coerce(r)
            n += 1
            latest.pop(r.arm_id, None)  # the last record wins, at its own place
            latest[r.arm_id] = r
        intern = _Interned()
        pivot = cls({a: summarise(r, intern=intern) for a, r in latest.items()}, records=latest)
        pivot.lines_read = n
        return pivot

    @classmethod
    def of_store(cls, path: Path | str, name: Path | str | None = None) -> "Pivot":
        """One pass over the store; raises OSError when it cannot be read. `name`: what
        to call it, when `path` is another way to the same file (an open descriptor's)."""
        path = Path(path)
        latest, skipped, partial, n = _scan(path)
        pivot = cls(latest, source=path)
        pivot.name = Path(name) if name is not None else path
        pivot.lines_read, pivot.skipped, pivot.partial_last = n, skipped, partial
        return pivot

    # -- reading ---------------------------------------------------------------------------------
    @property
    def arm_count(self) -> int:
        return sum(c.arms_total for c in self.cells)

    @property
    def counted(self) -> str:
        """What the pivot counted, said: `5 arms`, or `5 arms (7 records: 2 superseded by a
        later record of the same arm, which is the one counted)` (R3)."""
        said = plural(self.arm_count, "arm")
        extra = self.lines_read - self.arm_count
        if extra > 0:
            said += (f" ({plural(self.lines_read, 'record')}: {extra} superseded by a later "
                     f"record of the same arm, which is the one counted)")
        return said

    def arms(self, cell: Cell, states: Iterable[str] | None = None) -> Iterator[ArmRecord]:
        """The cell's latest records, in its order (repeat, arm id); only those in
        `states` when given (e.g. a report showing evidence of FAIL/BLOCKED arms only)."""
        wanted = None if states is None else set(states)
        chosen = [a for a in cell.arms if wanted is None or a.state in wanted]
        if self._records is not None:
            return (self._records[a.arm_id] for a in chosen)
        return read_at(self.source, [a.offset for a in chosen])

    def records(self) -> Iterator[ArmRecord]:
        """Every latest record, cell by cell."""
        for cell in self.cells:
            yield from self.arms(cell)

    def tasks(self) -> Iterator[tuple[str, list[Cell]]]:
        """(task id, its cells), in the pivot's order."""
        group: list[Cell] = []
        for cell in self.cells:
            if group and group[0].task_id != cell.task_id:
                yield group[0].task_id, group
                group = []
            group.append(cell)
        if group:
            yield group[0].task_id, group

    def skipped_notes(self) -> list[str]:
        notes = [f"{self.name}:{n}: skipped: {why}" for n, why in self.skipped]
        if self.partial_last:
            notes.append(f"{self.name}:{self.partial_last}: skipped: partial last line "
                         f"(a run stopped mid-write)")
        return notes


def _scan(path: Path):
    """(latest summary per arm, skipped lines, partial last line, records read)."""
    latest: dict[str, ArmSummary] = {}
    skipped: list[tuple[int, str]] = []
    partial = None
    intern = _Interned()
    n = offset = 0
    loads, summary, loads_whole = fields_loader(_LINE_FIELDS), _summary, fields_loader()
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            start, offset = offset, offset + len(raw)
            if raw.isspace():
                continue
            try:
                data = loads(raw)
                if type(data) is dict and data.get("state") == BLOCKED and not data.get("blocked_reason"):
                    data = loads_whole(raw)  # rare: the reason is a grader's (its verdicts)
                a = summary(data, start, intern)
            except RecordError as exc:
                skipped.append((number, str(exc)))
                continue
            except ValueError:
                if raw.endswith(b"\n"):
                    skipped.append((number, "not JSON"))
                else:
                    partial = number
                continue
            n += 1
            latest.pop(a.arm_id, None)
            latest[a.arm_id] = a
    return latest, skipped, partial, n


def build_cells(records: Iterable[ArmRecord | dict[str, Any]]) -> list[Cell]:
    """The cells of records in memory (the latest per arm id)."""
    return Pivot.of_records(records).cells
