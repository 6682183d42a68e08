"""The examples that open docs/tasks.md pass as printed, against a real daemon.

Every fenced block in the page that is headed by a bold file path (**`first-tasks/…`**) is
written to that path in a throwaway project and the tasks are run with the plugin, so the
first thing a task author copies cannot rot.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from document_checks import printed_as_documented

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"
FILE_BLOCK = re.compile(r"^\*\*`(?P<path>[^`]+)`\*\*\n\n```\w*\n(?P<body>.*?)^```$", re.M | re.S)

pytestmark = pytest.mark.daemon


def doc_files() -> dict[str, str]:
    return {m["path"]: m["body"] for m in FILE_BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def test_the_page_leads_with_one_task_per_grader_kind():
    files = doc_files()
    manifests = {p: yaml.safe_load(t) for p, t in files.items() if p.endswith("/task.yaml")}
    kinds = {g["kind"] for m in manifests.values() for g in m["graders"]}
    assert kinds == {"script", "processor", "judge", "match"}, kinds
    text = DOC.read_text(encoding="utf-8")
    assert text.index("## Start here") < text.index("## task.yaml"), "the examples come first"
    for manifest_path in manifests:  # each task is complete: a fixture and its profiles
        task_dir = manifest_path.rsplit("/", 1)[0]
        assert any(p.startswith(f"{task_dir}/fixture/") for p in files), task_dir


def test_the_examples_pass_on_the_echo_provider(project):
    for path, text in doc_files().items():
        written = project.write(path, text)
        assert written.read_text() == text, f"{path}: the example must not rely on dedenting"
    result = project.run("first-tasks")
    assert result.ret == 0, result.stdout.str()
    records = {r["task_id"]: r for r in project.records()}
    assert sorted(records) == ["judged-haiku", "script-check", "signed-answer"]
    for task_id, record in records.items():
        assert record["state"] == "PASS", (task_id, record["verdicts"])
    assert [v["grader_id"] for v in records["script-check"]["verdicts"]] == [
        "script:checks/answer.py", "match:answer.txt"]
    judged = records["judged-haiku"]["verdicts"]
    assert [v["state"] for v in judged] == ["PASS", "PASS"], judged
    # What the page says about echo's usage: counted per model call, two calls an arm.
    usage = records["script-check"]["usage"]
    assert usage["spend_total_tokens"] == 30 and usage["cost_usd"] == pytest.approx(0.002)


def test_the_dataset_example_runs_one_arm_per_sample(project):
    for path, text in doc_files().items():
        project.write(path, text)
    result = project.run("datasets", "-v")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["datasets/words/task.yaml::words[[]plain-echo-r0[]] PASSED*",
                                 "datasets/words/task.yaml::words[[]polite-echo-r0[]] PASSED*"])
    printed_as_documented(DOC, "pytest datasets/ -v", result.stdout.str())
    records = project.records()
    assert sorted(r["arm_id"] for r in records) == ["words[plain]@echo#0", "words[polite]@echo#0"]
    assert {r["sample_id"] for r in records} == {"plain", "polite"}
