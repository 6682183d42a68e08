"""A narrowed run (-k, --lf, a node id) updates the store it narrows, and the marks an arm
ran under are in its record, so `report` on the store exits as the run did
(docs/reports.md, "The store"; docs/tasks.md, "marks")."""
from __future__ import annotations

import subprocess
import sys

import pytest
from jaato_project import HANG, unused_plugins

pytestmark = pytest.mark.daemon

FAILING = [{"kind": "script", "run": "grep -qx DONE answer.txt"}]


def report(project, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_jaato_eval", "report",
                           str(project.store), *args], capture_output=True, text=True,
                          timeout=120)


def test_k_after_a_sweep_adds_to_its_store_instead_of_replacing_it(project):
    project.task("a-good")
    project.task("b-bad", graders=FAILING)
    result = project.run("tasks")
    assert result.ret == 1 and len(project.records()) == 2
    result = project.run("tasks", "-k", "b-bad")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["narrowed run (-k): 1 record added to the store*"])
    records = project.records()
    assert [r["arm_id"] for r in records] == ["a-good@echo#0", "b-bad@echo#0", "b-bad@echo#0"]
    assert not list(project.root.glob("results.previous*")), "the sweep was not rotated away"
    pivot = [line.split()[0] for line in result.stdout.lines if line.startswith(("a-", "b-"))]
    assert pivot == ["a-good", "b-bad"], result.stdout.str()  # the whole sweep, one row each
    result = project.run("tasks/a-good/task.yaml::a-good[echo-r0]")
    result.stdout.fnmatch_lines(["narrowed run (a node id): 1 record added to the store*"])
    assert len(project.records()) == 4


def test_an_xfail_arm_is_stored_with_its_mark_and_report_exits_as_the_run(project):
    project.task("known-bug", graders=FAILING, extra={"marks": [{"xfail": "known bug"}]})
    project.task("fine")
    result = project.run("tasks", "--jaato-pivot=all")
    assert result.ret == 0  # the FAIL was expected
    by = {r["task_id"]: r for r in project.records()}
    assert by["known-bug"]["state"] == "FAIL"
    assert by["known-bug"]["xfail"] == {"reason": "known bug", "strict": False}
    assert "xfail" not in by["fine"]
    assert [line for line in result.stdout.lines if line.startswith("known-bug")][0].split()[4:8] \
        == ["1", "0", "1", "(1"], result.stdout.str()
    shown = report(project)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "1 (1 xfail)" in shown.stdout


@pytest.mark.slow  # the -k test above shows the rule; this is the user's --lf round trip
def test_fix_then_lf_shows_the_whole_sweep(project):
    project.task("a-good")
    bad = project.task("b-bad", graders=FAILING)
    argv = [*unused_plugins(["--lf"]), f"--jaato-out={project.store}",
            f"--jaato-socket={project.daemon.socket_path}", "tasks"]
    project.monkeypatch.setenv("TMPDIR", str(project.tmp))
    first = project.pytester.runpytest_subprocess(*argv, timeout=HANG)
    assert first.ret == 1
    bad.write_text(bad.read_text().replace("DONE", "READY"))  # the fix
    rerun = project.pytester.runpytest_subprocess(*argv, "--lf", timeout=HANG)
    assert rerun.ret == 0, rerun.stdout.str()
    rerun.stdout.fnmatch_lines(["narrowed run (--lf): 1 record added to the store*"])
    pivot = {line.split()[0]: line.split()[2] for line in rerun.stdout.lines
             if line.startswith(("a-good", "b-bad"))}
    assert pivot == {"a-good": "100%", "b-bad": "100%"}, rerun.stdout.str()
    assert [r["state"] for r in project.records()] == ["PASS", "FAIL", "PASS"]
