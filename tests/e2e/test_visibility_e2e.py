"""What a run shows while it goes and after it: a line per finished arm, the private
daemon's start, what an interrupted run left and how to run it, the judge's bill, and
the Markdown pivot in GitHub's step summary. Against a real daemon."""
from __future__ import annotations

import json
import re
import shlex
import sys

import pytest
import yaml
from jaato_project import HANG, WRITER, signer

JUDGE_COST = 0.002


def judge_profile(payload: dict, cost: float | None = JUDGE_COST) -> dict:
    usage = {"prompt_tokens": 40, "output_tokens": 8, **({"cost_usd": cost} if cost else {})}
    return dict(WRITER, name="judge", completion_payload_schema={
        "type": "object", "properties": {"score": {}, "errors": {"type": "array"}},
        "required": ["score", "errors"]}, plugin_configs={
        "echo": {"tool_call": {"name": "signal_completion", "args": payload}, "response": "ok",
                 "usage": usage},
        "permission": {"policy": {"defaultPolicy": "allow"}}})


def judged_task(project, task_id="judged"):
    agent = signer({"answer": "42"})
    agent["plugin_configs"]["echo"]["usage"] = {"prompt_tokens": 10, "output_tokens": 5,
                                                "cost_usd": 0.001}
    project.task(task_id, profile=agent, graders=[
        {"kind": "judge", "profile": "judge", "threshold": 0.5}])
    where = project.root / "tasks" / task_id / ".jaato" / "profiles" / "echo"
    (where / "judge.yaml").write_text(yaml.safe_dump(judge_profile({"score": 1, "errors": []})))


def test_a_line_per_arm_at_default_verbosity_dots_under_q(project):
    project.task("ok")
    project.task("bad", graders=[{"kind": "script", "run": "grep -qx STEADY answer.txt"}])
    result = project.run("tasks")
    out = result.stdout.str()
    # verdict, arm id, the arm's duration and its cost, one line each
    assert re.search(r"^  PASS +ok@echo#0  arm \d+\.\d s · \$0\.00\d\d", out, re.M), out
    assert re.search(r"^  FAIL +bad@echo#0  arm \d+\.\d s · \$0\.00\d\d", out, re.M), out
    assert "1 failed, 1 passed" in out
    quiet = project.run("tasks", "-q").stdout.str()
    assert "  PASS " not in quiet and re.search(r"^[.F]{2}", quiet, re.M), quiet
    verbose = project.run("tasks", "-v").stdout.str()
    assert re.search(r"task\.yaml::ok\[echo-r0\] PASSED \(arm \d+\.\d s · \$0\.00\d\d\)",
                     verbose), verbose


def test_an_early_stop_says_what_did_not_run_and_the_command_that_runs_it(project):
    project.task("a-bad", graders=[{"kind": "script", "run": "false"}])
    project.task("b-ok")
    project.task("c-ok")
    out = project.run("tasks", "-x").stdout.str()
    line = next(x for x in out.splitlines() if "did not run" in x)
    assert line.startswith("2 arms did not run; they run with: pytest "), line
    command = shlex.split(line.split("with: ", 1)[1])
    assert "--resume" in command and "-x" in command
    again = project.run(*command[1:]).stdout.str()  # the plugin's own store and socket args
    assert "did not run" not in again
    assert {r["task_id"] for r in project.records()} == {"a-bad", "b-ok", "c-ok"}


def test_the_judges_bill_is_its_own_and_the_pivot_shows_both(project, tmp_path):
    judged_task(project)
    summary = tmp_path / "summary.md"
    project.monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = project.run("tasks", "--jaato-pivot=all").stdout.str()  # every column, any width
    (r,) = project.records()
    assert r["state"] == "PASS", r["verdicts"]
    assert r["usage"]["cost_usd"] == pytest.approx(0.001)  # the agent's alone
    assert r["judge_usage"]["cost_usd"] == pytest.approx(JUDGE_COST)
    assert r["judge_usage"]["spend_total_tokens"] == 48
    header = next(x for x in out.splitlines() if x.startswith("task "))
    assert "judge cost" in header and "total cost" in header
    row = next(x for x in out.splitlines() if x.startswith("judged "))
    assert "$0.0010" in row and "$0.0020" in row and "$0.0030" in row
    assert re.search(r"judged@echo#0  arm \d+\.\d s · \$0\.0010 \(judge \$0\.0020\)", out), out
    # GitHub's step summary got the Markdown pivot, and the run said so
    assert f"pivot appended to $GITHUB_STEP_SUMMARY ({summary})" in out
    text = summary.read_text()
    assert "| judged | echo | 100% |" in text and "judge cost" in text
    data = json.loads(project.pytester.run(sys.executable, "-m", "pytest_jaato_eval", "report",
                                           str(project.store), "--format", "json"
                                           ).stdout.str())
    assert data["cells"][0]["judge_cost_usd"] == pytest.approx(JUDGE_COST)


