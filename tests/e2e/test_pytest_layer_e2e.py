"""Arms as pytest citizens, against a real daemon: fixtures, conftest, marks, arms written
in Python, pytest's re-run workflow, and a pytest run without tasks left untouched."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jaato_project import HANG, SCHEMA, processes_mentioning, unused_plugins

from pytest_jaato_eval.testing.model_server import Turn

NEEDS_SEED = [{"kind": "script", "run": "grep -qx READY answer.txt && grep -qx planted seed.txt"}]


def run_with_cache(project, *args, shared_daemon=True):
    """Like project.run, with pytest's cache on (for --lf, --ff, --sw, --nf)."""
    argv = [*unused_plugins(args), f"--jaato-out={project.store}", *args]
    if shared_daemon:
        argv.append(f"--jaato-socket={project.daemon.socket_path}")
    project.monkeypatch.setenv("TMPDIR", str(project.tmp))
    return project.pytester.runpytest_subprocess(*argv, timeout=HANG)


def nothing_left(project) -> None:
    deadline = time.monotonic() + 10
    while processes_mentioning(str(project.tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(project.tmp)) == []
    assert project.run_dirs() == []


def test_conftest_autouse_fixture_seeds_the_workspace_and_setup_show_lists_it(project):
    project.task("seeded", graders=NEEDS_SEED, repeats=2)
    project.write("tasks/conftest.py", """
        import pytest

        @pytest.fixture(autouse=True)
        def seed(jaato_workspace):
            (jaato_workspace / "seed.txt").write_text("planted\\n")
    """)
    result = project.run("tasks", "--setup-show")
    result.assert_outcomes(passed=2)
    assert [r["state"] for r in project.records()] == ["PASS", "PASS"]
    out = result.stdout.str()
    setup = [line.split()[2] for line in out.splitlines() if line.strip().startswith("SETUP")]
    assert setup.count("jaato_daemon") == 1, out
    assert setup.count("jaato_workspace") == 2 and setup.count("seed") == 2
    for first in (0, 3):  # per arm: the workspace, then the project's fixture, then the arm
        assert setup[first + 1:first + 4] == ["jaato_workspace", "seed", "jaato_arm"], setup


def test_a_raising_jaato_daemon_override_blocks_every_arm_naming_it(project):
    project.task("a", repeats=2)
    project.task("b")
    project.write("tasks/conftest.py", """
        import pytest

        @pytest.fixture(scope="session")
        def jaato_daemon():
            raise RuntimeError("our test daemon would not start")
    """)
    result = project.run("tasks", shared_daemon=False)
    assert result.ret == 2
    records = project.records()
    assert sorted(r["arm_id"] for r in records) == ["a@echo#0", "a@echo#1", "b@echo#0"]
    for r in records:
        assert r["state"] == "BLOCKED"
        assert r["blocked_reason"] == ("fixture 'jaato_daemon' failed in setup: RuntimeError: "
                                       "our test daemon would not start")
    out = result.stdout.str()
    assert "3 blocked" in out and " error" not in out.splitlines()[-1]
    nothing_left(project)


def test_a_failing_project_fixture_blocks_the_arm_and_a_teardown_error_keeps_the_verdict(project):
    project.task("setup-breaks")
    project.task("teardown-breaks")
    project.write("tasks/conftest.py", """
        import pytest

        @pytest.fixture(autouse=True)
        def service(request, jaato_workspace):
            if "setup-breaks" in request.node.nodeid:
                raise ConnectionError("the seed database is down")
            yield
            if "teardown-breaks" in request.node.nodeid:
                raise OSError("could not stop the service")
    """)
    result = project.run("tasks")
    by = {r["arm_id"]: r for r in project.records()}
    assert by["setup-breaks@echo#0"]["state"] == "BLOCKED"
    assert by["setup-breaks@echo#0"]["blocked_reason"] == (
        "fixture 'service' failed in setup: ConnectionError: the seed database is down")
    assert by["teardown-breaks@echo#0"]["state"] == "PASS"
    assert len(project.records()) == 2
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("errors"), outcomes.get("blocked")) == (1, 1, 1)


