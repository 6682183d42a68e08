"""The agent's workspace by identity, the trap walk's bound, and the agent's environment,
from inside real sessions on the suite's daemon (`--jaato-socket`: no sandbox, so the
identity check is all that stands). One run holds every case; each asserts the verdict the
agent's act must get, live and on a regrade, and an honest arm beside them keeps its PASS."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from jaato_project import shell_agent

from pytest_jaato_eval import workspace
from pytest_jaato_eval.engine import foreign_sessions
from pytest_jaato_eval.engine.sandbox import probe

pytestmark = pytest.mark.daemon

# The agent renames its workspace and leaves a link at its path to a folder of the host's
# holding the answer the grader wants.
REPLACE = 'ws="$(pwd)" && cd .. && mv "$ws" "$ws.gone" && ln -s "{host}" "$ws"\n'
# More entries than the trap walk looks at, in a folder that sorts first, then a link out.
FLOOD = 'mkdir aaa && cd aaa && seq {n} | xargs touch && cd .. && ln -s "{host}/answer.txt" answer.txt\n'


def test_a_replaced_workspace_or_a_tree_past_the_walk_fails_and_the_env_names_no_harness(
        project, monkeypatch):
    monkeypatch.setattr(workspace, "SPECIAL_WALK", 60)  # the e2e's bound: 200k files is dear
    host = project.root / "host"
    project.write("host/answer.txt", "READY\n")
    project.task("a-replacer", profile=shell_agent("replacer", "sh replace.sh"))
    project.write("tasks/a-replacer/fixture/replace.sh", REPLACE.format(host=host))
    project.task("b-flood", profile=shell_agent("flood", "sh flood.sh"))
    project.write("tasks/b-flood/fixture/flood.sh", FLOOD.format(n=100, host=host))
    project.task("c-few", profile=shell_agent("few", "sh flood.sh"))  # the same, under the bound
    project.write("tasks/c-few/fixture/flood.sh", FLOOD.format(n=5, host=host))
    # one file past the snapshot's cap, and a wrong answer: no snapshot, and its FAIL stands
    project.task("d-big", profile=shell_agent(
        "big", "head -c 2000000 /dev/urandom > big.bin; echo WRONG > answer.txt"),
        extra={"snapshot": {"max_mb": 1}})
    # A wrong answer, then a process of the agent's that outlived its run swaps the folder
    # for a link to the host's answer right after the identity check (forced here, so the
    # race is the same on every run): what the harness reads next is the folder it held.
    project.task("e-late", profile=shell_agent("late", "echo WRONG > answer.txt"))
    checked = workspace.replaced
    swapped: list[Path] = []

    def then_swapped(ws: Path, held: int) -> str | None:
        found = checked(ws, held)
        if found is None and ws.name.startswith("e-late") and not swapped:
            os.rename(ws, ws.with_name(ws.name + ".gone"))
            os.symlink(host, ws)
            swapped.append(ws)
        return found
    monkeypatch.setattr(workspace, "replaced", then_swapped)
    project.task("h-honest")
    # Python arms: one whose agent replaces its workspace by a link to the checkout's key,
    # one whose agent writes its environment down for the test to read.
    project.write(".jaato/profiles/echo/replacer.yaml", yaml.safe_dump(
        shell_agent("replacer", "sh replace.sh")))
    project.write(".jaato/profiles/echo/printer.yaml", yaml.safe_dump(
        shell_agent("printer", "env > env.txt")))
    project.write("fixture/replace.sh", REPLACE.format(host=project.root / "arms"))
    project.write("arms/answer.txt", "PLATYPUS\n")
    project.write("arms/test_arms.py", """
        import os

        import pytest

        def arm(profile):  # both arms' marker, but for the profile
            return pytest.mark.jaato(config_root="../.jaato", fixture="../fixture",
                                     profile=profile, profile_set="echo")

        @arm("replacer")
        def test_replaced(jaato_arm):
            jaato_arm.run("Write your answer.")
            assert (jaato_arm.workspace / "answer.txt").read_text() == "PLATYPUS\\n"

        @arm("printer")
        def test_env(jaato_arm):
            jaato_arm.run("Print your environment.")
            env = dict(line.split("=", 1) for line in jaato_arm.read("env.txt").splitlines()
                       if "=" in line)
            assert env, "the tool wrote no environment"
            told = sorted(k for k in env if k.startswith(("PYTEST", "_PYTEST", "JAATO_EVAL"))
                          or k == "OLDPWD")
            assert told == [], told
            assert not any(str(os.getpid()) in v.split(":")[-1] for k, v in env.items()
                           if "TREE" in k), env
        """)

    result = project.run("tasks", "arms", "-p", "no:randomly")

    by = {r["task_id"]: r for r in project.records()}
    got = {task: (r["state"], [(v["grader_id"], v["state"]) for v in r["verdicts"]])
           for task, r in by.items()}
    assert got == {
        "a-replacer": ("FAIL", [("workspace", "FAIL")]),  # before: BLOCKED, or PASS regraded
        "b-flood": ("FAIL", [("resources", "FAIL")]),  # before: PASS, the walk stopped at 60
        "c-few": ("FAIL", [("workspace", "FAIL")]),  # the link out, found
        "d-big": ("FAIL", [("script:grep -qx READY answer.txt", "FAIL")]),  # regraded: BLOCKED before
        "e-late": ("FAIL", [("workspace", "FAIL")]),  # before: PASS, the host's answer read
        "h-honest": ("PASS", [("script:grep -qx READY answer.txt", "PASS")]),
        "arms/test_arms.py::test_replaced": ("FAIL", [("workspace", "FAIL")]),  # before: PASS
        "arms/test_arms.py::test_env": ("PASS", [("python:test_env", "PASS")]),
    }, got
    replaced = by["a-replacer"]["verdicts"][0]
    # what stands there: the agent's link, or a folder jaato made again at the path for the
    # session's files between the agent's `mv` and its `ln`
    assert replaced["detail"].startswith("the agent's workspace was replaced: its path held "
                                         ), replaced
    assert by["a-replacer"]["snapshot"] is None
    assert swapped and by["e-late"]["snapshot"] is None  # no regrade of a replaced workspace
    assert "SPECIAL_WALK" in by["b-flood"]["verdicts"][0]["detail"]
    assert (host / "answer.txt").read_text() == "READY\n"  # the link removed, not its target
    assert result.ret == 1

    regraded = project.root / "regraded.jsonl"
    project.run("tasks", "-p", "no:randomly", f"--jaato-regrade={project.store}",
                f"--jaato-out={regraded}")
    again = {r["task_id"]: r for r in map(json.loads, regraded.read_text().splitlines())}
    assert {task: (r["state"], [(v["grader_id"], v["state"]) for v in r["verdicts"]])
            for task, r in again.items()} == {
        task: verdicts for task, verdicts in got.items() if "/" not in task}
    assert os.path.isdir(project.root / "arms")  # the checkout's folder the link named
    assert any("the verdicts of run" in n for n in again["d-big"]["notes"]), again["d-big"]


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox on this machine: {probe()[1]}")
def test_a_kept_workspace_leaves_the_agents_sight_when_its_arm_ends(project, monkeypatch):
    """--keep-workspaces: the first arm's workspace, kept, is moved out of the agents' folder
    the moment its arm ends, so the next agent, which copies whatever answer it finds beside
    its own workspace, finds none and FAILS; the kept one is where its record says.

    On the same private daemon, the last arm's sessions cannot be listed after its run
    (forced: its listings wait for nothing, so they time out on the real daemon, as one the
    agent's tools keep busy would): a session of the agent's could act while the graders
    read, so the arm FAILS `sandbox` and its daemon is ended (before: PASS, and a caveat)."""
    asking = foreign_sessions._end

    async def hurried(socket_path, known, workspace, config_root):
        monkeypatch.setattr(foreign_sessions, "LIST_WAIT",
                            0 if workspace.name.startswith("c-unlisted") else 10.0)
        return await asking(socket_path, known, workspace, config_root)
    monkeypatch.setattr(foreign_sessions, "_end", hurried)
    project.task("a-strong")
    project.task("b-copycat", profile=shell_agent("copycat", "cp ../a-strong*/answer.txt ."))
    project.task("c-unlisted")
    result = project.run("tasks", "--jaato-sandbox=bwrap", "--keep-workspaces",
                         "-p", "no:randomly", shared_daemon=False)
    by = {r["task_id"]: r for r in project.records()}
    assert {t: r["state"] for t, r in by.items()} == {
        "a-strong": "PASS", "b-copycat": "FAIL",  # before: PASS, copied
        "c-unlisted": "FAIL"}, result.stdout.str()  # before: PASS
    unlisted = by["c-unlisted"]["verdicts"][0]
    assert unlisted["grader_id"] == "sandbox" and (
        "could not be listed after the agent's run (2 tries)" in unlisted["detail"]), unlisted
    kept = Path(by["a-strong"]["workspace"])
    assert (kept / "answer.txt").read_text() == "READY\n"
    assert kept.parent.name == "workspaces" and not (kept.parent / workspace.AGENTS / kept.name).exists()
