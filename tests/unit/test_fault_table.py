"""The rule that decides FAIL or BLOCKED, held once (pytest_jaato_eval/faults.py): its table
walked, the command-word lookup that tells a grader's own missing tool from a program of
the agent's, and the process a timeout finds running."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_jaato_eval import faults
from pytest_jaato_eval.engine.driver import exit_verdict
from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.engine.sandbox import (Confinement, Limits, missing_command, probe,
                                              seal_interpreter)
from pytest_jaato_eval.graders import judge
from pytest_jaato_eval.graders.context import GraderContext
from pytest_jaato_eval.graders.output import program_of, run_bounded
from pytest_jaato_eval.graders.script import grade_script
from pytest_jaato_eval.task.model import JudgeGrader, ScriptGrader
from pytest_jaato_eval.verdict import BLOCKED, FAIL


def test_every_fault_names_its_evidence_and_an_act_its_verdict_and_claim():
    names = [f.name for f in faults.FAULTS]
    assert len(names) == len(set(names))
    for fault in faults.FAULTS:
        assert fault.evidence.strip(), fault.name
        if fault.act:  # recorded before any grader, under a verdict of its own
            verdict = fault.failed("what it did")
            assert verdict.state == FAIL and verdict.grader_id == fault.outcome
            assert fault.claim, fault.name
        else:
            with pytest.raises(AssertionError):
                fault.failed("what it did")
    # the verdicts an act is recorded under come from the table, each once
    assert faults.AGENT_ACTS == ("resources", "sandbox", "checkout", "workspace")
    assert {f.outcome for f in faults.FAULTS if f.act} == set(faults.AGENT_ACTS)


@pytest.mark.parametrize("reason, stopped, agents", [
    ("operator_request", False, True), ("cancelled", False, True), ("deleted", False, True),
    ("operator_request", True, False),  # the harness's own stop (its ceiling)
    ("natural", False, False), (None, False, False), ("budget_exhausted", False, False),
])
def test_a_session_ended_by_a_verb_the_harness_did_not_send_is_the_agents(reason, stopped,
                                                                         agents):
    assert faults.session_ended_by_hand(reason, stopped) is agents


def test_126_and_127_are_the_environments_only_when_a_word_of_the_authors_is_missing():
    assert faults.could_not_run(127, "nosuch") == (faults.TOOL_MISSING, "command not found")
    assert faults.could_not_run(126, "/opt/x") == (faults.TOOL_MISSING, "not executable")
    assert faults.could_not_run(127, None) == (faults.PROGRAM_EXIT, "command not found")
    assert faults.could_not_run(1, "nosuch") is None
    assert not faults.TOOL_MISSING.agents and faults.PROGRAM_EXIT.agents
    # the driver asks the same rule: a missing word BLOCKS, else its stop short is graded
    blocked, error = exit_verdict(127, ["sh: 1: nosuch: not found"], "nosuch")
    assert "`nosuch` is not on its PATH" in blocked and error is None
    blocked, error = exit_verdict(127, ["sh: 1: ./selftest.sh: not found"], None)
    assert blocked is None and error.startswith("DriverStoppedShort: driver exited 127")


@pytest.mark.parametrize("command, missing", [
    ("definitely-not-a-binary-xyz", "definitely-not-a-binary-xyz"),
    ("echo hello && nosuch-tool arg", "nosuch-tool"),
    ("X=1 nosuch-tool", "nosuch-tool"),
    ("if test -f a; then nosuch-tool; fi", "nosuch-tool"),
    ("/no/such/bin x", "/no/such/bin"),
    ("cat a | nosuch-tool", "nosuch-tool"),
    ("sh ./selftest.sh", None),                      # the agent's script: not the author's
    ("./selftest.sh && echo ok", None),
    ('cmp -s "$JAATO_EVAL_CONFIG_ROOT"/expected.txt answer.txt', None),
    ('"$JAATO_EVAL_PYTHON" -m pytest -q', None),     # computed: not looked up
    ("printf 'x'; exit 127", None),
    ("2>/dev/null grep a b | sort; cd sub && true", None),
    ("test -f x || { echo no; exit 1; }", None),
    ("echo nosuch-tool > out.txt", None),            # arguments are no command words
    ("for i in 1 2; do nosuch-tool; done", None),    # not ours to read: not looked up
    ("cat <<EOF\nnosuch-tool\nEOF", None),
    ("echo 'unbalanced", None),
])
def test_the_authors_command_words_are_looked_up_before_it_runs(command, missing):
    assert missing_command(command, os.defpath + ":/usr/bin:/bin") == missing


def test_a_timeout_names_the_workspace_program_running_and_no_other(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "selftest.sh").write_text("sleep 3021\n")
    done = run_bounded(["/bin/sh", "-c", "sh ./selftest.sh"], timeout=1, cwd=ws)
    assert done.code is None and program_of(done.running, ws) == "./selftest.sh"
    assert faults.timed_out(program_of(done.running, ws)) is faults.PROGRAM_TIMEOUT
    done = run_bounded(["/bin/sh", "-c", "sleep 3022"], timeout=1, cwd=ws)
    assert done.code is None and done.running and program_of(done.running, ws) is None
    assert faults.timed_out(None) is faults.AUTHOR_TIMEOUT
    leftover = subprocess.run(["pgrep", "-f", "sleep 302[12]"], capture_output=True)
    assert leftover.stdout == b"", "the timed-out tree was not ended"


def test_an_oom_kill_is_the_agents_only_in_the_graders_own_cgroup():
    assert faults.oom_of(1, True, True) is faults.OOM_OWN          # its own count decides
    assert faults.oom_of(0, True, True) is None                   # the machine's, not its
    assert faults.oom_of(0, True, False) is faults.OOM_MACHINE    # no cgroup: the counter
    assert faults.oom_of(0, False, False) is None
    assert faults.OOM_OWN.agents and not faults.OOM_MACHINE.agents
    assert "own memory cgroup" in faults.oom_said(faults.OOM_OWN, 256 << 20)
    assert "machine-wide oom_kill counter" in faults.oom_said(faults.OOM_MACHINE, None)


def test_a_confined_grader_runs_in_its_own_memory_cgroup_and_its_oom_kill_is_the_agents(
        tmp_path):
    """In the agent's sandbox and in a cgroup of its own (128 MiB here): an allocation past
    it is ended there, the agent's FAIL; a kill from inside stays the FAIL it was; the
    timeout and 126/127 rules hold as unconfined; the cgroup is gone after."""
    sandbox = probe()[0]
    made = Limits.make(f"jaato-eval-{os.getpid()}-probe")
    if sandbox is None or made is None or not made.memory:
        pytest.skip("needs bubblewrap and a memory cgroup the run may make")
    made.remove()
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "cr").mkdir()
    confinement = Confinement(sandbox, hidden=(), readable=(), scratch=tmp_path / "scratch",
                              sealed=seal_interpreter(tmp_path / "sealed", sys.executable))
    ctx = GraderContext(workspace=ws, config_root=tmp_path / "cr", params={},
                        run=AgentRun(finish_reason="stop"), confinement=confinement,
                        memory_limit=128 << 20)
    grade = lambda run: grade_script(ScriptGrader(kind="script", run=run), ctx)  # noqa: E731
    assert grade("true").state == "PASS"
    eaten = grade("python3 -c 'b = bytearray(400 << 20)'")
    assert eaten.state == "FAIL" and "in its own memory cgroup" in eaten.detail, eaten
    killed = grade("kill -9 $$")
    assert killed.state == "FAIL" and "from inside its sandbox" in killed.detail, killed
    # in the sandbox too: the agent's program sleeping past the timeout, or exiting 127, is
    # its FAIL; the author's own hang, or missing tool, is BLOCKED
    (ws / "selftest.sh").write_text("sleep 3031\n")
    (ws / "quits.sh").write_text("exit 127\n")
    timed = lambda run: grade_script(  # noqa: E731
        ScriptGrader(kind="script", run=run, timeout_seconds=2), ctx)
    assert timed("sh ./selftest.sh").detail.endswith("running ./selftest.sh, a file of the "
                                                     "workspace")
    assert timed("sleep 3032").state == "BLOCKED"
    assert timed("sh quits.sh").state == "FAIL"
    missing = timed("definitely-not-a-binary-xyz")
    assert missing.state == "BLOCKED" and "command not found" in missing.detail, missing
    left = [c for f in made.folders.values()
            for c in f.parent.glob(f"jaato-eval-{os.getpid()}-grader-*")]
    assert left == []  # each grader's cgroup removed after it


def test_every_fail_or_blocked_a_judge_decides_but_its_score_asks_the_table(tmp_path, monkeypatch):
    """The judge's decisions come from faults.py: no BLOCKED of its own in graders/judge.py,
    and each decision it makes before a session gives the outcome its fault names."""
    source = Path(judge.__file__).read_text()
    assert "Verdict.blocked(" not in source  # before: fourteen BLOCKED decided there
    spec = JudgeGrader(kind="judge", profile="rubric")
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in range(3):
        (ws / f"f{n}.txt").write_text("x\n")
    signed = AgentRun(finish_reason="stop", payload={"answer": 1})
    cases = {
        faults.RUN_INCOMPLETE: GraderContext(workspace=ws, config_root=tmp_path,
                                             params={}, run=AgentRun(finish_reason="tool_use")),
        faults.HARNESS_COPY: GraderContext(workspace=ws, config_root=tmp_path, params={},
                                           run=signed),
        faults.VIEW_BOUND: GraderContext(workspace=ws, config_root=tmp_path, params={},
                                         run=signed, socket_path=str(tmp_path / "sock")),
    }
    monkeypatch.setattr(judge, "VIEW_FILES", 2)  # three files: past the view's bound
    for fault, ctx in cases.items():
        verdict = judge.grade_judge(spec, ctx)
        assert verdict.state == (BLOCKED if fault.outcome == faults.ENVIRONMENT else FAIL), (
            fault.name, verdict)
        assert verdict.grader_id == spec.id
    # the view's copy: an error only the agent's tree gives is its FAIL, any other BLOCKED
    assert faults.view_fault(PermissionError(errno.EACCES, "closed")) is faults.VIEW_UNREADABLE
    assert faults.view_fault(OSError(errno.ELOOP, "links")).graded("j", "c", "d").state == FAIL
    assert faults.view_fault(OSError(errno.ENOSPC, "full")).graded("j", "c", "d").state == BLOCKED
