"""The self-contained per-arm report (P4): one HTML document with the pivot, the
pass-rate-against-cost chart, and one table per task, one row per arm.

Self-contained means: no <script>, no stylesheet or font fetched, no URL at all; it
prints (print CSS, A4 landscape) and weasyprint renders the very same string to PDF
(pdf.py). Every value that came from a record is escaped, so a grader id holding
`"` or `&&` reads as text, never as markup.
"""
from __future__ import annotations

import time
from html import escape
from pathlib import Path
from typing import Any, Iterable

from ..pivot import DASH, LEGEND, PARTIAL_NOTE, Cell, Pivot, digest, pivot_rows
from . import arms, chart
from .pins import pins_of, pins_summary
from ..render import safe_text

EVIDENCE_LINES = 40    # per verdict: the tail is where a script's failure is
DETAIL_CHARS = 160     # a verdict's detail inside a table cell
GRADER_HEADER_CHARS = 60

CSS = """
:root { font-family: "DejaVu Sans", "Segoe UI", Helvetica, Arial, sans-serif; font-size: 13px;
        color: #111; }
body { margin: 24px; }
h1 { font-size: 20px; margin: 0 0 6px; }
h2 { font-size: 16px; margin: 28px 0 6px; border-bottom: 1px solid #bbb; }
h3 { font-size: 13px; margin: 14px 0 4px; }
p { margin: 4px 0; }
table { border-collapse: collapse; margin: 6px 0 10px; }
th, td { border: 1px solid #c8c8c8; padding: 3px 6px; vertical-align: top; text-align: left; }
th { background: #efefef; font-weight: bold; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.mono, code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.92em;
              overflow-wrap: break-word; }
.PASS { background: #e2f3e5; color: #14532d; }
.FAIL { background: #fbdedd; color: #7f1d1d; }
.BLOCKED { background: #fff0bf; color: #6b3c0c; }
.state { font-weight: bold; }
td.state { white-space: nowrap; }
.arm-evidence { border-top: 1px solid #ddd; padding-top: 4px; }
.detail { font-size: 0.9em; color: #333; }
.muted { color: #555; }
.meta { color: #333; font-size: 12px; }
table.arms { font-size: 11.5px; width: 100%; }
table.arms td { overflow-wrap: break-word; }
table.arms td.arm { white-space: nowrap; }  /* the id people search for: never split */
table.arms th.grader { word-break: break-all; min-width: 7em; }
pre.evidence { background: #f6f6f6; border: 1px solid #ddd; padding: 6px; margin: 2px 0 8px;
               white-space: pre-wrap; overflow-wrap: anywhere; font-size: 11px; }
svg.chart { max-width: 100%; height: auto; }
ul { margin: 4px 0; padding-left: 20px; }
@page { size: A4 landscape; margin: 12mm; }
@media print {
  body { margin: 0; font-size: 10px; }
  table.arms { font-size: 8px; }
  pre.evidence { font-size: 8px; }
  thead { display: table-header-group; }
  tr, pre, svg, .keep { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
}
"""

UNKNOWN_PROSE = (
    "— means unknown, never zero: cost — is not free (nobody reported a price); nudges — "
    "means the count could not be read, not that none fired; pass rate — means every arm "
    "was BLOCKED, so nothing about the agent was learned. A + after a sum means some arms "
    "reported nothing and the sum covers the others.")


def _e(value: Any) -> str:
    """HTML-escape a record's text, after neutralising control characters (ANSI, NUL,
    bidi overrides) line by line: evidence is untrusted output."""
    return "\n".join(escape(safe_text(line, None, collapse=False), quote=True)
                     for line in str(value).split("\n"))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def pivot_table(cells: list[Cell], k: int | None = None, css_class: str = "pivot") -> str:
    """The pivot as an HTML table (the same values as the terminal pivot)."""
    header, rows = pivot_rows(cells, k)
    text_cols = ("task", "profile set")
    out = [f'<table class="{css_class}"><thead><tr>']
    out += [f"<th>{_e(h)}</th>" for h in header]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>")
        out += [f'<td>{_e(r[h])}</td>' if h in text_cols else f'<td class="num">{_e(r[h])}</td>'
                for h in header]
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def digest_list(cells: list[Cell]) -> str:
    rows = digest(cells)
    if not rows:
        return '<p class="muted">No arm was blocked.</p>'
    items = "".join(f"<li>{_e(c.task_id)} @ {_e(c.profile_set)}: ({n}×) {_e(reason)}</li>"
                    for c, reason, n in rows)
    return f"<p>Blocked reasons, most frequent first:</p><ul class=\"digest\">{items}</ul>"


