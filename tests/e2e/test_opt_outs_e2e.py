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
import subprocess
import sys

import jaato_sdk
import pytest
from jaato_project import shell_agent

from pytest_jaato_eval.engine.sandbox import Limits

pytestmark = pytest.mark.daemon

# One verb of the daemon's, sent by the agent's tool about its own session (or the whole
# daemon), over the socket it reaches; what came back is kept in verb.log.
VERB = """\
import asyncio, glob, os, sys
sys.path.insert(0, sys.argv[2])  # the run's packages (jaato_sdk)
from jaato_sdk.client.ipc import IPCClient  # noqa: E402
from jaato_sdk.events import ClientType  # noqa: E402

VERBS = {
    "session.stop": lambda c, sid: c.stop_session(sid),
    "session.delete": lambda c, sid: c.delete_session(sid),
    "session.end": lambda c, sid: c.end_session(),
    "inject_prompt": lambda c, sid: c.inject_prompt("Write PASS.", timeout=5),
    "session.list": lambda c, sid: c.list_sessions(),
    "wake": lambda c, sid: c.wake_session(sid, "wake up"),
    "cascade_budget_set": lambda c, sid: c.cascade_budget_set(
        os.environ.get("JAATO_EVAL_CASCADE_ID", "x"), {"max_cost_usd": 1000.0}),
    "memories": lambda c, sid: c.list_memories(timeout=5),
    "set_default_policy": lambda c, sid: c.set_default_policy("deny"),
    "replay_messages": lambda c, sid: c.replay_messages(
        "r1", [{"role": "user", "parts": [{"type": "text", "text": "Write PASS."}]}],
        timeout_seconds=5),
}


async def main():
    sid = os.environ.get("JAATO_SESSION_ID") or max(
        glob.glob(".jaato/sessions/*.json"), key=os.path.getmtime).rsplit("/", 1)[1][:-5]
    c = IPCClient(sys.argv[1], client_type=ClientType.API, auto_start=False,
                  workspace_path=os.getcwd())
    await c.connect(timeout=30)
    seen = []
    c.subscribe_all(lambda ev: seen.append(f"{type(ev).__name__}: " + " ".join(
        str(getattr(ev, k, "")) for k in ("message", "text", "reason", "sessions")
        if getattr(ev, k, ""))[:200]))
    sent = 0
    try:
        if sys.argv[3] not in ("session.stop", "session.delete", "session.list", "wake",
                               "cascade_budget_set"):
            print("attach", await asyncio.wait_for(c.attach_session(sid), 10))
        sent = len(seen)
        print("answer", await asyncio.wait_for(VERBS[sys.argv[3]](c, sid), 10))
    except BaseException as exc:  # noqa: BLE001
        print("raised", type(exc).__name__, exc)
    # What the daemon sends back: once it has said something and then nothing for half a
    # second; 2 s at the most (some verbs are answered by no event).
    for _ in range(4):
        heard = len(seen)
        await asyncio.sleep(0.5)
        if len(seen) == heard > sent:
            break
    print("\\n".join(seen[-12:]))

asyncio.run(main())
"""


def verb_task(project, task: str, verb: str, graders=None) -> None:
    """A task whose agent sends `verb` about its own session, then answers READY. The suite's
    daemon is unconfined, its PATH's python3 not the run's: the script names the run's (in
    the sandbox `python3` is the run's own)."""
    site = os.path.dirname(os.path.dirname(jaato_sdk.__file__))
    project.task(task, profile=shell_agent("verber", "sh verb.sh"), graders=graders)
    project.write(f"tasks/{task}/fixture/verb.py", VERB)
    project.write(f"tasks/{task}/fixture/verb.sh", (
        f"{sys.executable} verb.py {project.daemon.socket_path} {site} {verb} "
        f"> verb.log 2>&1\necho READY > answer.txt\n"))


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
    verb_task(project, "g-stops-its-session", "session.stop")
    project.write("arms/test_stop_arm.py", """
        import pytest


        @pytest.mark.jaato(config_root="../tasks/g-stops-its-session/.jaato", profile="verber",
                           fixture="../tasks/g-stops-its-session/fixture", profile_set="echo")
        def test_a_python_arm_whose_agent_stops_its_session(jaato_arm):
            jaato_arm.run("Write READY.")
            assert jaato_arm.read("answer.txt").strip() == "READY"
        """)
    project.run("tasks", "arms", "-p", "no:randomly")
    live = {r["task_id"]: r for r in project.records()}
    python_arm = [r for task, r in live.items() if "python_arm" in task]
    assert len(python_arm) == 1 and python_arm[0]["state"] == "FAIL", live.keys()
    assert python_arm[0]["verdicts"][0]["grader_id"] == "sandbox", python_arm
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




