"""One account of a run, or of a store: what every view of it says, decided once.

An `Account` is a pivot (its cells, and its records to read), the arms a reader must look at (those that did not
pass, each with why, in one line: a FAIL's failing grader and its detail, a BLOCKED
arm's reason; at most `LISTED`, the rest counted) and the exit status its verdicts earn
(P5). The terminal, pytest-html's summary, the HTML/PDF document, the Markdown step
summary and `report` in every format (results/formats.py) read one Account made by `account(pivot)`, so
they cannot disagree: what one says about an arm, the others say too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from .pivot import Cell, Pivot, row_id
from .table import wrap
from ..render import safe_text
from ..verdict import BLOCKED, FAIL, PASS, failed_grader

LISTED = 20   # arms named with their reason, in any view; the rest are counted
WHY_CHARS = 300
EXIT_PASSED, EXIT_FAILED, EXIT_BLOCKED = 0, 1, 2

# What an arm that did not pass is called, as pytest words its outcome.
XFAIL, XPASS_STRICT = "XFAIL", "XPASS(strict)"


@dataclass(frozen=True)
class Noted:
    """One arm a reader must look at: its id, what it came to, and why, in one line."""
    arm_id: str
    outcome: str   # FAIL, BLOCKED, XFAIL (a FAIL an xfail mark expected), XPASS(strict)
    why: str
    where: str     # `task @ profile set`

    @property
    def fails_the_run(self) -> bool:
        return self.outcome in (FAIL, XPASS_STRICT)


@dataclass
class Account:
    pivot: Pivot        # the cells, and every arm's record for a view that reads them
    noted: list[Noted] = field(default_factory=list)
    unlisted: int = 0   # arms that did not pass beyond the LISTED named

    @property
    def cells(self) -> list[Cell]:
        return self.pivot.cells

    @property
    def arm_count(self) -> int:
        return self.pivot.arm_count

    @property
    def exit_status(self) -> int:
        return exit_status(self.cells)

    @property
    def failed(self) -> list[Noted]:
        return [n for n in self.noted if n.fails_the_run]


def exit_status(cells: list[Cell]) -> int:
    """P5, as pytest judged the arms: 1 when one failed the run (a FAIL no xfail mark
    expected, or a PASS a strict xfail mark did not), else 2 when one was BLOCKED (or has a
    state nobody knows), else 0 (an xfail arm that failed as expected included)."""
    if any(c.fails_the_run for c in cells):
        return EXIT_FAILED
    if any(c.blocked for c in cells):
        return EXIT_BLOCKED
    return EXIT_PASSED


def account(pivot: Pivot, listed: int = LISTED) -> Account:
    """The account of a pivot: its cells, and the first `listed` arms that did not pass,
    those that failed the run first, then the BLOCKED, then the expected failures, each
    group in the pivot's order. Only the FAIL records named are read back (their
    verdicts say why)."""
    noted: list[Noted] = []
    for group in (_failed, _blocked, _expected):
        for note in group(pivot):  # a generator: past the limit, nothing more is read
            if len(noted) == listed:
                break
            noted.append(note)
    counted = sum(_not_passed(c) for c in pivot.cells)
    return Account(pivot, noted, max(counted - len(noted), 0))


def _not_passed(c: Cell) -> int:
    return c.failed + c.blocked + c.strict_passes


def _failed(pivot: Pivot) -> Iterator[Noted]:
    for cell in pivot.cells:
        if not cell.fails_the_run:
            continue
        xfail = {a.arm_id: a.xfail for a in cell.arms}
        for record in pivot.arms(cell, {FAIL, PASS} if cell.strict_passes else {FAIL}):
            mark = xfail.get(record.arm_id)
            if record.state == FAIL and mark is None:
                yield Noted(record.arm_id, FAIL, _why(failed_grader(record.verdicts)
                                                      or record.error or "FAIL"), row_id(cell))
            elif record.state == PASS and mark == "strict":
                yield Noted(record.arm_id, XPASS_STRICT, "passed, but its strict xfail mark "
                            "expected it to fail", row_id(cell))


def _blocked(pivot: Pivot) -> Iterator[Noted]:
    for cell in pivot.cells:
        for a in cell.arms:
            if a.state not in (PASS, FAIL):
                yield Noted(a.arm_id, BLOCKED, _why(a.blocked_reason or f"state {a.state!r}"),
                            row_id(cell))


def _expected(pivot: Pivot) -> Iterator[Noted]:
    for cell in pivot.cells:
        if not cell.expected_failures:
            continue
        marked = {a.arm_id for a in cell.arms if a.state == FAIL and a.xfail is not None}
        for record in pivot.arms(cell, {FAIL}):
            if record.arm_id in marked:
                reason = (record.extra.get("xfail") or {}).get("reason") if isinstance(
                    record.extra.get("xfail"), dict) else None
                why = failed_grader(record.verdicts) or "FAIL"
                yield Noted(record.arm_id, XFAIL, _why(f"{why} (expected: {reason})" if reason
                                                        else why), row_id(cell))


def _why(text: str) -> str:
    return safe_text(text, WHY_CHARS)


def noted_lines(acc: Account, width: int | None = None) -> list[str]:
    """The arms that did not pass, for a terminal or a log: a heading, one line per arm
    (`FAIL     arm-id  grader: detail`), and how many more."""
    if not acc.noted:
        return []
    lines = [f"arms that did not pass ({acc.unlisted + len(acc.noted)}):"]
    for n in acc.noted:
        lines.extend(wrap(f"  {n.outcome:<8} {safe_text(n.arm_id, 120, collapse=False)}  "
                          f"{n.why}", width, "             "))
    if acc.unlisted:
        lines.append(f"  … and {acc.unlisted} more (the store has every arm: `show STORE -k` "
                     f"reads them)")
    return lines
