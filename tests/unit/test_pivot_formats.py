"""`report --format markdown|json|csv`, the step summary, and the judge's bill in the pivot.

The Markdown is rendered by cmark-gfm (GitHub's own renderer) and read back as a table.
"""
from __future__ import annotations

import csv
import io
import json

import cmarkgfm
import pytest

from pytest_jaato_eval.pytest_layer.controller import append_step_summary
from pytest_jaato_eval.cli import main
from pytest_jaato_eval.results.account import account
from pytest_jaato_eval.results.formats import FORMATS, Asked, document
from pytest_jaato_eval.results.pivot import Pivot
from pytest_jaato_eval.results.pivot import render_pivot
from pytest_jaato_eval.testing.records import arm_record, write_store
from document_checks import parse

JUDGE = {"cost_usd": 0.5, "spend_total_tokens": 900}


def records():
    return [arm_record("write-file", "echo", 0, "PASS", cost=0.25),
            arm_record("write-file", "echo", 1, "FAIL", cost=0.25),
            arm_record("write-file", "echo", 2, "BLOCKED", cost=None),
            arm_record("a|b <i>x</i>", "echo", 0, "PASS", cost=0.1, judge_usage=JUDGE),
            arm_record("a|b <i>x</i>", "echo", 1, "PASS", cost=0.1,
                       judge_usage={"cost_usd": None})]


def run(tmp_path, capsys, *args):
    store = write_store(tmp_path / "s.jsonl", records())
    code = main(["report", str(store), *args])
    return code, capsys.readouterr()


def table_of(document: str) -> list[list[str]]:
    """The rows GitHub would show: each <tr>'s cell texts."""
    html = cmarkgfm.github_flavored_markdown_to_html(document)
    rows, row = [], None
    for piece in html.replace("<tr>", "\n<tr>").split("\n"):
        if piece.startswith("<tr>"):
            row = []
            rows.append(row)
        if row is not None and piece.startswith(("<td", "<th")):
            row.append("".join(parse(piece).text))
    return rows


def test_markdown_is_a_github_table_with_the_ci_and_blocked_columns(tmp_path, capsys):
    code, out = run(tmp_path, capsys, "--format", "markdown")
    assert code == 1  # a FAIL: the verdict vocabulary, whatever the format
    html = cmarkgfm.github_flavored_markdown_to_html(out.out)
    assert html.count("<table>") == 3  # the pivot, the profile sets' headlines, the arms not passed
    pivot, rest = out.out.split("**Profile sets over the sweep")
    sweep, arms = rest.split("**Arms that did not pass**")
    head, *body = table_of(pivot)
    assert {"95% CI", "blocked", "pass rate", "cost", "judge cost", "total cost"} <= set(head)
    rows = {r[0]: dict(zip(head, r)) for r in body}
    assert set(rows) == {"write-file", "a|b <i>x</i>"}  # a pipe and markup stay text
    wf = rows["write-file"]
    assert (wf["n"], wf["blocked"], wf["pass rate"], wf["95% CI"]) == ("2", "1", "50%", "9–91%")
    judged = rows["a|b <i>x</i>"]
    assert (judged["cost"], judged["judge cost"], judged["total cost"]) == (
        "$0.2000", "$0.5000+", "$0.7000+")
    assert "<i>" not in html  # shown, never obeyed
    assert "ProviderError: 429 Too Many Requests" in html  # the blocked digest
    noted = {r[0]: r[1:] for r in table_of(arms)[1:]}  # each arm, what it came to, and why
    assert noted == {"write-file@echo#1": ["FAIL", "script:grep -qx READY answer.txt: exit 1, "
                                                   "expected 0"],
                     "write-file@echo#2": ["BLOCKED", "ProviderError: 429 Too Many Requests"]}


def test_json_holds_each_cells_n_rates_and_interval(tmp_path, capsys):
    code, out = run(tmp_path, capsys, "--format", "json")
    data = json.loads(out.out)  # stdout holds the document alone
    cells = {c["task"]: c for c in data["cells"]}
    wf = cells["write-file"]
    assert (wf["n"], wf["pass"], wf["fail"], wf["blocked"]) == (2, 1, 1, 1)
    assert wf["pass_rate"] == 0.5 and wf["ci95"][0] == pytest.approx(0.0945, abs=1e-4)
    assert wf["floor"] == pytest.approx(1 / 3)
    assert wf["cost_usd"] == 0.5 and wf["cost_unknown_arms"] == 1
    assert wf["judge_cost_usd"] is None and wf["judged_arms"] == 0
    assert wf["blocked_reasons"] == [{"reason": "ProviderError: 429 Too Many Requests",
                                      "count": 1}]
    judged = cells["a|b <i>x</i>"]
    assert judged["judge_cost_usd"] == 0.5 and judged["judge_cost_unknown_arms"] == 1
    assert judged["total_cost_usd"] == pytest.approx(0.7)
    assert data["arms"] == 5 and data["k"] == 2
    assert data["not_passed"] == {"count": 2, "listed": [
        {"arm_id": "write-file@echo#1", "outcome": "FAIL",
         "why": "script:grep -qx READY answer.txt: exit 1, expected 0"},
        {"arm_id": "write-file@echo#2", "outcome": "BLOCKED",
         "why": "ProviderError: 429 Too Many Requests"}]}


