"""The per-task arm tables of the report, gathered in one pass over the records.

Records arrive in any order (the store's order, one per arm id); each is reduced at once
to what the document shows, so no record is kept. Small reports give every arm its row
and the evidence of every arm worth reading. Large ones count a task × profile set's PASS
arms, and fold its other arms by how they did not pass: the first arm of each kind has
its row, naming the rest of that kind, and one evidence per kind and task
(docs/reports.md says why).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from ..results import transcript_view, transcripts
from ..results.pivot import DASH, reason_key
from ..results.record import ArmRecord
from ..render import safe_text
from . import arms

FULL_ARMS = 1000            # up to this many arms, every arm has its own row
GROUPS_PER_CELL = 10        # summarised: kinds of failure shown in full per task × profile set
DETAIL_CHARS = 160          # a verdict's detail inside a table cell
CELL_CHARS = 400            # any other table cell (notes may quote a whole error)
TEXT_CHARS = 4000           # a detail, reason or error in the evidence


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
    also: list[str] = field(default_factory=list)  # arms of other profile sets failing alike
    transcript: list[Any] | None = None  # transcript_view.SessionView, when one was kept
    transcript_note: str = ""            # why a named transcript is not shown
    blocked: str = ""  # the arm's own reason, when no grader's verdict says it


@dataclass
class Row:
    fields: dict[str, str]
    verdicts: dict[str, VerdictView]
    summary: bool = False
    expected: bool = False  # the arm ran under an xfail mark


def _text(value: Any, width: int = TEXT_CHARS) -> str:
    """Multi-line untrusted text, each line bounded (line breaks kept for <pre>/<p>)."""
    if value is None or value == "":
        return ""
    return "\n".join(safe_text(line, width, collapse=False) for line in str(value).split("\n"))


def verdict_view(v: dict[str, Any], with_lines: bool = True) -> VerdictView:
    """One verdict as shown (a record's verdict: its texts are strings, its evidence a
    list of strings, record.py)."""
    state = v["state"]
    detail = v.get("blocked_reason") if state == "BLOCKED" else v["detail"]
    return VerdictView(
        grader_id=_text(v["grader_id"]), state=state, claim=_text(v["claim"]),
        detail=_text(v["detail"]), blocked_reason=_text(v.get("blocked_reason")),
        cell_detail=safe_text(detail, DETAIL_CHARS) if detail else "",
        lines="\n".join(arms.evidence_tail(v)) if with_lines else "")


def arm_evidence(record: ArmRecord, failed_only: bool = False) -> ArmEvidence:
    """One arm's verdicts with the tail of their evidence; `failed_only` keeps the lines
    of verdicts that did not pass and drops those of the ones that did."""
    return ArmEvidence(
        _text(record.arm_id), str(record.state), _text(record.error),
        [verdict_view(v, not failed_only or v["state"] != "PASS") for v in record.verdicts],
        blocked=_text(record.blocked_reason))


def worth_reading(record: ArmRecord) -> bool:
    """An arm that did not pass, or one whose graders left something to read: a clean
    PASS with only "exit 0" to say would bury the arms worth reading."""
    return (record.state != "PASS" or bool(record.error)
            or any(v["evidence"] for v in record.verdicts))


class _Group:
    """Arms of one task × profile set that did not pass, the same way: the first in full,
    the rest named."""

    def __init__(self, key: tuple[int, str], row: Row):
        self.key, self.row = key, row
        self.others: list[tuple[int, str, str]] = []   # (repeat, arm id, state)

    def folded(self) -> Row:
        """The first arm's row, saying how many more failed the same way, and which."""
        if self.others:
            fields = self.row.fields
            fields["arm"] += f" +{len(self.others)}"
            alike = (f"{len(self.others)} more with the same verdicts and details: "
                     f"{_named(self.others)}")
            fields["notes"] = f"{fields['notes']}; {alike}" if fields["notes"] else alike
        return self.row


