"""The pivot as fixed-width terminal lines, and the rows the HTML report shows."""
from __future__ import annotations

from ..render import safe_text
from .cell import Cell, default_k, digest, interval_text, money, count, pct

ID_WIDTH = 80  # a task id or set name in a pivot row: long enough to tell ids apart

LEGEND = ("CI: 95% Wilson interval · floor: pass rate counting BLOCKED as FAIL · "
          "—: unknown, never 0",
          "det: share of answering arms (a payload) with the modal payload, — under two "
          "answers · pass@k / pass^k: any / all of k attempts pass")
PARTIAL_NOTE = "+: some arms reported none; the sum covers the arms that did"


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
