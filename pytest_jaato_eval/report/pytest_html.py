"""pytest-html, when it writes a report (`--html`): per-arm columns, evidence, pivot (P4).

Registered on the controller only, and only when pytest-html is loaded and asked for a
report: these hook names exist only once pytest-html has declared them. Everything is
rendered from the arm record on the call report (`report.jaato_record`, outcome.py),
so it works the same under xdist.
"""
from __future__ import annotations

import pytest
from pytest_html import extras

from ..outcome import record_of
from ..pivot import build_cells
from . import arms
from .html import evidence, pivot_section
from .html import _e

COLUMNS = ("state", "model", "provider", "session id", "turns", "cost", "budget", "nudges",
           "payload")

# pytest-html's stylesheet knows nothing of ours: the summary carries these few rules.
STYLE = """<style>
.jaato-PASS { background: #e2f3e5; color: #14532d; font-weight: bold; }
.jaato-FAIL { background: #fbdedd; color: #7f1d1d; font-weight: bold; }
.jaato-BLOCKED { background: #fff0bf; color: #6b3c0c; font-weight: bold; }
table.jaato-verdicts { border-collapse: collapse; }
table.jaato-verdicts td { border: 1px solid #ccc; padding: 1px 4px; font-size: 11px; }
table.jaato-pivot th, table.jaato-pivot td { border: 1px solid #ccc; padding: 2px 6px; }
table.jaato-pivot td.num { text-align: right; }
.jaato-evidence pre { white-space: pre-wrap; }
</style>"""


def verdicts_cell(record: dict) -> str:
    """One cell per grader verdict, in manifest order, each titled with its detail."""
    cells = []
    for v in arms.verdicts(record):
        state = str(v.get("state"))
        detail = v.get("blocked_reason") if state == "BLOCKED" else v.get("detail")
        title = f' title="{_e(detail)}"' if detail else ""
        cells.append(f'<td class="jaato-{_e(state)}"{title}>{_e(v.get("grader_id"))}: '
                     f'{_e(state)}</td>')
    if not cells:
        return '<td class="col-jaato-verdicts">—</td>'
    return (f'<td class="col-jaato-verdicts"><table class="jaato-verdicts"><tr>{"".join(cells)}'
            f'</tr></table></td>')


class JaatoHtmlColumns:
    def __init__(self):
        self.records: list[dict] = []

    def pytest_html_results_table_header(self, cells):
        cells.extend(f'<th class="col-jaato">{_e(c)}</th>' for c in COLUMNS)
        cells.append('<th class="col-jaato">verdicts</th>')

    def pytest_html_results_table_row(self, report, cells):
        record = record_of(report)
        if record is None:  # a plain test, or an arm's setup/teardown: keep the columns aligned
            cells.extend(["<td></td>"] * (len(COLUMNS) + 1))
            return
        fields = arms.arm_fields(record)
        for col in COLUMNS:
            cls = f' class="jaato-{_e(fields[col])}"' if col == "state" else ""
            cells.append(f"<td{cls}>{_e(fields[col])}</td>")
        cells.append(verdicts_cell(record))

    @pytest.hookimpl(tryfirst=True)  # before pytest-html files the report away
    def pytest_runtest_logreport(self, report):
        record = record_of(report)
        if record is None or report.when != "call":
            return
        self.records.append(record)
        notes = arms.notes_text(record)
        body = "".join(f"<p>{_e(n)}</p>" for n in notes) + evidence(record)
        if body:
            report.extras = list(getattr(report, "extras", None) or []) + [
                extras.html(f'<div class="jaato-evidence">{body}</div>')]

    def pytest_html_results_summary(self, prefix, summary, postfix, session):
        if self.records:
            table = pivot_section(build_cells(self.records), css_class="jaato-pivot")
            prefix.append(f"{STYLE}<h2>jaato-eval pivot</h2>{table}")


def register(config) -> None:
    """Only when pytest-html will write a report: otherwise there is nothing to add to."""
    if config.getoption("htmlpath", None):
        config.pluginmanager.register(JaatoHtmlColumns(), "jaato-eval-html")
