"""The per-task arm tables of the report, gathered in one pass over the records.

Records arrive in any order (the store's order, one per arm id); each is reduced at once
to what the document shows, so no record is kept. Small reports give every arm its row.
Large ones keep each failing or blocked arm's row complete and fold a task × profile set's
PASS arms into one summary row; evidence is kept only for arms that did not pass, for the
first few of each task × profile set (docs/reports.md says why).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..pivot import DASH, money
from ..render import safe_text
from . import arms

FULL_ARMS = 1000            # up to this many arms, every arm has its own row
EVIDENCE_LINES = 40         # per verdict: the tail is where a script's failure is
EVIDENCE_LINE_CHARS = 2000  # one evidence line; a 100k-char line would swamp the page
EVIDENCE_ARMS_PER_CELL = 5  # summarised: arms whose evidence is shown per task × profile set
DETAIL_CHARS = 160          # a verdict's detail inside a table cell
CELL_CHARS = 400            # any other table cell (notes may quote a whole error)
TEXT_CHARS = 4000           # a detail, reason or error in the evidence
MODELS_SHOWN = 3


@dataclass
class VerdictView:
    grader_id: str
    state: str
    claim: str
    detail: str
    blocked_reason: str
    cell_detail: str            # the detail as one clipped line, for the table cell
    lines: str = ""             # the evidence tail, one text with line breaks


@dataclass
class ArmEvidence:
    arm_id: str
    state: str
    error: str
    verdicts: list[VerdictView]


@dataclass
class Row:
    fields: dict[str, str]
    verdicts: dict[str, VerdictView]
    summary: bool = False


def _text(value: Any, width: int = TEXT_CHARS) -> str:
    """Multi-line untrusted text, each line bounded (line breaks kept for <pre>/<p>)."""
    if value is None or value == "":
        return ""
    return "\n".join(safe_text(line, width, collapse=False) for line in str(value).split("\n"))


def verdict_view(v: dict[str, Any], with_lines: bool = True) -> VerdictView:
    state = str(v.get("state"))
    detail = v.get("blocked_reason") if state == "BLOCKED" else v.get("detail")
    view = VerdictView(
        grader_id=_text(v.get("grader_id")), state=state, claim=_text(v.get("claim")),
        detail=_text(v.get("detail")), blocked_reason=_text(v.get("blocked_reason")),
        cell_detail=safe_text(detail, DETAIL_CHARS) if detail else "")
    lines = arms.evidence_lines(v) if with_lines else []
    if lines:
        cut = len(lines) - EVIDENCE_LINES
        shown = [safe_text(line, EVIDENCE_LINE_CHARS, collapse=False)
                 for line in lines[-EVIDENCE_LINES:]]
        view.lines = "\n".join(([f"… {cut} earlier lines not shown"] if cut > 0 else []) + shown)
    return view


def arm_evidence(record: dict[str, Any], failed_only: bool = False) -> ArmEvidence:
    """One arm's verdicts with the tail of their evidence; `failed_only` keeps the lines
    of verdicts that did not pass and drops those of the ones that did."""
    record = arms.as_mapping(record)
    return ArmEvidence(
        _text(record.get("arm_id")), str(record.get("state")), _text(record.get("error")),
        [verdict_view(v, not failed_only or v.get("state") != "PASS")
         for v in arms.verdicts(record)])


def worth_reading(record: dict[str, Any]) -> bool:
    """An arm that did not pass, or one whose graders left something to read: a clean
    PASS with only "exit 0" to say would bury the arms worth reading."""
    return (record.get("state") != "PASS" or bool(record.get("error"))
            or any(arms.evidence_lines(v) for v in arms.verdicts(record)))


def _repeat(record: dict[str, Any]) -> int:
    r = record.get("repeat")
    return r if isinstance(r, int) and not isinstance(r, bool) else 0


class PassSummary:
    """A task × profile set's PASS arms as one row: how many, what they cost, how long."""

    def __init__(self) -> None:
        self.arms = 0
        self.models: dict[str, None] = {}
        self.providers: dict[str, None] = {}
        self.cost: float | None = None
        self.cost_unknown = 0
        self.seconds = 0.0
        self.timed = 0
        self.turns = 0
        self.counted_turns = 0
        self.verdicts: dict[str, int] = {}

    def add(self, record: dict[str, Any]) -> None:
        self.arms += 1
        fields = arms.arm_fields(record)
        for seen, key in ((self.models, "model"), (self.providers, "provider")):
            if fields[key] != DASH:
                seen.setdefault(fields[key], None)
        cost = arms.number(arms.usage(record).get("cost_usd"))
        if cost is None:
            self.cost_unknown += 1
        else:
            self.cost = cost if self.cost is None else self.cost + cost
        if (seconds := arms.number(record.get("duration_seconds"))) is not None:
            self.seconds, self.timed = self.seconds + seconds, self.timed + 1
        if (turns := arms.number(record.get("turns"))) is not None:
            self.turns, self.counted_turns = self.turns + turns, self.counted_turns + 1
        for v in arms.verdicts(record):
            gid = str(v.get("grader_id"))
            self.verdicts[gid] = self.verdicts.get(gid, 0) + 1

    def row(self) -> Row:
        def few(names: dict[str, None]) -> str:
            shown = list(names)[:MODELS_SHOWN]
            more = len(names) - len(shown)
            return ", ".join(shown) + (f" +{more}" if more > 0 else "") if shown else DASH
        fields = dict.fromkeys(arms.COLUMNS, DASH)
        fields.update({
            "arm": f"{self.arms} arm{'s' if self.arms != 1 else ''}", "state": "PASS",
            "model": few(self.models), "provider": few(self.providers),
            "sessions": str(self.arms),
            "turns": f"{self.turns / self.counted_turns:.1f} mean" if self.counted_turns else DASH,
            "cost": money(self.cost, partial=self.cost is not None and self.cost_unknown > 0),
            "duration": f"{self.seconds / self.timed:.1f}s mean" if self.timed else DASH,
            "notes": "every arm passed; summarised in one row"})
        verdicts = {g: VerdictView(g, "PASS", "", "", "", f"×{n}")
                    for g, n in self.verdicts.items()}
        return Row(fields, verdicts, summary=True)


