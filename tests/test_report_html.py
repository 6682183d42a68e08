"""The self-contained report (P4): its HTML, escaping, the chart, and what a real browser
and a real PDF renderer make of it.

The browser and PDF checks need Debian's `chromium` and `poppler-utils` (pdftoppm,
pdftotext) and the `weasyprint` wheel (test extra; it needs pango from the OS). Each
check skips, saying which is missing, when its tool is absent. Set JAATO_REPORT_SHOTS=DIR
to keep the screenshots and PDF pages for a look.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_jaato_eval.testing.records import arm_record
from pytest_jaato_eval.report import chart, html, pdf

DATA = Path(__file__).parent / "data"
NASTY = 'script:grep -q "READY" answer.txt && test -s answer.txt'
NASTY_EVIDENCE = '<script>alert("x")</script> & <b>not bold</b>'


def arm(task, ps, repeat, state, *, cost=0.002, model="echo", graders=None, reason=None,
        evidence=(), error=None):
    return arm_record(task, ps, repeat, state, cost=cost, tokens=15, model=model,
                      graders=graders or [(NASTY, state)], reason=reason, evidence=evidence,
                      error=error, payload_hash="ab" * 32, budget_ceiling={"usd": 0.05},
                      run_id="r1", task_hash="h").to_dict()


RECORDS = [
    arm("write-file", "echo", 0, "PASS"),
    arm("write-file", "echo", 1, "FAIL", evidence=[NASTY_EVIDENCE, "last line"]),
    arm("write-file", "echo", 2, "BLOCKED", cost=None, graders=[(NASTY, "BLOCKED")],
        reason="ProviderError: 429 Too Many Requests"),
    arm("write-file", "gpt-large", 0, "PASS", cost=0.21, model="gpt-large"),
    arm("write-file", "gpt-large", 1, "PASS", cost=0.19, model="gpt-large"),
    arm("config-file", "echo", 0, "PASS", graders=[("script:test -f config.ini", "PASS"),
                                                   ("processor:schema.py", "PASS")]),
    arm("config-file", "gpt-large", 0, "FAIL", cost=0.2, model="gpt-large",
        graders=[("script:test -f config.ini", "PASS"), ("processor:schema.py", "FAIL")],
        evidence=["payload.name: expected a string"], error="NudgeExhausted: never signed off"),
]


class _Text(HTMLParser):
    """The text a reader sees, and every tag name."""

    def __init__(self):
        super().__init__()
        self.text, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def parse(document: str) -> _Text:
    p = _Text()
    p.feed(document)
    return p


def test_document_is_self_contained_and_escaped():
    doc = html.render(RECORDS, source="results.jsonl")
    assert "<script" not in doc.lower()
    assert "http://" not in doc and "https://" not in doc and "@import" not in doc
    assert "@media print" in doc and "@page" in doc
    # The grader id and the evidence are text: escaped in the source, intact once parsed.
    assert NASTY not in doc and '"READY" answer.txt' not in doc
    assert "script:grep -q &quot;READY&quot; answer.txt &amp;&amp; test -s answer.txt" in doc
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in doc
    parsed = parse(doc)
    text = "".join(parsed.text)
    assert NASTY in text and NASTY_EVIDENCE in text
    assert "script" not in parsed.tags and "b" in parsed.tags  # our own <b>, not the evidence's
    assert text.count(NASTY_EVIDENCE) == 1


def test_document_has_pivot_chart_and_one_table_per_task():
    doc = html.render(RECORDS)
    text = "".join(parse(doc).text)
    assert "<svg" in doc and doc.count("<circle") == 2 * 2  # 2 profile sets: point + legend
    assert "pass rate (95% Wilson interval) against mean cost per exercised arm" in doc
    assert "Task write-file" in text and "Task config-file" in text
    # One table per task, one row per arm: a pivot table + two arm tables.
    tables = re.findall(r'<table class="arms">.*?</table>', doc, re.S)
    assert len(tables) == 2
    rows = [t.count("<tr>") - 1 for t in tables]  # minus the header row
    assert sorted(rows) == [2, 5]
    # One column per grader, named by the grader id.
    assert '<th class="mono grader" title="processor:schema.py">processor:schema.py</th>' in doc
    # The P4 columns, unknowns as dashes, the budget column.
    for col in ("session id", "sessions", "upstream", "nudges", "payload", "budget"):
        assert f"<th>{col}</th>" in doc
    assert "$0.0020 / own $0.0500" in text and "sess-write-file-echo-1" in text
    assert "(1×) ProviderError: 429 Too Many Requests" in text
    assert "error: NudgeExhausted: never signed off" in text


def test_a_long_grader_id_is_clipped_in_its_header_and_whole_in_the_evidence():
    long_id = "script:" + " && ".join(f"test -s file{i}.txt" for i in range(12))
    doc = html.render([arm("t", "s", 0, "FAIL", graders=[(long_id, "FAIL")], evidence=["x"])])
    header = re.search(r'<th class="mono grader" title="([^"]*)">([^<]*)</th>', doc)
    assert header.group(1) == long_id.replace("&", "&amp;")
    assert len(header.group(2).replace("&amp;", "&")) == html.GRADER_HEADER_CHARS
    assert long_id in "".join(parse(doc).text)  # whole, in the evidence


def test_evidence_lists_the_arms_worth_reading():
    doc = html.render([arm("t", "s", 0, "PASS"), arm("t", "s", 1, "FAIL", evidence=["boom"])])
    evidence = doc[doc.index("<h3>Evidence</h3>"):]
    assert "t@s#1" in evidence and "t@s#0" not in evidence


def test_chart_says_what_it_could_not_plot():
    records = [arm("t", "free", 0, "PASS", cost=None),
               arm("t", "down", 0, "BLOCKED", reason="daemon gone")]
    doc = html.render(records)
    text = "".join(parse(doc).text)
    assert "free: pass rate 100%, but no arm reported a cost (unknown, not free)" in text
    assert "down: no arm exercised (every arm BLOCKED), pass rate —" in text
    assert "nothing to plot" in text


def test_chart_cost_axis_goes_logarithmic_when_costs_span_decades():
    points = [chart.Point("cheap", 1, 1, 0.001), chart.Point("dear", 1, 1, 0.5)]
    svg = chart.svg(points)
    assert "log scale" in svg and "$0.001" in svg and "$0.5" in svg
    assert "log scale" not in chart.svg([chart.Point("a", 1, 1, 0.1), chart.Point("b", 1, 2, 0.2)])


def test_reference_store_renders(tmp_path):
    from pytest_jaato_eval.commands import read_store
    doc = html.render(read_store(DATA / "jaato-eval-0.3.4.jsonl").records)
    text = "".join(parse(doc).text)
    assert "harness: — (not recorded)" in text and "jaato-sdk: 0.29.4" in text
    assert "$2.0300 / pool $6.0000 (66% consumed on arrival)" in text


# -- a real browser ------------------------------------------------------------------------
def _png_size_and_ink(path: Path) -> tuple[int, int, int]:
    """(width, height, number of distinct byte values in the pixel data): a blank page has ~2."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def _keep(path: Path) -> None:
    where = os.environ.get("JAATO_REPORT_SHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(where) / path.name)


def chromium(*args: str, url: str) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", *args, url],
            capture_output=True, text=True, timeout=120)


