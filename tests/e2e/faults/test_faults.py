"""The fault matrix: one test per fault, each against the real daemon.

Every test asserts the arm's state, that the reason names the cause, that the rest of
the sweep completed, that the store holds exactly one valid record per arm, and that
no process of the run (its graders; its daemon and runners where it has its own), nor its
run folder, is left behind. A fault of the daemon, a signal or a worker runs on the
plugin's own daemon; the others on the suite's shared one, as a user's `--jaato-socket`.
Run only these with `-m faults`; skip the slowest locally with `-m "faults and not slow"`.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from jaato_project import SCHEMA, late_remnant, processes_mentioning, signer, unused_plugins

from pytest_jaato_eval.results.record import RECORD_KEYS
from pytest_jaato_eval.sweep import LATE_TRACKER
from pytest_jaato_eval.testing.model_server import Turn
from pytest_jaato_eval.workspace import discard

pytestmark = pytest.mark.faults


def one_valid_record_per_arm(project, expected: set[str]) -> dict[str, dict]:
    records = project.records()
    ids = [r["arm_id"] for r in records]
    assert sorted(ids) == sorted(expected), ids
    for r in records:
        assert set(RECORD_KEYS) <= set(r)
    return {r["arm_id"]: r for r in records}


def nothing_left(project, shared_daemon: bool = False) -> None:
    deadline = time.monotonic() + 10  # a daemon may take a moment to finish dying
    while processes_mentioning(str(project.tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(project.tmp)) == []
    left = project.run_dirs()
    if shared_daemon:  # a daemon not the run's may write a tracker late: a later run sweeps it
        left = [d for d in left if not late_remnant(d)]
    assert left == [], [str(p) for d in left for p in d.rglob("*")]


def scripted(project, model, task_id):
    path = project.task(task_id)
    model.write_profile(path.parent / ".jaato", "agent", profile_set="echo",
                        completion_payload_schema=SCHEMA)
    path.write_text(path.read_text().replace("profile: writer", "profile: agent"))


@pytest.mark.parametrize("turn, cause", [
    (Turn.fault(429, "slow down", should_retry=False), "provider error: RateLimitError"),
    (Turn.fault(500, "boom", should_retry=False), "provider error: InternalServerError"),
], ids=["provider-429", "provider-500"])
@pytest.mark.slow
def test_provider_error(project, scripted_model, turn, cause):
    scripted(project, scripted_model([turn]), "bad")
    project.task("good")
    # The suite's daemon makes one provider attempt: jaato's retries of a 429 would only
    # add ~20 s of waiting to the same verdict.
    result = project.run("tasks")
    by = one_valid_record_per_arm(project, {"bad@echo#0", "good@echo#0"})
    assert by["bad@echo#0"]["state"] == "BLOCKED"
    assert by["bad@echo#0"]["blocked_reason"].startswith(cause)
    assert by["good@echo#0"]["state"] == "PASS" and result.ret == 2
    nothing_left(project, shared_daemon=True)


@pytest.mark.slow
def test_provider_hang_is_cut_by_the_ceiling(project, scripted_model):
    scripted(project, scripted_model([Turn.hang()]), "bad")
    project.task("good")
    # The ceiling binds the good arm too; it runs second, on the daemon the first arm warmed.
    result = project.run("tasks", "--arm-timeout=15")
    by = one_valid_record_per_arm(project, {"bad@echo#0", "good@echo#0"})
    assert "arm ceiling: the arm ran past 15 s" in by["bad@echo#0"]["blocked_reason"]
    assert by["bad@echo#0"]["termination_reason"] == "operator_request"  # stopped on the daemon
    assert by["good@echo#0"]["state"] == "PASS" and result.ret == 2
    nothing_left(project, shared_daemon=True)


@pytest.mark.slow
def test_daemon_killed_mid_arm_blocks_that_arm_and_later_arms_run(project, scripted_model):
    model = scripted_model([Turn.tool("signal_completion", answer="x").after(30)])
    scripted(project, model, "a-victim")
    project.task("b-after")

    def kill_the_daemon():
        model.wait_for_chat_requests(1, timeout=120)
        (pid_file,) = project.tmp.glob("jaato-eval-*/daemon.pid")
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)

    killer = threading.Thread(target=kill_the_daemon, daemon=True)
    killer.start()
    # Unconfined, anything on the machine could have ended the daemon: an environment fault.
    # (Confined, only the agent can: its FAIL, tests/e2e/test_sandbox_e2e.py.)
    result = project.run("tasks", "--jaato-sandbox=none", shared_daemon=False)
    killer.join(5)
    by = one_valid_record_per_arm(project, {"a-victim@echo#0", "b-after@echo#0"})
    assert by["a-victim@echo#0"]["state"] == "BLOCKED"
    assert "daemon: connection lost" in by["a-victim@echo#0"]["blocked_reason"]
    assert by["a-victim@echo#0"]["session_id"]
    assert by["b-after@echo#0"]["state"] == "PASS", "a fresh daemon ran the later arm"
    assert result.ret == 2
    nothing_left(project)


def test_socket_pointing_at_nothing_blocks_fast_and_starts_nothing(project):
    project.task("a", repeats=2)
    nowhere = project.tmp / "nobody.sock"
    started = time.monotonic()
    result = project.run("tasks", f"--jaato-socket={nowhere}", shared_daemon=False)
    assert time.monotonic() - started < 30
    by = one_valid_record_per_arm(project, {"a@echo#0", "a@echo#1"})
    for r in by.values():
        assert r["blocked_reason"] == (f"daemon: nothing answers at {nowhere} (--jaato-socket); "
                                       f"start one there or drop the option to use a private daemon")
    assert result.ret == 2
    assert not nowhere.exists(), "nothing was auto-started on that socket"
    assert processes_mentioning(str(nowhere)) == [], "no daemon was started for it"
    nothing_left(project)


@pytest.mark.slow
def test_xdist_worker_crash(project):
    # A hook of the project's conftest kills the xdist worker as the arm runs. (A grader
    # cannot: it runs in the agent's sandbox, where the worker is not even visible.)
    project.task("crash", profile=signer({"answer": "42"}))
    project.write("conftest.py", """
        import os
        import signal


        def pytest_runtest_call(item):
            if "crash" in item.nodeid:
                os.kill(os.getpid(), signal.SIGKILL)
        """)
    project.task("good", repeats=2)
    result = project.run("tasks", "-n", "2", shared_daemon=False)
    by = one_valid_record_per_arm(project, {"crash@echo#0", "good@echo#0", "good@echo#1"})
    assert by["crash@echo#0"]["state"] == "BLOCKED"
    assert by["crash@echo#0"]["blocked_reason"].startswith("worker crashed: worker 'gw")
    assert by["good@echo#0"]["state"] == by["good@echo#1"]["state"] == "PASS"
    assert result.ret == 2
    nothing_left(project)


@pytest.mark.slow
def test_grader_hang_times_out(project):
    project.task("hangs", graders=[{"kind": "script", "run": "sleep 3013", "timeout_seconds": 2}])
    project.task("good")
    result = project.run("tasks")
    by = one_valid_record_per_arm(project, {"hangs@echo#0", "good@echo#0"})
    assert by["hangs@echo#0"]["state"] == "BLOCKED"
    assert "timed out after 2 s (timeout_seconds)" in by["hangs@echo#0"]["blocked_reason"]
    assert processes_mentioning("sleep 3013") == [], "the grader's process group was killed"
    assert by["good@echo#0"]["state"] == "PASS" and result.ret == 2
    nothing_left(project, shared_daemon=True)


@pytest.mark.slow
def test_grader_raising_inside_a_processor(project):
    project.task("raises", profile=signer({"answer": "42"}),
                 graders=[{"kind": "processor", "script": "boom.py"}])
    (project.root / "tasks/raises/.jaato/boom.py").write_text(
        "def validate(payload, context):\n    return 1 / 0\n")
    project.task("good")
    result = project.run("tasks")
    by = one_valid_record_per_arm(project, {"raises@echo#0", "good@echo#0"})
    assert "validate() raised ZeroDivisionError" in by["raises@echo#0"]["blocked_reason"]
    assert by["good@echo#0"]["state"] == "PASS" and result.ret == 2
    nothing_left(project, shared_daemon=True)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_sweep_then_resume(project, sig):
    project.task("many", repeats=4)
    env = dict(os.environ, TMPDIR=str(project.tmp))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *unused_plugins([]), "tasks",
         f"--jaato-out={project.store}"], cwd=project.root, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        # A suite started as a background job inherits SIGINT ignored, and so would this run.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(project.records()) < 2:
        time.sleep(0.2)
    proc.send_signal(sig)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 2, out  # interrupted
    done = {r["arm_id"]: r["session_id"] for r in project.records()}
    assert 2 <= len(done) < 4, out
    nothing_left(project)
    result = project.run("tasks", "--resume")  # the suite's daemon: the signal was the point
    assert result.ret == 0
    by = one_valid_record_per_arm(project, {f"many@echo#{i}" for i in range(4)})
    assert {k: by[k]["session_id"] for k in done} == done, "completed arms were not re-run"
    nothing_left(project, shared_daemon=True)


@pytest.mark.slow
def test_store_with_a_cut_last_line_resumes_cleanly(project):
    project.task("cut", repeats=2)
    project.run("tasks", "-k", "r0")
    (kept,) = project.records()
    with open(project.store, "a") as fh:
        fh.write('{"arm_id": "cut@echo#1", "state": "PA')  # a run killed mid-write
    result = project.run("tasks", "--resume")
    assert result.ret == 0
    lines = project.store.read_text().splitlines()
    assert lines[1].startswith('{"arm_id": "cut@echo#1", "state": "PA') and len(lines) == 3
    valid = [json.loads(line) for line in (lines[0], lines[2])]
    assert [r["arm_id"] for r in valid] == ["cut@echo#0", "cut@echo#1"]
    assert valid[0]["session_id"] == kept["session_id"]


@pytest.mark.slow
def test_symlink_out_of_the_fixture_and_a_climbing_task_id_write_nothing_outside(project):
    outside = project.tmp / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    task = project.task("../../climb", directory="climb")
    fixture = task.parent / "fixture"
    (fixture / "escape").symlink_to(outside)
    root = project.tmp / "ws"
    refused = project.run("tasks", f"--jaato-workspaces={root}", "--keep-workspaces")
    assert refused.ret != 0 and project.records() == []
    refused.stdout.fnmatch_lines(["*climb/task.yaml: environment.fixture: 'escape' is a link*"
                                  "expected a relative link that stays inside the fixture"])
    assert "Traceback" not in refused.stdout.str()
    # a link that stays inside the fixture is copied as a link, into the run's own folder
    (fixture / "escape").unlink()
    (fixture / "inner").write_text("in\n")
    (fixture / "alias").symlink_to("inner")
    result = project.run("tasks", f"--jaato-workspaces={root}", "--keep-workspaces")
    (r,) = project.records()
    assert r["state"] == "PASS" and result.ret == 0
    ws = Path(r["workspace"])
    assert ws.parent == root.resolve() / f"run-{r['run_id']}", "the workspace stays in the run's folder"
    assert os.readlink(ws / "alias") == "inner", "the link was copied as a link"
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert (outside / "precious.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in project.tmp.iterdir() if p.name != "ws") == ["outside"]
    # removing the workspace must not follow a link either
    (ws / "out").symlink_to(outside)
    discard(ws)
    # the suite's daemon is an outside one (--jaato-socket): it may write the session's
    # trackers into the workspace after it was removed (sweep.py); nothing else may be left
    left = [str(p.relative_to(ws)) for p in ws.rglob("*") if p.is_symlink() or not p.is_dir()]
    assert all(p == f".jaato/{LATE_TRACKER}" or
               (p.startswith(".jaato/sessions/") and p.endswith(".json")) for p in left), left
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert (outside / "precious.txt").read_text() == "keep me\n"
