"""A grader kind is one declaration (task/model.py, graders/GRADE): every kind of
`AnyGrader` is in every per-kind table; and the match kind (G7), read by the harness."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import get_args

import pytest
import yaml

from pytest_jaato_eval import graders
from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.graders import match as match_grader
from pytest_jaato_eval.graders.context import GraderContext
from pytest_jaato_eval.task import model, preflight
from pytest_jaato_eval.task.load import ManifestError, json_schema, load_task

KINDS = get_args(model.AnyGrader)
DECLARED = ("label", "own_files", "preflight", "guarded")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_every_grader_kind_is_in_every_per_kind_table(kind):
    (name,) = get_args(kind.model_fields["kind"].annotation)
    assert name in model.GRADER_KINDS
    assert kind in graders.GRADE
    for attribute in DECLARED:  # the base's raise NotImplementedError is no declaration
        assert getattr(kind, attribute) is not getattr(model.Grader, attribute), attribute


def test_a_kind_missing_from_a_table_fails_the_walk():
    class Bare(model.Grader):
        kind: str = "bare"

    assert Bare not in graders.GRADE
    assert all(getattr(Bare, a) is getattr(model.Grader, a) for a in DECLARED)
    with pytest.raises(NotImplementedError):
        Bare().own_files(Path("."))


def manifest(tmp_path: Path, *graders_: dict) -> Path:
    (tmp_path / "fixture").mkdir(exist_ok=True)
    (tmp_path / ".jaato").mkdir(exist_ok=True)
    doc = {"id": "t", "environment": {"fixture": "fixture", "config_root": ".jaato"},
           "input": {"prompt": "p"}, "harness": {"profile": "w"}, "graders": list(graders_)}
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path / "task.yaml"


def test_a_match_grader_owns_no_file_needs_nothing_and_no_daemon(tmp_path):
    task = load_task(manifest(tmp_path, {"kind": "match", "path": "a.txt", "contains": "x"}))
    spec = task.graders[0]
    assert spec.id == "match:a.txt" and spec.expect == "present"
    assert spec.own_files(task.config_root) == set() and spec.guarded(task.config_root) == []
    assert spec.preflight(preflight._Needs(task.config_root, None)) is None
    assert not spec.NEEDS_DAEMON and model.JudgeGrader.NEEDS_DAEMON


@pytest.mark.parametrize("keys, said", [
    ({"path": "a.txt"}, "graders[0].contains: missing; expected contains (a text) or pattern"),
    ({"path": "a.txt", "contains": "x", "pattern": "x"}, "graders[0].pattern: give either"),
    ({"path": "a.txt", "pattern": "(x"}, "graders[0].pattern: not a regular expression"),
    ({"path": "../a.txt", "contains": "x"}, "graders[0].path: '../a.txt' leaves the workspace"),
    ({"path": "/etc/passwd", "contains": "x"}, "graders[0].path: '/etc/passwd' leaves"),
    ({"path": "a.txt", "contains": "x", "expect": "maybe"},
     "graders[0].expect: expected present or absent, got str 'maybe'"),
    ({"contains": "x"}, "graders[0].path"),
    ({"path": "a.txt", "contains": "x", "timeout_seconds": 5},
     "graders[0].timeout_seconds: not read: a match grader runs nothing to wait on"),
])
def test_a_wrong_match_grader_is_one_line_naming_its_key(tmp_path, keys, said):
    with pytest.raises(ManifestError) as caught:
        load_task(manifest(tmp_path, {"kind": "match", **keys}))
    message = str(caught.value)
    assert "\n" not in message and said in message, message


def test_the_json_schema_has_the_match_kind():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    base = {"id": "t", "environment": {"fixture": "f", "config_root": "c"},
            "input": {"prompt": "p"}, "harness": {"profile": "w"}}
    ok = {"kind": "match", "path": "a.txt", "pattern": "^x", "expect": "absent"}
    jsonschema.validate({**base, "graders": [ok]}, schema)
    for bad in ({"kind": "match", "path": "a", "contains": "x", "pattern": "x"},
                {"kind": "match", "path": "a"}, {**ok, "expect": "maybe"},
                {**ok, "timeout_seconds": 5}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**base, "graders": [bad]}, schema)


def grade(tmp_path: Path, **keys) -> tuple[str, str, list[str]]:
    spec = model.MatchGrader(kind="match", **{"path": "out.txt", **keys})
    ctx = GraderContext(workspace=tmp_path / "ws", config_root=tmp_path,
                        params={}, run=AgentRun(finish_reason="stop"))
    verdict = graders.grade(spec, ctx)
    return verdict.state, verdict.detail, verdict.evidence


def test_match_reads_the_file_as_the_agent_left_it(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "out.txt").write_text("first\nthe answer is 42\nlast\n")
    assert grade(tmp_path, contains="is 42") == ("PASS", "found", ["the answer is 42"])
    assert grade(tmp_path, pattern=r"^last$") == ("PASS", "found", ["last"])
    assert grade(tmp_path, pattern=r"^answer") == ("FAIL", "not found", [])
    assert grade(tmp_path, contains="42", expect="absent") == (
        "FAIL", "found", ["the answer is 42"])
    assert grade(tmp_path, contains="43", expect="absent") == ("PASS", "not found", [])
    os.symlink("out.txt", ws / "inside")  # a link that stays in the workspace is read
    assert grade(tmp_path, path="inside", contains="42")[0] == "PASS"
    (tmp_path / "key.txt").write_text("42")
    os.symlink(tmp_path / "key.txt", ws / "out")
    assert grade(tmp_path, path="out", contains="42") == (
        "FAIL", "out leads out of the workspace", [])
    assert grade(tmp_path, path="gone.txt", contains="42") == (
        "FAIL", "gone.txt is missing", [])
    assert grade(tmp_path, path="sub", contains="42") == ("FAIL", "sub is not a regular file", [])
    (ws / "bin").write_bytes(b"42 \xff")
    assert grade(tmp_path, path="bin", contains="42") == (
        "FAIL", "bin is not UTF-8 text (byte 3)", [])
    monkeypatch.setattr(match_grader, "MAX_BYTES", 8)
    state, detail, _ = grade(tmp_path, contains="42")
    assert state == "BLOCKED" and "larger than 8 bytes" in detail


def test_match_reads_the_workspace_held_though_its_path_was_replaced_since(tmp_path):
    """The folder held since the workspace was made is the one read: a process of the
    agent's that renames it after the identity check and leaves a link at its path to a
    host folder holding the answer changes nothing (before: BLOCKED, the lookup met the
    link at the path)."""
    ws, host = tmp_path / "ws", tmp_path / "host"
    ws.mkdir()
    host.mkdir()
    (ws / "out.txt").write_text("WRONG\n")
    (host / "out.txt").write_text("the answer is 42\n")
    held = os.open(ws, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.rename(ws, tmp_path / "ws.gone")
        os.symlink(host, ws)
        spec = model.MatchGrader(kind="match", path="out.txt", contains="is 42")
        ctx = GraderContext(workspace=ws, config_root=tmp_path, params={},
                            run=AgentRun(finish_reason="stop"), workspace_fd=held)
        verdict = graders.grade(spec, ctx)
    finally:
        os.close(held)
    assert (verdict.state, verdict.detail) == ("FAIL", "not found"), verdict


def test_match_is_blocked_on_a_truncated_run(tmp_path):
    (tmp_path / "ws").mkdir()
    spec = model.MatchGrader(kind="match", path="out.txt", contains="x")
    ctx = GraderContext(workspace=tmp_path / "ws", config_root=tmp_path, params={},
                        run=AgentRun(termination_reason="budget_exhausted"))
    assert graders.grade(spec, ctx).state == "BLOCKED"


def test_the_match_block_of_the_tasks_page_grades_as_it_says(tmp_path):
    """docs/tasks.md's `### match` block, as a user copies it into a task's graders."""
    page = (Path(__file__).parents[2] / "docs" / "tasks.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", page[page.index("### match\n"):], re.S).group(1)
    (grader,) = yaml.safe_load(block)
    (tmp_path / "ws" / "report").mkdir(parents=True)
    (tmp_path / "ws" / "report" / "summary.md").write_text("# Run\nAll tests pass (12)\n")
    keys = {k: v for k, v in grader.items() if k != "kind"}
    assert grade(tmp_path, **keys) == ("PASS", "found", ["All tests pass (12)"])
