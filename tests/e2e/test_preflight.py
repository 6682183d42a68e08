"""Preflight: an arm whose set, profile or grader file is missing is BLOCKED before it
costs anything, with a reason naming what was looked for, where, and the close matches."""
from __future__ import annotations

import os
import shutil
import textwrap
import time
from pathlib import Path

import pytest
from jaato_project import REPO

from pytest_jaato_eval.task import preflight
from pytest_jaato_eval.task.load import load_task

TASK = """\
id: t
environment: {fixture: fixture, config_root: .jaato}
input: {prompt: do it}
harness: {profile: writer, profile_set: echo}
graders:
  - {kind: script, run: "true"}
"""


@pytest.fixture(autouse=True)
def fresh_cache():
    preflight.clear_cache()
    yield
    preflight.clear_cache()


def make(tmp_path: Path, text: str = TASK, profiles: dict[str, str] | None = None):
    """A task folder; `profiles` maps a path under .jaato/profiles to its YAML."""
    (tmp_path / "fixture").mkdir(exist_ok=True)
    root = tmp_path / ".jaato"
    for rel, body in (profiles if profiles is not None else {"echo/writer.yaml": "model: echo\n"}).items():
        (root / "profiles" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "profiles" / rel).write_text(body)
    root.mkdir(exist_ok=True)
    (tmp_path / "task.yaml").write_text(textwrap.dedent(text))
    return load_task(tmp_path / "task.yaml")


def test_an_arm_with_its_set_and_profile_passes(tmp_path):
    assert preflight.check(make(tmp_path), "echo") is None


def test_a_missing_set_names_the_folder_and_a_close_match(tmp_path):
    task = make(tmp_path)
    reason = preflight.check(task, "ecko")
    root = tmp_path.resolve() / ".jaato"
    assert reason == (f"profile set 'ecko' not found (did you mean 'echo'?): no folder "
                      f"{root}/profiles/ecko/")
    assert "not found (there: echo): no folder" in preflight.check(task, "nosuch")


def test_a_missing_profile_names_set_folders_and_close_matches(tmp_path):
    task = make(tmp_path, TASK.replace("profile: writer", "profile: writter"),
                profiles={"echo/writer.yaml": "model: echo\n", "echo/reader.yaml": "{}\n"})
    reason = preflight.check(task, "echo")
    root = tmp_path.resolve() / ".jaato" / "profiles"
    assert reason == (f"profile 'writter' of profile set 'echo' not found (did you mean "
                      f"'writer'?): looked in {root}/echo/ and {root}/ for "
                      f"writter.yaml|.yml|.json")


def test_profiles_resolve_as_jaato_resolves_them(tmp_path):
    """The set's folder, then the regular tier; a file's `name:` over its stem;
    .yml and .json too; `set/profile` pins the set."""
    profiles = {"echo/other.yaml": "name: writer\n", "base.yml": "{}\n",
                "live/judge.json": '{"model": "x"}', "echo/.keep": ""}
    assert preflight.check(make(tmp_path, profiles=profiles), "echo") is None
    assert preflight.check(make(tmp_path, TASK.replace("profile: writer", "profile: base"),
                                profiles=profiles), "echo") is None
    pinned = make(tmp_path, TASK.replace("profile: writer", "profile: live/judge"),
                  profiles=profiles)
    assert preflight.check(pinned, "echo") is None  # the pinned set wins over the arm's
    stem_only = make(tmp_path, TASK.replace("profile: writer", "profile: other"),
                     profiles=profiles)
    assert "profile 'other' of profile set 'echo' not found" in preflight.check(stem_only, "echo")


def test_no_profile_set_looks_in_the_regular_tier_only(tmp_path):
    task = make(tmp_path, TASK.replace(", profile_set: echo", ""),
                profiles={"echo/writer.yaml": "{}\n"})
    reason = preflight.check(task, None)
    assert reason.startswith("profile 'writer' (no profile set) not found: looked in ")
    assert reason.endswith("/profiles/ for writer.yaml|.yml|.json")
    make(tmp_path, profiles={"writer.yaml": "{}\n"})
    preflight.clear_cache()
    assert preflight.check(task, None) is None


def test_a_profile_file_that_does_not_parse_says_so(tmp_path):
    task = make(tmp_path, profiles={"echo/writer.yaml": "model: [unclosed\n"})
    reason = preflight.check(task, "echo")
    assert reason.startswith("profile 'writer': ") and "writer.yaml does not parse" in reason
    assert "does not parse: line 2, column 1: " in reason  # where, as the parser saw it