def test_xfail_mark_shows_x_exits_0_and_stores_the_true_fail(project):
    project.task("known-bug", graders=[{"kind": "script", "run": "false"}],
                 extra={"marks": [{"xfail": "known bug"}]})
    result = project.run("tasks", "-rx")
    assert result.ret == 0
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*XFAIL*known-bug*known bug*"])
    (r,) = project.records()
    assert r["state"] == "FAIL"


def test_m_selects_marked_tasks_and_strict_markers_refuses_an_unregistered_one(project):
    project.pytester.makeini("[pytest]\nmarkers =\n    smoke: the quick tasks\n")
    project.task("quick", extra={"marks": ["smoke"]})
    project.task("slow-one")
    result = project.run("tasks", "-m", "smoke")
    result.assert_outcomes(passed=1)
    assert [r["arm_id"] for r in project.records()] == ["quick@echo#0"]

    project.task("typo", extra={"marks": ["smoek"]})
    result = project.run("tasks", "--strict-markers", "--co")
    path = project.root / "tasks/typo/task.yaml"
    result.stdout.fnmatch_lines([f"{path}: marks[[]0[]]: 'smoek' not found in `markers`*"])
    assert "Traceback" not in result.stdout.str()


def test_skipif_true_for_every_task_runs_nothing_and_starts_no_daemon(project):
    project.task("a", extra={"marks": [{"skipif": "sys.platform != 'nonesuch'"}]})
    project.task("b", extra={"marks": [{"skip": "not today"}]}, repeats=2)
    result = project.run("tasks", shared_daemon=False)
    assert result.ret == 0
    result.assert_outcomes(skipped=3)
    assert not project.store.exists() and project.records() == []
    assert project.run_dirs() == []
    assert processes_mentioning(str(project.tmp)) == []


def test_a_bad_marks_entry_is_a_one_line_error(project):
    project.task("bad", extra={"marks": [{"xfail": "a", "skip": "b"}]})
    result = project.run("tasks", "--co")
    path = project.root / "tasks/bad/task.yaml"
    result.stdout.fnmatch_lines([f"{path}: marks[[]0[]]: expected a marker name or a one-key*"])


PY_ARMS = '''
import pytest

ARM = dict(config_root="../tasks/write-file/.jaato", fixture="../tasks/write-file/fixture",
           profile="writer", profile_set="echo")


@pytest.mark.jaato(**ARM, repeats=2)
def test_writes_ready(jaato_arm):
    run = jaato_arm.run("Write the word READY, on a line of its own, to answer.txt.")
    assert (jaato_arm.workspace / "answer.txt").read_text() == "READY\\n"
    assert run.session_id and run.model == "echo"


@pytest.mark.jaato(**ARM)
def test_wants_done(jaato_arm):
    jaato_arm.run("Write DONE to answer.txt.")
    assert (jaato_arm.workspace / "answer.txt").read_text() == "DONE\\n", "the agent wrote READY"
'''


@pytest.mark.slow  # it waits out most of a 20 s ceiling (an echo arm beside the hog: a few s)
def test_a_python_arm_body_is_held_to_the_arm_ceiling_and_reads_boundedly(project):
    """The body is the arm's grader: a hang in it is cut when the arm ceiling runs out (its
    arm BLOCKED: a bug in the test, not the agent's FAIL), and `jaato_arm.read` never blocks
    on what the agent left."""
    project.task("write-file")
    project.write("arms/test_body.py", """
        import time

        import pytest

        ARM = dict(config_root="../tasks/write-file/.jaato", fixture="../tasks/write-file/fixture",
                   profile="writer", profile_set="echo")


        @pytest.mark.jaato(**ARM)
        def test_hangs(jaato_arm):
            jaato_arm.run("Write READY.")
            time.sleep(3600)


        @pytest.mark.jaato(**ARM)
        def test_reads(jaato_arm):
            jaato_arm.run("Write READY.")
            assert jaato_arm.read("answer.txt") == "READY\\n"
            assert jaato_arm.read("missing.txt") is None and jaato_arm.read("../../x") is None
        """)
    result = project.run("arms", "--arm-timeout=20")
    by = {r["arm_id"].split("::")[1]: r for r in project.records()}
    assert by["test_reads@echo#0"]["state"] == "PASS", by["test_reads@echo#0"]
    hung = by["test_hangs@echo#0"]
    assert hung["state"] == "BLOCKED", hung
    assert "test body ran past the arm ceiling" in hung["blocked_reason"]
    assert result.ret == 2


