"""jaato-eval 0.3.4 itself and the plugin, side by side (a daemon each), over the task set in
tests/parity/tasks (built from jaato-eval's README examples and its own tests: the judge on
any rubric scale, parameters, budgets, what its loader reads as not given): every arm gets the
reference's verdict, both say what a user must act on, and the reference's store validates,
reports and compares against ours.

jaato-eval is in the `test` extra (it needs only jaato-sdk and PyYAML, which we pin too); where
it is missing, tests/parity/side_by_side.py makes a venv of its own under .venv/ once.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from jaato_project import HANG, REPO, short_tmpdir

from pytest_jaato_eval.engine.daemon import PrivateDaemon

sys.path.insert(0, str(REPO / "tests" / "parity"))
import side_by_side  # noqa: E402

pytestmark = [pytest.mark.daemon, pytest.mark.slow]


def test_side_by_side_with_jaato_eval(daemon, tmp_path):
    """One test, not one per check: the two runs are the cost (~a minute each), and under -n
    tests sharing them would either run them on every worker or wait on one another."""
    ref, ours = run_both(daemon, tmp_path)
    agree_arm_by_arm(ref, ours, tmp_path)
    give_the_same_advice(ref, ours)
    reference_store_validates_reports_and_compares(tmp_path)
    resume_over_the_reference_store_runs_nothing_again(tmp_path, daemon)


def run_both(daemon, scratch):
    """Both engines at once, each on a daemon of its own (one daemon driven by two sessions
    at a time stalls: docs/running.md): ours on the suite's, the reference on one started
    here with the same environment."""
    (scratch / "tmp").mkdir(parents=True)
    env = {**os.environ, "TMPDIR": str(scratch / "tmp")}
    ref_python = side_by_side.reference_python(REPO / ".venv" / "jaato-eval-0.3.4")
    our_tasks = side_by_side.copy_tasks(side_by_side.TASKS, scratch / "our-tasks")
    ref_tasks = side_by_side.copy_tasks(side_by_side.TASKS, scratch / "ref-tasks")
    (scratch / "home").mkdir()
    theirs = PrivateDaemon(short_tmpdir("jtr-") / "d", env={
        **daemon.env, "TMPDIR": str(scratch / "tmp"), "HOME": str(scratch / "home")})
    theirs.ensure()
    try:
        with ThreadPoolExecutor(2) as pool:
            ref = pool.submit(side_by_side.run_reference, ref_python, ref_tasks,
                              scratch / "ref.jsonl", theirs.socket_path, scratch, env)
            ours = pool.submit(side_by_side.run_ours, our_tasks, scratch / "ours.jsonl",
                               daemon.socket_path, scratch, env)
            return ref.result(), ours.result()
    finally:
        theirs.stop()
        shutil.rmtree(theirs.run_dir.parent, ignore_errors=True)


def agree_arm_by_arm(ref, ours, scratch):
    reference = side_by_side.records(scratch / "ref.jsonl")
    assert reference, f"jaato-eval wrote no store: {ref.stderr[-2000:]}"
    pairs = side_by_side.pair(reference, side_by_side.records(scratch / "ours.jsonl"))
    assert len(pairs) == len(reference) >= 31
    # An arm the reference itself could not run (its one-shot session.new on a starved host)
    # says nothing about agreement; more than two would say the comparison did not happen.
    assert sum(not p.comparable for p in pairs) <= 2, [p.line() for p in pairs]
    differ = [p.line() for p in pairs if p.comparable and not p.same]
    assert not differ, "\n".join(differ)
    assert ours.returncode == ref.returncode == 1  # FAIL arms in both runs
    by_task = {p.key[0]: p for p in pairs if p.comparable}
    persona = by_task["add-pagination"]
    # A persona's turns are the session's own (its events carry the persona's name).
    assert persona.ours["turns"] == persona.reference["turns"] >= 1
    assert (persona.ours["usage"]["spend_total_tokens"]
            == persona.reference["usage"]["spend_total_tokens"])
    # The judge's instrument caveat rides on judge-graded arms in both stores.
    assert bool(persona.ours["caveats"]) == bool(persona.reference["caveats"]) is True
    assert by_task["budget-pool"].ours["caveats"] == by_task["budget-pool"].reference["caveats"] == []
    # The rubric on its own scale, and what jaato-eval's loader reads as "not given": the
    # verdict each task is built to reach (both engines agreeing on a crash would be no news).
    assert {task: by_task[task].ours["state"] for task in RUBRICS if task in by_task} == {
        task: state for task, state in RUBRICS.items() if task in by_task}
    assert len(set(RUBRICS) & set(by_task)) >= len(RUBRICS) - 2
    for task, states in {"judge-negative-score": ["PASS", "FAIL"],  # the gate let the judge run
                         "judge-rubric-shapes": ["PASS"] * 4}.items():
        if task in by_task:  # grader by grader, in both engines
            pair = by_task[task]
            assert [v["state"] for v in pair.ours["verdicts"]] == states, pair.line()
            assert [v["state"] for v in pair.reference["verdicts"]] == states, pair.line()


# Task -> the verdict it is built to reach in both engines (tests/parity/tasks).
RUBRICS = {
    "judge-rubric-shapes": "PASS",       # 8 against 7 on 0-10, "0.9", passed: true, and a
                                         # Malloy-style 1-10 confidence, one judge each
    "judge-negative-score": "FAIL",      # score -1 against 0.5, gated on one id (a string)
    "params-date": "PASS",               # agent_params day: 2026-08-28 unquoted
    "driver-date": "FAIL",               # the scorer compares the bare date: jaato-eval quotes it
    "params-collision-judged": "FAIL",   # its script BLOCKED by the collision, its judge FAILs
    "manifest-nulls": "PASS",            # description:, agent:, agent_params:, budget: {}
    "budget-seconds": "PASS",
    "script-names-profiles": "PASS",     # a grader names $JAATO_EVAL_CONFIG_ROOT/profiles/...
}


def give_the_same_advice(ref, ours):
    """What a run says that its user acts on, in each engine's words: a pool deadline no arm
    can reach, before anything runs; an arm graded without the agent's sign-off."""
    assert "budget-seconds: budget.seconds=1800 exceeds the per-arm ceiling" in ref.stderr
    assert "'budget-seconds': budget.seconds (1800) exceeds the per-arm ceiling" in ours.stdout
    assert "unsigned-tree@default#0  (graded without a sign-off: NudgeExhausted" in ref.stderr
    assert "unsigned-tree@echo#0" in ours.stdout
    line = next(x for x in ours.stdout.splitlines() if "unsigned-tree@echo#0" in x)
    assert "PASS" in line and "never signed off: NudgeExhausted" in line, line


