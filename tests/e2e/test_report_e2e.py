"""The reports of a real run (P4), against a real daemon: `--jaato-html`, `--jaato-pdf`,
and pytest-html's `--html` with the per-arm columns, evidence and pivot."""
from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
import sys

import markupsafe
import pytest

from pytest_jaato_eval.report import pdf

from document_checks import chromium, keep, parse, png_size_and_ink  # noqa: E402

NASTY = 'grep -q "STEADY" answer.txt && test -s answer.txt'


def _weasyprint_ok() -> bool:
    try:
        pdf.load_weasyprint()
    except pdf.PdfUnavailable:
        return False
    return True


def pytest_html_tests(path) -> dict:
    """pytest-html keeps its rows as JSON in one attribute; the page's script draws them."""
    blob = re.search(r'data-jsonblob="([^"]*)"', path.read_text()).group(1)
    return json.loads(htmllib.unescape(blob))["tests"]


@pytest.mark.slow
@pytest.mark.daemon
def test_a_run_writes_every_report(project):
    project.task("write-file", repeats=2)
    project.task("wrong", graders=[{"kind": "script", "run": NASTY}])
    project.task("no-tool", graders=[{"kind": "script", "run": "no-such-command-jaato-eval"}])
    ours = project.root / "out" / "report.html"
    theirs = project.root / "pytest-report.html"
    args = ["tasks", f"--html={theirs}", f"--jaato-html={ours}"]
    ours_pdf = project.root / "out" / "report.pdf"
    if _weasyprint_ok():
        args.append(f"--jaato-pdf={ours_pdf}")
    result = project.run(*args)
    assert result.ret == 1  # one FAIL
    assert result.parseoutcomes() == {"passed": 2, "failed": 1, "blocked": 1}
    result.stdout.fnmatch_lines([f"html report: {ours}"])

    # Our document: the real arms, escaped, self-contained.
    doc = ours.read_text()
    assert "<script" not in doc and "http://" not in doc and "https://" not in doc
    text = "".join(parse(doc).text)
    for arm_id in ("write-file@echo#0", "write-file@echo#1", "wrong@echo#0", "no-tool@echo#0"):
        assert arm_id in text
    assert f"script:{NASTY}" in text and f"script:{NASTY}" not in doc
    assert "<svg" in doc and "echo" in text
    assert "Task no-tool" in text and "BLOCKED" in text

    # pytest-html: our columns on every arm row, the evidence as extras, the pivot in the summary.
    page = theirs.read_text()
    for column in ("state", "model", "session id", "budget", "nudges", "arm time", "payload",
                   "verdicts"):
        assert re.search(f'<th class="col-jaato"( title="[^"]*")?>{column}</th>', page), column
    assert "jaato-eval pivot" in page and "<table class=\"jaato-pivot\">" in page
    tests = pytest_html_tests(theirs)
    rows = {nodeid: entries[-1] for nodeid, entries in tests.items()}
    wrong = next(v for k, v in rows.items() if "wrong" in k)
    cells = "".join(wrong["resultsTableRow"])
    assert '<td class="jaato-FAIL">FAIL</td>' in cells and "<td>echo</td>" in cells
    assert str(markupsafe.escape(f"script:{NASTY}")) in cells and NASTY not in cells
    assert any("exit 1, expected 0" in e["content"] for e in wrong["extras"])
    blocked = next(v for k, v in rows.items() if "no-tool" in k)
    assert '<td class="jaato-BLOCKED">BLOCKED</td>' in "".join(blocked["resultsTableRow"])
    assert all(len(v["resultsTableRow"]) == len(rows[next(iter(rows))]["resultsTableRow"])
               for v in rows.values())

    # The PDF (when weasyprint is here): same document, real text on its pages.
    if not _weasyprint_ok():
        pytest.skip("weasyprint unavailable: the PDF part was not checked")
    result.stdout.fnmatch_lines([f"pdf report: {ours_pdf}"])
    if shutil.which("pdftotext"):
        out = subprocess.run(["pdftotext", str(ours_pdf), "-"], capture_output=True, text=True,
                             check=True).stdout
        assert "Task wrong" in out and "no-such-command-jaato-eval" in out

    # pytest-html's page draws its rows with its own script: a real browser shows ours in it.
    shot = project.root / "pytest-html.png"
    chromium("--window-size=1600,1200", f"--screenshot={shot}", url=theirs.as_uri())
    assert png_size_and_ink(shot)[2] > 50
    keep(shot)


def test_pdf_asked_without_weasyprint_is_a_usage_error(pytester, monkeypatch):
    # weasyprint made unimportable: what a machine without the extra sees. Nothing runs.
    monkeypatch.setitem(sys.modules, "weasyprint", None)
    pytester.makefile(".txt", hello="x")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--jaato-pdf=r.pdf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: --jaato-pdf: a PDF report needs weasyprint, which is not installed: "
            "pip install 'pytest-jaato-eval[pdf]'") in result.stderr.lines
    assert "Traceback" not in result.stderr.str()
