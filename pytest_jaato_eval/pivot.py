"""The pivot: pass rate per task x profile set, its uncertainty, what was blocked and why (P1-P3).

Cells are built from records (the latest per arm id, R3) and rendered twice: as
fixed-width lines for the terminal here, and as HTML in report/html.py. The
formatters below are shared so both say the same thing the same way.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import stats
from .render import safe_text
from .store import latest_by_arm
from .verdict import FAIL, PASS

DASH = "—"  # unknown, never 0 (P2)
ID_WIDTH = 80  # a task id or set name in a pivot row: long enough to tell ids apart

LEGEND = ("CI: 95% Wilson interval · floor: pass rate counting BLOCKED as FAIL · "
          "—: unknown, never 0",
          "det: share of exercised arms with the modal payload · pass@k / pass^k: any / all of k "
          "attempts pass")
PARTIAL_NOTE = "+: some arms reported none; the sum covers the arms that did (P2)"


@dataclass
class Cell:
    task_id: str
    profile_set: str
    passed: int = 0
    failed: int = 0
    blocked: int = 0
    cost: float | None = None
    tokens: int | None = None
    cost_unknown: int = 0      # arms whose cost nobody reported (P2)
    tokens_unknown: int = 0
    hashes: list[str | None] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    arms: list[dict[str, Any]] = field(default_factory=list)

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
    def det(self) -> float | None:
        """P3: share of exercised arms sharing the modal payload hash; BLOCKED excluded."""
        return stats.modal_share(self.hashes)

    def pass_at(self, k: int | None) -> float | None:
        return None if k is None else stats.pass_at_k(self.exercised, self.passed, k)

    def pass_hat(self, k: int | None) -> float | None:
        return None if k is None else stats.pass_hat_k(self.exercised, self.passed, k)

    @property
    def mean_cost(self) -> float | None:
        """Mean cost of an exercised arm, over the exercised arms that reported one."""
        costs = [c for r in self.arms if r.get("state") in (PASS, FAIL)
                 if (c := _number((r.get("usage") or {}).get("cost_usd"))) is not None]
        return sum(costs) / len(costs) if costs else None


def _number(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _add(total, value):
    value = _number(value)
    if value is None:
        return total
    return value if total is None else total + value


def _repeat(record: dict[str, Any]) -> int:
    r = record.get("repeat")
    return r if isinstance(r, int) and not isinstance(r, bool) else 0


def build_cells(records: Iterable[dict[str, Any]]) -> list[Cell]:
    cells: dict[tuple[str, str], Cell] = {}
    for r in latest_by_arm(records).values():
        key = (str(r.get("task_id")), str(r.get("profile_set") or "default"))
        cell = cells.setdefault(key, Cell(*key))
        cell.arms.append(r)
        state = r.get("state")
        if state == PASS:
            cell.passed += 1
        elif state == FAIL:
            cell.failed += 1
        else:  # BLOCKED, or a state nobody knows: never counted as a verdict on the agent
            cell.blocked += 1
            cell.reasons[reason_key(r.get("blocked_reason") or f"state {state!r}")] += 1
        if state in (PASS, FAIL):
            cell.hashes.append(r.get("payload_hash"))
        usage = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        cell.cost = _add(cell.cost, usage.get("cost_usd"))
        cell.tokens = _add(cell.tokens, usage.get("spend_total_tokens"))
        cell.cost_unknown += _number(usage.get("cost_usd")) is None
        cell.tokens_unknown += _number(usage.get("spend_total_tokens")) is None
    for cell in cells.values():
        cell.arms.sort(key=lambda r: (_repeat(r), str(r.get("arm_id"))))
    return [cells[k] for k in sorted(cells)]


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


def count(x: int | None, partial: bool = False) -> str:
    return DASH if x is None else f"{x:,}{'+' if partial else ''}"


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
        "det": pct(c.det),
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