def test_grader_files_are_checked(tmp_path):
    task = make(tmp_path, TASK.replace('- {kind: script, run: "true"}', textwrap.dedent("""\
        - {kind: script, file: checks/answer.py}
          - {kind: script, file: checks/run.sh}
          - {kind: processor, script: processors/check.py}
          - {kind: judge, profile: critic}""")))
    root = tmp_path / ".jaato"
    reason = preflight.check(task, "echo")
    assert reason == (f"grader script:checks/answer.py: script checks/answer.py not found: "
                      f"looked for {task.config_root}/checks/answer.py")
    (root / "checks").mkdir()
    (root / "checks" / "answers.py").write_text("")
    assert "not found (did you mean 'answers.py'?): looked for" in preflight.check(task, "echo")
    preflight.clear_cache()
    (root / "checks" / "answer.py").write_text("")
    (root / "checks" / "run.sh").write_text("#!/bin/sh\n")
    assert preflight.check(task, "echo").startswith(
        "grader script:checks/run.sh: script checks/run.sh is not executable")
    (root / "checks" / "run.sh").chmod(0o755)
    assert "processor processors/check.py not found" in preflight.check(task, "echo")
    (root / "processors").mkdir()
    (root / "processors" / "check.py").write_text("")
    reason = preflight.check(task, "echo")
    assert reason.startswith("grader judge:critic: judge profile 'critic' of profile set "
                             "'echo' not found") and "(did you mean" not in reason
    (root / "profiles" / "echo" / "critic.yaml").write_text("{}\n")
    preflight.clear_cache()
    assert preflight.check(task, "echo") is None


