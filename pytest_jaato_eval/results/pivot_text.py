"""The pivot as fixed-width terminal lines, and the rows the HTML report shows."""
from __future__ import annotations

from ..render import safe_text
from .cell import Cell, default_k, digest, interval_text, money, count, pct

ID_WIDTH = 80  # a task id or set name in a pivot row: long enough to tell ids apart

LEGEND = ("CI: 95% Wilson interval · floor: pass rate counting BLOCKED as FAIL · "
          "—: unknown, never 0",
          "det: largest group of arms with one payload, over the arms exercised; — under "
          "two answers · pass@k / pass^k: any / all of k attempts pass")
PARTIAL_NOTE = "+: some arms reported none; the sum covers the arms that did"
JUDGE_NOTE = ("cost: the agent's sessions · judge cost: the judge's own sessions · "
              "total cost: both")


def pivot_notes(header: list[str], rows: list[dict[str, str]]) -> list[str]:
    """The legend under a pivot: what its columns mean, as far as they are there."""
    notes = list(LEGEND)
    if "judge cost" in header:
        notes.append(JUDGE_NOTE)
    if any(v.endswith("+") for r in rows for h, v in r.items() if "cost" in h or h == "tokens"):
        notes.append(PARTIAL_NOTE)
    return notes


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
        row[f"pass@{k}"] = pct(c.pass_at(k))
        row[f"pass^{k}"] = pct(c.pass_hat(k))
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


def render_pivot(cells: list[Cell], k: int | None = None) -> list[str]:
    """Fixed-width terminal lines: the table, a legend, then the digest of blocked reasons."""
    header, rows = pivot_rows(cells, k)
    table = [header] + [[r[h] for h in header] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    right = {h for h in header if h not in ("task", "profile set")}  # numbers align right
    lines = ["  ".join(v.rjust(w) if h in right else v.ljust(w)
                       for h, v, w in zip(header, row, widths)).rstrip() for row in table]
    lines.append("")
    lines.extend(pivot_notes(header, rows))
    rows_digest = digest(cells)
    if rows_digest:
        lines.append("")
        lines.append("blocked reasons (most frequent first):")
        for c, reason, n in rows_digest:
            lines.append(f"  {row_id(c)}: ({n}×) {reason}")
    return lines
