"""Provider faults through a scripted OpenAI-compatible model and the real daemon: each is
BLOCKED naming its cause, never FAIL (S4, S7)."""
from __future__ import annotations

import pytest
from jaato_project import SCHEMA

from pytest_jaato_eval.testing.model_server import Turn


def scripted_task(project, model, task_id, **task_kw):
    """A task whose `agent` profile talks to `model` (host baked in: the port is this run's)."""
    path = project.task(task_id, **task_kw)
    model.write_profile(path.parent / ".jaato", "agent", profile_set="echo",
                        completion_payload_schema=SCHEMA)
    manifest = path.read_text().replace("profile: writer", "profile: agent")
    path.write_text(manifest)
    return path


def test_a_multi_turn_agent_passes(project, scripted_model):
    model = scripted_model([Turn.tool("writeNewFile", path="answer.txt", content="READY\n"),
                            Turn.tool("signal_completion", answer="wrote it").with_usage(900, 40)])
    scripted_task(project, model, "multi")
    project.run("tasks")
    (r,) = project.records()
    assert r["state"] == "PASS", r
    assert (r["model"], r["provider"]) == ("scripted", "vllm")
    assert r["turns"] >= 1 and r["payload_hash"]
    assert len(model.chat_requests) == 2


# 429, 500 and the hang are in tests/e2e/faults; a broken stream is named the same way.
@pytest.mark.parametrize("fault, names", [
    (Turn.malformed("garbage"), "JSONDecodeError"),
])
def test_provider_errors_are_blocked_naming_the_error(project, scripted_model, fault, names):
    model = scripted_model([fault])
    scripted_task(project, model, "faulty")
    result = project.run("tasks")
    assert result.ret == 2
    (r,) = project.records()
    assert r["state"] == "BLOCKED" and r["verdicts"] == []
    assert r["blocked_reason"].startswith(f"provider error: {names}"), r["blocked_reason"]
    # the record's `error` is jaato's own account of the session's end, whole
    assert r["error"].startswith("RunnerCallError: ") and names in r["error"], r["error"]
    assert r["session_id"]
    result.stdout.fnmatch_lines([f"*({1}×) provider error: {names}*"])