# What each verb did to the arm (docs/security.md, "The daemon's verbs, tried"): the two that
# end the session FAIL it; the rest leave its answer to be graded on its merits.
VERB_OUTCOMES = {
    "session.delete": ("FAIL", "ended `deleted`"),
    "session.end": ("FAIL", "ended `stopped`"),
    "inject_prompt": ("PASS", "MidTurnPromptInjectedEvent"),
    "session.list": ("PASS", "SessionListEvent"),
    "wake": ("PASS", ""),
    "cascade_budget_set": ("PASS", ""),
    "memories": ("PASS", "MemoryListEvent"),
    "set_default_policy": ("PASS", ""),
    "replay_messages": ("PASS", "ReplayMessagesResultEvent"),
}


# Nine arms and their regrade; the rule's live case is
# test_what_the_agent_can_cause_is_its_fail_and_what_it_cannot_stays_blocked (session.stop)
@pytest.mark.slow
def test_each_daemon_verb_the_agent_sends_about_its_own_session(project):
    """A deleted session sends no terminal: the arm ends when the daemon says it deleted
    the session and no longer lists it, a FAIL, not at its ceiling (before: it waited out
    the ceiling, which it then named)."""
    tasks = {}
    for i, verb in enumerate(VERB_OUTCOMES):
        tasks[verb] = f"{chr(97 + i)}-{verb.replace('.', '-').replace('_', '-')}"
        verb_task(project, tasks[verb], verb, graders=[
            {"kind": "script", "run": "cat verb.log; grep -qx READY answer.txt"}])
    project.run("tasks", "-p", "no:randomly", "--arm-timeout=240")
    live = {r["task_id"]: r for r in project.records()}
    deleted = live[tasks["session.delete"]]["verdicts"][0]["detail"]
    assert "ran past" not in deleted, deleted  # ended at the daemon's word, not the ceiling
    regraded = project.root / "regraded.jsonl"
    project.run("tasks", f"--jaato-regrade={project.store}", f"--jaato-out={regraded}")
    again = {r["task_id"]: r for r in map(json.loads, regraded.read_text().splitlines())}
    wrong = []
    for by, when in ((live, "live"), (again, "regraded")):
        for verb, (state, text) in VERB_OUTCOMES.items():
            r = by[tasks[verb]]
            seen = " ".join(f"{v['grader_id']}: {v['detail']} {v['evidence']}"
                            for v in r["verdicts"])
            if r["state"] != state or text not in seen or (
                    state == "FAIL" and r["verdicts"][0]["grader_id"] != "sandbox"):
                wrong.append((when, verb, r["state"], r["blocked_reason"], r["verdicts"]))
    assert wrong == []


def test_an_agent_that_fills_the_disk_the_store_shares_fails_and_no_record_is_lost(project):
    """The workspaces and the store on one 64 MiB file system, smaller than the agent's
    disk limit (10 GiB): the filler is held to what was free at its start, less what the
    run keeps, and FAILS `resources`; its files go; the store's every line is whole, and the
    next arm's record is there (before: INTERNALERROR, ENOSPC closing the store)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs",
                              str(project.tmp)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        store = project.tmp / "results.jsonl"
        project.task("a-filler", profile=shell_agent(
            "filler", "head -c 200M /dev/zero > big; echo READY > answer.txt"))
        project.task("b-honest")
        result = project.run("tasks", "-p", "no:randomly", f"--jaato-out={store}")
        lines = store.read_text().splitlines()
        records = {r["task_id"]: r for r in map(json.loads, lines)}  # every line whole
        filler = records["a-filler"]
        assert filler["state"] == "FAIL", filler
        assert filler["verdicts"][0]["grader_id"] == "resources", filler
        assert "less what the run keeps" in filler["verdicts"][0]["detail"], filler
        assert records["b-honest"]["state"] == "PASS", records["b-honest"]
        assert result.ret == 1
    finally:
        subprocess.run(["umount", "-l", str(project.tmp)], check=False)


def test_a_grader_killed_by_the_oom_killer_in_its_own_cgroup_reading_the_agents_file_fails(
        project):
    """A sparse 6 GB `settings.json` of the agent's, that the grader's `json.load` reads
    whole: the grader runs in a memory cgroup of its own, bounded as the agent is (256 MiB
    here), whose OOM kill is the agent's FAIL (before: BLOCKED by the machine-wide counter);
    an honest arm's grader, in its cgroup too, PASSes."""
    probe = Limits.make(f"jaato-eval-{os.getpid()}-probe")
    if probe is None or not probe.memory:
        pytest.skip("no memory cgroup can be made here (not root, nothing delegated)")
    probe.remove()
    load = {"kind": "script", "run": '"$JAATO_EVAL_PYTHON" "$JAATO_EVAL_CONFIG_ROOT/load.py"'}
    for task, command in (("a-sparse", "truncate -s 6G settings.json"),
                          ("b-honest", "echo '{}' > settings.json")):
        project.task(task, profile=shell_agent("settler", command), graders=[load],
                     extra={"resources": {"memory": "256M"}})
        project.write(f"tasks/{task}/.jaato/load.py",
                      "import json\njson.load(open('settings.json'))\n")
    project.run("tasks", "-p", "no:randomly")
    by = {r["task_id"]: r for r in project.records()}
    sparse = by["a-sparse"]
    assert sparse["state"] == "FAIL", sparse
    assert "OOM killer ended it in its own memory cgroup" in sparse["verdicts"][0]["detail"]
    assert by["b-honest"]["state"] == "PASS", by["b-honest"]