def pivot_section(cells: list[Cell], k: int | None = None, prose: bool = False,
                  css_class: str = "pivot") -> str:
    """Pivot, legend and digest: the report's first section and the pytest-html summary."""
    partial = any(c.cost is not None and c.cost_unknown or c.tokens is not None and c.tokens_unknown
                  for c in cells)
    notes = list(LEGEND) + ([PARTIAL_NOTE] if partial else []) + ([UNKNOWN_PROSE] if prose else [])
    legend = "".join(f'<p class="muted">{_e(line)}</p>' for line in notes)
    return pivot_table(cells, k, css_class) + legend + digest_list(cells)


def verdict_cell(v: dict[str, Any] | None) -> str:
    if v is None:
        return f'<td class="muted" title="no verdict">{DASH}</td>'
    state = str(v.get("state"))
    detail = v.get("blocked_reason") if state == "BLOCKED" else v.get("detail")
    body = f'<span class="state">{_e(state)}</span>'
    if detail:
        line = _clip(" ".join(str(detail).split()), DETAIL_CHARS)
        body += f'<div class="detail">{_e(line)}</div>'
    cls = state if state in ("PASS", "FAIL", "BLOCKED") else ""
    return f'<td class="verdict {cls}">{body}</td>'


def evidence(record: dict[str, Any]) -> str:
    """One arm's verdicts with their evidence (the tail of each), escaped."""
    out = []
    if record.get("error"):
        out.append(f'<p><b>error</b>: <span class="mono">{_e(record["error"])}</span></p>')
    for v in arms.verdicts(record):
        state = str(v.get("state"))
        head = (f'<p class="keep"><b class="mono">{_e(v.get("grader_id"))}</b> '
                f'<span class="state {_e(state)}">{_e(state)}</span>')
        if v.get("claim"):
            head += f' <span class="muted">— {_e(v["claim"])}</span>'
        head += "</p>"
        out.append(head)
        if v.get("detail"):
            out.append(f'<p class="detail">{_e(v["detail"])}</p>')
        if v.get("blocked_reason") and v.get("blocked_reason") != v.get("detail"):
            out.append(f'<p class="detail">blocked: {_e(v["blocked_reason"])}</p>')
        lines = arms.evidence_lines(v)
        if lines:
            cut = len(lines) - EVIDENCE_LINES
            shown = lines[-EVIDENCE_LINES:]
            prefix = f"… {cut} earlier lines not shown\n" if cut > 0 else ""
            out.append(f'<pre class="evidence">{_e(prefix + chr(10).join(shown))}</pre>')
    return "".join(out)


