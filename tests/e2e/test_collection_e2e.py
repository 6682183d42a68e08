"""Collection as pytest users expect it (X1, X2, M1, M2), through a real pytest run."""
from __future__ import annotations

import pytest
from jaato_project import processes_mentioning

BAD = {
    "missing-key": "environment: {fixture: fixture, config_root: .jaato}\ninput: {prompt: p}\n"
                   "harness: {profile: w}\ngraders: [{kind: script, run: 'true'}]\n",
    "null": "id: a\nenvironment: {fixture: fixture, config_root: .jaato}\ninput: {prompt: p}\n"
            "harness: {profile: null}\ngraders: [{kind: script, run: 'true'}]\n",
    "wrong-type": "id: b\nenvironment: {fixture: fixture, config_root: .jaato}\ninput: {prompt: p}\n"
                  "harness: {profile: w}\ngraders: [{kind: script, run: 'true'}]\nrepeats: abc\n",
    "unknown-key": "id: c\nenvironment: {fixture: fixture, config_root: .jaato}\n"
                   "input: {prompt: p}\nharness: {profile: w}\n"
                   "graders: [{kind: script, run: 'true'}]\nrepaets: 2\n",
    "wrong-kind-key": "id: d\nenvironment: {fixture: fixture, config_root: .jaato}\n"
                      "input: {prompt: p}\nharness: {profile: w, run: x}\n"
                      "graders: [{kind: script, run: 'true'}]\n",
    "bad-repeats": "id: e\nenvironment: {fixture: fixture, config_root: .jaato}\n"
                   "input: {prompt: p}\nharness: {profile: w}\n"
                   "graders: [{kind: script, run: 'true'}]\nrepeats: 0\n",
    "missing-fixture": "id: f\nenvironment: {fixture: gone, config_root: .jaato}\n"
                       "input: {prompt: p}\nharness: {profile: w}\n"
                       "graders: [{kind: script, run: 'true'}]\n",
    "empty-graders": "id: h\nenvironment: {fixture: fixture, config_root: .jaato}\n"
                     "input: {prompt: p}\nharness: {profile: w}\ngraders: []\n",
    "unknown-grader": "id: i\nenvironment: {fixture: fixture, config_root: .jaato}\n"
                      "input: {prompt: p}\nharness: {profile: w}\ngraders: [{kind: vibes}]\n",
    "bad-yaml": "id: [j\n",
}
EXPECT = {
    "missing-key": "id: missing",
    "null": "harness.profile: is null",
    "wrong-type": "repeats: expected an integer >= 1, got str 'abc'",
    "unknown-key": "repaets: unknown key (did you mean 'repeats'?)",
    "wrong-kind-key": "harness.run: harness.run is not read under harness.kind: session",
    "bad-repeats": "repeats: expected an integer >= 1, got int 0",
    "missing-fixture": "environment.fixture: 'gone' resolves to",
    "empty-graders": "graders: empty",
    "unknown-grader": "graders[0].kind: unknown kind 'vibes'",
    "bad-yaml": "not valid YAML",
}


def write_bad_tasks(project):
    for name, text in BAD.items():
        project.write(f"tasks/bad-{name}/task.yaml", text)
        (project.root / f"tasks/bad-{name}/fixture").mkdir(exist_ok=True)
        (project.root / f"tasks/bad-{name}/.jaato").mkdir(exist_ok=True)


def test_bad_manifests_are_one_line_errors_and_nothing_starts(project):
    write_bad_tasks(project)
    project.task("good")
    result = project.run("tasks", shared_daemon=False)
    out = result.stdout.str()
    assert result.ret == 2
    assert f"{len(BAD)} errors" in out
    for name, says in EXPECT.items():
        path = project.root / f"tasks/bad-{name}/task.yaml"
        lines = [line for line in out.splitlines() if line.startswith(f"{path}: ")]
        assert lines and says in lines[0], (name, lines)
    assert "Traceback" not in out and "raise " not in out
    assert not project.store.exists(), "no arm ran, so no store"
    assert project.run_dirs() == [], "no daemon was started"


