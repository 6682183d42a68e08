"""The self-contained report (P4): its HTML, escaping, the chart, and what a real browser
and a real PDF renderer make of it.

The browser and PDF checks need Debian's `chromium` and `poppler-utils` (pdftoppm,
pdftotext) and the `weasyprint` wheel (test extra; it needs pango from the OS). Each
check skips, saying which is missing, when its tool is absent. Set JAATO_REPORT_SHOTS=DIR
to keep the screenshots and PDF pages for a look.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_jaato_eval.testing.records import arm_record
from pytest_jaato_eval.report import chart, html, pdf
from document_checks import chromium, keep, parse, png_size_and_ink

DATA = Path(__file__).parents[1] / "data"
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


def test_document_is_self_contained_and_escaped():
    doc = html.render(RECORDS, source="results.jsonl")
    assert "<script" not in doc.lower()
    assert "http://" not in doc and "https://" not in doc and "@import" not in doc
    assert "@media print" in doc and "@page" in doc
    # The grader id and the evidence are text: escaped in the source, intact once parsed.
    assert NASTY not in doc and '"READY" answer.txt' not in doc
    # (Jinja2's autoescape writes a quote as &#34;, the same character as &quot;.)
    assert "script:grep -q &#34;READY&#34; answer.txt &amp;&amp; test -s answer.txt" in doc
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in doc
    parsed = parse(doc)
    text = "".join(parsed.text)
    assert NASTY in text and NASTY_EVIDENCE in text
    assert "script" not in parsed.tags and "b" in parsed.tags  # our own <b>, not the evidence's
    assert text.count(NASTY_EVIDENCE) == 1


def test_document_has_pivot_chart_and_one_table_per_task():
    doc = html.render(RECORDS)
    text = "".join(parse(doc).text)
    assert "<svg" in doc and doc.count("<circle") == 2 * 2  # 2 profile sets: point + legend
    assert ("pass rate over the sweep (95% interval, tasks as clusters) against mean cost per "
            "exercised arm") in doc
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
    svg = html.chart_svg(points)
    assert "log scale" in svg and "$0.001" in svg and "$0.5" in svg
    assert "log scale" not in html.chart_svg([chart.Point("a", 1, 1, 0.1), chart.Point("b", 1, 2, 0.2)])


def test_reference_store_renders(tmp_path):
    from pytest_jaato_eval.results.stores import read_store
    doc = html.render(read_store(DATA / "jaato-eval-0.3.4.jsonl").records)
    text = "".join(parse(doc).text)
    assert "harness: — (not recorded)" in text and "jaato-sdk: 0.29.4" in text
    assert "$2.0300 / pool $6.0000 (66% consumed on arrival)" in text


# -- a real browser ------------------------------------------------------------------------
def test_report_in_a_real_browser(tmp_path):
    page = html.write(tmp_path / "report.html", RECORDS, source="results.jsonl")
    shot = tmp_path / "report-browser.png"
    result = chromium("--window-size=1400,2000", f"--screenshot={shot}", url=page.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    width, height, ink = png_size_and_ink(shot)
    assert (width, height) == (1400, 2000) and ink > 50, "the screenshot is blank"
    keep(shot)
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
        _, _, ink = png_size_and_ink(page)
        assert ink > 20, f"{page.name} is blank"
        keep(page)
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
    from pytest_jaato_eval.cli import main
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


# -- hostile text and template injection -----------------------------------------------------
INJECTIONS = ["<script>alert(1)</script>", "{{ 7 * 7 }}", "{% for x in range(3) %}loop{% endfor %}",
              "{{ cycler.__init__.__globals__.os.system('touch pwned') }}", "{# c #}",
              '"><img src=x onerror=alert(1)>', "\u202etxt.exe", "\x1b[2J\x00"]


def injected_record(i: int, payload: str) -> dict:
    """Every text field of a record carries `payload`, ids included."""
    record = arm(f"t{payload}{i}", f"s{payload}", i, "FAIL", model=payload,
                 graders=[(f"script:{payload}", "FAIL"), (f"judge:{payload}", "BLOCKED")],
                 reason=payload, evidence=[payload, f"x {payload} y"], error=payload)
    record.update(provider=payload, upstream_provider=payload, session_id=payload,
                  finish_reason=payload, payload_hash=payload, caveats=[payload],
                  workspace=payload, run_id=payload, task_hash=payload,
                  provenance={"harness": payload, "harness_version": payload,
                              "jaato_sdk_version": payload, "jaato_sdk_path": payload})
    for v in record["verdicts"]:
        v.update(claim=payload, detail=payload)
    return record


@pytest.mark.parametrize("summarised", [False, True], ids=["every-arm", "summarised"])
def test_no_field_is_ever_rendered_as_markup_or_as_a_template(tmp_path, monkeypatch, summarised):
    if summarised:
        monkeypatch.setattr(html.tables, "FULL_ARMS", 1)
    records = [injected_record(i, p) for i, p in enumerate(INJECTIONS)]
    monkeypatch.chdir(tmp_path)
    doc = html.write(tmp_path / "r.html", records, title="{{ 6 * 7 }}<b>t</b>",
                     source="{% if 1 %}src{% endif %}").read_text()
    assert not (tmp_path / "pwned").exists()
    parsed = parse(doc)
    text = re.sub(r"generated [0-9: -]+\w*", "", "".join(parsed.text))  # the clock may say 42
    # Nothing was evaluated: the braces are still there, and no 49/42 or loop output appeared.
    assert "49" not in text and "42" not in text and "looploop" not in text
    assert "{{ 7 * 7 }}" in text and "{% for x in range(3) %}" in text
    assert "{{ 6 * 7 }}<b>t</b>" in text and "{% if 1 %}src{% endif %}" in text
    # Nothing became markup: the only tags are the report's own.
    assert set(parsed.tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3",
                                "p", "table", "thead", "tbody", "tr", "th", "td", "span", "b",
                                "div", "pre", "ul", "li", "section", "svg", "g", "rect", "line",
                                "text", "circle"}
    assert "<script" not in doc and "<img" not in doc and "onerror=alert(1)>" not in doc
    assert "<b>t</b>" not in doc and not [p for p in INJECTIONS if "<" in p and p in doc]
    # Control characters and bidi overrides are shown as escapes, never raw.
    assert "\u202e" not in doc and "\x1b" not in doc and "\x00" not in doc
    assert "\\u202etxt.exe" in text and "\\x1b[2J\\x00" in text


def test_a_huge_evidence_line_is_cut():
    record = arm("t", "s", 0, "FAIL", evidence=["Z" * 100_000, "tail"])
    doc = html.render([record])
    assert "Z" * (html.arms.EVIDENCE_LINE_CHARS - 1) + "…" in doc
    assert "Z" * html.arms.EVIDENCE_LINE_CHARS not in doc and "tail" in doc


def test_the_pivot_cells_say_what_the_terminal_pivot_says():
    from pytest_jaato_eval.results.pivot import build_cells
    from pytest_jaato_eval.results.pivot import pivot_rows
    records = RECORDS + [arm("write-file", "echo", 3, "PASS"), arm("write-file", "echo", 4, "FAIL")]
    header, rows = pivot_rows(build_cells(records))
    table = re.search(r'<table class="pivot">.*?</table>', html.render(records), re.S).group(0)
    cells = [[c for c in re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", tr)]
             for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    assert cells[0] == header
    assert cells[1:] == [[r[h] for h in header] for r in rows]  # det included, same text


# -- large reports: streamed, PASS arms counted, failures grouped --------------------------------
def test_a_large_report_counts_pass_arms_and_groups_failures(monkeypatch):
    monkeypatch.setattr(html.tables, "FULL_ARMS", 10)
    records = ([arm("big", "echo", r, "PASS") for r in range(20)]
               + [arm("big", "echo", r, "FAIL", evidence=["same failure"]) for r in range(20, 26)]
               + [arm("big", "gpt", r, "FAIL", evidence=["same failure"]) for r in range(3)]
               + [arm("big", "echo", 30, "BLOCKED", graders=[(NASTY, "BLOCKED")],
                      reason="ProviderError: 429 Too Many Requests")])
    doc = html.render(records)
    text = " ".join(parse(doc).text)
    assert "30 arms, more than 10" in text
    assert "PASS arms, counted: echo 20 · gpt" not in text  # gpt has no PASS arm
    assert "PASS arms, counted: echo 20" in " ".join(text.split())
    table = re.search(r'<table class="arms">.*?</table>', doc, re.S).group(0)
    assert table.count("<tr>") - 1 == 3  # echo FAIL kind, echo BLOCKED, gpt FAIL kind
    assert "big@echo#20 +5" in text and "big@gpt#0 +2" in text
    assert "5 more with the same verdicts and details: #21 #22 #23 #24 #25" in text
    assert "big@echo#5" not in text  # a PASS arm has no row
    # One evidence per kind of failure in the task, naming the arms that failed alike.
    evidence = doc[doc.index("<h3>Evidence</h3>"):]
    assert evidence.count('class="arm-evidence"') == 2
    assert "the same verdicts and details as big@gpt#0" in " ".join(parse(evidence).text) or \
        "the same verdicts and details as big@echo#20" in " ".join(parse(evidence).text)


def test_too_many_kinds_of_failure_are_named_in_one_row(monkeypatch):
    monkeypatch.setattr(html.tables, "FULL_ARMS", 1)
    monkeypatch.setattr(html.tables, "GROUPS_PER_CELL", 2)
    records = [arm("t", "s", r, "FAIL", graders=[(f"script:check{r}", "FAIL")]) for r in range(5)]
    text = " ".join(parse(html.render(records)).text)
    assert "+3 more that did not pass" in text
    assert "other failures (only 2 kinds are shown in full): #2 #3 #4" in text


def _store(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_document_is_streamed_a_task_at_a_time(tmp_path):
    from pytest_jaato_eval.results.pivot import Pivot
    records = [arm(f"task{t}", "echo", r, "PASS") for t in range(30) for r in range(2)]
    pivot = Pivot.of_store(_store(tmp_path / "s.jsonl", records))
    pieces = html.stream(pivot)
    first = next(pieces)
    assert first.startswith("<!DOCTYPE html>")
    rest = list(pieces)
    written = html.write(tmp_path / "r.html", pivot).read_text()
    strip = lambda d: re.sub(r"generated [^<]*", "", d)  # noqa: E731
    assert strip(written) == strip(first + "".join(rest)) == strip(html.render(records))
    assert len(rest) > 30 and not list(tmp_path.glob(".*partial"))


def test_templates_and_stylesheet_ship_as_package_data():
    import importlib.resources
    import tomllib
    folder = importlib.resources.files("pytest_jaato_eval.report") / "templates"
    names = {p.name for p in folder.iterdir()}
    assert {"report.html", "task.html", "fragments.html", "chart.html", "pytest_html.html",
            "report.css"} <= names
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["pytest_jaato_eval.report"]
    assert "templates/*.html" in data and "templates/*.css" in data
    assert any(d.lower().startswith("jinja2") for d in pyproject["project"]["dependencies"])


def test_a_large_report_reads_only_the_records_of_arms_that_did_not_pass(tmp_path, monkeypatch):
    # PASS arms are counted from the pivot's cells: their records are never re-read.
    from pytest_jaato_eval.results.pivot import Pivot
    monkeypatch.setattr(html.tables, "FULL_ARMS", 4)
    records = ([arm("all-pass", "echo", r, "PASS") for r in range(3)]
               + [arm("mixed", "echo", r, "PASS") for r in range(2)]
               + [arm("mixed", "echo", 2, "FAIL", evidence=["boom"])])
    pivot = Pivot.of_store(_store(tmp_path / "s.jsonl", records))
    assert not html.every_arm_shown(pivot.cells)
    read, real_arms = [], Pivot.arms

    def arms_spy(self, cell, states=None):
        for r in real_arms(self, cell, states):
            read.append(r.state)
            yield r

    monkeypatch.setattr(Pivot, "arms", arms_spy)
    doc = html.render(pivot)
    # only what did not pass is read: by the tables, and by the account's bounded list
    assert set(read) == {"FAIL"}
    strip = lambda d: re.sub(r"generated [^<]*", "", d)  # noqa: E731
    assert strip(doc) == strip(html.render(records))  # the same as from records in memory
    text = " ".join(" ".join(parse(doc).text).split())
    assert "Task all-pass PASS arms, counted: echo 3" in text
    assert "PASS arms, counted: echo 2" in text and "mixed@echo#2" in text
    assert doc.count('<table class="arms">') == 1  # the all-PASS task has no table


def test_a_small_reports_first_page_is_full_and_the_chart_follows(tmp_path):
    # The pivot and the sweep's headline fill page one; the chart, kept whole, follows on
    # page two: never a page left mostly empty before it.
    _need_pdf_tools()
    records = [arm("write-file", "echo", r, "PASS") for r in range(2)] + [
        arm("config-file", "echo", 0, "PASS")]
    out = pdf.write(tmp_path / "small.pdf", html.render(records, source="results.jsonl"))

    def page(n):
        return subprocess.run(["pdftotext", "-f", str(n), "-l", str(n), str(out), "-"],
                              capture_output=True, text=True, check=True).stdout
    first, second = page(1), page(2)
    assert "Pivot" in first and "Profile sets over the sweep" in first
    assert "Pass rate against cost, per profile set" in first + second
    assert "mean cost per exercised arm" in first + second  # the chart's own axis, drawn


def test_a_tasks_table_stays_within_the_window():
    """A task's table of long arm ids and many graders stays within a 1280 px window (looked
    at in headless chromium): the columns that do not fit scroll inside the table's own box,
    which is never wider than the page; on paper nothing scrolls."""
    graders = [(f"script:checks/check_{i}_the_answer_file_is_well_formed.py", "PASS")
               for i in range(6)]
    doc = html.render([arm("refactor-the-billing-module", "openrouter-claude-sonnet-long-name",
                           0, "PASS", graders=graders)])
    css = re.sub(r"/\*.*?\*/", "", doc, flags=re.S)
    screen, _, paper = css.partition("@media print")
    assert re.search(r"div\.wide \{ max-width: 100%; overflow-x: auto; \}", screen)
    assert re.search(r"div\.wide \{ overflow: visible; \}", paper)
    table = doc[doc.index(">Task refactor-the-billing-module"):]
    assert table.index('<div class="wide"><table class="arms">') < table.index("</table></div>")
