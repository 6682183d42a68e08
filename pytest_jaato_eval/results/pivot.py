"""The pivot: pass rate per task x profile set, its uncertainty, what was blocked and why (P1-P3).

A cell (task x profile set) aggregates the latest record per arm id (R3). Cells are
built in one pass over a store (`Pivot.of_store`, which keeps a small summary per arm,
never whole records, and reads only the keys it needs of each line), over records in
memory (`Pivot.of_records`), or over several stores read as one (`open_stores`); all
give the same cells.

Figures are formatted here once, for every medium: unknown is a dash, never 0 (P2). The
pivot is shown as the terminal's fixed-width table (`render_pivot`), the HTML report's
(report/html.py, from `pivot_rows`), and as `report`'s other formats (results/formats.py):
each holds the same cells as the table.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Iterable, Iterator, Sequence

from . import inference, stats
from .record import (DEFAULT_SET, INT_LIMIT, ArmRecord, RecordError, coerce, fields_reader,
                     number)
from .stores import (LINE_BUFFER, Unusable, combine, fields_loader, latest_by_arm, no_record,
                     read_at, read_store, readable)
from .table import Column, fit, wrap
from .table import table_lines  # noqa: F401 - the one fixed-width table, read from here too
from ..render import safe_text
from ..verdict import BLOCKED, FAIL, PASS, blocked_grader

DASH = "—"  # unknown, never 0 (P2)


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
    judged: bool = False              # a grader opened a session of its own (a judge)
    judge_cost: float | None = None   # what it cost, when reported
    xfail: str | None = None          # ran under an xfail mark: "xfail", or "strict"
    sample_id: str | None = None      # the dataset row it ran on
    regraded_from: str | None = None  # graded again (--jaato-regrade) from this run's snapshot


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
    payloads: Counter = field(default_factory=Counter)  # answers of exercised arms
    unanswered: int = 0        # exercised arms that left no payload
    reasons: Counter = field(default_factory=Counter)
    arms: list[ArmSummary] = field(default_factory=list)
    judged: int = 0            # arms a judge graded (a session of its own)
    judge_cost: float | None = None
    judge_cost_unknown: int = 0   # judged arms whose judge reported no cost
    expected_failures: int = 0    # FAIL arms that ran under an xfail mark: not the run's FAIL
    strict_passes: int = 0        # PASS arms under a strict xfail mark: the run's FAIL
    regraded: int = 0             # arms graded again from an earlier run's snapshots
    # A dataset task's samples, each its own tally: pass@k, pass^k and det are about the
    # repeats of one input, so they are taken per sample and averaged over the samples.
    samples: dict[str, "SampleTally"] = field(default_factory=dict)
    _items: dict[str, inference.Item] | None = field(default=None, repr=False, compare=False)

    def add(self, a: ArmSummary) -> None:
        self.arms.append(a)
        self._items = None
        if a.regraded_from is not None:
            self.regraded += 1
        if a.sample_id is not None:
            self.samples.setdefault(a.sample_id, SampleTally()).add(a)
        if a.state == PASS:
            self.passed += 1
            if a.xfail == "strict":
                self.strict_passes += 1
        elif a.state == FAIL:
            self.failed += 1
            if a.xfail is not None:
                self.expected_failures += 1
        else:  # BLOCKED, or a state nobody knows: never counted as a verdict on the agent
            self.blocked += 1
            self.reasons[reason_key(a.blocked_reason or f"state {a.state!r}")] += 1
        if a.state in (PASS, FAIL):
            if a.payload_hash is None:
                self.unanswered += 1
            else:
                self.payloads[a.payload_hash] += 1
        if a.cost is None:
            self.cost_unknown += 1
        else:
            self.cost = a.cost if self.cost is None else self.cost + a.cost
        if a.judged:
            self.judged += 1
            if a.judge_cost is None:
                self.judge_cost_unknown += 1
            else:
                self.judge_cost = (a.judge_cost if self.judge_cost is None
                                   else self.judge_cost + a.judge_cost)
        if a.tokens is None:
            self.tokens_unknown += 1
        else:
            self.tokens = a.tokens if self.tokens is None else self.tokens + a.tokens

    @property
    def items(self) -> dict[str, inference.Item]:
        """The cell's items (inference.Item, by sample id), counted once from its arms in
        their order: every headline, pair and dataset interval reads them."""
        if self._items is None:
            self._items = inference.items_of(self.arms)
        return self._items

    @property
    def fails_the_run(self) -> bool:
        """Whether the cell's arms failed the run as pytest judged it: a FAIL not expected
        by an xfail mark, or a PASS a strict xfail mark did not expect."""
        return self.failed > self.expected_failures or self.strict_passes > 0

    @property
    def fail_text(self) -> str:
        """The fail count, with the expected failures among them (`3 (1 xfail)`)."""
        return f"{self.failed} ({self.expected_failures} xfail)" if self.expected_failures \
            else str(self.failed)

    @property
    def total_cost(self) -> float | None:
        """The agent's cost and the judge's together (either alone when the other is unknown)."""
        if self.cost is None and self.judge_cost is None:
            return None
        return (self.cost or 0.0) + (self.judge_cost or 0.0)

    @property
    def total_cost_partial(self) -> bool:
        return self.total_cost is not None and (self.cost_unknown + self.judge_cost_unknown) > 0

    @property
    def arms_total(self) -> int:
        return self.passed + self.failed + self.blocked

    @property
    def exercised(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        if self.samples:  # a dataset's samples weigh the same, as in the headline
            return self._over_samples.rate
        return stats.rate(self.passed, self.exercised)  # P1: BLOCKED is not in the denominator

    @property
    def interval(self) -> tuple[float, float] | None:
        """Wilson's over the arms; for a dataset task, over its samples as the units (the
        repeats of one sample are not independent coins: the headline's clustered
        interval, inference.headline)."""
        if self.samples:
            return self._over_samples.interval
        return stats.wilson(self.passed, self.exercised)

    @property
    def _over_samples(self) -> inference.Headline:
        return inference.headline(self.profile_set, inference.tasks_of([self]))

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
        """P3, jaato-eval's number: the largest group of exercised arms with one payload, over
        every exercised arm; 0 when no two agree (a group of one is no agreement); None
        under two answers. An arm without a payload stays in the denominator: it did not
        reproduce the answer, and det_text says how many answered."""
        if self.samples:
            return _mean(t.det for t in self.samples.values())
        return stats.det(self.payloads, self.exercised)

    @property
    def det_text(self) -> str:
        """`det` as shown: with how many answered when some exercised arm did and some did
        not, a dash included (`— (1 of 2 answered)`: it is a dash because one answered), as
        jaato-eval. When none answered (an agent that never signs off with a payload), det
        says nothing, and shows only the dash."""
        text = pct(self.det)
        if self.unanswered and self.answered:
            text += f" ({self.answered} of {self.exercised} answered)"
        return text

    def pass_at(self, k: int | None) -> float | None:
        return self._per_input(stats.pass_at_k, k)

    def short_of(self, k: int | None) -> int:
        """The dataset's samples pass@k and pass^k leave out: under k exercised repeats."""
        if k is None:
            return 0
        return sum(t.passed + t.failed < k for t in self.samples.values())

    def per_input_text(self, value: float | None, k: int | None) -> str:
        """pass@k or pass^k as shown: with the samples it is over when it left some out."""
        short = self.short_of(k)
        if not short or value is None:
            return pct(value)
        return f"{pct(value)} ({len(self.samples) - short} of {len(self.samples)} samples)"

    def pass_hat(self, k: int | None) -> float | None:
        return self._per_input(stats.pass_hat_k, k)

    def _per_input(self, estimate, k: int | None) -> float | None:
        """`estimate(n, c, k)` of the cell, or its mean over a dataset's samples."""
        if k is None:
            return None
        if self.samples:
            return _mean(estimate(t.passed + t.failed, t.passed, k) for t in self.samples.values())
        return estimate(self.exercised, self.passed, k)

    @property
    def attempts(self) -> list[int]:
        """The exercised arms of each attempt group: of each sample, or of the cell."""
        if self.samples:
            return [t.passed + t.failed for t in self.samples.values()]
        return [self.exercised]


