"""Attacks on what reads the agent's workspace after its run, from inside a real session on
the plugin's own confined daemon: the trap check, each grader's copy of the workspace, a
grader that runs the agent's code, and a Python arm's test. One run holds every case (they
do not interfere); each asserts the verdict the agent's act must get: its FAIL, or graded on
its merits, never BLOCKED."""
from __future__ import annotations

import json

import pytest
import yaml
from jaato_project import shell_agent

from pytest_jaato_eval.engine.sandbox import probe

pytestmark = [pytest.mark.daemon, pytest.mark.skipif(
    probe()[0] is None, reason=f"no sandbox on this machine: {probe()[1]}")]

# A tree deeper than PATH_MAX, whose one-letter aliases (`s -> ddd…`) keep a link's text
# short, and a link out through its deepest folder: Python's os.path.realpath gives up on a
# path longer than PATH_MAX and takes what follows for a plain folder, so `..` brings it
# back inside the workspace, while the kernel follows `L -> /` and leaves it.
DEEP_TREE = """\
import os, sys
ws = os.getcwd()
name = "d" * 250
for _ in range(20):
    os.mkdir(name)
    os.symlink(name, "s")
    os.chdir(name)
"""
DEEP_LINK = DEEP_TREE + """\
os.symlink("/", "L")
os.chdir(ws)
key = os.path.join(os.path.dirname(os.path.dirname(ws)), sys.argv[1])  # absolute, or in the run
os.symlink("s/" * 20 + "L" + "/.." * 21 + key, "answer.txt")
"""
# Nested one-letter folders, deeper than shutil.copytree's recursion can follow.
NESTED = """\
import os
for _ in range(600):
    os.mkdir("n")
    os.chdir("n")
open("deepest.txt", "w").write("READY\\n")
"""
# A file the disk holds once and a naive copy many times: hard links, and a sparse file.
MULTIPLIED = """\
head -c 2097152 /dev/urandom > big.bin
i=0; while [ $i -lt 100 ]; do ln big.bin h$i; i=$((i+1)); done
truncate -s 256M sparse.bin
echo READY > answer.txt
"""
# A FIFO past PATH_MAX, which a walk by path cannot list, read by the agent's self-test
# through the aliases: a grader that runs it would wait on the FIFO until its timeout.
DEEP_FIFO = DEEP_TREE + """\
os.mkfifo("f")
os.chdir(ws)
open("selftest.sh", "w").write("cat " + "s/" * 20 + "f\\n")
"""