def transcript(project, record) -> dict:
    from pytest_jaato_eval.results import transcripts
    return transcripts.read(project.store, record["transcript"])


def test_every_arm_keeps_its_transcript_with_its_judges_and_shows_it(project):
    judged_task(project)
    project.task("bad", graders=[{"kind": "script", "run": "grep -qx STEADY answer.txt"}])
    out = project.run("tasks", "--html=page.html").stdout.str()
    by = {r["task_id"]: r for r in project.records()}
    bad = transcript(project, by["bad"])
    (agent,) = bad["sessions"]
    assert agent["session_id"] == by["bad"]["session_id"] and agent["model"] == "echo"
    call = agent["messages"][1]["parts"][0]
    assert (call["name"], call["args"]["path"]) == ("writeNewFile", "answer.txt")
    result = agent["messages"][2]["parts"][0]
    assert result["type"] == "function_response" and result["result"]["success"] is True
    assert agent["turns"] and agent["turns"][0]["total"] == 15
    judged = transcript(project, by["judged"])
    assert [s["role"] for s in judged["sessions"]] == ["agent", "judge"]
    assert judged["sessions"][1]["payload"] == {"score": 1, "errors": []}
    assert judged["sessions"][0]["payload"] == {"answer": "42"}
    # the terminal view: the failed arm's story, then its grader's verdict
    shown = project.pytester.run(sys.executable, "-m", "pytest_jaato_eval", "show",
                                 str(project.store), "-k", "bad").stdout.str()
    assert shown.index("→ writeNewFile") < shown.index("agent: done") < shown.index(
        "script:grep -qx STEADY answer.txt: FAIL")
    # pytest-html has it as the item's extra, folded
    page = (project.root / "page.html").read_text()
    assert "transcript: 1 session" in page and "transcript: 2 sessions" in page
    assert "did not run" not in out


@pytest.mark.slow  # four runs; the rotation is also shown by tests/unit/test_transcripts.py
def test_transcripts_resume_rotate_with_the_store_and_can_be_turned_off(project):
    project.task("a")
    project.task("b")
    folder = project.store.with_name("results.transcripts")
    project.run("tasks/a")
    first = sorted(p.name for p in folder.iterdir())
    assert len(first) == 1
    project.run("tasks", "--resume")  # b is added beside a's
    assert len(list(folder.iterdir())) == 2
    assert all(transcript(project, r)["arm_id"] == r["arm_id"] for r in project.records())
    project.run("tasks", "--no-jaato-transcripts")  # the store is set aside, its transcripts too
    assert not folder.exists() and all(r["transcript"] is None for r in project.records())
    (kept,) = project.root.glob("results.*.transcripts")
    assert len(list(kept.iterdir())) == 2


@pytest.mark.slow  # a kept daemon's start and stop
def test_a_kept_daemon_serves_runs_until_it_is_stopped(project):
    """docs/running.md's commands, run as written (in the project's directory)."""
    import os
    import re
    import subprocess
    from pathlib import Path

    from pytest_jaato_eval import kept_daemon
    from pytest_jaato_eval.engine.daemon import can_connect
    project.task("ok")
    (project.root / "pytest.ini").write_text("[pytest]\n")  # the project's own rootdir
    doc = (Path(__file__).parents[2] / "docs" / "running.md").read_text()
    (block,) = [b for b in re.findall(r"^```bash\n(.*?)^```", doc, re.S | re.M)
                if "pytest_jaato_eval daemon start" in b]
    start, run, stop = block.strip().splitlines()
    env = {**os.environ, "TMPDIR": str(project.tmp),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def sh(line):
        return subprocess.run(["bash", "-c", line], cwd=project.root, env=env, text=True,
                              capture_output=True, timeout=HANG)
    folder = kept_daemon.default_dir(project.root)
    try:
        started = sh(start)
        assert started.returncode == 0, started.stderr
        socket = started.stdout.strip()
        keeper = kept_daemon._keeper(folder)
        ran = sh(run)  # starts nothing: finds the running one, the same socket
        assert kept_daemon._keeper(folder) == keeper
        assert "private jaato daemon" not in ran.stdout, ran.stdout + ran.stderr
        store = project.root / "jaato-results.jsonl"
        assert store.exists(), ran.stdout + ran.stderr
        (record,) = [json.loads(x) for x in store.read_text().splitlines()]
        assert record["session_id"], ran.stdout  # a session on the kept daemon
    finally:
        stopped = sh(stop)
    assert stopped.stdout.strip() == f"stopped the kept daemon in {folder}"
    assert not keeper.alive() and not can_connect(socket) and not folder.exists()