def default_k(cells: list[Cell]) -> int | None:
    """One k for the whole pivot, so pass@k compares across cells: the fewest exercised
    repeats of one input (a cell, or a dataset's sample) among those with repeats (at
    least 2); None when nothing was repeated."""
    ns = [n for c in cells for n in c.attempts if n >= 2]
    return min(ns) if ns else None


@dataclass(slots=True)
class SampleTally:
    """One sample's arms in a cell: what pass@k and det need."""
    passed: int = 0
    failed: int = 0
    payloads: Counter = field(default_factory=Counter)

    def add(self, a: ArmSummary) -> None:
        if a.state in (PASS, FAIL):
            if a.state == PASS:
                self.passed += 1
            else:
                self.failed += 1
            if a.payload_hash is not None:
                self.payloads[a.payload_hash] += 1

    @property
    def det(self) -> float | None:
        """The cell's det rule, within the sample."""
        return stats.det(self.payloads, self.passed + self.failed)


def _mean(values: Iterable[float | None]) -> float | None:
    """The mean of the known values; None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


# Ids in a reason (UUIDs, hashes, jaato's `YYYYMMDD_HHMMSS` session ids) would split one
# cause into many digest lines.
_IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
                  r"|\b[0-9a-f]{16,}\b|\b\d{8}_\d{6}(?:_\w+)?\b", re.IGNORECASE)


def reason_key(reason: str, width: int = 160) -> str:
    """A blocked reason as one digest line: whitespace collapsed, ids elided, control
    characters shown as escapes, truncated (render.safe_text)."""
    return safe_text(_IDS.sub("…", " ".join(str(reason).split())), width)


def digest(cells: list[Cell]) -> list[tuple[Cell, str, int]]:
    """P1: every blocked reason with its count, most frequent first."""
    rows = [(c, reason, n) for c in cells for reason, n in c.reasons.most_common()]
    return sorted(rows, key=lambda d: -d[2])  # stable: ties keep task order


# -- figures as text -----------------------------------------------------------------------
def pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.0f}%"


def interval_text(iv: tuple[float, float] | None) -> str:
    return DASH if iv is None else f"{100 * iv[0]:.0f}–{100 * iv[1]:.0f}%"


def money(x: float | None, partial: bool = False) -> str:
    return DASH if x is None else f"${x:.4f}{'+' if partial else ''}"


def count(x: float | None, partial: bool = False) -> str:
    return DASH if x is None else f"{x:,.0f}{'+' if partial else ''}"


# What the pivot reads of a record, decided by the record's own checks (the usage
# numbers by the same rule, read without copying the rest of `usage`).
_FIELDS = ("arm_id", "task_id", "profile_set", "repeat", "state", "blocked_reason",
           "payload_hash", "run_id", "task_hash")
_read = fields_reader(_FIELDS)
_LINE_FIELDS = _FIELDS + ("usage", "judge_usage", "provenance", "xfail",
                          "sample_id", "regraded")  # all `_summary` reads
_read_provenance = fields_reader(("arm_id", "provenance"))
PROVENANCE_PINS = ("harness", "harness_version", "jaato_sdk_version", "jaato_sdk_path")


class _Interned:
    """One tuple of pins per distinct provenance, shared by every arm that has it; the
    record's own check runs once per distinct value, not once per line."""

    def __init__(self):
        self._seen: dict[Any, tuple | None] = {}

    def __call__(self, data: dict, typed: bool = False) -> tuple | None:
        """The pins of a store line's `provenance`, or (typed) of a record's."""
        raw = data.get("provenance")
        if not raw:
            return None
        try:
            key: Any = tuple(raw.items()) if type(raw) is dict else raw
            return self._seen[key]
        except (KeyError, TypeError):  # new, or unhashable as read
            pass
        prov = raw if typed else _read_provenance(data)[1]
        pins = None if not prov else tuple(
            None if prov.get(k) is None else str(prov.get(k)) for k in PROVENANCE_PINS)
        try:
            self._seen[key] = pins
        except TypeError:
            pass
        return pins


