"""What a losing agent can bring about itself to leave the pass rate (a BLOCKED) instead of
FAILING, each tried from inside a real session on the suite's daemon: its session stopped
over the daemon's socket, its program exiting 127 under a grader, its self-test sleeping
past the grader's timeout. Each is its FAIL, live and on a regrade; the author's own hang
and a grader tool missing stay BLOCKED, and an honest arm keeps its PASS (docs/security.md,
"BLOCKED only on evidence")."""
from __future__ import annotations

import json
import os
import shlex
import sys

import jaato_sdk
import pytest
from jaato_project import shell_agent

pytestmark = pytest.mark.daemon

# The agent's own session stopped with the verb jaato gives any client of its socket.
STOP_OWN = """\
import asyncio, glob, os, sys

sys.path.insert(0, sys.argv[2])  # the run's packages (jaato_sdk)
from jaato_sdk.client.ipc import IPCClient  # noqa: E402
from jaato_sdk.events import ClientType  # noqa: E402


async def main():
    sid = os.environ.get("JAATO_SESSION_ID") or max(
        glob.glob(".jaato/sessions/*.json"), key=os.path.getmtime).rsplit("/", 1)[1][:-5]
    c = IPCClient(sys.argv[1], client_type=ClientType.API, auto_start=False)
    await c.connect(timeout=30)
    open("stopped.txt", "w").write(sid)
    await c.stop_session(sid)
    await asyncio.sleep(3)

asyncio.run(main())
"""


# Each case's state, and what its reason (BLOCKED) or verdicts (else) say.
EXPECTED = {
    "a-exit-127": ("FAIL", "exit 127 (command not found) from a program"),
    "b-conftest-127": ("FAIL", "exit 127 (command not found) from a program"),
    "c-sleeps": ("FAIL", "timed out after 3 s (timeout_seconds), running ./selftest.sh"),
    "d-author-hang": ("BLOCKED", "timed out after 2 s (timeout_seconds)"),
    "e-missing-tool": ("BLOCKED", "exit 127 (command not found): "
                                  "`definitely-not-a-binary-xyz` is not on its"),
    "f-honest": ("PASS", ""),
    "g-stops-its-session": ("FAIL", "sandbox: the agent's session ended `operator_request` "
                                    "and the harness did not stop it"),
}


def writes(name: str, text: str) -> str:
    """A shell command that writes `text` into the workspace's `name`, then answers READY."""
    return f"printf '%s' {shlex.quote(text)} > {name}; echo READY > answer.txt"


def test_what_the_agent_can_cause_is_its_fail_and_what_it_cannot_stays_blocked(project):
    selftest = [{"kind": "script", "run": "sh ./selftest.sh", "timeout_seconds": 3}]
    project.task("a-exit-127", profile=shell_agent("quitter", writes("selftest.sh",
                                                                     "exit 127\n")),
                 graders=selftest)
    project.task("b-conftest-127", profile=shell_agent("exiter", writes(
        "conftest.py", "import os\nos._exit(127)\n") + "; echo 'def test_x(): pass' > test_x.py"),
        graders=[{"kind": "script", "run": '"$JAATO_EVAL_PYTHON" -m pytest -q -p no:cacheprovider'}])
    project.task("c-sleeps", profile=shell_agent("sleeper", writes("selftest.sh",
                                                                   "sleep 3014\n")),
                 graders=selftest)
    project.task("d-author-hang", graders=[{"kind": "script", "run": "sleep 3013",
                                            "timeout_seconds": 2}])
    project.task("e-missing-tool", graders=[{"kind": "script",
                                             "run": "definitely-not-a-binary-xyz answer.txt"}])
    project.task("f-honest", profile=shell_agent("honest", writes("selftest.sh", "exit 0\n")),
                 graders=selftest)
    # The suite's daemon is unconfined, its PATH's python3 not the run's: the script names
    # the run's (in the sandbox `python3` is the run's own).
    project.task("g-stops-its-session", profile=shell_agent("stopper", "sh stop.sh"))
    project.write("tasks/g-stops-its-session/fixture/stop.sh", (
        f"{sys.executable} stop.py {project.daemon.socket_path} "
        f"{os.path.dirname(os.path.dirname(jaato_sdk.__file__))} > stop.log 2>&1\n"
        f"echo READY > answer.txt\n"))
    project.write("tasks/g-stops-its-session/fixture/stop.py", STOP_OWN)
    project.run("tasks", "-p", "no:randomly")
    live = {r["task_id"]: r for r in project.records()}
    regraded = project.root / "regraded.jsonl"
    project.run("tasks", f"--jaato-regrade={project.store}", f"--jaato-out={regraded}")
    again = {r["task_id"]: r for r in map(json.loads, regraded.read_text().splitlines())}
    wrong = []  # every case's miss at once
    for by, when in ((live, "live"), (again, "regraded")):
        for task, (state, text) in EXPECTED.items():
            r = by[task]
            seen = r["blocked_reason"] if state == "BLOCKED" else " ".join(
                f"{v.get('grader_id')}: {v.get('detail')}" for v in r["verdicts"])
            if r["state"] != state or text not in str(seen):
                wrong.append((when, task, r["state"], r["blocked_reason"], r["verdicts"]))
    assert wrong == []
