"""Arms end to end against a real jaato daemon (echo provider): PASS, FAIL, BLOCKED."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from jaato_project import REPO, SCHEMA, processes_mentioning

from pytest_jaato_eval.results.record import RECORD_KEYS
from pytest_jaato_eval.testing.model_server import Turn


def test_shipped_tasks_pass_on_a_private_daemon(project):
    """`pytest tasks/` as a new user runs it: every arm PASS, exit 0, one full record per arm."""
    shutil.copytree(REPO / "tasks", project.root / "tasks")
    result = project.run("tasks", shared_daemon=False)
    result.assert_outcomes(passed=6)
    assert result.ret == 0
    records = project.records()
    assert sorted(r["arm_id"] for r in records) == [
        "config-file@echo#0", "judged-file@echo#0", "signed-answer@echo#0",
        "two-stage-driver@echo#0", "write-file@echo#0", "write-file@echo#1"]
    for r in records:
        assert set(RECORD_KEYS) <= set(r), set(RECORD_KEYS) - set(r)
        assert r["state"] == "PASS"
        assert (r["model"], r["provider"]) == ("echo", "echo")
        assert r["session_id"] and r["session_ids"][0] == r["session_id"]
        assert r["turns"] >= 1
        assert r["usage"]["cost_usd"] > 0 and r["usage"]["spend_total_tokens"] > 0
        assert r["provenance"]["jaato_sdk_version"]
    result.stdout.fnmatch_lines(["*jaato-eval pivot*", "config-file*echo*100%*1*0*0*",
                                 "write-file*echo*100%*2*0*0*"])
    # The private daemon's start is said, with its time, before the first arm's line (and,
    # when the first arm had to wait for it, while it waited).
    lines = result.stdout.lines
    ready = next(i for i, x in enumerate(lines)
                 if re.fullmatch(r"jaato-eval: private jaato daemon ready after \d+\.\d s", x))
    starting = [i for i, x in enumerate(lines)
                if x.startswith("jaato-eval: starting the private jaato daemon")]
    assert all(i < ready for i in starting), result.stdout.str()
    assert ready < next(i for i, x in enumerate(lines) if x.startswith("  PASS "))
    # The first arm's time holds its wait for the daemon's start: its line says so, no other.
    passed = [x for x in lines if x.startswith("  PASS ")]
    waited = [r for r in records if r["daemon_wait_seconds"] is not None]
    noted = [x for x in passed if re.search(r" \(daemon start \d+\.\d s\)", x)]
    assert len(waited) <= 1 and noted == passed[:len(waited)], result.stdout.str()
    assert waited or not starting, result.stdout.str()  # said to be starting: an arm waited
    if waited:
        assert waited[0]["arm_id"] in noted[0] and waited[0]["daemon_wait_seconds"] <= (
            waited[0]["arm_seconds"])
    # R5: graded again from their snapshots, in the same sandbox, every verdict is the same
    # (the driver's, the processor's, the judge's and the scripts').
    regraded = project.root / "regraded.jsonl"
    again = project.run("tasks", f"--jaato-regrade={project.store}", f"--jaato-out={regraded}",
                        shared_daemon=False)
    assert again.ret == 0, again.stdout.str()
    before = {r["arm_id"]: r for r in records}
    for r in map(json.loads, regraded.read_text().splitlines()):
        assert [(v["grader_id"], v["state"], v["detail"]) for v in r["verdicts"]] == [
            (v["grader_id"], v["state"], v["detail"]) for v in before[r["arm_id"]]["verdicts"]]
        assert r["usage"] == before[r["arm_id"]]["usage"] and r["regraded"]
    # The private daemon and its run folder are gone, and nothing else was left in TMPDIR
    # (the judge's view of the workspace included, which the daemon writes into late).
    assert project.run_dirs() == []
    assert list(project.tmp.iterdir()) == []
    assert processes_mentioning(str(project.tmp)) == []


def test_discarded_workspaces_are_gone_and_a_failed_one_is_kept(project):
    """W4 with the removal in the background: after the run, a user-chosen workspace root
    holds the FAIL arm's workspace whole, which its record names, and no PASS arm's copy.
    (The shared daemon may still write a tracker into a removed workspace a moment after
    its session: what counts is that the copy the agent worked in is gone.)"""
    project.task("good", repeats=3)
    project.task("bad", graders=[{"kind": "script", "run": "grep -qx STEADY answer.txt"}])
    root = project.tmp / "ws"
    result = project.run("tasks", f"--jaato-workspaces={root}", "--keep-failed-workspaces")
    result.assert_outcomes(passed=3, failed=1)
    states = {r["arm_id"]: (r["state"], r["workspace"]) for r in project.records()}
    (kept,) = [ws for state, ws in states.values() if state == "FAIL"]
    assert all(ws is None for state, ws in states.values() if state == "PASS")
    root = root / f"run-{project.records()[0]['run_id']}"  # the run's own folder in it
    assert kept == str(root.resolve() / "bad@echo#0")
    assert (Path(kept) / "answer.txt").read_text() == "READY\n"
    assert (Path(kept) / "seed.txt").read_text() == "seed\n"
    left = {p.name for p in root.resolve().iterdir()} - {"bad@echo#0"}
    # The arms worked in the agents' folder (`.arms`); what is left there is a late tracker
    # of the outside daemon's at most.
    agents = root.resolve() / ".arms"
    left = {n for n in left if n != ".arms"} | (
        {f".arms/{p.name}" for p in agents.iterdir()} if agents.is_dir() else set())
    assert all(re.fullmatch(r"(\.arms/)?\.?good@echo#\d(-\w+-state)?|(\.arms/)?\.?bad@echo#0"
                            r"(-\w+-state)?", n) for n in left), left
    for name in left:  # a late tracker at most: never the fixture's copy or the agent's file
        assert not (root / name / "seed.txt").exists() and not (root / name / "answer.txt").exists()


def test_grader_expecting_other_content_fails_with_the_verdict_table(project):
    project.task("wrong", graders=[{"kind": "script", "run": "grep -qx STEADY answer.txt"},
                                   {"kind": "script", "run": "cat answer.txt; exit 0"}])
    result = project.run("tasks")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*arm wrong@echo#0: FAIL*",
        "*grader*state*detail*",
        "*script:grep -qx STEADY answer.txt*FAIL*exit 1, expected 0*",
        "*script:cat answer.txt; exit 0*PASS*exit 0*",
        "*evidence of script:cat answer.txt*",
        "*READY*",
    ])
    assert "Traceback" not in result.stdout.str()
    (record,) = project.records()
    assert record["state"] == "FAIL" and record["blocked_reason"] is None


def test_missing_profile_is_blocked_by_preflight_naming_set_and_folder(project):
    project.task("lost", extra={"harness": {"profile": "nope", "profile_set": "echo"}})
    result = project.run("tasks", shared_daemon=False)
    assert result.ret == 2
    result.stdout.fnmatch_lines([
        "tasks/lost/task.yaml*",
        "  BLOCKED lost@echo#0  arm * s · profile 'nope' of profile set*",  # its line, its reason
        "*short test summary info*",
        "BLOCKED *lost[[]echo-r0[]] - profile 'nope' of profile set 'echo' not found (there: "
        "writer): looked in *",
        "*1 blocked*",
    ])
    (record,) = project.records()
    assert record["state"] == "BLOCKED"
    assert record["blocked_reason"].startswith("profile 'nope' of profile set 'echo' not found")
    assert record["verdicts"] == [] and record["session_id"] is None  # no session was opened
    assert processes_mentioning(str(project.tmp)) == []
    assert project.run_dirs() == []
    # Started below the rootdir, its BLOCKED line names the arm as pytest's FAILED lines do:
    # relative to where pytest was started, to be pasted back.
    project.write("pytest.ini", "[pytest]\n")
    project.task("broken", graders=[{"kind": "script", "run": "false"}])
    project.monkeypatch.chdir(project.root / "tasks")
    below = project.run(".")
    below.stdout.fnmatch_lines(["*short test summary info*",
                                "FAILED broken/task.yaml::broken[[]echo-r0[]]*",
                                "BLOCKED lost/task.yaml::lost[[]echo-r0[]] - profile 'nope'*"])


@pytest.mark.slow
def test_arm_cut_by_the_ceiling_is_blocked_and_its_session_stopped(project, scripted_model):
    # An agent that never stops on its own: it reads a file every half second, forever (a
    # script repeats its last turn). Paced, so waiting out the ceiling costs the machine
    # nothing; echo's own endless re-emission would spin a core for the whole ceiling.
    model = scripted_model([Turn.tool("readFile", path="seed.txt").after(0.5)])
    path = project.task("slow")
    model.write_profile(path.parent / ".jaato", "runaway", profile_set="echo",
                        completion_payload_schema=SCHEMA)
    path.write_text(path.read_text().replace("profile: writer", "profile: runaway"))
    project.task("quick")
    # Generous enough for the quick arm on a loaded 2-core machine; the runaway never ends.
    result = project.run("tasks", "--arm-timeout=20")
    assert result.ret == 2
    result.assert_outcomes(passed=1, skipped=0)
    result.stdout.fnmatch_lines(["*1 passed, 1 blocked*"])
    by_id = {r["arm_id"]: r for r in project.records()}
    slow = by_id["slow@echo#0"]
    assert slow["state"] == "BLOCKED"
    assert "arm ceiling" in slow["blocked_reason"]
    assert "20 s" in slow["blocked_reason"] and "--arm-timeout" in slow["blocked_reason"]
    assert "not the task pool's budget.seconds" in slow["blocked_reason"]
    assert slow["session_id"], "the session id is kept even though the arm was cut"
    assert slow["turns"] >= 0
    assert len(model.chat_requests) >= 5, "the agent was still at work when it was cut"
    assert by_id["quick@echo#0"]["state"] == "PASS"
    assert processes_mentioning(str(project.tmp)) == []


def test_junit_carries_blocked_as_a_skip_with_properties(project):
    project.task("lost", extra={"harness": {"profile": "nope", "profile_set": "echo"}})
    project.task("fine")
    junit = project.root / "junit.xml"
    result = project.run("tasks", f"--junitxml={junit}")
    assert result.ret == 2
    xml = junit.read_text()
    assert ('<skipped type="pytest.skip" message="BLOCKED: profile \'nope\' of profile set '
            '\'echo\' not found') in xml
    assert 'name="jaato_state" value="BLOCKED"' in xml
    assert 'name="jaato_model" value="echo"' in xml
    assert 'name="jaato_verdict[script:grep -qx READY answer.txt]" value="PASS"' in xml