def counted_tokens(tokens: float | None, cost: float | None) -> float | None:
    """P2: a token count of 0 beside a cost nobody reported is no count (the daemon reports
    0 where the provider reported nothing), so it is unknown, as the cost is."""
    return None if tokens == 0 and cost is None else tokens


def _summary(data: dict, offset: int | None, intern: _Interned) -> ArmSummary:
    """Raises RecordError when `data` is not a record."""
    arm_id, task, pset, repeat, state, reason, phash, run_id, thash = _read(data)
    if state == BLOCKED and not reason:
        reason = blocked_grader(data.get("verdicts"))
    get = data.get
    return _arm(arm_id, task, pset, repeat, state, reason, phash, run_id, thash, get("usage"),
                get("judge_usage"), intern(data), offset, get("xfail"), get("sample_id"),
                get("regraded"))


def _arm(arm_id: str, task: Any, pset: str | None, repeat: int | None, state: str | None,
         reason: str | None, phash: str | None, run_id: str | None, thash: str | None,
         usage: Any, judge: Any, pins: tuple | None, offset: int | None, xfail: Any,
         sample: Any, regraded: Any) -> ArmSummary:
    """The summary of a line's fields, read and checked (`_summary`, `_LineReader`)."""
    cost = tokens = None
    if type(usage) is dict:
        cost = number(usage.get("cost_usd"))
        tokens = counted_tokens(number(usage.get("spend_total_tokens")), cost)
    judged = type(judge) is dict
    judge_cost = number(judge.get("cost_usd")) if judged and isinstance(judge, dict) else None
    return ArmSummary(arm_id, str(task), pset or DEFAULT_SET,
                      repeat if repeat is not None else 0, state, reason, phash, cost, tokens,
                      run_id, thash, pins, offset, judged, judge_cost,
                      **_marks(xfail, sample), regraded_from=_regraded_from(regraded))


