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

from ..pivot import LEGEND, PARTIAL_NOTE, Cell, build_cells, digest, pivot_rows, row_id
from ..render import safe_text
from ..store import latest_by_arm
from . import arms, chart, tables
from .pins import pins, pins_summary

GRADER_HEADER_CHARS = 60
DETAIL_CHARS = tables.DETAIL_CHARS
EVIDENCE_LINES = tables.EVIDENCE_LINES

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
    import jinja2
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
    from markupsafe import Markup
    source, _, _ = environment().loader.get_source(environment(), "report.css")
    return Markup(source)  # our own file, shipped with the package


def fragments():
    """The shared macros (pivot, verdict cell, evidence) as callables returning markup."""
    return environment().get_template("fragments.html").module


@dataclass
class PivotView:
    header: list[str]
    rows: list[dict[str, str]]
    notes: list[str]
    digest: list[tuple[str, int, str]]
    text_columns: tuple[str, ...] = ("task", "profile set")


def pivot_view(cells: list[Cell], k: int | None = None) -> PivotView:
    """The same values as the terminal pivot, with its legend and blocked-reason digest."""
    header, rows = pivot_rows(cells, k)
    partial = any(r["cost"].endswith("+") or r["tokens"].endswith("+") for r in rows)
    return PivotView(header, rows, list(LEGEND) + ([PARTIAL_NOTE] if partial else []),
                     [(row_id(c), n, reason) for c, reason, n in digest(cells)])


class _Gathered:
    """One pass over the latest records: the task tables, each profile set's costs for the
    chart, and the distinct run pins; no record is kept."""

    def __init__(self, records: Iterable[Any], summarise: bool):
        self.tables = tables.Tables(summarise)
        self.costs: dict[str, chart.SetCosts] = {}
        self.pinned: dict[tuple, dict[str, Any]] = {}
        self.arms = 0
        for record in records:
            record = arms.as_mapping(record)
            self.arms += 1
            self.tables.add(record)
            self.costs.setdefault(str(record.get("profile_set") or "default"),
                                  chart.SetCosts()).add(record)
            prov = record.get("provenance")
            slim = {"provenance": prov if isinstance(prov, dict) else None,
                    "run_id": record.get("run_id"), "task_hash": record.get("task_hash"),
                    "task_id": record.get("task_id")}
            self.pinned.setdefault(repr(sorted((k, repr(v)) for k, v in slim.items())), slim)


def context(records: Iterable[Any], *, cells: list[Cell] | None = None,
            title: str = "jaato-eval report", source: str | None = None,
            k: int | None = None) -> dict[str, Any]:
    """What the report template needs. `records` are read once; given `cells`, they must
    already be the latest record per arm id (the pivot's own input), else they are."""
    if cells is None:
        records = list(latest_by_arm(arms.as_mapping(r) for r in records).values())
        cells = build_cells(records)
    total = sum(c.arms_total for c in cells)
    summarise = total > tables.FULL_ARMS
    seen = _Gathered(records, summarise)
    points = chart.profile_points(cells, seen.costs)
    meta = [f"{seen.arms} arms in {len(cells)} cells (task × profile set)",
            f"generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"]
    if source:
        meta.insert(0, f"store: {source}")
    meta += pins_summary(pins(seen.pinned.values()))
    note = (f"{seen.arms:,} arms, more than {tables.FULL_ARMS:,}: each task's PASS arms are "
            f"counted per profile set, and its other arms grouped by how they did not pass: "
            f"the first arm of each kind has its row, which names the others of that kind, "
            f"and one evidence per kind is shown." if summarise else "")
    return {"title": title, "meta": meta, "pivot": pivot_view(cells, k), "prose": [UNKNOWN_PROSE],
            "chart": chart.layout(points), "unplotted": chart.unplotted(points),
            "summarised": note, "tasks": seen.tables.tasks(), "css": stylesheet(),
            "columns": arms.COLUMNS, "numeric": {"sessions", "turns", "cost", "nudges", "duration"},
            "mono": {"session id", "payload"}, "grader_header_chars": GRADER_HEADER_CHARS}


def stream(records: Iterable[Any], **kw) -> Iterator[str]:
    """The document in pieces, as the template produces them: a task at a time."""
    return environment().get_template("report.html").generate(**context(records, **kw))


def render(records: Iterable[Any], **kw) -> str:
    return "".join(stream(records, **kw))


def write(path: Path, records: Iterable[Any], **kw) -> Path:
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


def write_documents(records: list[dict[str, Any]], html_path: Path | None, pdf_path: Path | None,
                    source: str | None = None) -> list[str]:
    """Write the HTML and/or PDF report of a run; one line each saying where (or why not).

    Called at the end of a run, after every arm is in the store: a report that cannot be
    written is said in one line, and never hides the results already printed.
    """
    if not (html_path or pdf_path):
        return []
    from . import pdf
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