def run_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_jaato_eval", *args],
                          capture_output=True, text=True, timeout=120)


def reference_store_validates_reports_and_compares(scratch):
    ref_store, our_store = scratch / "ref.jsonl", scratch / "ours.jsonl"
    valid = run_command("validate", str(ref_store))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    report = run_command("report", str(ref_store))
    assert report.returncode == 1, report.stderr  # the reference's own exit: one FAIL
    blocked = [r for r in side_by_side.records(ref_store) if r["state"] == "BLOCKED"]
    for record in blocked:  # every blocked reason, the arm's or its grader's
        reasons = [record["blocked_reason"]] if record["blocked_reason"] else [
            v["blocked_reason"] for v in record["verdicts"] if v["state"] == "BLOCKED"]
        assert any(r and r[:60] in report.stdout for r in reasons), (record["arm_id"], reasons)
    assert "state 'BLOCKED'" not in report.stdout
    theirs = subprocess.run(  # and jaato-eval's own report reads our store
        [side_by_side.reference_python(REPO / ".venv" / "jaato-eval-0.3.4"), "-m", "jaato_eval",
         "report", str(our_store)], capture_output=True, text=True, timeout=120)
    assert theirs.returncode == 1 and "| add-pagination | echo | 100% |" in theirs.stdout, (
        theirs.stdout + theirs.stderr)
    compared = run_command("compare", str(ref_store), str(our_store))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    paired = [json.loads(line) for line in our_store.read_text().splitlines()]
    assert len(paired) == len(blocked) + len([r for r in side_by_side.records(ref_store)
                                              if r["state"] != "BLOCKED"])


def resume_over_the_reference_store_runs_nothing_again(scratch, daemon):
    """jaato-eval's `t@default#0` is our `t@echo#0` (the task's own set): --resume over its
    store finds every arm done."""
    store = scratch / "resumed.jsonl"
    shutil.copyfile(scratch / "ref.jsonl", store)
    before = store.read_text()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(scratch / "our-tasks"), "-p", "no:cacheprovider",
         "-q", "--resume", f"--jaato-out={store}", f"--jaato-socket={daemon.socket_path}",
         f"--rootdir={scratch / 'our-tasks'}"],
        cwd=scratch, env={**os.environ, "TMPDIR": str(scratch / "tmp")}, capture_output=True,
        text=True, timeout=HANG)
    assert f"{len(side_by_side.records(scratch / 'ref.jsonl'))} deselected" in run.stdout, (
        run.stdout[-3000:])
    assert store.read_text() == before  # nothing ran, nothing was appended