class _LineReader:
    """The summary of a store line the common way: its fields decoded straight into the
    types `_summary` keeps as they are (strings, an in-range int, mappings), the
    provenance left as its bytes and read once per distinct value. A line it cannot take
    so (another type somewhere, a BLOCKED arm whose reason is a grader's, JSON msgspec
    refuses) raises LookupError, and `_summary` reads it: the same summary either way, at
    a third of the CPU (bench/bench_store.py)."""

    def __init__(self, intern: _Interned):
        import msgspec  # optional, as for every store read (stores.fields_loader)
        text, mapping = str | None, dict[str, Any] | None
        exact = Annotated[int, msgspec.Meta(ge=-INT_LIMIT, le=INT_LIMIT)] | None
        line = msgspec.defstruct("StoreLineSummary", [
            ("arm_id", str), ("task_id", text, None), ("profile_set", text, None),
            ("repeat", exact, None), ("state", text, None), ("blocked_reason", text, None),
            ("payload_hash", text, None), ("run_id", text, None), ("task_hash", text, None),
            ("usage", mapping, None), ("judge_usage", mapping, None),
            ("provenance", msgspec.Raw, msgspec.Raw(b"")), ("xfail", mapping, None),
            ("sample_id", Any, None), ("regraded", Any, None)])
        self._decode = msgspec.json.Decoder(line).decode
        self._error = (msgspec.MsgspecError, RecursionError)  # too deep: `_summary` says so
        self._intern = intern
        self._pins: dict[bytes, tuple | None] = {}
        self._value = fields_loader()

    def __call__(self, raw: bytes, offset: int) -> ArmSummary:
        try:
            h: Any = self._decode(raw)
        except self._error:
            raise LookupError from None
        if h.state == BLOCKED and not h.blocked_reason:
            raise LookupError
        return _arm(h.arm_id, h.task_id, h.profile_set, h.repeat, h.state, h.blocked_reason,
                    h.payload_hash, h.run_id, h.task_hash, h.usage, h.judge_usage,
                    self._pins_of(h.arm_id, bytes(h.provenance)), offset, h.xfail,
                    h.sample_id, h.regraded)

    def _pins_of(self, arm_id: str, raw: bytes) -> tuple | None:
        try:
            return self._pins[raw]
        except KeyError:
            pass
        data = {"arm_id": arm_id, "provenance": self._value(raw) if raw else None}
        pins = self._pins[raw] = self._intern(data)
        return pins


def _marks(xfail: Any, sample: Any) -> dict[str, str | None]:
    """The keys an arm of ours may add: its xfail mark and its dataset row."""
    return {"xfail": ("strict" if xfail.get("strict") else "xfail")
            if type(xfail) is dict else None,
            "sample_id": sample if type(sample) is str else None}


def _regraded_from(regraded: Any) -> str | None:
    """The run a regraded record's agent ran in (its `regraded`), or None."""
    if type(regraded) is not dict:
        return None
    run = regraded.get("agent_run_id") or regraded.get("run_id")
    return run if type(run) is str else "an unknown run"


def summarise(record: ArmRecord, intern: _Interned | None = None) -> ArmSummary:
    """What the pivot keeps of a record in memory, read from its typed fields (`_summary`
    decides the same values from a store's line)."""
    reason = record.blocked_reason
    if record.state == BLOCKED and not reason:
        reason = blocked_grader(record.verdicts)
    return ArmSummary(record.arm_id, str(record.task_id), record.set_name,
                      record.repeat if record.repeat is not None else 0, record.state, reason,
                      record.payload_hash, record.cost, counted_tokens(record.tokens, record.cost),
                      record.run_id,
                      record.task_hash,
                      (intern or _Interned())({"provenance": record.provenance}, typed=True),
                      None, record.judge_usage is not None, record.judge_cost,
                      **_marks(record.extra.get("xfail"), record.extra.get("sample_id")),
                      regraded_from=_regraded_from(record.regraded))


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
        self.notes: list[str] = []   # what reading several stores as one said

    # -- building --------------------------------------------------------------------------------
    @classmethod
    def of_records(cls, records: Iterable[ArmRecord | dict]) -> "Pivot":
        every = [coerce(r) for r in records]
        latest = latest_by_arm(every)
        intern = _Interned()
        pivot = cls({a: summarise(r, intern=intern) for a, r in latest.items()}, records=latest)
        pivot.lines_read = len(every)
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

    def arms(self, cell: Cell, states: Iterable[str | None] | None = None,
             ) -> Iterator[ArmRecord]:
        """The cell's latest records, in its order (repeat, arm id); only those in
        `states` when given (e.g. a report showing evidence of FAIL/BLOCKED arms only)."""
        wanted = None if states is None else set(states)
        chosen = [a for a in cell.arms if wanted is None or a.state in wanted]
        if self._records is not None:
            return (self._records[a.arm_id] for a in chosen)
        assert self.source is not None  # a pivot without records is a store's
        return read_at(self.source, [a.offset for a in chosen])

    def records(self) -> Iterator[ArmRecord]:
        """Every latest record, cell by cell."""
        for cell in self.cells:
            yield from self.arms(cell)

    def skipped_notes(self) -> list[str]:
        notes = [f"{self.name}:{n}: skipped: {why}" for n, why in self.skipped]
        if self.partial_last:
            notes.append(f"{self.name}:{self.partial_last}: skipped: partial last line "
                         f"(a run stopped mid-write)")
        return notes + self.notes