@dataclass
class _Cell:
    """One task × profile set while the records stream past."""
    rows: list[tuple[tuple[int, str], Row]] = field(default_factory=list)
    evidence: list[tuple[tuple[int, str], ArmEvidence]] = field(default_factory=list)
    groups: dict[tuple, _Group] = field(default_factory=dict)
    overflow: list[tuple[int, str, str]] = field(default_factory=list)


def signature(record: ArmRecord) -> tuple:
    """How an arm did not pass: its state, its reason (ids elided, as in the blocked-reason
    digest) and each verdict's state and detail, so repeats of one failure match."""
    reason = record.blocked_reason
    return (str(record.state), reason_key(reason) if reason else "",
            tuple((v["grader_id"], v["state"],
                   (v.get("blocked_reason") or v["detail"])[:DETAIL_CHARS])
                  for v in record.verdicts))


def _named(arms_: list[tuple[int, str, str]]) -> str:
    """Arms listed by repeat number, `#3 #7 …`, with the state where it varies."""
    states = {s for _, _, s in arms_}
    return " ".join(f"#{r}" if len(states) == 1 else f"#{r} {s}" for r, _, s in sorted(arms_))


def _more_row(text: str, named: list[tuple[int, str, str]], state: str, note: str) -> Row:
    fields = dict.fromkeys(arms.COLUMNS, DASH)
    fields.update({"arm": text, "state": state, "notes": f"{note}: {_named(named)}"})
    return Row(fields, {}, summary=True)


@dataclass
class TaskTable:
    task_id: str
    graders: list[str]
    rows: list[Row]
    evidence: list[ArmEvidence]
    passed: list[tuple[str, int]]   # summarised: (profile set, PASS arms), no rows
    samples: list["SampleRow"] = field(default_factory=list)  # a dataset task's drill-down


@dataclass
class SampleRow:
    """One sample of a task, over every profile set and repeat: its arms' states."""
    sample_id: str
    passed: int = 0
    failed: int = 0
    blocked: int = 0


def sample_rows(cells: Iterable[Any]) -> dict[str, list[SampleRow]]:
    """task -> its samples in id order, counted from the pivot's arms (every arm, also in
    a summarised report, where PASS records are not read)."""
    found: dict[str, dict[str, SampleRow]] = {}
    for cell in cells:
        for a in cell.arms:
            if a.sample_id is None:
                continue
            row = found.setdefault(cell.task_id, {}).setdefault(
                a.sample_id, SampleRow(_text(a.sample_id, 80)))
            if a.state == "PASS":
                row.passed += 1
            elif a.state == "FAIL":
                row.failed += 1
            else:
                row.blocked += 1
    return {task: [rows[k] for k in sorted(rows)] for task, rows in found.items()}