# The agent's tool aims the daemon's verbs at another arm's session, found by its workspace in
# the daemon's listing, else by its record in that arm's kept workspace (unconfined, the agent
# reaches it); what came back is kept in other.log.
OTHER = """\
import asyncio, glob, os, sys
sys.path.insert(0, sys.argv[2])  # the run's packages (jaato_sdk)
from jaato_sdk.client.ipc import IPCClient  # noqa: E402
from jaato_sdk.events import ClientType, EventType  # noqa: E402


async def main():
    c = IPCClient(sys.argv[1], client_type=ClientType.API, auto_start=False,
                  workspace_path=os.getcwd())
    await c.connect(timeout=30)
    seen, listed = [], asyncio.get_running_loop().create_future()
    c.subscribe_all(lambda ev: seen.append(f"{type(ev).__name__}: " + " ".join(
        str(getattr(ev, k, "")) for k in ("message", "text", "reason", "error")
        if getattr(ev, k, ""))[:200]))
    c.subscribe(EventType.SESSION_LIST, lambda ev: listed.done() or listed.set_result(
        list(getattr(ev, "sessions", []) or [])))
    await c.list_sessions()
    rows = await asyncio.wait_for(listed, 10)
    other = [r for r in rows if sys.argv[3] in repr(r)]
    print("listed", len(other), "of", len(rows))
    kept = glob.glob(f"../../{sys.argv[3]}*/.jaato/sessions/*.json")  # a kept workspace's
    sid = str(other[0]["id"]) if other else (kept[0].rsplit("/", 1)[1][:-5] if kept else "none")
    print("other session", "found" if sid != "none" else "none")
    for verb, call in (("attach", lambda: c.attach_session(sid)),
                       ("inject_prompt", lambda: c.inject_prompt("Write PASS.", timeout=5)),
                       ("wake", lambda: c.wake_session(sid, "wake up")),
                       ("session.stop", lambda: c.stop_session(sid)),
                       ("session.delete", lambda: c.delete_session(sid))):
        try:
            print(verb, "answer", await asyncio.wait_for(call(), 10))
        except BaseException as exc:  # noqa: BLE001
            print(verb, "raised", type(exc).__name__, exc)
        await asyncio.sleep(1)
        print("\\n".join(seen[-6:]))
        seen.clear()

asyncio.run(main())
"""


@pytest.mark.slow  # the verbs each wait for the daemon's answer
def test_the_daemon_verbs_the_agent_aims_at_another_arms_session(project):
    """docs/security.md's verb table, the rows about another arm's session: the first arm's
    session, over by then (arms on one daemon run one after another) and no longer listed,
    its id read from that arm's kept workspace, is attached, prompted, woken, stopped and
    deleted by the second arm's agent: the daemon refuses each. The first arm's record
    stands; the second is graded on its merits."""
    site = os.path.dirname(os.path.dirname(jaato_sdk.__file__))
    project.task("a-first")
    project.task("b-other", profile=shell_agent("other", "sh other.sh"), graders=[
        {"kind": "script", "run": "cat other.log; grep -qx READY answer.txt"}])
    project.write("tasks/b-other/fixture/other.py", OTHER)
    project.write("tasks/b-other/fixture/other.sh", (
        f"{sys.executable} other.py {project.daemon.socket_path} {site} a-first "
        f"> other.log 2>&1\necho READY > answer.txt\n"))
    project.run("tasks", "-p", "no:randomly", "--keep-workspaces")
    by = {r["task_id"]: r for r in project.records()}
    assert by["a-first"]["state"] == "PASS", by["a-first"]
    other = by["b-other"]
    said = " ".join(str(v["evidence"]) for v in other["verdicts"])
    assert other["state"] == "PASS", other
    for refused in ("listed 0 of ", "other session found", "ErrorEvent: Session not found",
                    "No session selected", "session.wake refused", "is not loaded",
                    "SystemMessageEvent: Session '"):
        assert refused in said, (refused, said)