def open_stores(paths: Sequence[Path]) -> Pivot:
    """One store's pivot, streamed, or several stores read as one (stores.combine, which
    refuses a changed task); Unusable when there is nothing to pivot."""
    if len(paths) > 1:
        merged = combine([read_store(p) for p in paths])
        merged.refuse_changed()
        pivot = Pivot.of_records(merged.records)
        pivot.source, pivot.notes = Path(merged.path), merged.skipped_notes()
        return pivot
    path = readable(paths[0])
    try:
        pivot = Pivot.of_store(path)
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not pivot.cells:
        raise no_record(path)
    return pivot


def _fast_reader(intern: _Interned) -> _LineReader | None:
    try:
        return _LineReader(intern)
    except ImportError:  # a minimal install: every line the common way
        return None


def _scan(path: Path):
    """(latest summary per arm, skipped lines, partial last line, records read)."""
    latest: dict[str, ArmSummary] = {}
    skipped: list[tuple[int, str]] = []
    partial = None
    intern = _Interned()
    n = offset = 0
    loads, summary, loads_whole = fields_loader(_LINE_FIELDS), _summary, fields_loader()
    fast = _fast_reader(intern)
    with open(path, "rb", buffering=LINE_BUFFER) as fh:
        for number, raw in enumerate(fh, 1):
            start, offset = offset, offset + len(raw)
            if raw.isspace():
                continue
            if fast is not None:
                try:
                    a = fast(raw, start)
                except LookupError:
                    pass
                else:
                    n += 1
                    latest.pop(a.arm_id, None)
                    latest[a.arm_id] = a
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


# -- the pivot as text ------------------------------------------------------------------------
ID_WIDTH = 80  # a task id or set name in a pivot row: long enough to tell ids apart

# Each column: what the legend says of it, and its rank when a terminal is too narrow for
# the whole table (results/table.py: 0 always shown; the highest dropped first). The most
# read stay: the verdict counts and what an arm costs; the figures derived from others
# (pass = n x pass rate), and det, go first.
TEXT_COLUMNS = ("task", "profile set")
_COLUMNS: dict[str, tuple[int, str | None]] = {
    "task": (0, None), "profile set": (0, None),
    "pass rate": (0, "pass rate: PASS / n, BLOCKED never in it (a dataset: its samples' mean)"),
    "95% CI": (0, "95% CI: two-sided Wilson, over the arms (a dataset: its samples)"),
    "n": (0, "n: arms exercised, PASS + FAIL"),
    "blocked": (0, "blocked: environment faults, reasons below"),
    "total cost": (1, "total cost: agent and judge"),
    "fail": (2, None),
    "floor": (3, "floor: pass rate counting BLOCKED as FAIL"),
    "pass@": (4, "pass@k / pass^k: any / all of k attempts pass (a dataset's samples "
                 "with under k exercised repeats left out, and said)"),
    "pass^": (5, None),
    "cost": (1, "cost: the agent's sessions"),
    "tokens": (7, None),
    "pass": (8, None),
    "det": (9, "det: largest group of arms with one payload, over the arms exercised; "
               "— under two answers"),
    "judge cost": (10, "judge cost: the judge's own sessions"),
}
JUDGED_COST_RANK = 6  # beside a judge's, the agent's own cost is read after the total
UNKNOWN_NOTE = "—: unknown, never 0"
PARTIAL_NOTE = "+: some arms reported none; the sum covers the arms that did"
XFAIL_NOTE = "fail (N xfail): N failures an xfail mark expected, not failures of the run"
ALL_COLUMNS = "-v or --jaato-pivot=all shows every column"


def _column_key(header: str) -> str:
    return header[:5] if header.startswith(("pass@", "pass^")) else header


def pivot_columns(header: Sequence[str]) -> list[Column]:
    """The pivot's header as table columns: ids on the left, figures right-aligned,
    each with its rank."""
    judged = "judge cost" in header
    columns = []
    for h in header:
        rank = _COLUMNS.get(_column_key(h), (1, None))[0]
        if h == "cost" and judged:
            rank = JUDGED_COST_RANK
        columns.append(Column(h, right=h not in TEXT_COLUMNS, rank=rank,
                              text=h in TEXT_COLUMNS))
    return columns