@pytest.mark.slow  # an xdist run; the collection error without -n is shown above
def test_under_xdist_a_collection_error_still_runs_the_collected_arms(project):
    """xdist's workers still run what was collected after another file failed to collect,
    so the daemons they started early must not be abandoned for it (its arms would all be
    BLOCKED as "its start was abandoned"). One worker shows it: each starts its daemon alike."""
    project.write("tasks/broken/task.yaml", "id: [unclosed\n")
    project.task("good", repeats=2)
    result = project.run("tasks", "-n", "1", shared_daemon=False)
    result.assert_outcomes(passed=2, errors=1)
    assert sorted((r["arm_id"], r["state"]) for r in project.records()) == [
        ("good@echo#0", "PASS"), ("good@echo#1", "PASS")]
    assert project.run_dirs() == []


def test_continue_on_collection_errors_runs_the_valid_tasks(project):
    write_bad_tasks(project)
    project.task("good")
    result = project.run("tasks", "--continue-on-collection-errors")
    result.assert_outcomes(passed=1, errors=len(BAD))
    assert [r["arm_id"] for r in project.records()] == ["good@echo#0"]


def test_duplicate_task_id_names_both_paths(project):
    first = project.task("twin", directory="one")
    second = project.task("twin", directory="two")
    result = project.run("tasks", "--co")
    out = result.stdout.str()
    assert f"{second}: id: task id 'twin' is also declared by {first}" in out


def test_a_project_without_tasks_is_untouched(project):
    """X1: plugin installed, no task.yaml: nothing started, nothing written, exit code alone."""
    project.write("tests/test_plain.py", """
        def test_ok():
            assert True
    """)
    result = project.run("tests", shared_daemon=False)
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    assert "jaato-eval" not in result.stdout.str().replace("jaato-eval-0", "")
    assert not project.store.exists()
    assert project.run_dirs() == []
    project.write("tests/test_plain.py", "def test_bad():\n    assert False\n")
    assert project.run("tests", shared_daemon=False).ret == 1


def test_collect_only_lists_arms_without_a_daemon(project):
    project.task("alpha", repeats=2)
    project.task("beta")
    result = project.run("tasks", "--co", "-q", "--profile-set=echo,other", shared_daemon=False)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "tasks/alpha/task.yaml::alpha[[]echo-r0[]]",
        "tasks/alpha/task.yaml::alpha[[]echo-r1[]]",
        "tasks/alpha/task.yaml::alpha[[]other-r0[]]",
        "tasks/alpha/task.yaml::alpha[[]other-r1[]]",
        "tasks/beta/task.yaml::beta[[]echo-r0[]]",
        "tasks/beta/task.yaml::beta[[]other-r0[]]",
    ])
    assert project.run_dirs() == [] and not project.store.exists()
    assert processes_mentioning(str(project.tmp)) == []


def test_k_selects_one_task_and_one_profile_set(project):
    project.task("alpha")
    project.task("beta")
    result = project.run("tasks", "--profile-set=echo,other", "-k", "alpha and echo")
    result.assert_outcomes(passed=1)
    assert [r["arm_id"] for r in project.records()] == ["alpha@echo#0"]


def test_profile_set_in_the_arm_id_is_the_one_used(project):
    """The arm-id rule: the task's own set when no --profile-set names one."""
    project.task("own")
    project.task("none", profile_set=None)
    result = project.run("tasks", "--jaato-repeats=1")
    result.assert_outcomes(passed=2)
    assert sorted(r["arm_id"] for r in project.records()) == ["none@default#0", "own@echo#0"]


def test_bad_option_value_is_a_usage_error(project):
    project.task("alpha")
    result = project.run("tasks", "--arm-timeout=-3")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--arm-timeout: expected a finite number of seconds >= 0 (0 = off), got -3*"])
