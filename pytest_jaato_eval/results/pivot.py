"""The pivot: pass rate per task x profile set, its uncertainty, what was blocked and why (P1-P3).

Cells are per-cell aggregates of the latest record per arm id (R3). They are built
in one pass over a store (`Pivot.of_store`, which keeps a small summary per arm,
never whole records) or over records in memory (`Pivot.of_records`); both give the
same cells. Rendered twice: as fixed-width lines for the terminal here, and as HTML
in report/html.py, through the formatters below, so both say the same thing.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import stats
from .record import ArmRecord, RecordError, coerce, fields_reader
from .record_values import number_or_none
from ..render import safe_text
from .store import fields_loader, read_at
from ..verdict import FAIL, PASS

DASH = "—"  # unknown, never 0 (P2)
ID_WIDTH = 80  # a task id or set name in a pivot row: long enough to tell ids apart

LEGEND = ("CI: 95% Wilson interval · floor: pass rate counting BLOCKED as FAIL · "
          "—: unknown, never 0",
          "det: share of answering arms (a payload) with the modal payload, — under two "
          "answers · pass@k / pass^k: any / all of k attempts pass")
PARTIAL_NOTE = "+: some arms reported none; the sum covers the arms that did"


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 arm`, `2 arms`: every count a person reads."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


@dataclass(slots=True)
class ArmSummary:
    """What the pivot keeps of one arm: enough for the cells, `compare`, the run pins,
    and the byte offset of its record for readers that want the whole of it."""
    arm_id: str
    task_id: str
    profile_set: str
    repeat: int
    state: str | None
    blocked_reason: str | None
    payload_hash: str | None
    cost: float | None
    tokens: float | None
    run_id: str | None = None
    task_hash: str | None = None
    provenance: tuple | None = None   # PROVENANCE_PINS values, shared between arms
    offset: int | None = None


@dataclass
class Cell:
    task_id: str
    profile_set: str
    passed: int = 0
    failed: int = 0
    blocked: int = 0
    cost: float | None = None
    tokens: float | None = None
    cost_unknown: int = 0      # arms whose cost nobody reported (P2)
    tokens_unknown: int = 0
    exercised_cost: float = 0.0   # summed over the exercised arms that reported a cost
    exercised_costed: int = 0
    payloads: Counter = field(default_factory=Counter)  # answers of exercised arms
    unanswered: int = 0        # exercised arms that left no payload
    reasons: Counter = field(default_factory=Counter)
    arms: list[ArmSummary] = field(default_factory=list)

    def add(self, a: ArmSummary) -> None:
        self.arms.append(a)
        if a.state == PASS:
            self.passed += 1
        elif a.state == FAIL:
            self.failed += 1
        else:  # BLOCKED, or a state nobody knows: never counted as a verdict on the agent
            self.blocked += 1
            self.reasons[reason_key(a.blocked_reason or f"state {a.state!r}")] += 1
        if a.state in (PASS, FAIL):
            if a.payload_hash is None:
                self.unanswered += 1
            else:
                self.payloads[a.payload_hash] += 1
            if a.cost is not None:
                self.exercised_cost += a.cost
                self.exercised_costed += 1
        if a.cost is None:
            self.cost_unknown += 1
        else:
            self.cost = a.cost if self.cost is None else self.cost + a.cost
        if a.tokens is None:
            self.tokens_unknown += 1
        else:
            self.tokens = a.tokens if self.tokens is None else self.tokens + a.tokens

    @property
    def arms_total(self) -> int:
        return self.passed + self.failed + self.blocked

    @property
    def exercised(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        return stats.rate(self.passed, self.exercised)  # P1: BLOCKED is not in the denominator

    @property
    def interval(self) -> tuple[float, float] | None:
        return stats.wilson(self.passed, self.exercised)

    @property
    def floor(self) -> float | None:
        """The pass rate if every BLOCKED arm had failed: what a pessimist may claim."""
        return stats.rate(self.passed, self.arms_total)

    @property
    def answered(self) -> int:
        """Exercised arms that produced a payload: the only ones that can agree."""
        return self.exercised - self.unanswered

    @property
    def det(self) -> float | None:
        """P3: share of answering arms with the modal payload; None under two answers (a
        missing payload agrees with nothing, and one answer agrees only with itself)."""
        if self.answered < 2:
            return None
        return stats.modal_share(self.payloads.elements())

    @property
    def det_text(self) -> str:
        """`det` as shown: with how many answered when some exercised arm did not."""
        text = pct(self.det)
        if self.det is not None and self.unanswered:
            text += f" ({self.answered} of {self.exercised} answered)"
        return text

    def pass_at(self, k: int | None) -> float | None:
        return None if k is None else stats.pass_at_k(self.exercised, self.passed, k)

    def pass_hat(self, k: int | None) -> float | None:
        return None if k is None else stats.pass_hat_k(self.exercised, self.passed, k)

    @property
    def mean_cost(self) -> float | None:
        """Mean cost of an exercised arm, over the exercised arms that reported one."""
        return self.exercised_cost / self.exercised_costed if self.exercised_costed else None


# What the pivot reads of a record, decided by the record's own checks (the usage
# numbers by the same rule, read without copying the rest of `usage`).
_FIELDS = ("arm_id", "task_id", "profile_set", "repeat", "state", "blocked_reason",
           "payload_hash", "run_id", "task_hash")
_read = fields_reader(_FIELDS)
_LINE_FIELDS = _FIELDS + ("usage", "provenance")  # all `_summary` reads of a line
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
    usage = data.get("usage")
    cost = tokens = None
    if type(usage) is dict:
        cost = number_or_none(usage.get("cost_usd"))
        tokens = number_or_none(usage.get("spend_total_tokens"))
    return ArmSummary(arm_id, str(task), pset or "default", repeat if repeat is not None else 0,
                      state, reason, phash, cost, tokens, run_id, thash, intern(data), offset)


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
        for r in records:
            r = coerce(r)
            latest.pop(r.arm_id, None)  # the last record wins, at its own place
            latest[r.arm_id] = r
        intern = _Interned()
        pivot = cls({a: summarise(r, intern=intern) for a, r in latest.items()}, records=latest)
        pivot.lines_read = len(latest)
        return pivot

    @classmethod
    def of_store(cls, path: Path | str) -> "Pivot":
        """One pass over the store; raises OSError when it cannot be read."""
        path = Path(path)
        latest, skipped, partial, n = _scan(path)
        pivot = cls(latest, source=path)
        pivot.lines_read, pivot.skipped, pivot.partial_last = n, skipped, partial
        return pivot

    # -- reading ---------------------------------------------------------------------------------
    @property
    def arm_count(self) -> int:
        return sum(c.arms_total for c in self.cells)

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
        notes = [f"{self.source}:{n}: skipped: {why}" for n, why in self.skipped]
        if self.partial_last:
            notes.append(f"{self.source}:{self.partial_last}: skipped: partial last line "
                         f"(a run stopped mid-write)")
        return notes


def _scan(path: Path):
    """(latest summary per arm, skipped lines, partial last line, records read)."""
    latest: dict[str, ArmSummary] = {}
    skipped: list[tuple[int, str]] = []
    partial = None
    intern = _Interned()
    n = offset = 0
    loads, summary = fields_loader(_LINE_FIELDS), _summary
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            start, offset = offset, offset + len(raw)
            if raw.isspace():
                continue
            try:
                a = summary(loads(raw), start, intern)
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


def default_k(cells: list[Cell]) -> int | None:
    """One k for the whole pivot, so pass@k compares across cells: the smallest sample
    among cells with repeats (at least 2 exercised arms); None when no cell has repeats."""
    ns = [c.exercised for c in cells if c.exercised >= 2]
    return min(ns) if ns else None


# Ids in a reason (sessions, UUIDs, hashes) would split one cause into many digest lines.
_IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
                  r"|\b[0-9a-f]{16,}\b", re.IGNORECASE)


def reason_key(reason: str, width: int = 160) -> str:
    """A blocked reason as one digest line: whitespace collapsed, ids elided, control
    characters shown as escapes, truncated (render.safe_text)."""
    return safe_text(_IDS.sub("…", " ".join(str(reason).split())), width)


def digest(cells: list[Cell]) -> list[tuple[Cell, str, int]]:
    """P1: every blocked reason with its count, most frequent first."""
    rows = [(c, reason, n) for c in cells for reason, n in c.reasons.most_common()]
    return sorted(rows, key=lambda d: -d[2])  # stable: ties keep task order


# -- formatters shared by the terminal and the HTML report ---------------------------------
def pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.0f}%"


def interval_text(iv: tuple[float, float] | None) -> str:
    return DASH if iv is None else f"{100 * iv[0]:.0f}–{100 * iv[1]:.0f}%"


def money(x: float | None, partial: bool = False) -> str:
    return DASH if x is None else f"${x:.4f}{'+' if partial else ''}"


def count(x: float | None, partial: bool = False) -> str:
    return DASH if x is None else f"{x:,.0f}{'+' if partial else ''}"


def cell_row(c: Cell, k: int | None) -> dict[str, str]:
    """The cell's values as text, keyed by column header (P1-P3)."""
    row = {  # ids come from manifests and the command line: shown, never obeyed
        "task": safe_text(c.task_id, ID_WIDTH, collapse=False),
        "profile set": safe_text(c.profile_set, ID_WIDTH, collapse=False),
        "pass rate": pct(c.pass_rate), "95% CI": interval_text(c.interval),
        "n": str(c.exercised), "pass": str(c.passed), "fail": str(c.failed),
        "blocked": str(c.blocked), "floor": pct(c.floor),
        "cost": money(c.cost, partial=c.cost is not None and c.cost_unknown > 0),
        "tokens": count(c.tokens, partial=c.tokens is not None and c.tokens_unknown > 0),
        "det": c.det_text,
    }
    if k is not None:
        row[f"pass@{k}"] = pct(c.pass_at(k))
        row[f"pass^{k}"] = pct(c.pass_hat(k))
    return row