def pivot_notes(header: Sequence[str], rows: list[dict[str, str]]) -> list[str]:
    """The legend under a pivot: what its columns mean, for the columns it shows."""
    said = [_COLUMNS[_column_key(h)][1] for h in header if _column_key(h) in _COLUMNS]
    notes = [n for n in dict.fromkeys(said) if n] + [UNKNOWN_NOTE]
    values = [v for r in rows for h, v in r.items() if h in header]
    if any(v.endswith("+") for r in rows for h, v in r.items()
           if h in header and ("cost" in h or h == "tokens")):
        notes.append(PARTIAL_NOTE)
    if "fail" in header and any(v.endswith(" xfail)") for v in values):
        notes.append(XFAIL_NOTE)
    return notes


def regrade_notes(cells: list[Cell]) -> list[str]:
    """A regraded store says so under its pivot: which arms were graded again, from which
    runs, and whose cost its columns show (one sentence; the terminal wraps it)."""
    regraded = sum(c.regraded for c in cells)
    if not regraded:
        return []
    runs = sorted({safe_text(a.regraded_from, 40) for c in cells for a in c.arms
                   if a.regraded_from})
    shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
    total = sum(c.arms_total for c in cells)
    # A BLOCKED arm got no verdict: refused (its agent's side changed), without a snapshot,
    # or its grading faulted; its reason is in the BLOCKED column.
    blocked = sum(1 for c in cells for a in c.arms if a.regraded_from and a.state == BLOCKED)
    unverdicted = f"; {blocked} BLOCKED, given no verdict again" if blocked else ""
    return [f"regraded: {regraded - blocked} of {plural(total, 'arm')} graded again from the "
            f"snapshots of run {shown} (--jaato-regrade){unverdicted}: no agent ran; cost and "
            f"tokens are the agents' in that run, judge cost the regrade's own"]


def cell_row(c: Cell, k: int | None, judged: bool = False) -> dict[str, str]:
    """The cell's values as text, keyed by column header (P1-P3). `judged`: some arm of
    the pivot was graded by a judge, so its bill has columns of its own."""
    row = {  # ids come from manifests and the command line: shown, never obeyed
        "task": safe_text(c.task_id, ID_WIDTH, collapse=False),
        "profile set": safe_text(c.profile_set, ID_WIDTH, collapse=False),
        "pass rate": pct(c.pass_rate), "95% CI": interval_text(c.interval),
        "n": str(c.exercised), "pass": str(c.passed), "fail": c.fail_text,
        "blocked": str(c.blocked), "floor": pct(c.floor),
        "cost": money(c.cost, partial=c.cost is not None and c.cost_unknown > 0),
        "tokens": count(c.tokens, partial=c.tokens is not None and c.tokens_unknown > 0),
        "det": c.det_text,
    }
    if judged:  # the agent's cost stays `cost`; the judge's and both together beside it
        row["judge cost"] = money(c.judge_cost, partial=c.judge_cost is not None
                                  and c.judge_cost_unknown > 0)
        row["total cost"] = money(c.total_cost, partial=c.total_cost_partial)
    if k is not None:
        row[f"pass@{k}"] = c.per_input_text(c.pass_at(k), k)
        row[f"pass^{k}"] = c.per_input_text(c.pass_hat(k), k)
    return row


def row_id(c: Cell) -> str:
    """`task @ set` for a digest line, safe to print."""
    return (f"{safe_text(c.task_id, ID_WIDTH, collapse=False)} @ "
            f"{safe_text(c.profile_set, ID_WIDTH, collapse=False)}")


def pivot_rows(cells: list[Cell], k: int | None = None) -> tuple[list[str], list[dict[str, str]]]:
    k = default_k(cells) if k is None else k
    judged = any(c.judged for c in cells)
    rows = [cell_row(c, k, judged) for c in cells]
    header = list(rows[0]) if rows else list(cell_row(Cell("", ""), k))
    return header, rows


