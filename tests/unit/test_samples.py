"""Samples: a task.yaml's dataset read and checked, arms per sample with stable ids, the
shard unit, the judge's gate checked at load, and xfail in the pivot's exit
(docs/tasks.md, "Datasets"). The end-to-end runs are in tests/e2e/test_samples_e2e.py."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_jaato_eval.task.arms import arms_of
from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.graders.context import GraderContext
from pytest_jaato_eval.graders.judge import judge_prompt
from pytest_jaato_eval.graders.processor import grade_processor
from pytest_jaato_eval.task.load import ManifestError, json_schema, load_task
from pytest_jaato_eval.pytest_layer.outcome import arm_identity, block_crashed, identity_properties
from pytest_jaato_eval.pytest_layer.shard import unit_of
from pytest_jaato_eval.report import html
from pytest_jaato_eval.results.pivot import ArmSummary, Cell, default_k
from pytest_jaato_eval.results.account import exit_status as report_exit
from pytest_jaato_eval.testing.records import arm_record

TASK = """\
id: words
environment: {fixture: fixture, config_root: .jaato}
input:
  prompt: "Write {{ word }} ({{ sample_id }})."
  agent_params: {word: "{{ sample.word }}", fixed: 3}
harness: {profile: writer}
graders:
  - {kind: script, run: "true"}