@dataclass
class _Cell:
    """One task × profile set while the records stream past."""
    rows: list[tuple[tuple[int, str], Row]] = field(default_factory=list)
    evidence: list[tuple[tuple[int, str], ArmEvidence]] = field(default_factory=list)
    passing: PassSummary | None = None
    evidence_not_shown: int = 0


@dataclass
class TaskTable:
    task_id: str
    graders: list[str]
    rows: list[Row]
    evidence: list[ArmEvidence]
    evidence_not_shown: int


class Tables:
    """Every task's table, filled one record at a time."""

    def __init__(self, summarise: bool) -> None:
        self.summarise = summarise
        self.cells: dict[tuple[str, str], _Cell] = {}
        self.graders: dict[str, dict[str, None]] = {}  # task -> grader ids, first seen first

    def add(self, record: Any) -> None:
        record = arms.as_mapping(record)
        task = str(record.get("task_id"))
        cell = self.cells.setdefault((task, str(record.get("profile_set") or "default")), _Cell())
        graders = self.graders.setdefault(task, {})
        for v in arms.verdicts(record):
            graders.setdefault(str(v.get("grader_id")), None)
        key = (_repeat(record), str(record.get("arm_id")))
        if self.summarise and record.get("state") == "PASS":
            cell.passing = cell.passing or PassSummary()
            cell.passing.add(record)
            return
        verdicts = {}
        for v in arms.verdicts(record):
            verdicts.setdefault(str(v.get("grader_id")), verdict_view(v, with_lines=False))
        fields = {c: safe_text(v, CELL_CHARS, collapse=c == "notes")
                  for c, v in arms.arm_fields(record).items()}
        cell.rows.append((key, Row(fields, verdicts)))
        if not self.summarise:
            if worth_reading(record):
                cell.evidence.append((key, arm_evidence(record)))
        elif len(cell.evidence) < EVIDENCE_ARMS_PER_CELL:
            cell.evidence.append((key, arm_evidence(record, failed_only=True)))
        else:
            cell.evidence_not_shown += 1

    def tasks(self) -> Iterator[TaskTable]:
        """Tasks in id order, profile sets in name order, arms by repeat then id; each
        task's rows are released once it has been yielded."""
        by_task: dict[str, list[str]] = {}
        for task, profile_set in sorted(self.cells):
            by_task.setdefault(task, []).append(profile_set)
        for task, sets in by_task.items():
            rows, evidence, not_shown = [], [], 0
            for profile_set in sets:
                cell = self.cells.pop((task, profile_set))
                if cell.passing is not None:
                    rows.append(cell.passing.row())
                rows += [row for _, row in sorted(cell.rows, key=lambda kr: kr[0])]
                evidence += [ev for _, ev in sorted(cell.evidence, key=lambda ke: ke[0])]
                not_shown += cell.evidence_not_shown
            yield TaskTable(_text(task), list(self.graders.pop(task)), rows, evidence, not_shown)


def gather(records: Iterable[Any], summarise: bool) -> Tables:
    tables = Tables(summarise)
    for record in records:
        tables.add(record)
    return tables