def render_pivot(cells: list[Cell], k: int | None = None, width: int | None = None, *,
                 every_column: bool = False, all_columns: str = ALL_COLUMNS,
                 detect: float | None = None) -> list[str]:
    """Fixed-width terminal lines: the table, a legend, the digest of blocked reasons, then
    the sweep's headline and pairs (`sweep_lines`; `detect`: the difference a "to detect"
    line plans for).
    `width`: the terminal's; the table fits it by table.fit's rule (unless `every_column`),
    the columns left out named under it with `all_columns` (how to see them), and the
    legend and reasons are wrapped to it. None: every column, a note per line."""
    header, rows = pivot_rows(cells, k)
    fitted = fit(pivot_columns(header), rows, None if every_column else width)
    lines = list(fitted.lines)
    lines.append("")
    shown = [c.header for c in fitted.shown]
    notes = pivot_notes(shown, rows)
    lines.extend(notes if width is None else wrap(" · ".join(notes), width))
    if fitted.dropped:
        left_out = ", ".join(h for h in header if h not in shown)
        lines.extend(wrap(f"not shown in {width} columns: {left_out} ({all_columns})",
                          width))
    for note in regrade_notes(cells):
        lines.extend(wrap(note, width or WIDTH, "  "))
    rows_digest = digest(cells)
    if rows_digest:
        lines.append("")
        lines.append("blocked reasons (most frequent first):")
        for c, reason, n in rows_digest:
            lines.extend(wrap(f"  {row_id(c)}: ({n}×) {reason}", width, "      "))
    lines.extend(sweep_lines(cells, detect, width))
    return lines


# -- the sweep: each profile set's headline, each pair of sets (results/inference.py) ----------
# Blocks of their own under the pivot, in every medium; each terminal line fits 80 columns
# on its own, whatever the table above does.
WIDTH = 80
HEADLINE_TITLE = "Profile sets over the sweep (every task weighs the same):"
HEADLINE_HEADER = ("profile set", "pass rate", "95% CI", "over", "blocked", "floor", "cost/PASS")
HEADLINE_NOTES = (
    "rate: a task's samples and repeats averaged within it, then the tasks averaged",
    "95% CI: two-sided, over the units named, tasks as clusters (docs/statistics.md)",
    "cost/PASS: every arm's cost (agent and judge) over the PASS arms")
PAIRS_TITLE = "Pairs (B − A, paired by task and sample):"
PAIR_NOTES = (
    "pts: percentage points · CI and p: two-sided, by the method named",
    "better / worse: items (task × sample) whose pass share rose / fell",
    "to detect: tasks, or repeats per item, for 80% power at 5% (two-sided) to find",
    "  the smallest difference worth finding (--detect), if new tasks and repeats",
    "  vary as these did")
_UNIT_NAMES = {inference.TASK: "task", inference.SAMPLE: "sample", inference.ARM: "arm"}


def shows_sweep(cells: list[Cell]) -> bool:
    """Whether the blocks say more than the table: some set spans several tasks or
    samples, or several sets can be compared."""
    return len(cells) > 1 or any(c.samples for c in cells)


def over_text(level: str, units: int) -> str:
    """`3 tasks`, `5 samples`, `4 arms`: the units an interval is over."""
    return plural(units, _UNIT_NAMES[level])


def headline_row(h: inference.Headline) -> dict[str, str]:
    """A set's headline as text, keyed by HEADLINE_HEADER."""
    per_pass = h.cost_per_pass
    return {"profile set": safe_text(h.profile_set, ID_WIDTH, collapse=False),
            "pass rate": pct(h.rate), "95% CI": interval_text(h.interval),
            "over": DASH if h.rate is None else over_text(h.level, h.units),
            "blocked": str(h.blocked), "floor": pct(h.floor),
            "cost/PASS": money(per_pass, partial=per_pass is not None and h.unpriced > 0)}


HEADLINE_COLUMNS = (Column("profile set", text=True), Column("pass rate", right=True),
                    Column("95% CI", right=True), Column("over", rank=2),
                    Column("blocked", right=True), Column("floor", right=True, rank=1),
                    Column("cost/PASS", right=True, rank=1))


def headline_lines(heads: list[inference.Headline], width: int | None = WIDTH) -> list[str]:
    """The headlines as a table fitted to `width` by table.fit's rule (the set's name on a
    line of its own above its figures when even the kept columns do not fit)."""
    rows = [headline_row(h) for h in heads]
    return [HEADLINE_TITLE, *fit(HEADLINE_COLUMNS, rows, width).lines]


def points(x: float) -> str:
    """A difference in percentage points, signed and whole (`+12`, `-3`, `+0`); under one
    point, to a tenth (`-0.3`), and under a twentieth to one figure (`-0.04`), so a
    number that is not 0 never reads as `-0` or `+0`."""
    v = 100 * x
    whole = round(v)
    if whole == 0 and abs(v) >= 0.05:
        return f"{v:+.1f}"
    if whole == 0 and v != 0:
        return f"{v:+.1g}"
    return f"{whole:+d}"


def p_text(p: float | None) -> str:
    """The p-value with three decimals near the 5% line, two above 0.1."""
    if p is None:
        return f"p {DASH}"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}" if p < 0.1 else f"p={p:.2f}"