"""


def write(tmp_path: Path, text: str, **files: str) -> Path:
    (tmp_path / "fixture").mkdir(exist_ok=True)
    (tmp_path / ".jaato").mkdir(exist_ok=True)
    for name, body in files.items():
        (tmp_path / name.replace("_", ".")).write_text(body)
    p = tmp_path / "task.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def error_of(path: Path) -> str:
    with pytest.raises(ManifestError) as info:
        load_task(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message


def test_inline_rows_are_samples_and_the_prompt_and_params_render_per_sample(tmp_path):
    task = load_task(write(tmp_path, TASK + "dataset:\n  rows:\n    - {id: a, word: cat}\n"
                                            "    - {word: dog}\n"))
    arms = arms_of(task, ["x", "y"], 2)
    assert [a.id for a in arms[:5]] == ["words[a]@x#0", "words[a]@x#1", "words[a]@y#0",
                                        "words[a]@y#1", "words[row-2]@x#0"]
    assert len(arms) == 8 and len({a.id for a in arms}) == 8
    dog = arms[-1]
    assert dog.prompt == "Write dog (row-2)." and dog.agent_params == {"word": "dog", "fixed": 3}
    assert dog.grader_params == {"word": "dog", "fixed": 3}
    assert task.input.prompt == "Write {{ word }} ({{ sample_id }})."  # the task's own is a template


def test_jsonl_and_csv_files_and_the_limit(tmp_path):
    rows = "".join(f'{{"id": "r{i}", "word": "w{i}"}}\n' for i in range(5))
    task = load_task(write(tmp_path, TASK + "dataset: {file: rows.jsonl, limit: 3}\n",
                           rows_jsonl=rows + "\n"))
    assert [s.id for s in task.samples] == [f"r{i}" for i in range(5)]
    assert [a.sample_id for a in arms_of(task, None, None)] == ["r0", "r1", "r2"]
    assert [a.sample_id for a in arms_of(task, None, None, samples=1)] == ["r0"]
    csv = load_task(write(tmp_path, TASK + "dataset: rows.csv\n",  # as a spreadsheet saves it
                          rows_csv="\ufeffid,word\r\nc1,cat\r\nc2,dog\r\n"))
    assert [(a.sample_id, a.prompt) for a in arms_of(csv, None, None)] == [
        ("c1", "Write cat (c1)."), ("c2", "Write dog (c2).")]


def test_a_changed_dataset_changes_the_task_hash(tmp_path):
    path = write(tmp_path, TASK + "dataset: rows.jsonl\n", rows_jsonl='{"word": "a"}\n')
    before = load_task(path).content_hash
    (tmp_path / "rows.jsonl").write_text('{"word": "b"}\n')
    assert load_task(path).content_hash != before


@pytest.mark.parametrize("dataset, files, says", [
    ("dataset: rows.txt\n", {"rows_txt": "x"}, "dataset.file: rows.txt: expected a .jsonl or "
                                               ".csv file"),
    ("dataset: missing.jsonl\n", {}, "dataset.file: cannot read"),
    ("dataset: rows.jsonl\n", {"rows_jsonl": '{"word": "a"}\nnot json\n'},
     "dataset.file: rows.jsonl line 2: not valid JSON"),
    ("dataset: rows.jsonl\n", {"rows_jsonl": '[1, 2]\n'},
     "dataset.file row 1: expected a mapping of field names to values, got list"),
    ("dataset: {rows: [{id: a, word: x}, {id: a, word: y}]}\n", {},
     "dataset.rows row 2: id 'a' is also the id of row 1; sample ids must be unique"),
    ("dataset: {rows: [{id: 'a b', word: x}]}\n", {}, "dataset.rows row 1: id 'a b': expected"),
    ("dataset: {rows: []}\n", {}, "dataset.rows: empty; expected at least one row"),
    ("dataset: {file: a.jsonl, rows: [{word: x}]}\n", {}, "dataset.rows: give either file"),
    ("dataset: {rows: [{word: x}], limit: 0}\n", {}, "dataset.limit: expected an integer >= 1"),
    ("dataset: {rows: [{word: x}], lmit: 2}\n", {}, "dataset.lmit: unknown key (did you mean "
                                                      "'limit'?)"),
    ("dataset: {rows: [{wrd: x}]}\n", {}, "input.prompt: sample 'row-1': UndefinedError: 'word' "
                                          "is undefined"),
])
def test_a_bad_dataset_is_one_line_naming_the_key(tmp_path, dataset, files, says):
    message = error_of(write(tmp_path, TASK + dataset, **files))
    assert says in message, message


def test_without_a_dataset_a_task_is_one_sample_and_its_prompt_is_not_a_template(tmp_path):
    task = load_task(write(tmp_path, TASK))
    (arm,) = arms_of(task, None, None)
    assert arm.id == "words@default#0" and arm.sample is None
    assert arm.prompt == "Write {{ word }} ({{ sample_id }})."  # sent as written


def test_a_gate_naming_no_grader_before_the_judge_is_refused_listing_the_ids(tmp_path):
    judge = "  - {kind: judge, profile: rubric, gate_on: ['script:ture']}\n"
    message = error_of(write(tmp_path, TASK + judge))
    assert "graders[1].gate_on[0]: 'script:ture' is no grader of this task; expected the id of " \
           "a grader before it: 'script:true'" in message, message
    later = TASK.replace('  - {kind: script, run: "true"}\n',
                         "  - {kind: judge, profile: rubric, gate_on: ['script:true']}\n"
                         '  - {kind: script, run: "true"}\n')
    message = error_of(write(tmp_path, later))
    assert "'script:true' runs after this judge; expected the id of a grader before it: none" \
           in message, message


def _item(nodeid: str, arm) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, arm=arm, name=nodeid.rsplit("::", 1)[-1])


def test_a_samples_arms_are_one_shard_unit_unless_the_task_has_a_pool(tmp_path):
    task = load_task(write(tmp_path, TASK + "dataset: {rows: [{id: a, word: x}, {id: b, word: y}]}\n"))
    units = {unit_of(_item(f"t::{a.id}", a)) for a in arms_of(task, ["x", "y"], 2)}
    assert units == {"sample:words[a]", "sample:words[b]"}
    pooled = load_task(write(tmp_path, TASK + "budget: {usd: 1}\n"
                                              "dataset: {rows: [{id: a, word: x}, {id: b, word: y}]}\n"))
    assert {unit_of(_item(f"t::{a.id}", a)) for a in arms_of(pooled, None, 2)} == {"task:words"}


def _cell(*arms: tuple[str, str | None]) -> Cell:
    cell = Cell("t", "echo")
    for i, (state, xfail) in enumerate(arms):
        cell.add(ArmSummary(f"t@echo#{i}", "t", "echo", i, state, None, None, None, None,
                            xfail=xfail))
    return cell


def test_report_exits_as_the_run_did_under_xfail():
    assert report_exit([_cell(("PASS", None), ("FAIL", "xfail"))]) == 0
    assert _cell(("FAIL", "xfail")).fail_text == "1 (1 xfail)"
    assert report_exit([_cell(("PASS", None), ("FAIL", None))]) == 1
    assert report_exit([_cell(("PASS", "strict"))]) == 1  # XPASS(strict) failed the run
    assert report_exit([_cell(("PASS", "xfail"))]) == 0


def test_the_html_report_and_its_chart_mark_expected_failures():
    expected = arm_record("t", "echo", 0, "FAIL")
    expected.extra["xfail"] = {"reason": "known bug", "strict": False}
    doc = html.render([expected, arm_record("t", "echo", 1, "PASS")])
    assert doc.count("(xfail)</small>") == 1  # the arm's row
    assert "· 1 xfail" in doc  # the chart's legend for the set


def test_the_html_report_drills_down_per_sample():
    records = []
    for sample, states in (("cat", ("PASS", "FAIL")), ("dog", ("PASS", "PASS"))):
        for repeat, state in enumerate(states):
            r = arm_record("words", "echo", repeat, state, arm_id=f"words[{sample}]@echo#{repeat}")
            r.extra["sample_id"] = sample
            records.append(r)
    doc = html.render(records)
    table = doc[doc.index('<details class="samples">'):doc.index("</details>")]
    assert "Per sample: 2 samples" in table
    rows = [[cell for cell in re.findall(r"<td[^>]*>([^<]*)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table, re.S) if "<td" in row]
    assert rows == [["cat", "1", "1", "0"], ["dog", "2", "0", "0"]]


def test_pass_at_k_and_det_are_taken_per_sample_and_averaged():
    cell = Cell("words", "echo")
    for sample, state, payload in (("a", "PASS", "x"), ("a", "PASS", "x"),
                                   ("b", "FAIL", "y"), ("b", "FAIL", "y")):
        cell.add(ArmSummary(f"words[{sample}]@echo#{len(cell.arms)}", "words", "echo", 0, state,
                            None, payload, None, None, sample_id=sample))
    assert default_k([cell]) == 2  # each sample's repeats, not the cell's four arms
    assert cell.pass_at(2) == 0.5 and cell.pass_hat(2) == 0.5  # one sample always, one never
    assert cell.det == 1.0  # each sample reproduced its own answer
    assert cell.pass_rate == 0.5


def test_a_samples_identity_rides_on_its_reports_and_into_a_crashed_arms_record(tmp_path):
    task = load_task(write(tmp_path, TASK + "dataset: {rows: [{id: a, word: x}]}\n"))
    (arm,) = arms_of(task, ["echo"], 1)
    props = dict(identity_properties(arm))
    assert props["jaato_arm_id"] == "words[a]@echo#0" and props["jaato_sample_id"] == "a"
    report = SimpleNamespace(longrepr="worker 'gw0' crashed", user_properties=list(props.items()))
    block_crashed(report, "tasks/words/task.yaml::words[a-echo-r0]", arm_identity(report), "r1")
    record = report.jaato_record
    assert record["state"] == "BLOCKED" and record["sample_id"] == "a"
    assert record["arm_id"] == "words[a]@echo#0" and record["task_id"] == "words"
    plain = arms_of(load_task(write(tmp_path, TASK)), ["echo"], 1)[0]
    assert "jaato_sample_id" not in dict(identity_properties(plain))


def test_a_reports_record_is_read_once_and_read_from_any_report_object():
    """record_of keeps what it read per report (the terminal's line and the store's writer
    share it) and reads a new line again; a report that takes no weak reference is read
    all the same."""
    from pytest_jaato_eval.pytest_layer.outcome import RECORD_ATTR, record_of

    line = arm_record("t", "echo", 0, "FAIL").to_dict()
    plain = SimpleNamespace(**{RECORD_ATTR: line})  # no weak reference to it can be made
    assert record_of(plain).state == "FAIL"

    class Report:
        pass

    report = Report()
    setattr(report, RECORD_ATTR, line)
    assert record_of(report) is record_of(report)
    setattr(report, RECORD_ATTR, arm_record("t", "echo", 0, "PASS").to_dict())
    assert record_of(report).state == "PASS"


CHECK_SAMPLE = """\
def validate(payload, context):
    if context.sample == {"id": "a", "word": "cat"} and context.sample_id == "a":
        return []
    return [f"saw {context.sample!r} {context.sample_id!r}"]