# ~40 s live and as long again regraded; the rules each case shows are also in faster tests:
# tests/unit/test_grader_view.py (the trap check, the graders' copy), tests/unit/test_sandbox.py
# (a grader killed from inside), tests/e2e/test_regrade_e2e.py (an act that stands on a regrade)
@pytest.mark.slow
def test_what_the_agent_leaves_cannot_hide_a_trap_or_turn_its_fail_into_blocked(project):
    project.task("a-realpath", profile=shell_agent(
        "linker", "python3 plant.py owned/0-a-realpath/keys/expected.txt"),
        graders=[{"kind": "script",
                  "run": 'cmp answer.txt "$JAATO_EVAL_CONFIG_ROOT/keys/expected.txt"'}])
    project.write("tasks/a-realpath/fixture/plant.py", DEEP_LINK)
    project.write("tasks/a-realpath/.jaato/keys/expected.txt", "PLATYPUS\n")
    project.task("b-nested", profile=shell_agent("nester", "python3 nest.py"), graders=[
        {"kind": "script", "run": 'test "$(find . -name deepest.txt | wc -l)" = 1'}])
    project.write("tasks/b-nested/fixture/nest.py", NESTED)
    project.task("c-multiplied", profile=shell_agent("multiplier", "sh multiply.sh"), graders=[
        {"kind": "script", "run": 'test "$(stat -c %i big.bin)" = "$(stat -c %i h99)"'},
        {"kind": "script", "run": 'test "$(stat -c %b sparse.bin)" -lt 1024'}],
        extra={"resources": {"disk": "64M"}})
    project.write("tasks/c-multiplied/fixture/multiply.sh", MULTIPLIED)
    project.task("d-killer", profile=shell_agent("killer", "sh plant.sh"),
                 graders=[{"kind": "script", "run": "sh ./selftest.sh"}])
    project.write("tasks/d-killer/fixture/plant.sh",
                  "printf 'kill -KILL $PPID\\n' > selftest.sh\n")
    # many files, each an inode and no block, under a small disk limit: graded on merit
    project.task("e-files", profile=shell_agent("files", "sh many.sh"),
                 extra={"resources": {"disk": "16M"}})
    project.write("tasks/e-files/fixture/many.sh",
                  "mkdir many && cd many && seq 3000 | xargs touch && cd .. && "
                  "echo READY > answer.txt\n")
    project.task("g-deep-fifo", profile=shell_agent("fifo", "python3 plant.py"),
                 graders=[{"kind": "script", "run": "sh ./selftest.sh", "timeout_seconds": 5}])
    project.write("tasks/g-deep-fifo/fixture/plant.py", DEEP_FIFO)
    project.task("h-honest")
    # A Python arm whose test compares the agent's answer with the expected one kept beside
    # it in the checkout, outside the sandbox; the agent links its answer there.
    project.write(".jaato/profiles/echo/linker.yaml", yaml.safe_dump(
        shell_agent("linker", "python3 plant.py " + str(project.root / "arms/expected.txt"))))
    project.write("arms/expected.txt", "PLATYPUS\n")
    project.write("fixture/plant.py", DEEP_LINK)
    project.write("arms/test_answer.py", """
        from pathlib import Path

        import pytest


        @pytest.mark.jaato(config_root="../.jaato", fixture="../fixture", profile="linker",
                           profile_set="echo")
        def test_answers(jaato_arm):
            jaato_arm.run("Write your answer.")
            expected = Path(__file__).with_name("expected.txt").read_text()
            assert (jaato_arm.workspace / "answer.txt").read_text() == expected
        """)

    result = project.run("tasks", "arms", "--jaato-sandbox=bwrap", "-p", "no:randomly",
                         shared_daemon=False)

    by = {r["task_id"]: r for r in project.records()}
    got = {task: (r["state"], [(v["grader_id"], v["state"]) for v in r["verdicts"]])
           for task, r in by.items()}
    trap = ("FAIL", [("workspace", "FAIL")])
    assert got == {
        "a-realpath": trap,  # before: BLOCKED, its copy for the grader could not be made
        "b-nested": ("PASS", [("script:test \"$(find . -name deepest.txt | wc -l)\" = 1",
                               "PASS")]),  # before: BLOCKED, RecursionError
        "c-multiplied": ("PASS", [  # before: FAIL, each copy held 100 copies and no hole
            ('script:test "$(stat -c %i big.bin)" = "$(stat -c %i h99)"', "PASS"),
            ('script:test "$(stat -c %b sparse.bin)" -lt 1024', "PASS")]),
        "d-killer": ("FAIL", [("script:sh ./selftest.sh", "FAIL")]),  # before: BLOCKED
        "e-files": ("PASS", [("script:grep -qx READY answer.txt", "PASS")]),
        "g-deep-fifo": trap,  # before: BLOCKED, its copy for the grader could not be made
        "h-honest": ("PASS", [("script:grep -qx READY answer.txt", "PASS")]),
        # before: PASS, the test read the checkout's expected.txt through the link (the
        # path the agent's command names is its contamination too)
        "arms/test_answer.py::test_answers": ("FAIL", [("workspace", "FAIL"),
                                                       ("contamination", "FAIL")]),
    }, got
    assert by["a-realpath"]["verdicts"][0]["evidence"][0] == "answer.txt"
    fifo = by["g-deep-fifo"]["verdicts"][0]["evidence"]
    assert fifo and fifo[0].endswith("/f"), fifo
    killed = by["d-killer"]["verdicts"][0]["detail"]
    assert killed.startswith("killed by SIGKILL, from inside its sandbox"), killed
    assert result.ret == 1

    # Graded again from what each arm kept: the agent's acts stand where no snapshot could
    # be kept (a tree past PATH_MAX), and what was kept is graded as it was live.
    regraded = project.root / "regraded.jsonl"
    project.run("tasks", "--jaato-sandbox=bwrap", "-p", "no:randomly",
                f"--jaato-regrade={project.store}", f"--jaato-out={regraded}",
                shared_daemon=False)
    again = {r["task_id"]: r for r in map(json.loads, regraded.read_text().splitlines())}
    assert {task: (r["state"], [(v["grader_id"], v["state"]) for v in r["verdicts"]])
            for task, r in again.items()} == {
        task: verdicts for task, verdicts in got.items() if "/" not in task}
    # before: a-realpath and g-deep-fifo BLOCKED, and c-multiplied BLOCKED "no snapshot kept"
    assert any(n.startswith("regraded without a snapshot (snapshot left out: the workspace and "
                            "the run's facts hold more than") for n in again["c-multiplied"]["notes"])
