"""The pivot: pass rate per task x profile set, with what was blocked and why (P1-P3)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from .store import latest_by_arm
from .verdict import BLOCKED, FAIL, PASS

DASH = "—"  # unknown, never 0 (P2)


@dataclass
class Cell:
    task_id: str
    profile_set: str
    passed: int = 0
    failed: int = 0
    blocked: int = 0
    cost: float | None = None
    tokens: int | None = None
    hashes: list[str | None] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)

    @property
    def exercised(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.exercised if self.exercised else None  # P1

    @property
    def det(self) -> float | None:
        """P3 (fixed): share of exercised arms sharing the modal payload hash; BLOCKED excluded."""
        if not self.hashes:
            return None
        return Counter(self.hashes).most_common(1)[0][1] / len(self.hashes)


def _add(total, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value if total is None else total + value
    return total


def build_cells(records: Iterable[dict[str, Any]]) -> list[Cell]:
    cells: dict[tuple[str, str], Cell] = {}
    for r in latest_by_arm(records).values():
        key = (str(r.get("task_id")), str(r.get("profile_set") or "default"))
        cell = cells.setdefault(key, Cell(*key))
        state = r.get("state")
        if state == PASS:
            cell.passed += 1
        elif state == FAIL:
            cell.failed += 1
        else:
            cell.blocked += 1
            cell.reasons[_short(r.get("blocked_reason") or f"state {state!r}")] += 1
        if state in (PASS, FAIL):
            cell.hashes.append(r.get("payload_hash"))
        usage = r.get("usage") or {}
        cell.cost = _add(cell.cost, usage.get("cost_usd"))
        cell.tokens = _add(cell.tokens, usage.get("spend_total_tokens"))
    return [cells[k] for k in sorted(cells)]


def _short(reason: str, width: int = 160) -> str:
    line = " ".join(str(reason).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.0f}%"


def render_pivot(cells: list[Cell]) -> list[str]:
    """Fixed-width lines for the terminal; the digest of blocked reasons follows the table."""
    header = ("task", "profile set", "pass rate", "pass", "fail", "blocked", "cost", "tokens", "det")
    rows = [header]
    for c in cells:
        rows.append((c.task_id, c.profile_set, _pct(c.pass_rate), str(c.passed), str(c.failed),
                     str(c.blocked), DASH if c.cost is None else f"${c.cost:.4f}",
                     DASH if c.tokens is None else f"{c.tokens:,}", _pct(c.det)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    digest = [(c, reason, n) for c in cells for reason, n in c.reasons.most_common()]
    if digest:
        lines.append("")
        lines.append("blocked reasons (most frequent first):")
        for c, reason, n in sorted(digest, key=lambda d: -d[2]):
            lines.append(f"  {c.task_id} @ {c.profile_set}: ({n}×) {reason}")
    return lines