def task_section(task_id: str, records: list[dict[str, Any]]) -> str:
    graders = arms.grader_ids(records)
    out = [f'<h2 id="task-{_e(task_id)}">Task {_e(task_id)}</h2>',
           '<table class="arms"><thead><tr>']
    out += [f"<th>{_e(c)}</th>" for c in arms.COLUMNS]
    # A grader id can be a whole shell line: clipped in the header, whole in the evidence.
    out += [f'<th class="mono grader" title="{_e(g)}">{_e(_clip(g, GRADER_HEADER_CHARS))}</th>'
            for g in graders]
    out.append("</tr></thead><tbody>")
    numeric = {"sessions", "turns", "cost", "nudges", "duration"}
    mono = {"arm", "session id", "payload"}
    for r in records:
        fields = arms.arm_fields(r)
        out.append("<tr>")
        for col in arms.COLUMNS:
            value = _e(fields[col])
            if col == "state":
                out.append(f'<td class="state {value}">{value}</td>')
            elif col in numeric:
                out.append(f'<td class="num">{value}</td>')
            elif col == "arm":
                out.append(f'<td class="mono arm">{value}</td>')
            elif col in mono:
                out.append(f'<td class="mono">{value}</td>')
            else:
                out.append(f"<td>{value}</td>")
        out += [verdict_cell(arms.verdict_of(r, g)) for g in graders]
        out.append("</tr>")
    out.append("</tbody></table>")
    # Every arm that did not pass, and any arm whose graders left evidence lines: a clean
    # PASS with only "exit 0" to say would bury the arms worth reading.
    with_evidence = [r for r in records if r.get("state") != "PASS" or r.get("error")
                     or any(arms.evidence_lines(v) for v in arms.verdicts(r))]
    if with_evidence:
        out.append("<h3>Evidence</h3>")
        for r in with_evidence:
            state = _e(r.get("state"))
            out.append(f'<div class="arm-evidence"><p class="keep">'
                       f'<b class="mono">{_e(r.get("arm_id"))}</b> '
                       f'<span class="state {state}">{state}</span></p>{evidence(r)}</div>')
    return "".join(out)


def render(records: "Iterable[dict[str, Any]] | Pivot", *, title: str = "jaato-eval report",
           source: str | None = None, k: int | None = None) -> str:
    # A Pivot streamed from a store, or records (a repeated arm id counts once).
    pivot = records if isinstance(records, Pivot) else Pivot.of_records(records)
    cells = pivot.cells
    points = chart.profile_points(cells)
    meta = [f"{pivot.arm_count} arms in {len(cells)} cells (task × profile set)",
            f"generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"]
    if source:
        meta.insert(0, f"store: {source}")
    meta += pins_summary(pins_of(pivot))
    body = [f"<h1>{_e(title)}</h1>",
            "".join(f'<p class="meta">{_e(m)}</p>' for m in meta),
            "<h2>Pivot</h2>", pivot_section(cells, k, prose=True),
            '<section class="keep"><h2>Pass rate against cost, per profile set</h2>',
            '<p class="muted">Each point pools a profile set\'s exercised arms over every task; '
            'the bar is the 95% Wilson interval. Up and to the left is better.</p>',
            f'{chart.svg(points)}</section>']
    missing = chart.unplotted(points)
    if missing:
        body.append("<p>Not plotted:</p><ul>" + "".join(f"<li>{_e(m)}</li>" for m in missing)
                    + "</ul>")
    for task_id, task_cells in pivot.tasks():  # one task's records at a time
        body.append(task_section(task_id, [r for c in task_cells for r in pivot.arms(c)]))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")


def write(path: Path, records: Iterable[dict[str, Any]], **kw) -> Path:
    return write_text(Path(path), render(records, **kw))


def write_documents(records: list[dict[str, Any]], html_path: Path | None, pdf_path: Path | None,
                    source: str | None = None) -> list[str]:
    """Write the HTML and/or PDF report of a run; one line each saying where (or why not).

    Called at the end of a run, after every arm is in the store: a report that cannot be
    written is said in one line, and never hides the results already printed.
    """
    if not (html_path or pdf_path):
        return []
    from . import pdf
    document = render(records, source=source)
    lines = []
    if html_path:
        try:
            write_text(Path(html_path), document)
            lines.append(f"html report: {html_path}")
        except OSError as exc:
            lines.append(f"error: html report not written: {html_path}: {exc.strerror or exc}")
    if pdf_path:
        try:
            pdf.write(Path(pdf_path), document)
            lines.append(f"pdf report: {pdf_path}")
        except Exception as exc:  # the renderer's failure is a line, not a lost summary
            lines.append(f"error: pdf report not written: {pdf_path}: "
                         f"{' '.join(str(exc).split())[:300]}")
    return lines


def write_text(path: Path, document: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document, encoding="utf-8")
    return path
