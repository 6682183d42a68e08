"""Processor (G3) and judge (G5) graders and the unsigned arm (S8), against a real daemon.

The echo provider plays both the agent and the judge: `signal_completion` with a
fixed payload is a real sign-off, and a profile with a completion schema whose
agent only answers in prose is a real unsigned arm (the daemon nudges it twice,
then ends it with NudgeExhausted).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from jaato_project import SCHEMA, WRITER, signer

def unsigned() -> dict:
    # Works (writes the file) but never calls signal_completion.
    return dict(WRITER, name="worker", completion_payload_schema=SCHEMA)


def judge_profile(payload: dict) -> dict:
    return dict(WRITER, name="judge", completion_payload_schema={
        "type": "object", "properties": {"score": {}, "errors": {"type": "array"}},
        "required": ["score", "errors"]}, plugin_configs={
        "echo": {"tool_call": {"name": "signal_completion", "args": payload}, "response": "ok"},
        "permission": {"policy": {"defaultPolicy": "allow"}}})


def add_profile(project, task_id, profile):
    where = project.root / "tasks" / task_id / ".jaato" / "profiles" / "echo"
    (where / f"{profile['name']}.yaml").write_text(yaml.safe_dump(profile))


def processor(project, task_id, body: str) -> dict:
    where = project.root / "tasks" / task_id / ".jaato"
    where.mkdir(parents=True, exist_ok=True)
    (where / "check.py").write_text(body)
    return {"kind": "processor", "script": "check.py"}


def sessions_in(record) -> int:
    return len(list(Path(record["workspace"], ".jaato", "sessions").glob("*.json")))


def test_processor_pass_fail_and_blocked(project):
    ok = "def validate(payload, context):\n    return [] if payload == {'answer': '42'} else ['no']\n"
    project.task("p-pass", profile=signer({"answer": "42"}),
                 graders=[processor(project, "p-pass", ok)])
    project.task("p-fail", profile=signer({"answer": "41"}), graders=[
        processor(project, "p-fail", "def validate(payload, context):\n"
                                     "    return [f'answer is {payload[\"answer\"]}', 'second']\n")])
    project.task("p-nopayload", graders=[processor(project, "p-nopayload", ok)])
    project.task("p-raises", profile=signer({"answer": "42"}), graders=[
        processor(project, "p-raises", "def validate(payload, context):\n    raise KeyError('x')\n")])
    project.task("p-ledger", profile=signer({"answer": "42"}), graders=[processor(
        project, "p-ledger", "def validate(payload, context):\n"
                             "    names = [c['name'] for c in context.tool_calls]\n"
                             "    return [] if 'signal_completion' in names else [str(names)]\n")])
    project.task("p-missing", profile=signer({"answer": "42"}),
                 graders=[{"kind": "processor", "script": "nowhere.py"}])
    project.run("tasks")
    by = {r["task_id"]: r for r in project.records()}
    assert by["p-pass"]["state"] == "PASS"
    assert by["p-ledger"]["state"] == "PASS", by["p-ledger"]["verdicts"]  # a faithful ledger
    fail = by["p-fail"]["verdicts"][0]
    assert fail["state"] == "FAIL" and fail["evidence"] == ["answer is 41", "second"]
    assert "no payload" in by["p-nopayload"]["blocked_reason"]
    assert "validate() raised KeyError" in by["p-raises"]["blocked_reason"]
    assert "nowhere.py not found" in by["p-missing"]["blocked_reason"]
    assert by["p-pass"]["payload_hash"] and by["p-nopayload"]["payload_hash"] is None


def test_unsigned_arm_is_graded_and_its_processor_blocked(project):
    project.task("tree-ok", profile=unsigned())
    project.task("tree-bad", profile=unsigned(), graders=[
        {"kind": "script", "run": "grep -qx STEADY answer.txt"},
        processor(project, "tree-bad", "def validate(payload, context):\n    return []\n")])
    project.task("tree-payload", profile=unsigned(), graders=[
        {"kind": "script", "run": "grep -qx READY answer.txt"},
        processor(project, "tree-payload", "def validate(payload, context):\n    return []\n")])
    result = project.run("tasks", "--arm-timeout=120")
    by = {r["task_id"]: r for r in project.records()}
    ok, bad, payload = by["tree-ok"], by["tree-bad"], by["tree-payload"]
    for r in (ok, bad, payload):
        assert r["error"].startswith("NudgeExhausted"), r["error"]
        assert r["blocked_reason"] is None  # as jaato-eval writes it: the graders say the rest
    assert payload["state"] == "BLOCKED"  # its processor has no payload to read
    assert "BLOCKED tasks/tree-payload/task.yaml::tree-payload[echo-r0] - processor:" in (
        result.stdout.str())
    assert ok["state"] == "PASS"  # the tree is real, so it is graded
    assert bad["state"] == "FAIL"  # and a failing tree stays in the denominator
    assert bad["verdicts"][1]["state"] == "BLOCKED"
    assert "never signed off" in bad["verdicts"][1]["blocked_reason"]


@pytest.mark.parametrize("judged, before, gate_on, state, says, judge_opened", [
    ({"score": 0.7, "errors": []}, [], [], "PASS", "score 0.7", True),  # == threshold passes
    ({"score": 0.5, "errors": []}, [], [], "FAIL", "score 0.5 < 0.7", True),
    ({"score": "high", "errors": []}, [], [], "BLOCKED", "score is 'high', not a number", True),
    # `errors` is the judge saying it could not grade, as jaato-eval reads it (docs/tasks.md)
    ({"score": 1, "errors": ["cannot read"]}, [], [], "BLOCKED",
     "the judge cannot grade: cannot read", True),
    ({"score": 1, "errors": []}, ["false"], ["script:false"], "BLOCKED",
     "gate script:false=FAIL", False),
    # (a gate on a grader that does not run before the judge is a collection error now:
    # tests/unit/test_samples.py)
])
def test_judge(project, judged, before, gate_on, state, says, judge_opened):
    graders = [{"kind": "script", "run": run} for run in before]
    graders.append({"kind": "judge", "profile": "judge", "threshold": 0.7, "gate_on": gate_on})
    project.task("j", profile=signer({"answer": "42"}), graders=graders)
    add_profile(project, "j", judge_profile(judged))
    project.run("tasks", "--keep-workspaces")
    (r,) = project.records()
    verdict = r["verdicts"][-1]
    assert verdict["state"] == state, verdict
    assert says in verdict["detail"]
    # Guards open no judge session; an opened one runs in the judge's own view, so the
    # arm's workspace holds the agent's session only.
    opened = bool(verdict["evidence"]) and not verdict["evidence"][0].startswith("judge session —")
    assert opened == judge_opened, verdict
    assert sessions_in(r) == 1


def test_judge_is_not_opened_for_an_unsigned_arm(project):
    project.task("j", profile=unsigned(), graders=[
        {"kind": "script", "run": "true"}, {"kind": "judge", "profile": "judge"}])
    add_profile(project, "j", judge_profile({"score": 1, "errors": []}))
    project.run("tasks", "--keep-workspaces", "--arm-timeout=120")
    (r,) = project.records()
    assert r["verdicts"][1]["state"] == "BLOCKED"
    assert "never signed off" in r["verdicts"][1]["detail"]
    assert sessions_in(r) == 1