def test_python_arms_pass_and_fail_with_the_assertion_as_evidence(project):
    project.task("write-file")
    project.write("arms/test_arms.py", PY_ARMS)
    result = project.run("arms", "-v")
    result.stdout.fnmatch_lines(["*test_writes_ready[[]echo-r0[]] PASSED*",
                                 "*test_writes_ready[[]echo-r1[]] PASSED*",
                                 "*test_wants_done[[]echo-r0[]] FAILED*"])
    assert result.ret == 1
    by = {r["arm_id"]: r for r in project.records()}
    assert set(by) == {"arms/test_arms.py::test_writes_ready@echo#0",
                       "arms/test_arms.py::test_writes_ready@echo#1",
                       "arms/test_arms.py::test_wants_done@echo#0"}
    good, bad = by["arms/test_arms.py::test_writes_ready@echo#0"], \
        by["arms/test_arms.py::test_wants_done@echo#0"]
    assert good["state"] == "PASS" and good["task_id"] == "arms/test_arms.py::test_writes_ready"
    assert good["session_id"] and good["model"] == "echo" and good["task_hash"]
    assert bad["state"] == "FAIL"
    evidence = "\n".join(bad["verdicts"][0]["evidence"])
    assert "the agent wrote READY" in evidence and "assert 'READY\\n' == 'DONE\\n'" in evidence
    assert "jaato-eval pivot" in result.stdout.str()


def test_python_arm_blocked_by_a_provider_500(project, scripted_model):
    model = scripted_model([Turn.fault(500, "boom", should_retry=False)])
    path = project.task("scripted")
    model.write_profile(path.parent / ".jaato", "agent", profile_set="echo",
                        completion_payload_schema=SCHEMA)
    project.write("arms/test_scripted.py", """
        import pytest

        @pytest.mark.jaato(config_root="../tasks/scripted/.jaato",
                           fixture="../tasks/scripted/fixture", profile="agent",
                           profile_set="echo")
        def test_answers(jaato_arm):
            run = jaato_arm.run("Answer.")
            assert run.payload == {"answer": "ok"}
    """)
    result = project.run("arms")
    assert result.ret == 2
    assert result.parseoutcomes().get("blocked") == 1
    (r,) = project.records()
    assert r["state"] == "BLOCKED" and r["verdicts"] == []
    assert r["blocked_reason"].startswith("provider error: InternalServerError"), r
    assert r["session_id"]