def test_report_in_a_real_browser(tmp_path):
    page = html.write(tmp_path / "report.html", RECORDS, source="results.jsonl")
    shot = tmp_path / "report-browser.png"
    result = chromium("--window-size=1400,2000", f"--screenshot={shot}", url=page.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    width, height, ink = _png_size_and_ink(shot)
    assert (width, height) == (1400, 2000) and ink > 50, "the screenshot is blank"
    _keep(shot)
    # Chromium's own print of the page: the text a reader gets is the escaped text, intact.
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext not installed (Debian: apt-get install poppler-utils)")
    printed = tmp_path / "report-browser.pdf"
    chromium("--no-pdf-header-footer", f"--print-to-pdf={printed}", url=page.as_uri())
    text = subprocess.run(["pdftotext", "-layout", str(printed), "-"], capture_output=True,
                          text=True, check=True).stdout
    assert "Task write-file" in text and "write-file@echo#1" in text.replace("\n", "")
    assert '<script>alert("x")</script>' in text


# -- the PDF -------------------------------------------------------------------------------
def _need_pdf_tools():
    try:
        pdf.load_weasyprint()
    except pdf.PdfUnavailable as exc:
        pytest.skip(str(exc))
    for tool in ("pdftoppm", "pdftotext"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (Debian: apt-get install poppler-utils)")


def test_pdf_pages_hold_the_tables(tmp_path):
    _need_pdf_tools()
    out = pdf.write(tmp_path / "report.pdf", html.render(RECORDS, source="results.jsonl"))
    assert out.read_bytes()[:5] == b"%PDF-"
    subprocess.run(["pdftoppm", "-r", "60", "-png", str(out), str(tmp_path / "page")], check=True)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert pages, "pdftoppm made no page"
    for page in pages:
        _, _, ink = _png_size_and_ink(page)
        assert ink > 20, f"{page.name} is blank"
        _keep(page)
    text = subprocess.run(["pdftotext", "-layout", str(out), "-"], capture_output=True,
                          text=True, check=True).stdout
    flat = " ".join(text.split())
    assert "write-file@echo#0" in "".join(text.split())  # a table cell may wrap it
    for needle in ("jaato-eval report", "Pivot", "Task write-file", "Task config-file",
                   "write-file@echo#1", "BLOCKED", "ProviderError: 429 Too Many Requests",
                   "processor:schema.py", '<script>alert("x")</script>'):
        assert needle in flat, needle
    assert "pass rate" in flat and "95% CI" in flat


def test_pdf_of_the_reference_store_through_the_command(tmp_path):
    _need_pdf_tools()
    from pytest_jaato_eval.commands import main
    target = tmp_path / "ref.pdf"
    # Exit 1: the store holds a FAIL (report exits with the verdict vocabulary).
    assert main(["report", str(DATA / "jaato-eval-0.3.4.jsonl"), "--pdf", str(target)]) == 1
    text = subprocess.run(["pdftotext", str(target), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "summarise@openrouter_gemini25flash#1" in " ".join(text.split()).replace(" ", "") or \
        "sess-77c1" in text


def test_records_round_trip_through_json():
    # The document renders from plain JSON records: what a store holds, nothing richer.
    doc_a = html.render(RECORDS)
    doc_b = html.render(json.loads(json.dumps(RECORDS)))
    strip = lambda d: re.sub(r"generated [^<]*", "", d)  # noqa: E731
    assert strip(doc_a) == strip(doc_b)
