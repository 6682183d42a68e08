"""`report --format`: the account of a run (results/account.py) in each format, from one
registry, `FORMATS`, that the command, its `--help` and the tests read.

Each renderer is handed the whole account (the pivot, whose records it may read, and the
arms that did not pass with why) and what the reader asked (`Asked`); each holds the same
cells as the terminal's table (`pivot.render_pivot`).
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any, Callable

from . import inference
from .account import Account, noted_lines
from .pivot import (HEADLINE_HEADER, HEADLINE_NOTES, HEADLINE_TITLE, ID_WIDTH, PAIR_NOTES,
                    PAIRS_TITLE, Cell, default_k, digest, headline_row, pair_lines, pivot_notes,
                    pivot_rows, plural, regrade_notes, render_pivot, row_id, shows_sweep)
from ..render import safe_text

JSON_FORMAT = "pytest-jaato-eval pivot 1"  # what a reader of the JSON checks it is reading


@dataclass(frozen=True)
class Asked:
    """What the reader asked of a format: k for pass@k, the store's name, the difference a
    "to detect" line plans for, and the terminal's width (None: every column)."""
    k: int | None = None
    source: str | None = None
    detect: float | None = None
    width: int | None = None


# -- text -------------------------------------------------------------------------------------
def text(acc: Account, asked: Asked) -> str:
    """What `report` prints on a terminal: the store and its count, the table fitted to the
    width, and the arms that did not pass."""
    lines = [f"{asked.source}: {acc.pivot.counted}", *render_pivot(
        acc.cells, k=asked.k, width=asked.width, detect=asked.detect,
        all_columns="--all-columns shows every column")]
    lines += [""] + noted_lines(acc, asked.width) if acc.noted else []
    return "\n".join(lines) + "\n"


# -- Markdown ---------------------------------------------------------------------------------
def _md(text: str) -> str:
    """A value inside a table cell: no pipe, no markup, no HTML (ids come from stores)."""
    text = safe_text(text, None, collapse=True)
    for char in "\\`*_[]<>|":
        text = text.replace(char, "\\" + char)
    return text


def markdown(acc: Account, asked: Asked) -> str:
    """A GitHub-flavoured Markdown pivot: a heading, the table (numbers right-aligned),
    its legend, the blocked reasons, the sweep, and the arms that did not pass."""
    cells, source = acc.cells, asked.source
    header, rows = pivot_rows(cells, asked.k)
    text_columns = ("task", "profile set")
    lines = ["### jaato-eval pivot", ""]
    if source is not None:
        lines += [f"{_md(str(source))}: {plural(acc.arm_count, 'arm')}", ""]
    lines.append("| " + " | ".join(_md(h) for h in header) + " |")
    lines.append("|" + "|".join(" --- " if h in text_columns else " ---: " for h in header) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_md(row[h]) for h in header) + " |")
    lines.append("")
    lines += [_md(note) + "  " for note in pivot_notes(header, rows) + regrade_notes(cells)]
    blocked = digest(cells)
    if blocked:
        lines += ["", "**Blocked reasons** (most frequent first):", ""]
        lines += [f"- {_md(row_id(c))}: ({n}×) {_md(reason)}" for c, reason, n in blocked]
    lines += sweep_markdown(cells, asked.detect)
    return "\n".join(lines) + "\n" + noted_markdown(acc)


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
        "pass_at_k_samples_left_out": c.short_of(k),
        "cost_usd": c.cost, "cost_unknown_arms": c.cost_unknown,
        "judged_arms": c.judged, "judge_cost_usd": c.judge_cost,
        "judge_cost_unknown_arms": c.judge_cost_unknown, "total_cost_usd": c.total_cost,
        "tokens": c.tokens, "tokens_unknown_arms": c.tokens_unknown,
        "regraded_arms": c.regraded,
        "blocked_reasons": [{"reason": reason, "count": n}
                            for reason, n in c.reasons.most_common()],
    }


def as_json(acc: Account, asked: Asked) -> str:
    """The cells, each set's headline and each pair as numbers, and the arms that did not
    pass (`not_passed`)."""
    cells = acc.cells
    k = default_k(cells) if asked.k is None else asked.k
    return json.dumps({
        "format": JSON_FORMAT, "source": asked.source, "arms": acc.arm_count,
        "k": k, "cells": [cell_json(c, k) for c in cells],
        "profile_sets": [headline_json(h) for h in inference.headlines(cells)],
        "pairs": [pair_json(p) for p in inference.pairs(cells, detect=asked.detect)],
        "not_passed": {"count": acc.unlisted + len(acc.noted), "listed": [
            {"arm_id": n.arm_id, "outcome": n.outcome, "why": n.why} for n in acc.noted]},
    }, indent=2) + "\n"


# -- CSV --------------------------------------------------------------------------------------
CSV_COLUMNS = ("task", "profile_set", "n", "arms", "pass", "fail", "blocked", "pass_rate",
               "ci95_low", "ci95_high", "floor", "det", "k", "pass_at_k", "pass_hat_k",
               "cost_usd", "judge_cost_usd", "total_cost_usd", "tokens",
               # a profile set's headline is a row too: scope "profile set", task empty
               "scope", "unit", "units", "cost_per_pass_usd")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet would run as a formula


