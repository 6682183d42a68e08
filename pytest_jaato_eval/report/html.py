"""The self-contained per-arm report (P4): one HTML document with the pivot, the
pass-rate-against-cost chart, and one table per task, rendered from Jinja2 templates
(templates/) and streamed to its file.

Self-contained means: no <script>, no stylesheet or font fetched, no URL at all; it
prints (print CSS, A4 landscape) and weasyprint renders the very same document to PDF
(pdf.py). Record text only ever reaches a template as a value: autoescape makes `"` or
`&&` in a grader id read as text, and the environment's finalize shows control
characters as escapes (render.safe_text) in every value it outputs.
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import jinja2
from markupsafe import Markup

from ..render import safe_text
from ..results.account import Account, Noted, account
from ..results.pins import pins_of, pins_summary
from ..results import inference
from ..results.pivot import (HEADLINE_HEADER, HEADLINE_NOTES, PAIR_NOTES, PAIRS_TITLE, Cell,
                             Pivot, digest, headline_row, pair_lines, pivot_notes, pivot_rows,
                             regrade_notes, row_id, shows_sweep)
from ..results.record import ArmRecord
from ..verdict import PASS
from . import arms, chart, pdf, tables

GRADER_HEADER_CHARS = 60
DETAIL_CHARS = tables.DETAIL_CHARS
EVIDENCE_LINES = arms.EVIDENCE_LINES

UNKNOWN_PROSE = (
    "— means unknown, never zero: cost — is not free (nobody reported a price); nudges — "
    "means the count could not be read, not that none fired; pass rate — means every arm "
    "was BLOCKED, so nothing about the agent was learned. A + after a sum means some arms "
    "reported nothing and the sum covers the others.")


def shown(value: Any) -> Any:
    """Every value a template outputs: markup we built passes, numbers pass, text is shown
    line by line with its control characters as escapes (autoescape then escapes it)."""
    if value is None:
        return ""
    if hasattr(value, "__html__") or isinstance(value, (int, float)):
        return value
    text = str(value)
    if text.isprintable():
        return text
    return "\n".join(safe_text(line, None, collapse=False) for line in text.split("\n"))


@functools.cache
def environment():
    """The one Jinja2 environment: templates from the package, autoescape always on."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_jaato_eval.report", "templates"),
        autoescape=True, finalize=shown, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined)
    env.filters["safe_text"] = safe_text
    env.globals["STATES"] = ("PASS", "FAIL", "BLOCKED")  # the only states that become a class
    env.filters["fixed"] = lambda x: f"{x:.1f}"
    return env


@functools.cache
def stylesheet():
    source, _, _ = environment().loader.get_source(environment(), "report.css")
    return Markup(source)  # our own file, shipped with the package


def chart_svg(points: list[chart.Point], width: int = 720, height: int = 330) -> str:
    """The chart as an inline <svg> element."""
    return environment().get_template("chart.html").render(
        chart=chart.layout(points, width, height))


def fragments():
    """The shared macros (pivot, verdict cell, evidence) as callables returning markup."""
    return environment().get_template("fragments.html").module


@dataclass
class PivotView:
    header: list[str]
    rows: list[dict[str, str]]
    notes: list[str]
    digest: list[tuple[str, int, str]]
    noted: list[Noted]   # the arms that did not pass, with why (results/account.py)
    unlisted: int        # and how many more
    text_columns: tuple[str, ...] = ("task", "profile set")


def pivot_view(acc: Account, k: int | None = None) -> PivotView:
    """The same values as the terminal pivot, with its legend, blocked-reason digest and
    the arms that did not pass: the run's one account."""
    header, rows = pivot_rows(acc.cells, k)
    return PivotView(header, rows, pivot_notes(header, rows) + regrade_notes(acc.cells),
                     [(row_id(c), n, reason) for c, reason, n in digest(acc.cells)],
                     acc.noted, acc.unlisted)


@dataclass
class SweepView:
    """Each profile set's headline and each pair, as the terminal says them."""
    header: tuple[str, ...]
    rows: list[dict[str, str]]
    notes: tuple[str, ...]
    pairs: list[tuple[str, list[str]]]      # (B − A, its lines)
    pairs_title: str = PAIRS_TITLE.rstrip(":")
    pair_notes: tuple[str, ...] = PAIR_NOTES
    text_columns: tuple[str, ...] = ("profile set", "over")