class Tables:
    """Every task's table, filled one record at a time."""

    def __init__(self, summarise: bool, passed: dict[tuple[str, str], int] | None = None,
                 transcripts: Callable[[ArmEvidence, ArmRecord], ArmEvidence] | None = None):
        self.summarise = summarise
        self.with_transcript = transcripts or (lambda ev, record: ev)
        self.reads_transcripts = transcripts is not None
        self.passed = passed or {}   # (task, profile set) -> PASS arms, from the pivot
        self.cells: dict[tuple[str, str], _Cell] = {}
        self.graders: dict[str, dict[str, None]] = {}  # task -> grader ids, first seen first
        # summarised: one evidence per task and kind of failure, with its owner's sort key
        self.kinds: dict[str, dict[tuple, tuple[tuple, ArmEvidence]]] = {}
        self.samples: dict[str, list[SampleRow]] = {}  # task -> its per-sample drill-down

    def add(self, record: ArmRecord) -> None:
        if self.summarise and record.state == "PASS":
            return  # counted from the pivot's cells
        task = str(record.task_id)
        cell = self.cells.setdefault((task, record.set_name), _Cell())
        graders = self.graders.setdefault(task, {})
        for v in record.verdicts:
            graders.setdefault(v["grader_id"], None)
        key = (record.repeat or 0, record.arm_id)
        if not self.summarise:
            cell.rows.append((key, _row(record)))
            if worth_reading(record) or (self.reads_transcripts and record.transcript):
                cell.evidence.append((key, self.with_transcript(arm_evidence(record), record)))
        else:
            sig = signature(record)
            group = cell.groups.get(sig)
            if group is not None:
                group.others.append((*key, str(record.state)))
            elif len(cell.groups) < GROUPS_PER_CELL:
                cell.groups[sig] = _Group(key, _row(record))
                kinds = self.kinds.setdefault(task, {})
                if sig in kinds:
                    kinds[sig][1].also.append(_text(record.arm_id, 80))
                else:
                    kinds[sig] = ((record.set_name, key),
                                  self.with_transcript(arm_evidence(record, failed_only=True),
                                                       record))
            else:
                cell.overflow.append((*key, str(record.state)))

    def tasks(self) -> Iterator[TaskTable]:
        """Tasks in id order, profile sets in name order, arms by repeat then id; each
        task's rows are released once it has been yielded."""
        by_task: dict[str, list[str]] = {}
        shown = set(self.cells) | ({k for k, n in self.passed.items() if n} if self.summarise
                                   else set())
        for task, profile_set in sorted(shown):
            by_task.setdefault(task, []).append(profile_set)
        for task, sets in by_task.items():
            rows: list[Row] = []
            evidence: list[ArmEvidence] = []
            passed: list[tuple[str, int]] = []
            for profile_set in sets:
                cell = self.cells.pop((task, profile_set), None) or _Cell()
                if self.summarise and self.passed.get((task, profile_set)):
                    passed.append((_text(profile_set, 80), self.passed[task, profile_set]))
                rows += [row for _, row in sorted(cell.rows, key=lambda kr: kr[0])]
                evidence += [ev for _, ev in sorted(cell.evidence, key=lambda ke: ke[0])]
                for group in sorted(cell.groups.values(), key=lambda g: g.key):
                    rows.append(group.folded())
                if cell.overflow:
                    rows.append(_more_row(
                        f"+{len(cell.overflow)} more that did not pass", cell.overflow,
                        "/".join(sorted({s for _, _, s in cell.overflow})),
                        f"other failures (only {GROUPS_PER_CELL} kinds are shown in full)"))
            evidence += [ev for _, ev in sorted(self.kinds.pop(task, {}).values(),
                                                key=lambda ke: ke[0])]
            yield TaskTable(_text(task), list(self.graders.pop(task, {})), rows, evidence, passed,
                            self.samples.pop(task, []))


def transcript_reader(store: Any):
    """What adds an arm's transcript to its evidence, or None when the store keeps none."""
    if store is None or not transcripts.folder_of(store).is_dir():
        return None

    def add(evidence: ArmEvidence, record: ArmRecord) -> ArmEvidence:
        if record.transcript is None:
            return evidence
        try:
            evidence.transcript = transcript_view.sessions(
                transcripts.read(store, record.transcript))
        except transcripts.TranscriptUnreadable as exc:
            evidence.transcript_note = safe_text(exc, 400)
        return evidence
    return add


def _row(record: ArmRecord) -> Row:
    fields = {c: safe_text(v, CELL_CHARS, collapse=c == "notes")
              for c, v in arms.arm_fields(record).items()}
    verdicts: dict[str, VerdictView] = {}
    for v in record.verdicts:
        verdicts.setdefault(v["grader_id"], verdict_view(v, with_lines=False))
    return Row(fields, verdicts, expected=isinstance(record.extra.get("xfail"), dict))


def gather(records: Iterable[ArmRecord], cells: Iterable[Any], summarise: bool,
           store: Any = None) -> Tables:
    """The tables of `records`; `cells` give each task × profile set's PASS count. With
    `store` (its path), each arm's evidence carries its transcript, read from beside it."""
    cells = list(cells)
    tables = Tables(summarise, {(c.task_id, c.profile_set): c.passed for c in cells},
                    transcript_reader(store))
    tables.samples = sample_rows(cells)
    for record in records:
        tables.add(record)
    return tables
