"""pytest-html, when it writes a report (`--html`): per-arm columns, evidence, pivot (P4).

Registered on the controller only, and only when pytest-html is loaded and asked for a
report: these hook names exist only once pytest-html has declared them. Everything is
rendered from the arm record on the call report (`report.jaato_record`, outcome.py),
so it works the same under xdist. The markup comes from templates/pytest_html.html.
"""
from __future__ import annotations

import pytest
from pytest_html import extras

from ..report import arms, tables
from ..report.html import environment, pivot_view
from ..results.pivot import build_cells
from ..results.record import ArmRecord
from ..results import transcript_view, transcripts
from .outcome import record_of, transcript_of

COLUMNS = ("state", "model", "provider", "session id", "turns", "cost", "budget", "nudges",
           "payload")


def _macros():
    return environment().get_template("pytest_html.html").module


def verdicts_cell(record: ArmRecord) -> str:
    """One cell per grader verdict, in manifest order, each titled with its detail."""
    return str(_macros().verdicts_cell([tables.verdict_view(v, with_lines=False)
                                        for v in record.verdicts]))


class JaatoHtmlColumns:
    def __init__(self):
        self.records: list[ArmRecord] = []

    def pytest_html_results_table_header(self, cells):
        cells.extend(str(_macros().header_cell(c)) for c in COLUMNS + ("verdicts",))

    def pytest_html_results_table_row(self, report, cells):
        record = record_of(report)
        if record is None:  # a plain test, or an arm's setup/teardown: keep the columns aligned
            cells.extend(["<td></td>"] * (len(COLUMNS) + 1))
            return
        fields = arms.arm_fields(record)
        cells.extend(str(_macros().field_cell(col, fields[col])) for col in COLUMNS)
        cells.append(verdicts_cell(record))

    @pytest.hookimpl(tryfirst=True)  # before pytest-html files the report away
    def pytest_runtest_logreport(self, report):
        record = record_of(report)
        if record is None or report.when != "call":
            return
        self.records.append(record)
        evidence = tables.arm_evidence(record)
        carried = transcript_of(report)  # the arm's transcript rides on its report
        if carried is not None:
            try:
                evidence.transcript = transcript_view.sessions(transcripts.decode(carried[1]))
            except transcripts.TranscriptUnreadable as exc:
                evidence.transcript_note = str(exc)
        body = str(_macros().arm_extra(arms.notes_text(record), evidence))
        if body.strip():
            report.extras = list(getattr(report, "extras", None) or []) + [extras.html(body)]

    def pytest_html_results_summary(self, prefix, summary, postfix, session):
        if self.records:
            prefix.append(str(_macros().summary(pivot_view(build_cells(self.records)))))


def register(config) -> None:
    """Only when pytest-html will write a report: otherwise there is nothing to add to."""
    if config.getoption("htmlpath", None):
        config.pluginmanager.register(JaatoHtmlColumns(), "jaato-eval-html")