def sweep_view(cells: list[Cell]) -> SweepView | None:
    """None when the blocks would repeat the pivot's one row."""
    if not shows_sweep(cells):
        return None
    pairs = []
    for p in inference.pairs(cells):
        name, *lines = pair_lines(p, name=f"{p.b} − {p.a}")
        pairs.append((name, [line.strip() for line in lines]))
    return SweepView(HEADLINE_HEADER, [headline_row(h) for h in inference.headlines(cells)],
                     HEADLINE_NOTES, pairs)


def every_arm_shown(cells: list[Cell]) -> bool:
    """Whether each arm gets its own row; if not, only the records of arms that did not
    pass are read (PASS arms are counted from the cells)."""
    return sum(c.arms_total for c in cells) <= tables.FULL_ARMS


def shown_records(pivot: Pivot, summarise: bool) -> Iterator[ArmRecord]:
    """The latest records the tables need, cell by cell: every one, or in a large report
    those of arms that did not pass (a store is re-read only at their offsets)."""
    if not summarise:
        return pivot.records()
    return (r for c in pivot.cells
            for r in pivot.arms(c, {a.state for a in c.arms if a.state != PASS}))


def context(records: Pivot | Iterable[ArmRecord], *, title: str = "jaato-eval report",
            source: str | None = None, k: int | None = None) -> dict[str, Any]:
    """What the report template needs: from a Pivot (streamed from a store), or from
    records (the latest per arm id counts). Counts, the chart and the run pins come from
    the pivot's cells; records are read once, for the task tables."""
    pivot = records if isinstance(records, Pivot) else Pivot.of_records(records)
    cells = pivot.cells
    summarise = not every_arm_shown(cells)
    table = tables.gather(shown_records(pivot, summarise), cells, summarise,
                          store=pivot.name)  # each arm's transcript, read from beside it
    points = chart.profile_points(cells)
    meta = [f"{pivot.arm_count} arms in {len(cells)} cells (task × profile set)",
            f"generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"]
    if source:
        meta.insert(0, f"store: {source}")
    meta += pins_summary(pins_of(pivot))
    note = (f"{pivot.arm_count:,} arms, more than {tables.FULL_ARMS:,}: each task's PASS arms "
            f"are counted per profile set, and its other arms grouped by how they did not "
            f"pass: the first arm of each kind has its row, which names the others of that "
            f"kind, and one evidence per kind is shown." if summarise else "")
    return {"title": title, "meta": meta, "pivot": pivot_view(account(pivot), k),
            "prose": [UNKNOWN_PROSE, " · ".join(arms.COLUMN_NOTES.values())],
            "sweep": sweep_view(cells),
            "chart": chart.layout(points), "unplotted": chart.unplotted(points),
            "summarised": note, "tasks": table.tasks(), "css": stylesheet(),
            "columns": arms.COLUMNS, "numeric": {"sessions", "turns", "cost", "nudges", "arm time",
                                                  "session time"},
            "mono": {"session id", "payload"}, "grader_header_chars": GRADER_HEADER_CHARS}


def stream(records: Pivot | Iterable[ArmRecord], **kw) -> Iterator[str]:
    """The document in pieces, as the template produces them: a task at a time."""
    return environment().get_template("report.html").generate(**context(records, **kw))


def render(records: Pivot | Iterable[ArmRecord], **kw) -> str:
    return "".join(stream(records, **kw))


def write(path: Path, records: Pivot | Iterable[ArmRecord], **kw) -> Path:
    """Stream the document to `path`; it appears whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with open(partial, "w", encoding="utf-8", buffering=1 << 20) as fh:
            for piece in stream(records, **kw):
                fh.write(piece)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def write_documents(records: Pivot | list[ArmRecord], html_path: Path | None,
                    pdf_path: Path | None, source: str | None = None) -> list[str]:
    """Write the HTML and/or PDF report of a run; one line each saying where (or why not).

    Called at the end of a run, after every arm is in the store: a report that cannot be
    written is said in one line, and never hides the results already printed.
    """
    if not (html_path or pdf_path):
        return []
    lines = []
    if html_path:
        try:
            write(Path(html_path), records, source=source)
            lines.append(f"html report: {html_path}")
        except OSError as exc:
            lines.append(f"error: html report not written: {html_path}: {exc.strerror or exc}")
    if pdf_path:
        try:
            pdf.write(Path(pdf_path), render(records, source=source))
            lines.append(f"pdf report: {pdf_path}")
        except Exception as exc:  # the renderer's failure is a line, not a lost summary
            lines.append(f"error: pdf report not written: {pdf_path}: "
                         f"{' '.join(str(exc).split())[:300]}")
    return lines