def _csv_text(text: str) -> str:
    text = safe_text(text, ID_WIDTH * 4, collapse=True)
    return "'" + text if text.startswith(_FORMULA) else text


def as_csv(acc: Account, asked: Asked) -> str:
    """One row per cell, then one per profile set (its headline, `scope` "profile set");
    numbers as numbers, unknown as an empty field."""
    cells = acc.cells
    k = default_k(cells) if asked.k is None else asked.k
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    rows = []
    for c in cells:
        row = cell_json(c, k)
        row["task"], row["profile_set"] = _csv_text(c.task_id), _csv_text(c.profile_set)
        rows.append({**row, "scope": "cell"})
    for h in inference.headlines(cells):
        row = headline_json(h)
        rows.append({**row, "task": "", "profile_set": _csv_text(h.profile_set),
                     "scope": "profile set", "fail": h.exercised - h.passed})
    for row in rows:
        row["ci95_low"], row["ci95_high"] = row.pop("ci95") or (None, None)
        writer.writerow(["" if row.get(col) is None else row[col] for col in CSV_COLUMNS])
    return out.getvalue()


# -- the sweep in Markdown --------------------------------------------------------------------
def sweep_markdown(cells: list[Cell], detect: float | None = None) -> list[str]:
    """The same blocks for a Markdown page: a table, then one paragraph per pair."""
    if not shows_sweep(cells):
        return []
    rows = [headline_row(h) for h in inference.headlines(cells)]
    lines = ["", f"**{_md(HEADLINE_TITLE.rstrip(':'))}**", "",
             "| " + " | ".join(HEADLINE_HEADER) + " |",
             "|" + "|".join(" --- " if h in ("profile set", "over") else " ---: "
                            for h in HEADLINE_HEADER) + "|"]
    lines += ["| " + " | ".join(_md(r[h]) for h in HEADLINE_HEADER) + " |" for r in rows]
    lines += [""] + [_md(note) + "  " for note in HEADLINE_NOTES]
    found = inference.pairs(cells, detect=detect)
    if found:
        lines += ["", f"**{_md(PAIRS_TITLE.rstrip(':'))}**", ""]
        for p in found:
            first, *rest = pair_lines(p, name=f"{p.b} − {p.a}")
            lines.append(f"- **{_md(first)}**: " + "; ".join(_md(x.strip()) for x in rest))
        lines += [""] + [_md(note) + "  " for note in PAIR_NOTES]
    return lines


def headline_json(h: inference.Headline) -> dict[str, Any]:
    return {"profile_set": h.profile_set, "pass_rate": h.rate,
            "ci95": None if h.interval is None else list(h.interval),
            "unit": h.level, "units": h.units, "tasks": h.tasks, "items": h.items,
            "arms": h.arms, "n": h.exercised, "pass": h.passed, "blocked": h.blocked,
            "floor": h.floor, "cost_usd": h.spent, "cost_unknown_arms": h.unpriced,
            "cost_per_pass_usd": h.cost_per_pass, "effective_n": h.effective_n,
            "design_effect": h.design_effect}


def pair_json(p: inference.Pair) -> dict[str, Any]:
    n = p.needed
    return {"a": p.a, "b": p.b, "difference": p.diff,
            "ci95": None if p.interval is None else list(p.interval), "p_value": p.p,
            "decided": p.decided, "unit": p.level, "units": p.units,
            "level": 1 - p.alpha, "method": p.method, "se": p.se, "df": p.df,
            "items_better": p.better, "items_worse": p.worse, "items_same": p.same,
            "left_out_items": p.left_items, "left_out_arms": p.left_arms,
            "cost_per_arm_usd": {"a": p.cost_a, "b": p.cost_b},
            "runs_needed": None if n is None else {
                "detect": n.delta, "unit": n.level, "units": n.units, "units_now": n.units_now,
                "repeats": n.repeats, "repeats_now": n.repeats_now,
                "repeats_may_not": n.repeats_may_not}}


# -- the arms that did not pass ---------------------------------------------------------------
def noted_markdown(acc: Account) -> str:
    """The arms that did not pass as a Markdown table (empty when every arm passed)."""
    if not acc.noted:
        return ""
    total = acc.unlisted + len(acc.noted)
    shown = f"; the first {len(acc.noted)} are named" if acc.unlisted else ""
    lines = ["", f"**Arms that did not pass** ({total}{shown}):", "",
             "| arm | outcome | why |", "| --- | --- | --- |"]
    lines += [f"| {_md(n.arm_id)} | {n.outcome} | {_md(n.why)} |" for n in acc.noted]
    return "\n".join(lines) + "\n"


# -- the registry -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Format:
    render: Callable[[Account, Asked], str]
    help: str   # what `report --help` says of it


FORMATS: dict[str, Format] = {
    "text": Format(text, "the table, default"),
    "markdown": Format(markdown, "GitHub-flavoured, for $GITHUB_STEP_SUMMARY or a PR comment"),
    "json": Format(as_json, "each cell's n, rates and intervals as numbers"),
    "csv": Format(as_csv, "a row per cell and per profile set"),
}


def document(acc: Account, fmt: str, **asked: Any) -> str:
    return FORMATS[fmt].render(acc, Asked(**asked))
