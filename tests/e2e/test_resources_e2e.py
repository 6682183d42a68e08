"""An agent that uses up what its sandbox gives it, or leaves what would hang its grader, from
inside a real session: each is its own FAIL with the cause named (engine/resources.py,
workspace.special_files), never a BLOCKED, and the arms after it run on a clean machine."""
from __future__ import annotations

import os

import pytest
import yaml
from jaato_project import shell_agent

from pytest_jaato_eval.engine.sandbox import Limits, probe

pytestmark = [pytest.mark.daemon, pytest.mark.skipif(
    probe()[0] is None, reason=f"no sandbox on this machine: {probe()[1]}")]

# Files of 1 MiB, far past a 32 MiB limit, each written whole (`head` stops at its count).
FILL = "i=0; while [ $i -lt 400 ]; do head -c 1048576 /dev/zero > fill-$i.bin || break; i=$((i+1)); done"
BOMB = "a = []\nwhile True:\n    a.append(bytearray(64 << 20))  # written: every page is held\n"


def memory_cgroup() -> bool:
    limits = Limits.make(f"jaato-eval-{os.getpid()}-probe")
    if limits is None:
        return False
    try:
        return limits.memory
    finally:
        limits.remove()


@pytest.mark.slow  # two resources exhausted on a confined daemon
def test_an_agent_that_fills_its_disk_or_its_memory_fails_and_the_next_arms_run(project):
    """Before: the disk-filling agent's own FAIL became BLOCKED (its grader's sandbox could not
    be set up on a full disk) and so did the next arm (its fixture could not be copied); the
    allocation bomb met the machine's OOM killer, which may pick pytest."""
    project.task("a-filler", profile=shell_agent("filler", FILL),
                 extra={"resources": {"disk": "32M"}})
    project.task("b-honest")
    project.task("c-bomb", profile=shell_agent("bomb", "python3 bomb.py"),
                 extra={"resources": {"memory": "1536M"}})
    project.write("tasks/c-bomb/fixture/bomb.py", BOMB)
    project.task("d-honest")
    result = project.run("tasks", "--jaato-sandbox=bwrap", "-p", "no:randomly",
                         "--keep-failed-workspaces", shared_daemon=False)
    by = {r["task_id"]: r for r in project.records()}
    filler = by["a-filler"]
    (verdict,) = filler["verdicts"]
    assert (verdict["grader_id"], verdict["state"]) == ("resources", "FAIL"), filler
    assert "past its limit of 32 MiB" in verdict["detail"], verdict
    assert filler["workspace"] is None  # its files removed at once, kept or not
    assert any("files the agent added were removed" in n for n in filler["notes"])
    assert by["b-honest"]["state"] == "PASS", by["b-honest"]
    bomb = by["c-bomb"]
    if memory_cgroup():
        (verdict,) = bomb["verdicts"]
        assert (verdict["grader_id"], verdict["state"]) == ("resources", "FAIL"), bomb
        assert "limit of 1.5 GiB and the kernel ended" in verdict["detail"], verdict
    else:  # no memory cgroup here: the machine's OOM killer prefers the sandbox's processes
        assert bomb["state"] != "PASS", bomb
    assert by["d-honest"]["state"] == "PASS", by["d-honest"]
    assert result.ret == 1  # pytest itself ran to its summary


def test_a_python_arm_whose_agent_links_its_answer_to_proc_kmsg_fails_without_a_hang(project):
    """Before: the link was a regular file to the trap check, and the test's read_text()
    blocked until the body's bound: BLOCKED "a hang in the test"."""
    # (a script in the workspace: jaato refuses a command naming a path outside it)
    project.write(".jaato/profiles/echo/linker.yaml", yaml.safe_dump(
        shell_agent("linker", "sh plant.sh")))
    project.write("fixture/plant.sh", "ln -s /proc/kmsg answer.txt\n")
    project.write("arms/test_kmsg.py", """
        import pytest


        @pytest.mark.jaato(config_root="../.jaato", fixture="../fixture", profile="linker",
                           profile_set="echo")
        def test_reads_the_answer(jaato_arm):
            jaato_arm.run("Write your answer.")
            assert (jaato_arm.workspace / "answer.txt").read_text() == "READY\\n"
        """)
    result = project.run("arms", "--jaato-sandbox=bwrap", shared_daemon=False)
    (record,) = project.records()
    (verdict,) = record["verdicts"]
    assert (record["state"], verdict["grader_id"]) == ("FAIL", "workspace"), record
    assert verdict["evidence"] == ["answer.txt"]
    assert result.ret == 1


@pytest.mark.slow  # waits out two 20 s arm ceilings; the rule's unit test is in tests/unit
def test_a_python_arm_body_held_by_what_the_agent_made_is_the_agents_fail(project):
    """A body that overruns while reading a file the agent left (a sparse 500 GB file,
    hashed), and one that swallows the agent's trap FAIL and then reads through the trap:
    both are bounded by what the arm ceiling left them, and both FAIL."""
    for name, plant in (("sparse", "truncate -s 500G big.bin"),
                        ("linker", "ln -s /proc/kmsg answer.txt")):
        project.write(f".jaato/profiles/echo/{name}.yaml", yaml.safe_dump(
            shell_agent(name, f"sh {name}.sh")))
        project.write(f"fixture/{name}.sh", plant + "\n")
    project.write("arms/test_held.py", """
        import time

        import pytest


        @pytest.mark.jaato(config_root="../.jaato", fixture="../fixture", profile="sparse",
                           profile_set="echo")
        def test_hashes_the_output(jaato_arm):
            jaato_arm.run("Write big.bin.")
            with open(jaato_arm.workspace / "big.bin", "rb") as f:
                while f.read(1 << 16):  # (a MiB a read would cost this worker 30% of a CPU)
                    time.sleep(0.01)  # as slow as a real digest of 500 GB, without the CPU


        @pytest.mark.jaato(config_root="../.jaato", fixture="../fixture", profile="linker",
                           profile_set="echo")
        def test_swallows_the_fail(jaato_arm):
            try:
                jaato_arm.run("Write your answer.")
            except AssertionError:
                pass
            (jaato_arm.workspace / "answer.txt").read_text()
        """)
    result = project.run("arms", "--jaato-sandbox=bwrap", "--arm-timeout=20",
                         shared_daemon=False)
    by = {r["task_id"].rsplit("::", 1)[-1]: r for r in project.records()}
    hashed, swallowed = by["test_hashes_the_output"], by["test_swallows_the_fail"]
    assert hashed["state"] == "FAIL", hashed
    assert "while reading big.bin, which the agent left" in hashed["verdicts"][0]["detail"]
    assert swallowed["state"] == "FAIL", swallowed
    assert swallowed["verdicts"][0]["grader_id"] == "workspace"
    assert result.ret == 1