"""


def test_a_processor_and_the_judge_see_the_sample(tmp_path):
    task = load_task(write(tmp_path, TASK.replace('  - {kind: script, run: "true"}\n',
                                                  "  - {kind: processor, script: check.py}\n"
                                                  "  - {kind: judge, profile: rubric}\n")
                           + "dataset: {rows: [{id: a, word: cat}]}\n"))
    (tmp_path / ".jaato" / "check.py").write_text(CHECK_SAMPLE)
    (arm,) = arms_of(task, None, None)
    ctx = GraderContext(workspace=tmp_path / "fixture", config_root=tmp_path / ".jaato",
                        params=arm.grader_params, run=AgentRun(payload={"answer": "cat"},
                                                               finish_reason="stop"),
                        sample=arm.sample)
    verdict = grade_processor(task.graders[0], ctx)
    assert verdict.state == "PASS", verdict
    prompt = judge_prompt(ctx, task.graders[1])
    assert "The sample this arm ran on (a):" in prompt and '"word": "cat"' in prompt
    env = ctx.contract_env()
    assert env["JAATO_EVAL_SAMPLE_ID"] == "a" and env["JAATO_EVAL_PARAM_WORD"] == "cat"
    assert json.loads(env["JAATO_EVAL_SAMPLE"]) == {"id": "a", "word": "cat"}


def test_the_json_schema_takes_a_dataset_as_a_file_name_or_a_mapping():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    base = {"id": "t", "environment": {"fixture": "f", "config_root": "c"},
            "input": {"prompt": "p"}, "harness": {"profile": "w"},
            "graders": [{"kind": "script", "run": "true"}]}
    for dataset in ("rows.jsonl", {"file": "rows.csv", "limit": 2}, {"rows": [{"id": "a"}]}):
        jsonschema.validate({**base, "dataset": dataset}, schema)
    for bad in ({"file": "a.jsonl", "rows": [{}]}, {}, {"fil": "a.jsonl"}, 3):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**base, "dataset": bad}, schema)