def difference_text(p: inference.Pair) -> str:
    """`+42 pts (95% CI +12 to +71 pts), p=0.02, over 3 tasks`, or why there is none."""
    if p.diff is None:
        return "no item exercised by both"
    iv = p.interval
    ci = DASH if iv is None else f"{points(iv[0])} to {points(iv[1])} pts"
    return (f"{points(p.diff)} pts ({level_text(p.alpha)} CI {ci}), {p_text(p.p)}, "
            f"over {over_text(p.level, p.units)}")


def level_text(alpha: float) -> str:
    """`95%`, `98.33%`: a two-sided interval's level."""
    return f"{100 * (1 - alpha):.4g}%"


def method_text(p: inference.Pair) -> str:
    """How the pair's interval and p-value were computed: `by paired t: se 9.1 pts, 2 df`;
    under the exact test, which gives the p-value and the decision, the interval's own."""
    t = "" if p.se is None or p.df is None else f": se {100 * p.se:.1f} pts, {p.df} df"
    if p.exact:
        return f"p by {p.method}, which decides; CI by {inference.PAIRED_T}{t}"
    return f"by {p.method}{t}"


def items_text(p: inference.Pair) -> str:
    return f"items: {p.better} better, {p.worse} worse, {p.same} same"


def left_out_text(p: inference.Pair) -> str:
    return (f"left out: {plural(p.left_items, 'item')} ({plural(p.left_arms, 'arm')}) "
            f"BLOCKED or not run under one set")


def pair_cost_text(p: inference.Pair) -> str:
    """Agent and judge, every known part (`+`: some part of some arm is unknown, a lower
    bound); the difference only where both sides are whole."""
    a, b = money(p.cost_a, p.cost_a_partial), money(p.cost_b, p.cost_b_partial)
    if p.cost_a is None or p.cost_b is None or p.cost_partial:
        return f"cost per arm: {a} → {b}"
    delta = p.cost_b - p.cost_a
    return f"cost per arm: {a} → {b} ({'-' if delta < 0 else '+'}${abs(delta):.4f})"


def _one_place(x: float) -> str:
    """`2`, `2.4`: a mean count as read."""
    return f"{round(x, 1):g}"


def needed_text(n: inference.Needed) -> str:
    """The one line of how much more to run, its assumption in PAIR_NOTES."""
    head = f"to detect {100 * n.delta:.0f} pts at 80% power: "
    if n.level == inference.ARM:
        if n.repeats is None:
            return head + f"{DASH} (no spread to plan from)"
        said = head + f"{plural(n.repeats, 'repeat')} per set (now {_one_place(n.repeats_now)})"
        return said + (": enough already" if n.repeats <= n.repeats_now else "")
    if n.units is None:
        return head + f"{DASH} (no spread between {_UNIT_NAMES[n.level]}s to plan from)"
    said = head + f"{plural(n.units, _UNIT_NAMES[n.level])} (now {n.units_now})"
    if n.units <= n.units_now:  # the difference asked for would have shown: it is smaller
        return said + ": enough already"
    if n.repeats is not None:
        said += f" or {plural(n.repeats, 'repeat')} (now {_one_place(n.repeats_now)})"
    elif n.repeats_may_not:
        said += "; more repeats alone may not"
    return said


def pair_name(p: inference.Pair, width: int = WIDTH) -> str:
    """`B − A`, the names clipped (each to half the line) when both do not fit `width`."""
    b, a = safe_text(p.b, None, collapse=False), safe_text(p.a, None, collapse=False)
    if len(b) + len(a) + 3 > width:
        b, a = safe_text(b, (width - 3) // 2), safe_text(a, (width - 3) // 2)
    return f"{b} − {a}"


def pair_lines(p: inference.Pair, name: str | None = None, width: int = WIDTH) -> list[str]:
    """One pair: its name, then its figures indented, each line within WIDTH."""
    lines = [name or pair_name(p, width), "  " + difference_text(p)]
    if p.diff is not None:
        lines.append("  " + method_text(p))
        lines.append("  " + items_text(p))
    if p.left_items:
        lines.append("  " + left_out_text(p))
    if p.cost_a is not None or p.cost_b is not None:
        lines.append("  " + pair_cost_text(p))
    if p.needed is not None:
        lines.append("  " + needed_text(p.needed))
    return lines


def sweep_lines(cells: list[Cell], detect: float | None = None,
                width: int | None = None) -> list[str]:
    """The headline block and, with two sets or more, the pairs block, with their notes;
    each line within `width` (80 where it is not known)."""
    if not shows_sweep(cells):
        return []
    width = width or WIDTH
    lines = ["", *headline_lines(inference.headlines(cells), width), *HEADLINE_NOTES]
    found = inference.pairs(cells, detect=detect)
    if found:
        lines += ["", PAIRS_TITLE]
        for p in found:
            lines += [line for part in pair_lines(p, width=width) for line in wrap(part, width, "    ")]
        lines += PAIR_NOTES
    return lines
