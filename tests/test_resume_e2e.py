"""--resume (R3, X5): only missing arms run, completed ones keep their sessions, a changed
task is refused; and -n runs arms on per-worker private daemons (X6)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import processes_mentioning, signer


def test_resume_runs_only_the_missing_arms_and_refuses_a_changed_task(project):
    project.task("alpha", repeats=2)
    project.task("beta", repeats=1)
    project.run("tasks", "-k", "alpha")
    first = {r["arm_id"]: r["session_id"] for r in project.records()}
    assert sorted(first) == ["alpha@echo#0", "alpha@echo#1"]
    result = project.run("tasks", "--resume")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*resumed: 2 arms already in the store were kept*"])
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
    assert len(project.records()) == 3


def test_sigint_halfway_then_resume_completes_each_arm_once(project):
    project.task("many", repeats=4)
    env = dict(os.environ, TMPDIR=str(project.tmp))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tasks",
         f"--jaato-out={project.store}"], cwd=project.root, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(project.records()) < 2:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 2, out  # pytest's "interrupted"
    done = {r["arm_id"]: r["session_id"] for r in project.records()}
    assert 2 <= len(done) < 4, out
    assert processes_mentioning(str(project.tmp)) == [], "the private daemon was stopped"
    result = project.run("tasks", "--resume", shared_daemon=False)
    assert result.ret == 0
    records = project.records()
    assert sorted(r["arm_id"] for r in records) == [f"many@echo#{i}" for i in range(4)]
    assert {r["arm_id"]: r["session_id"] for r in records if r["arm_id"] in done} == done


def test_xdist_spreads_arms_over_private_daemons_and_one_writer(project):
    for name in ("a", "b", "c"):
        project.task(name, repeats=2)
    result = project.run("tasks", "-n", "2", shared_daemon=False)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=6)
    records = project.records()
    assert len(records) == 6 and len({r["arm_id"] for r in records}) == 6
    assert len({r["run_id"] for r in records}) == 1, "workers share the controller's run id"
    assert result.stdout.str().count("jaato-eval pivot") == 1
    assert processes_mentioning(str(project.tmp)) == [] and project.run_dirs() == []


def test_a_worker_killed_mid_arm_blocks_that_arm_only(project):
    crash = project.root / "tasks" / "crash" / ".jaato"
    project.task("crash", graders=[{"kind": "processor", "script": "die.py"}],
                 profile=signer({"answer": "42"}))
    (crash / "die.py").write_text("import os\n\ndef validate(payload, context):\n    os._exit(3)\n")
    for name in ("a", "b"):
        project.task(name, repeats=2)
    result = project.run("tasks", "-n", "2", shared_daemon=False)
    records = {r["arm_id"]: r for r in project.records()}
    assert len(records) == 5 and len(project.records()) == 5
    crashed = records["crash@echo#0"]
    assert crashed["state"] == "BLOCKED" and "worker crashed" in crashed["blocked_reason"]
    assert all(r["state"] == "PASS" for k, r in records.items() if k != "crash@echo#0")
    assert result.ret == 2, result.stdout.str()
    result.stdout.fnmatch_lines(["*4 passed, 1 blocked*"])
    time.sleep(2)  # the orphaned daemon gets SIGTERM from the kernel when its worker dies
    assert processes_mentioning(str(project.tmp)) == []
    assert project.run_dirs() == [], [str(p) for d in project.run_dirs() for p in d.rglob("*")]
