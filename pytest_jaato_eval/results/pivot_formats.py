"""The pivot for machines and CI pages: Markdown (GitHub-flavoured), JSON and CSV.

The terminal table (pivot_text.py) is for people at a terminal; these are what a CI
job publishes: Markdown for `$GITHUB_STEP_SUMMARY` or a pull-request comment, JSON
(the cells with their counts, rates and intervals as numbers) for a dashboard or a
gate of one's own, CSV for a spreadsheet. Each holds the same cells as the table.
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any

from .cell import Cell, default_k, digest, plural
from .pivot_text import ID_WIDTH, pivot_notes, pivot_rows, row_id
from ..render import safe_text

FORMATS = ("text", "markdown", "json", "csv")
JSON_FORMAT = "pytest-jaato-eval pivot 1"  # what a reader of the JSON checks it is reading


# -- Markdown ---------------------------------------------------------------------------------
def _md(text: str) -> str:
    """A value inside a table cell: no pipe, no markup, no HTML (ids come from stores)."""
    text = safe_text(text, None, collapse=True)
    for char in "\\`*_[]<>|":
        text = text.replace(char, "\\" + char)
    return text


def markdown(cells: list[Cell], *, k: int | None = None, source: str | None = None,
             arms: int | None = None) -> str:
    """A GitHub-flavoured Markdown pivot: a heading, the table (numbers right-aligned),
    its legend, and the blocked reasons."""
    header, rows = pivot_rows(cells, k)
    text_columns = ("task", "profile set")
    lines = ["### jaato-eval pivot", ""]
    if source is not None:
        count = plural(arms if arms is not None else sum(c.arms_total for c in cells), "arm")
        lines += [f"{_md(str(source))}: {count}", ""]
    lines.append("| " + " | ".join(_md(h) for h in header) + " |")
    lines.append("|" + "|".join(" --- " if h in text_columns else " ---: " for h in header) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_md(row[h]) for h in header) + " |")
    lines.append("")
    lines += [_md(note) + "  " for note in pivot_notes(header, rows)]
    blocked = digest(cells)
    if blocked:
        lines += ["", "**Blocked reasons** (most frequent first):", ""]
        lines += [f"- {_md(row_id(c))}: ({n}×) {_md(reason)}" for c, reason, n in blocked]
    return "\n".join(lines) + "\n"


# -- JSON -------------------------------------------------------------------------------------
def cell_json(c: Cell, k: int | None) -> dict[str, Any]:
    """A cell's figures as numbers (rates from 0 to 1, null when unknown, never 0)."""
    iv = c.interval
    return {
        "task": c.task_id, "profile_set": c.profile_set,
        "n": c.exercised, "arms": c.arms_total,
        "pass": c.passed, "fail": c.failed, "blocked": c.blocked,
        "pass_rate": c.pass_rate, "ci95": None if iv is None else [iv[0], iv[1]],
        "floor": c.floor, "det": c.det,
        "k": k, "pass_at_k": c.pass_at(k), "pass_hat_k": c.pass_hat(k),
        "cost_usd": c.cost, "cost_unknown_arms": c.cost_unknown,
        "judged_arms": c.judged, "judge_cost_usd": c.judge_cost,
        "judge_cost_unknown_arms": c.judge_cost_unknown, "total_cost_usd": c.total_cost,
        "tokens": c.tokens, "tokens_unknown_arms": c.tokens_unknown,
        "blocked_reasons": [{"reason": reason, "count": n}
                            for reason, n in c.reasons.most_common()],
    }


def as_json(cells: list[Cell], *, k: int | None = None, source: str | None = None,
            arms: int | None = None) -> str:
    k = default_k(cells) if k is None else k
    return json.dumps({
        "format": JSON_FORMAT, "source": source,
        "arms": arms if arms is not None else sum(c.arms_total for c in cells),
        "k": k, "cells": [cell_json(c, k) for c in cells]}, indent=2) + "\n"


# -- CSV --------------------------------------------------------------------------------------
CSV_COLUMNS = ("task", "profile_set", "n", "arms", "pass", "fail", "blocked", "pass_rate",
               "ci95_low", "ci95_high", "floor", "det", "k", "pass_at_k", "pass_hat_k",
               "cost_usd", "judge_cost_usd", "total_cost_usd", "tokens")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet would run as a formula


def _csv_text(text: str) -> str:
    text = safe_text(text, ID_WIDTH * 4, collapse=True)
    return "'" + text if text.startswith(_FORMULA) else text


def as_csv(cells: list[Cell], *, k: int | None = None, **_: Any) -> str:
    """One row per cell, numbers as numbers, unknown as an empty field."""
    k = default_k(cells) if k is None else k
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for c in cells:
        row = cell_json(c, k)
        ci = row.pop("ci95") or (None, None)
        row["ci95_low"], row["ci95_high"] = ci
        row["task"], row["profile_set"] = _csv_text(c.task_id), _csv_text(c.profile_set)
        writer.writerow(["" if row[col] is None else row[col] for col in CSV_COLUMNS])
    return out.getvalue()


RENDERERS = {"markdown": markdown, "json": as_json, "csv": as_csv}