def test_a_grader_file_linked_out_of_the_config_root_is_refused(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("")
    task = make(tmp_path, TASK.replace('run: "true"', "file: check.py"))
    (tmp_path / ".jaato" / "check.py").symlink_to(outside)
    assert "outside the config root" in preflight.check(task, "echo")


def test_a_driver_arm_needs_no_profiles_of_its_own(tmp_path):
    """Its driver chooses the profiles of the sessions it opens (as under jaato-eval): a
    config root without profiles/<set>/ runs; only a judge's profile is looked up."""
    driver = TASK.replace("input: {prompt: do it}\n", "").replace(
        "harness: {profile: writer, profile_set: echo}",
        "harness: {kind: driver, run: 'true', profile_set: openrouter_sonnet}")
    task = make(tmp_path, driver, profiles={})
    assert preflight.check(task, "openrouter_sonnet") is None
    assert preflight.check(task, None) is None
    judged = make(tmp_path, driver + "  - {kind: judge, profile: rubric}\n", profiles={})
    assert "judge profile 'rubric'" in preflight.check(judged, "nosuch")


def test_colliding_parameters_block_that_arm_only(tmp_path):
    """M9: `issue-id` and `issue_id` both want $JAATO_EVAL_PARAM_ISSUE_ID: the manifest loads
    and its arms are BLOCKED before they cost anything, as jaato-eval blocks them."""
    colliding = TASK.replace("input: {prompt: do it}",
                             "input: {prompt: do it, agent_params: {issue-id: 1, issue_id: 2}}")
    task = make(tmp_path, colliding)
    assert preflight.check(task, "echo") == ("input.agent_params: keys 'issue-id' and 'issue_id' "
                                             "both map to $JAATO_EVAL_PARAM_ISSUE_ID; rename one")
    # A judge grades it whatever its script graders say, as under jaato-eval: the arm runs.
    judged = make(tmp_path, colliding + "  - {kind: judge, profile: writer}\n")
    assert preflight.check(judged, "echo") is None
    driver = make(tmp_path, TASK.replace("input: {prompt: do it}",
                                         "input: {params: {a-b: 1, a_b: 2}}").replace(
        "harness: {profile: writer, profile_set: echo}", "harness: {kind: driver, run: x}"))
    assert preflight.check(driver, "echo").startswith("input.params: keys 'a-b' and 'a_b'")


# -- end to end -----------------------------------------------------------------------------
def blocked_lines(result) -> list[str]:
    return [line for line in result.outlines if line.startswith("BLOCKED ")]


@pytest.mark.slow
def test_shipped_tasks_with_a_missing_set_pass_or_block_before_any_session(project):
    """`--profile-set=echo,nosuch`: the echo arms PASS, every nosuch arm is BLOCKED by
    preflight in one line naming the set, the folder and `echo`, with no session."""
    shutil.copytree(REPO / "tasks", project.root / "tasks")
    started = time.monotonic()
    result = project.run("tasks", "--profile-set=echo,nosuch", "-rs")
    took = time.monotonic() - started
    assert result.ret == 2
    records = project.records()
    assert len(records) == 12
    states = {r["arm_id"]: r["state"] for r in records}
    assert {a: s for a, s in states.items() if "@echo#" in a} == dict.fromkeys(
        [a for a in states if "@echo#" in a], "PASS")
    nosuch = [r for r in records if r["profile_set"] == "nosuch"]
    assert len(nosuch) == 6 and {r["state"] for r in nosuch} == {"BLOCKED"}
    # A driver arm chooses its own profiles (as under jaato-eval): its driver runs, and
    # reports the missing profile as an environment fault of its own.
    (driver,) = [r for r in nosuch if r["task_id"] == "two-stage-driver"]
    assert "profile 'planner' not" in driver["blocked_reason"], driver["blocked_reason"]
    nosuch.remove(driver)
    for r in nosuch:
        assert r["session_id"] is None and r["verdicts"] == []
        assert r["blocked_reason"].startswith("profile set 'nosuch' not found (there: echo): "
                                              "no folder ")
        assert r["blocked_reason"].endswith("/.jaato/profiles/nosuch/")
    lines = blocked_lines(result)
    assert len(lines) == 6, lines
    for arm in ("config-file", "judged-file", "signed-answer", "two-stage-driver"):
        assert sum(f"{arm}[nosuch-r0]" in line for line in lines) == 1, lines
    assert sum("write-file[nosuch-r" in line for line in lines) == 2
    assert all("profile set 'nosuch' not found" in line for line in lines
               if "two-stage-driver" not in line)
    print(f"echo,nosuch run: {took:.1f} s")




@pytest.mark.slow
def test_every_arm_failing_preflight_starts_no_daemon(project):
    project.task("ghost", profile_set="echo")
    project.task("ghost2", profile_set="echo", directory="g2")
    mark = project.spy_on_daemon_starts()
    result = project.run("tasks", "--profile-set=nosuch", shared_daemon=False)
    assert result.ret == 2
    records = project.records()
    assert [r["state"] for r in records] == ["BLOCKED", "BLOCKED"]
    assert not mark.exists() and Path(f"{mark}.loaded").exists()


def test_a_script_grader_file_runs_from_the_config_root_and_a_missing_one_blocks(project):
    """`file:` grades from the config root (where the agent cannot write), a .py with the
    plugin's interpreter; a file that is not there BLOCKS the arm before its session."""
    project.task("by-file", graders=[{"kind": "script", "file": "checks/ready.py"}])
    project.write("tasks/by-file/.jaato/checks/ready.py", """\
        import os, pathlib, sys
        assert pathlib.Path.cwd() == pathlib.Path(os.environ["JAATO_EVAL_WORKSPACE"])
        sys.exit(0 if pathlib.Path("answer.txt").read_text() == "READY\\n" else 1)
        """)
    project.task("missing-file", graders=[{"kind": "script", "file": "checks/ready.py"}],
                 directory="missing")
    project.task("wrong", graders=[{"kind": "script", "file": "checks/steady.sh"}],
                 directory="wrong")
    sh = project.write("tasks/wrong/.jaato/checks/steady.sh", "#!/bin/sh\ngrep -qx STEADY answer.txt\n")
    sh.chmod(0o755)
    result = project.run("tasks")
    by_id = {r["task_id"]: r for r in project.records()}
    assert by_id["by-file"]["state"] == "PASS", by_id["by-file"]
    assert by_id["by-file"]["verdicts"][0]["grader_id"] == "script:checks/ready.py"
    assert by_id["wrong"]["state"] == "FAIL"  # run directly, judged by its exit
    missing = by_id["missing-file"]
    assert missing["state"] == "BLOCKED" and missing["session_id"] is None
    assert missing["blocked_reason"].startswith(
        "grader script:checks/ready.py: script checks/ready.py not found: looked for ")
    assert result.ret == 1
    assert os.environ.get("JAATO_EVAL") is None
