"""pytest-html, when it writes a report (`--html`): per-arm columns, evidence, pivot (P4).

Registered on the controller only, and only when pytest-html is loaded and asked for a
report: these hook names exist only once pytest-html has declared them. Everything is
rendered from the arm record on the call report (`report.jaato_record`, outcome.py),
so it works the same under xdist. The markup comes from templates/pytest_html.html.
"""
from __future__ import annotations

import markupsafe
import pytest
from pytest_html import extras

from ..report import arms, tables
from ..report.html import environment, pivot_view, sweep_view
from ..results.record import ArmRecord
from ..results import transcript_view, transcripts
from .outcome import one_line, record_of, transcript_of
from .run import CONTROLLER

COLUMNS = ("state", "model", "provider", "session id", "turns", "cost", "budget", "nudges",
           "arm time", "session time", "payload")


def _macros():
    return environment().get_template("pytest_html.html").module


def verdicts_cell(record: ArmRecord) -> str:
    """One cell per grader verdict, in manifest order, each titled with its detail."""
    return str(_macros().verdicts_cell([tables.verdict_view(v, with_lines=False)
                                        for v in record.verdicts]))


class JaatoHtmlColumns:
    def __init__(self, config):
        self.config = config
    def pytest_html_results_table_header(self, cells):
        cells.extend(str(_macros().header_cell(c, arms.COLUMN_NOTES.get(c, "")))
                     for c in COLUMNS + ("verdicts",))

    def pytest_html_results_table_row(self, report, cells):
        record = record_of(report)
        if record is None:  # a plain test, or an arm's setup/teardown: keep the columns aligned
            cells.extend(["<td></td>"] * (len(COLUMNS) + 1))
            return
        fields = arms.arm_fields(record)
        cells.extend(str(_macros().field_cell(col, fields[col])) for col in COLUMNS)
        cells.append(verdicts_cell(record))

    def pytest_html_results_table_html(self, report, data):
        """An arm's log: why it did not pass, in words (pytest-html would print a BLOCKED
        arm's skip as a raw (path, line, reason) tuple)."""
        record = record_of(report)
        if record is not None and isinstance(report.longrepr, tuple):
            data[:1] = [str(markupsafe.escape(one_line(report.longrepr[2], 2000))) + "\n"]

    @pytest.hookimpl(tryfirst=True)  # before pytest-html files the report away
    def pytest_runtest_logreport(self, report):
        record = record_of(report)  # the call's, or the setup's of an arm BLOCKED there
        if record is None:
            return
        evidence = tables.arm_evidence(record)
        evidence.blocked = ""  # said by the notes above it
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
        # The run's one account, the controller's (registered once the run had an arm): its
        # summary is the terminal's.
        controller = self.config.pluginmanager.get_plugin(CONTROLLER)
        acc = controller.account(session.config) if controller is not None else None
        if acc is not None:
            prefix.append(str(_macros().summary(pivot_view(acc), sweep_view(acc.cells))))


def register(config) -> None:
    """Only when pytest-html will write a report: otherwise there is nothing to add to."""
    if config.getoption("htmlpath", None):
        config.pluginmanager.register(JaatoHtmlColumns(config), "jaato-eval-html")