@pytest.mark.slow  # an xdist run: a private daemon per worker
def test_xdist_spreads_task_and_python_arms_over_one_writer_then_resume_runs_nothing(project):
    """-n 2 over task arms and Python arms together (X6): every arm once in the store, written
    by the controller alone under the run's one id, one pivot, nothing left running. Resuming
    the finished sweep (R3) deselects every arm, and no worker starts a daemon for nothing."""
    for name in ("a", "b"):
        project.task(name, repeats=2)
    project.task("write-file")  # the Python arms' config root and fixture; one arm too
    project.write("arms/test_arms.py", PY_ARMS)
    mark = project.spy_on_daemon_starts()
    result = project.run("tasks", "arms", "-n", "2", shared_daemon=False)
    assert result.ret == 1, result.stdout.str()  # test_wants_done fails, as written
    # The spy (used below and elsewhere) sees a run start its daemon.
    assert "started" in mark.read_text(), result.stdout.str()
    result.assert_outcomes(passed=7, failed=1)
    records = project.records()
    first = {r["arm_id"]: r["session_id"] for r in records}
    assert len(records) == len(first) == 8 and all(first.values())
    assert len({r["run_id"] for r in records}) == 1, "workers share the controller's run id"
    assert result.stdout.str().count("jaato-eval pivot") == 1
    nothing_left(project)
    mark.unlink()
    Path(f"{mark}.loaded").unlink()
    again = project.run("tasks", "arms", "--resume", "-n", "2", shared_daemon=False)
    # R3: nothing left to run, it exits as `report` on the store does (an arm there FAILED)
    report = project.pytester.run(sys.executable, "-m", "pytest_jaato_eval", "report",
                                  str(project.store))
    assert again.ret == report.ret == 1, again.stdout.str()
    assert Path(f"{mark}.loaded").exists(), "the spy was loaded"
    assert not mark.exists(), "no worker starts a daemon for arms --resume deselects"
    again.stdout.fnmatch_lines(["resumed: 8 arms already in the store were kept, not run again"])
    assert {r["arm_id"]: r["session_id"] for r in project.records()} == first
    nothing_left(project)


@pytest.mark.slow
def test_lf_runs_exactly_the_failed_arm_and_ff_runs_it_first(project):
    project.task("a-good", repeats=2)
    project.task("b-bad", graders=[{"kind": "script", "run": "false"}])
    project.task("c-good")
    project.task("write-file")
    project.write("arms/test_arms.py", PY_ARMS)
    result = run_with_cache(project, "tasks", "arms")
    result.assert_outcomes(passed=6, failed=2)
    result = run_with_cache(project, "tasks", "arms", "--lf", "-v")
    result.assert_outcomes(failed=2)  # the files with no failure are not even collected
    result.stdout.fnmatch_lines(["*rerun previous 2 failures*"])
    ran = [line.split()[0] for line in result.stdout.lines if " FAILED" in line and "::" in line]
    assert ran[:2] == ["tasks/b-bad/task.yaml::b-bad[echo-r0]",
                       "arms/test_arms.py::test_wants_done[echo-r0]"] or sorted(ran[:2]) == sorted(
        ["tasks/b-bad/task.yaml::b-bad[echo-r0]", "arms/test_arms.py::test_wants_done[echo-r0]"])
    result = run_with_cache(project, "tasks", "arms", "--ff", "-v")
    order = [line.split()[0] for line in result.stdout.lines
             if (" PASSED" in line or " FAILED" in line) and "::" in line]
    assert len(order) == 8
    assert set(order[:2]) == {"tasks/b-bad/task.yaml::b-bad[echo-r0]",
                              "arms/test_arms.py::test_wants_done[echo-r0]"}, order


@pytest.mark.slow
def test_a_crashed_workers_record_carries_the_real_arm_id(project):
    # Graders run in children of their own now, so the worker is crashed from a fixture
    # that the project's conftest runs around the arm (os._exit: no teardown, no report).
    project.task("my task", directory="crash")
    project.write("tasks/crash/conftest.py", """
        import os
        import pytest

        @pytest.fixture(autouse=True)
        def crash_the_worker(jaato_workspace):
            os._exit(3)
    """)
    project.task("good")
    result = project.run("tasks", "-n", "2")
    assert result.ret == 2
    by = {r["arm_id"]: r for r in project.records()}
    assert set(by) == {"my task@echo#0", "good@echo#0"}
    crashed = by["my task@echo#0"]
    assert crashed["state"] == "BLOCKED" and crashed["task_id"] == "my task"
    assert crashed["blocked_reason"].startswith("worker crashed")
    # --resume finds it by that id: nothing runs again.
    result = project.run("tasks", "--resume")
    result.stdout.fnmatch_lines(["*2 deselected*"])


