"""--resume (R3, X5): only missing arms run, completed ones keep their sessions, a changed
task is refused. Resuming after an xdist run is in tests/e2e/test_pytest_layer_e2e.py;
interrupted sweeps and crashed workers are in tests/e2e/faults."""
from __future__ import annotations

import sys

import pytest


@pytest.mark.slow
def test_resume_runs_only_the_missing_arms_and_refuses_a_changed_task(project):
    project.task("alpha", repeats=2)
    project.task("beta", repeats=1)
    project.run("tasks", "-k", "alpha")
    first = {r["arm_id"]: r["session_id"] for r in project.records()}
    assert sorted(first) == ["alpha@echo#0", "alpha@echo#1"]
    result = project.run("tasks", "--resume")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*resumed: 2 arms already in the store were kept*"])
    # The store holds both runs' records: the summary says so, and what this run added.
    result.stdout.fnmatch_lines(["store: *results.jsonl (3 records; 1 record written by this run; run *"])
    records = project.records()
    assert sorted(r["arm_id"] for r in records) == ["alpha@echo#0", "alpha@echo#1", "beta@echo#0"]
    assert {r["arm_id"]: r["session_id"] for r in records if r["task_id"] == "alpha"} == first
    assert len({r["run_id"] for r in records}) == 2  # two runs, one file, told apart
    # Edit a task's prompt: resuming would mix two versions of it.
    manifest = project.root / "tasks" / "beta" / "task.yaml"
    manifest.write_text(manifest.read_text().replace("Write READY.", "Write READY now."))
    refused = project.run("tasks", "--resume")
    assert refused.ret == 2
    refused.stdout.fnmatch_lines(["*beta/task.yaml: resume: task 'beta' changed since*"])
    assert "jaato-eval pivot" not in refused.stdout.str()  # no pivot above a refusal
    assert len(project.records()) == 3


@pytest.mark.slow
def test_retry_blocked_runs_again_only_the_blocked_arms_and_the_new_record_counts(project):
    """A BLOCKED arm is an environment fault: once it is fixed, --retry-blocked runs those
    arms again (and only those), appending records that win over the BLOCKED ones."""
    project.task("alpha", repeats=2)
    project.task("beta", repeats=1)
    project.run("tasks", "-k", "alpha")
    alpha = {r["arm_id"]: r["session_id"] for r in project.records()}
    # The fault: no daemon where the run is told to look. beta is BLOCKED, for real.
    broken = project.run("tasks", "--resume", f"--jaato-socket={project.tmp}/no-daemon.sock",
                         shared_daemon=False)
    assert broken.ret == 2
    assert [r["state"] for r in project.records() if r["task_id"] == "beta"] == ["BLOCKED"]
    # --resume alone keeps BLOCKED arms as done: nothing to run.
    project.run("tasks", "--resume").assert_outcomes(deselected=3)
    # Fixed: --retry-blocked runs beta again, and nothing else.
    result = project.run("tasks", "--retry-blocked")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*resumed: 2 arms already in the store were kept*",
                                 "*retried: 1 arm stored as BLOCKED was run again*"])
    pivot = result.stdout.str().split("jaato-eval pivot", 1)[1]
    beta_row = next(line for line in pivot.splitlines() if line.startswith("beta"))
    assert "100%" in beta_row, pivot  # the new PASS, not the old BLOCKED
    records = project.records()
    assert [r["state"] for r in records if r["task_id"] == "beta"] == ["BLOCKED", "PASS"]
    assert {r["arm_id"]: r["session_id"] for r in records if r["task_id"] == "alpha"} == alpha
    assert len([r for r in records if r["task_id"] == "alpha"]) == 2  # not run again


def test_a_resume_under_xdist_counts_what_it_kept_and_one_with_nothing_left_exits_as_report(
        project):
    """Under -n the summary counts the arms the store held before the run (not those the
    run added), and says nothing was retried when nothing was; a resume of a complete,
    all-PASS store exits 0, as `report` on that store does, not pytest's 5."""
    project.task("alpha", repeats=2)
    project.task("beta", repeats=1)
    project.run("tasks", "-k", "alpha")
    resumed = project.run("tasks", "--resume", "-n", "2")
    out = resumed.stdout.str()
    assert resumed.ret == 0, out
    resumed.stdout.fnmatch_lines(["*resumed: 2 arms already in the store were kept*"])
    assert "retried:" not in out, out
    done = project.run("tasks", "--resume")
    assert done.ret == 0, done.stdout.str()
    done.assert_outcomes(deselected=3)
    done.stdout.fnmatch_lines(["*resumed: 3 arms already in the store were kept*"])
    report = project.pytester.run(sys.executable, "-m", "pytest_jaato_eval", "report",
                                  str(project.store))
    assert report.ret == done.ret == 0