def row_id(c: Cell) -> str:
    """`task @ set` for a digest line, safe to print."""
    return (f"{safe_text(c.task_id, ID_WIDTH, collapse=False)} @ "
            f"{safe_text(c.profile_set, ID_WIDTH, collapse=False)}")


def pivot_rows(cells: list[Cell], k: int | None = None) -> tuple[list[str], list[dict[str, str]]]:
    k = default_k(cells) if k is None else k
    rows = [cell_row(c, k) for c in cells]
    header = list(rows[0]) if rows else list(cell_row(Cell("", ""), k))
    return header, rows


def render_pivot(cells: list[Cell], k: int | None = None) -> list[str]:
    """Fixed-width terminal lines: the table, a legend, then the digest of blocked reasons."""
    header, rows = pivot_rows(cells, k)
    table = [header] + [[r[h] for h in header] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    right = {h for h in header if h not in ("task", "profile set")}  # numbers align right
    lines = ["  ".join(v.rjust(w) if h in right else v.ljust(w)
                       for h, v, w in zip(header, row, widths)).rstrip() for row in table]
    lines.append("")
    lines.extend(LEGEND)
    if any(r["cost"].endswith("+") or r["tokens"].endswith("+") for r in rows):
        lines.append(PARTIAL_NOTE)
    rows_digest = digest(cells)
    if rows_digest:
        lines.append("")
        lines.append("blocked reasons (most frequent first):")
        for c, reason, n in rows_digest:
            lines.append(f"  {row_id(c)}: ({n}×) {reason}")
    return lines