def test_a_non_manifest_collection_error_is_one_line_for_that_file(project):
    """Anything but a ManifestError raised while collecting a task.yaml (a MemoryError, an
    unforeseen OSError) is that file's one-line collection error, never an INTERNALERROR.
    The manifest reader no longer raises one for any input we know, so a conftest makes
    it raise (the only stub here, and the test says so)."""
    task = project.task("odd")
    project.task("fine")
    project.write("conftest.py", """
        import pytest_jaato_eval.pytest_layer.collect as collect

        real = collect.load_task

        def load_task(path):
            if "odd" in str(path):
                raise MemoryError("simulated: the manifest reader ran out of memory")
            return real(path)

        collect.load_task = load_task
    """)
    result = project.run("tasks", "--co", "-q")
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    lines = [line for line in out.splitlines() if line.startswith(f"{task}: ")]
    assert lines == [f"{task}: cannot collect: MemoryError: simulated: the manifest reader "
                     f"ran out of memory"], out
    assert result.ret == 2 and "1 error" in out


CHECK_UNTOUCHED = """
import signal, sys
import pytest
before = signal.getsignal(signal.SIGTERM)
code = pytest.main(sys.argv[1:])
print("RESULT", code, signal.getsignal(signal.SIGTERM) is before,
      signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "jaato_sdk" in sys.modules)
"""


def _untouched(project, *args):
    env = dict(os.environ, TMPDIR=str(project.tmp))
    out = subprocess.run([sys.executable, "-c", CHECK_UNTOUCHED, *args], cwd=project.root,
                         env=env, capture_output=True, text=True, timeout=HANG).stdout
    (line,) = [line for line in out.splitlines() if line.startswith("RESULT")]
    return line.split()[1:], out


def test_a_run_without_tasks_leaves_sigterm_alone_and_imports_no_sdk(project):
    project.write("tests/test_plain.py", """
        import signal, sys

        def test_during_the_run():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
            assert "jaato_sdk" not in sys.modules
    """)
    result, out = _untouched(project, "tests", "-p", "no:cacheprovider", "-q")
    assert result == ["0", "True", "True", "False"], out


@pytest.mark.slow
def test_a_run_with_a_private_daemon_restores_sigterm(project):
    project.task("t")
    project.write("tasks/conftest.py", """
        import signal

        def test_nothing():
            pass

        def pytest_runtest_call(item):
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    """)
    result, out = _untouched(project, "tasks", "-p", "no:cacheprovider", "-q",
                             f"--jaato-out={project.store}")
    assert result[:3] == ["0", "True", "True"], out
    assert json.loads(project.store.read_text().splitlines()[0])["state"] == "PASS"
    nothing_left(project)


@pytest.mark.slow
def test_sw_resumes_from_the_failed_arm(project):
    project.task("a-good", repeats=2)
    project.task("b-bad", graders=[{"kind": "script", "run": "false"}])
    project.task("c-good")
    result = run_with_cache(project, "tasks", "--sw")
    result.assert_outcomes(passed=2, failed=1)  # stopped at the failure: c-good never ran
    result = run_with_cache(project, "tasks", "--sw", "-v")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*skipping 2 already passed items*"])


def test_a_test_that_is_no_arm_may_use_the_daemon_fixture(project):
    """`jaato_daemon` is the run's private daemon, started on first use, for any test that
    asks for it (docs/tasks.md), not only for arms: a process that collected no arm makes
    its worker there."""
    project.write("plain/test_plain.py", """
        import asyncio

        from jaato_sdk.client.ipc import IPCClient
        from jaato_sdk.events import ClientType


        def test_talks_to_the_daemon(jaato_daemon):
            async def ping():
                client = IPCClient(jaato_daemon, client_type=ClientType.API, auto_start=False)
                await client.connect(timeout=30)
                await client.disconnect()
            asyncio.run(ping())
        """)
    result = project.run("plain", shared_daemon=False)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