def test_csv_is_a_row_per_cell_unknown_empty_and_no_formula(tmp_path, capsys):
    recs = records() + [arm_record("=HYPERLINK(1)", "echo", 0, "BLOCKED")]
    store = write_store(tmp_path / "s.jsonl", recs)
    assert main(["report", str(store), "--format", "csv"]) == 1
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    by_task = {r["task"]: r for r in rows}
    assert by_task["'=HYPERLINK(1)"]["pass_rate"] == ""  # every arm blocked: unknown
    assert by_task["write-file"]["ci95_high"].startswith("0.905")
    assert by_task["a|b <i>x</i>"]["judge_cost_usd"] == "0.5"


def test_text_stays_the_default_and_has_the_judge_columns_only_when_judged(tmp_path):
    plain = render_pivot(Pivot.of_records(records()[:3]).cells)
    judged = render_pivot(Pivot.of_records(records()).cells)
    assert "judge cost" not in plain[0] and "judge cost" in judged[0]
    assert any(line.startswith("cost: the agent's sessions") for line in judged)


def test_the_step_summary_is_appended_and_an_unwritable_one_is_a_line(tmp_path):
    acc = account(Pivot.of_records(records()))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    line = append_step_summary(summary, acc, "s.jsonl")
    assert line.startswith("pivot appended to $GITHUB_STEP_SUMMARY")
    text = summary.read_text()
    assert text.startswith("earlier step\n") and document(acc, "markdown",
                                                          source="s.jsonl") in text
    assert "| write-file@echo#1 | FAIL | script:grep -qx READY answer.txt: exit 1" in text
    line = append_step_summary(tmp_path / "no" / "such" / "dir", acc, "s.jsonl")
    assert line.startswith("error: $GITHUB_STEP_SUMMARY:")


def test_compare_shows_the_cost_delta_per_arm_with_the_judges_part(tmp_path, capsys):
    base = write_store(tmp_path / "b.jsonl", [
        arm_record("t", "echo", 0, "PASS", cost=0.01, judge_usage={"cost_usd": 0.02}),
        arm_record("u", "echo", 0, "PASS", cost=0.01)])
    new = write_store(tmp_path / "n.jsonl", [
        arm_record("t", "echo", 0, "PASS", cost=0.03, judge_usage={"cost_usd": 0.01}),
        arm_record("u", "echo", 0, "PASS", cost=None)])
    assert main(["compare", str(base), str(new)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(x for x in lines if x.startswith("group"))
    t = next(x for x in lines if x.startswith("t @ echo"))
    u = next(x for x in lines if x.startswith("u @ echo"))
    column = header.index("Δ cost/arm")
    # agent +$0.02 and judge -$0.01: together +$0.01 an arm, the judge's part said
    assert t[column:].startswith("+$0.0100 (judge -$0.0100)")
    assert u[column:].startswith("—")  # the new side reported no cost: unknown, never 0


def test_every_format_is_one_entry_the_command_and_its_help_read(tmp_path, capsys):
    store = write_store(tmp_path / "s.jsonl", records())
    acc = account(Pivot.of_store(store))
    for name, fmt in FORMATS.items():
        assert main(["report", str(store), "--format", name]) == 1
        out = capsys.readouterr().out
        assert out == fmt.render(acc, Asked(source=str(store)))  # not a terminal: every column
        if name != "csv":  # a row per cell; the others say why an arm did not pass
            assert "grep -qx READY answer.txt: exit 1" in out
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    said = "".join(capsys.readouterr().out.split())
    for name, fmt in FORMATS.items():
        assert "".join(f"{name} ({fmt.help})".split()) in said
    with pytest.raises(SystemExit):
        main(["report", str(store), "--format", "yaml"])
    assert "invalid choice: 'yaml'" in capsys.readouterr().err
