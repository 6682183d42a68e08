"""The harness against a hostile agent and odd inputs, each written as an attack.

Every attack runs the real plugin in a real pytest run against a real daemon and
asserts what must hold whatever the attacker does: one record per arm, no process or
folder of ours left, the run ends within its bounds (far below the arm ceiling).
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from jaato_project import late_remnant, processes_mentioning, shell_agent, unused_plugins

from pytest_jaato_eval.processes import TREE_VAR, Ident, run_prefix

pytestmark = pytest.mark.faults

CEILING = "--arm-timeout=600"
# What a run the harness ends by itself is held to. It tells "ended by the harness" from "left
# to the ceiling" (600 s) or to the attacker's hour-long sleeps, on a machine several times
# busier than idle; it is not a measure of speed.
BOUND = 400


def driver_task(project, task_id, run, graders=None, fixture_files=None):
    d = project.root / "tasks" / task_id
    (d / "fixture").mkdir(parents=True)
    for name, text in (fixture_files or {"seed.txt": "seed\n"}).items():
        (d / "fixture" / name).write_text(text)
    (d / ".jaato").mkdir()
    manifest = {"id": task_id, "environment": {"fixture": "fixture", "config_root": ".jaato"},
                "harness": {"kind": "driver", "run": run},
                "graders": graders or [{"kind": "script", "run": "true"}]}
    (d / "task.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return d


def one_record_each(project, expected: set[str]) -> dict[str, dict]:
    records = project.records()
    assert sorted(r["arm_id"] for r in records) == sorted(expected)
    return {r["arm_id"]: r for r in records}


def gone(*needles: str, wait: float = 30.0) -> bool:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if not any(processes_mentioning(n) for n in needles):
            return True
        time.sleep(0.2)
    return False


def no_run_folder_left(project, shared_daemon: bool = True) -> None:
    folders = project.run_dirs()
    if shared_daemon:  # a daemon not the run's may write a tracker late: a later run sweeps it
        folders = [d for d in folders if not late_remnant(d)]
    left = [str(p) for d in folders for p in [d, *d.rglob("*")]]
    assert left == [], left[:20]


def timed_run(project, *args, shared_daemon=True):
    started = time.monotonic()
    result = project.run(*args, shared_daemon=shared_daemon, timeout=BOUND + 300)
    took = time.monotonic() - started
    assert took < BOUND, f"the run took {took:.0f} s (bound {BOUND} s)"
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    return result


# -- processes ------------------------------------------------------------------------

def test_grader_background_children_that_ignore_sigterm_or_leave_the_session_are_ended(project):
    # Three ways out of a grader's reach: a background child deaf to SIGTERM, one that
    # setsid()s into a session of its own, and one double-forked away (re-parented).
    run = ("(trap '' TERM; exec sleep 4101) & "
           "setsid sh -c 'trap \"\" TERM; exec sleep 4102' & "
           "sh -c '(setsid sleep 4103 &) ; exit 0'; true")
    project.task("sneaky", graders=[{"kind": "script", "run": run}])
    result = timed_run(project, "tasks", CEILING)
    by = one_record_each(project, {"sneaky@echo#0"})
    assert by["sneaky@echo#0"]["state"] == "PASS" and result.ret == 0
    assert gone("sleep 4101", "sleep 4102", "sleep 4103"), "a grader's child outlived the run"
    no_run_folder_left(project)


def test_driver_whose_child_holds_stdout_and_ignores_sigterm_does_not_hold_the_arm(project):
    driver_task(project, "holder", "(trap '' TERM; exec sleep 4111) & echo started; exit 0")
    result = timed_run(project, "tasks", CEILING)
    by = one_record_each(project, {"holder@default#0"})
    assert by["holder@default#0"]["state"] == "PASS" and result.ret == 0
    assert by["holder@default#0"]["duration_seconds"] < 30, "the driver's exit ended the wait"
    assert gone("sleep 4111")
    no_run_folder_left(project)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_driver_printing_one_huge_line_still_gives_one_record(project, stream):
    redirect = "" if stream == "stdout" else " >&2"
    py = "import sys; sys.stdout.write('x' * 300000)"
    driver_task(project, "loud", f'"$JAATO_EVAL_PYTHON" -c "{py}"{redirect}; echo{redirect}; '
                                 f'echo tail{redirect}; exit 4')
    result = timed_run(project, "tasks", CEILING)
    by = one_record_each(project, {"loud@default#0"})
    r = by["loud@default#0"]
    assert r["error"].startswith("DriverStoppedShort: driver exited 4"), r["error"]
    assert result.ret == 0  # an unsigned driver arm is graded, and `true` passes
    text = project.store.read_text()
    assert len(text) < 100_000, "the huge line was cut, not stored"
    if stream == "stderr":
        assert r["error"].endswith("tail"), "the last stderr line is read past the huge one"
    no_run_folder_left(project)


@pytest.mark.slow
def test_sigterm_to_pytest_mid_arm_under_xdist_leaves_no_process(project):
    project.task("grading", graders=[{"kind": "script", "run": "trap '' TERM; sleep 4121",
                                      "timeout_seconds": 900}])
    driver_task(project, "driving", "(trap '' TERM; exec sleep 4122) & sleep 4123")
    env = dict(os.environ, TMPDIR=str(project.tmp))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *unused_plugins(["-n"]), "tasks", "-n", "2",
         f"--jaato-out={project.store}", CEILING], cwd=project.root, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not (
                processes_mentioning("sleep 4121") and processes_mentioning("sleep 4123")):
            time.sleep(0.3)
        assert processes_mentioning("sleep 4121") and processes_mentioning("sleep 4123")
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=120)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, out
    assert gone("sleep 4121", "sleep 4122", "sleep 4123", str(project.tmp), wait=20), \
        processes_mentioning(str(project.tmp))
    deadline = time.monotonic() + 10
    while project.run_dirs() and time.monotonic() < deadline:
        time.sleep(0.2)
    no_run_folder_left(project)


@pytest.mark.slow  # a private daemon; the unit test shows the rule on a stand-in
def test_processes_the_agent_leaves_running_are_ended_before_grading(project, tmp_path):
    """The agent's tools start three background jobs that outlive its session (jaato's
    daemon adopts them): one deaf to SIGTERM in a session of its own, one double-forked
    with its environment cleared, one plain `nohup`. Alive, they could rewrite the
    workspace under the grader or touch a later arm. Every one is ended before grading:
    the grader sees the marker file stand still and every pid listed dead, in each arm."""
    pids = tmp_path / "pids"

    def background(script: str, *, how: str = "") -> str:
        return f"{how}sh -c {shlex.quote(script)} </dev/null >/dev/null 2>&1 &"

    deaf = f"trap '' TERM HUP; echo $$ >> {pids}; while :; do echo x >> marker.txt; sleep 0.1; done"
    bare = f"echo $$ >> {pids}; while :; do echo y >> marker.txt; sleep 0.1; done"
    command = " ".join([
        background(deaf, how="setsid "),
        # double-forked: its parent exits at once, and its environment is empty
        "sh -c " + shlex.quote(background(bare, how="setsid env -i /bin/") ) + ";",
        background(f"echo $$ >> {pids}; exec sleep 4711", how="nohup "),
        "sleep 0.3"])
    profile = shell_agent("lingerer", command)
    still = ("sleep 0.5; a=$(wc -l < marker.txt); sleep 1; b=$(wc -l < marker.txt); "
             "echo \"marker $a -> $b\"; test \"$a\" -gt 0 && test \"$a\" = \"$b\"")
    # Each pid listed is gone, or a zombie (ended; the daemon has not reaped it yet).
    dead = (f"test \"$(wc -l < {pids})\" -ge 3 && for p in $(cat {pids}); do "
            "s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -c1); "
            "if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo alive $p $s; exit 1; fi; done")
    project.task("lingerer", profile=profile, repeats=2,
                 graders=[{"kind": "script", "run": still}, {"kind": "script", "run": dead}])
    # Unconfined: the pids the jobs write are the host's, and so is the file they go to (a
    # confined agent's are its namespace's; test_sandbox_e2e.py has its leftovers).
    result = timed_run(project, "tasks", CEILING, "--jaato-sandbox=none", shared_daemon=False)
    by = one_record_each(project, {"lingerer@echo#0", "lingerer@echo#1"})
    for record in by.values():
        assert record["state"] == "PASS", record["verdicts"]
        said = [c for c in record["notes"] if "left" in c and "ended before grading" in c]
        assert said and "marker.txt" in said[0], record["notes"]
    assert len(pids.read_text().split()) == 6
    assert result.ret == 0
    assert gone("sleep 4711")
    no_run_folder_left(project, shared_daemon=False)


def test_a_record_the_agent_forges_into_the_store_counts_nowhere(project):
    """An unconfined agent (the suite's daemon is not the run's, so nothing confines it)
    finds the store and appends a copy of an earlier arm's record turned FAIL: read back,
    the last record per arm would win. The run sets the written-into file aside as evidence,
    writes the store again with the records it holds, exits with its own code, and no store
    command takes the evidence for a store."""
    store = project.root / "results.jsonl"
    forge = f"tail -n 1 {store} | sed 's/\"state\": \"PASS\"/\"state\": \"FAIL\"/g' >> {store}"
    profile = {"name": "forger", "provider": "echo", "model": "echo",
               "plugins": ["cli(preload)", "permission"],
               "plugin_configs": {
                   "echo": {"tool_call": {"name": "cli_based_tool", "args": {"command": forge}},
                            "response": "done"},
                   "permission": {"policy": {"defaultPolicy": "allow"}}}}
    project.task("a-honest")
    project.task("b-forger", profile=profile, graders=[{"kind": "script", "run": "true"}])
    result = timed_run(project, "tasks", CEILING, "--jaato-html=report.html")
    out = result.stdout.str()
    (evidence,) = project.root.glob("results.tampered-*.jsonl")
    forged = evidence.read_text().splitlines()
    assert len(forged) == 3 and '"state": "FAIL"' in forged[1], "the forgery is not the evidence"
    lines = store.read_text().splitlines()
    assert [json.loads(line)["arm_id"] for line in lines] == ["a-honest@echo#0", "b-forger@echo#0"]
    assert all(json.loads(line)["state"] == "PASS" for line in lines)
    honest = [line.split() for line in out.splitlines() if line.startswith("a-honest ")]
    assert honest and honest[0][2] == "100%", out
    assert "somebody else wrote into it" in out and "set aside as" in out, out
    html = (project.root / "report.html").read_text()
    assert "a-honest@echo#0" in html and ">FAIL<" not in html.split("a-honest@echo#0")[1][:400]
    assert result.ret == 6
    refused = subprocess.run([sys.executable, "-m", "pytest_jaato_eval", "report", str(evidence)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "not a store" in refused.stderr + refused.stdout


# -- bounded reads of what the agent wrote ------------------------------------------------

def test_agent_made_fifo_and_huge_file_named_like_its_session_log_do_not_hang_the_run(project):
    # The driver is agent-side code: it opens its session, learns the id, then plants a
    # FIFO, a sparse 8 GiB file and a link to / under the names nudge counting reads.
    plant = (
        "import asyncio, os\n"
        "from jaato_sdk.client.ipc import IPCClient\n"
        "from jaato_sdk.client.convenience import Session\n"
        "from jaato_sdk.events import ClientType\n"
        "async def main():\n"
        "    c = IPCClient(os.environ['JAATO_EVAL_SOCKET'], client_type=ClientType.API,\n"
        "                  auto_start=False, env_file='.env',\n"
        "                  workspace_path=os.environ['JAATO_EVAL_WORKSPACE'],\n"
        "                  config_root=os.environ['JAATO_EVAL_CONFIG_ROOT'])\n"
        "    await c.connect(timeout=10)\n"
        "    sid = await c.create_session(profile='writer',\n"
        "                                 cascade_driver_id=os.environ['JAATO_EVAL_CASCADE_ID'])\n"
        "    await Session(c, sid).complete('Write READY.')\n"
        "    await c.disconnect()\n"
        "    logs = '.jaato/logs'\n"
        "    os.makedirs(logs, exist_ok=True)\n"
        "    os.mkfifo(f'{logs}/session_{sid}_a.log')\n"
        "    with open(f'{logs}/session_{sid}_b.log', 'wb') as f:\n"
        "        f.truncate(8 << 30)\n"
        "    os.symlink('/dev/zero', f'{logs}/session_{sid}_c.log')\n"
        "    os.makedirs('.jaato/sessions', exist_ok=True)\n"
        "    os.mkfifo(f'.jaato/sessions/zz-{sid}.json')\n"
        "asyncio.run(main())\n")
    d = driver_task(project, "planter", '"$JAATO_EVAL_PYTHON" plant.py',
                    fixture_files={"plant.py": plant})
    profiles = d / ".jaato" / "profiles" / "echo"
    profiles.mkdir(parents=True)
    from jaato_project import WRITER
    (profiles / "writer.yaml").write_text(yaml.safe_dump(WRITER))
    manifest = yaml.safe_load((d / "task.yaml").read_text())
    manifest["harness"]["profile_set"] = "echo"
    (d / "task.yaml").write_text(yaml.safe_dump(manifest))
    result = timed_run(project, "tasks", CEILING)
    by = one_record_each(project, {"planter@echo#0"})
    r = by["planter@echo#0"]
    assert r["session_id"], "the planted names matched a real session"
    # The FIFOs are the agent's own traps: its FAIL, named, and no grader was run on them.
    assert r["state"] == "FAIL" and result.ret == 1, r
    (verdict,) = r["verdicts"]
    assert verdict["grader_id"] == "workspace" and sorted(verdict["evidence"]) == sorted(
        [f".jaato/logs/session_{r['session_id']}_a.log",
         f".jaato/logs/session_{r['session_id']}_c.log",  # the link to /dev/zero
         f".jaato/sessions/zz-{r['session_id']}.json"])
    no_run_folder_left(project)


def test_profile_the_ceiling_reader_cannot_parse_still_gives_one_record(project):
    # The budget-ceiling reader follows the profile's `inherits`; these shapes used to raise.
    for i, (inherits, limits) in enumerate([(5, [5]), ({"a": 1}, "x"), (["self-0"], {"usd": "nan"})]):
        profile = {"name": f"self-{i}", "provider": "echo", "model": "echo", "inherits": inherits,
                   "budget_control": {"limits": limits},
                   "plugin_configs": {"echo": {"response": "ok"}}}
        project.task(f"odd-{i}", profile=profile, graders=[{"kind": "script", "run": "true"}])
    result = timed_run(project, "tasks", CEILING)
    by = one_record_each(project, {f"odd-{i}@echo#0" for i in range(3)})
    for r in by.values():
        assert r["state"] in ("PASS", "BLOCKED"), r
        if r["state"] == "BLOCKED":
            assert "\n" not in r["blocked_reason"]
    assert result.ret in (0, 2)


# -- collection ---------------------------------------------------------------------------

def test_collection_never_enters_a_fixture_or_config_root(project):
    marker = project.tmp / "conftest-ran"
    task = project.task("repo")
    fixture = task.parent / "fixture"
    (fixture / "tests").mkdir()
    (fixture / "tests" / "test_repo.py").write_text("def test_repo():\n    assert False\n")
    (fixture / "test_top.py").write_text("def test_top():\n    assert False\n")
    (fixture / "conftest.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    (fixture / "tests" / "conftest.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    nested = fixture / "nested"
    nested.mkdir()
    (nested / "task.yaml").write_text(task.read_text().replace("id: repo", "id: nested"))
    (nested / "fixture").mkdir()
    (fixture / "again").symlink_to(".")  # inside the fixture (one out of it is refused)
    (task.parent / "up").symlink_to("/")  # beside the fixture, in the task folder itself
    config = task.parent / ".jaato"
    (config / "test_grader_helper.py").write_text("def test_config():\n    assert False\n")
    (config / "conftest.py").write_text(f"open({str(marker)!r}, 'w').write('config')\n")
    elsewhere = project.root / "tasks" / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "into-fixture").symlink_to(fixture)
    (elsewhere / "to-root").symlink_to("/")
    result = timed_run(project, "tasks", CEILING)
    by = one_record_each(project, {"repo@echo#0"})
    assert by["repo@echo#0"]["state"] == "PASS" and result.ret == 0
    out = result.stdout.str()
    assert "test_repo" not in out and "test_top" not in out and "test_config" not in out
    assert "1 passed" in out, out
    assert not marker.exists(), f"a fixture or config conftest was imported: {marker.read_text()}"


def test_fifo_in_a_fixture_is_refused_in_one_line_and_hangs_nothing(project):
    task = project.task("piped")
    os.mkfifo(task.parent / "fixture" / "pipe")
    project.task("good")
    result = timed_run(project, "tasks", CEILING)
    out = result.stdout.str()
    assert "'pipe' is a FIFO" in out, out  # refused at collection, in one line, never opened
    assert "Traceback" not in out
    assert result.ret != 0
    no_run_folder_left(project)


# -- options and the socket -----------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-inf"])
def test_arm_timeout_must_be_finite_and_not_negative(project, value):
    project.task("a")
    result = project.run("tasks", f"--arm-timeout={value}")
    assert result.ret == 4
    err = result.stderr.str().strip().splitlines()
    assert any(line.startswith("ERROR: --arm-timeout: expected a finite number of seconds >= 0")
               for line in err), err
    assert "Traceback" not in result.stderr.str()
    assert project.records() == []


@pytest.mark.slow
def test_socket_that_accepts_and_never_answers_is_blocked_fast_with_the_right_advice(project):
    path = str(project.tmp / "mute.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    held, stop = [], threading.Event()

    def accept_and_say_nothing():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept_and_say_nothing, daemon=True)
    t.start()
    try:
        project.task("a", repeats=2)
        result = timed_run(project, "tasks", f"--jaato-socket={path}", CEILING,
                           shared_daemon=False)
    finally:
        stop.set()
        t.join(5)
        for conn in held:
            conn.close()
        server.close()
    by = one_record_each(project, {"a@echo#0", "a@echo#1"})
    for r in by.values():
        assert r["state"] == "BLOCKED"
        assert "accepted the connection but sent no greeting" in r["blocked_reason"]
        assert "arm-timeout" not in r["blocked_reason"], "the ceiling is not the cause"
    assert result.ret == 2
    no_run_folder_left(project, shared_daemon=False)


# -- clean-up -------------------------------------------------------------------------------

def _owner_folder(root: Path, name: str, pid: int, started: float, run_id: str) -> Path:
    folder = root / f"jaato-eval-{name}"
    (folder / "daemon").mkdir(parents=True)
    (folder / "daemon" / "daemon.log").write_text("left behind\n")
    (folder / "owner.json").write_text(json.dumps({"pid": pid, "started": started,
                                                   "run_id": run_id}))
    return folder


def test_a_later_run_sweeps_dead_runs_folders_and_processes_and_keeps_live_ones(project):
    project.tmp.mkdir(exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    dead_ident = (dead.pid, time.time() - 3600)  # its start time: gone, whatever the PID is now
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    # A runner the killed run left: it carries that run's marker in its environment.
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                               "signal.SIG_IGN); print('deaf', flush=True); time.sleep(4131)"],
        env={**os.environ, TREE_VAR: run_prefix("deadrun0001") + "daemon"}, stdout=subprocess.PIPE,
        text=True)
    try:
        # Deaf to SIGTERM before the run starts: only SIGKILL ends it then.
        assert orphan.stdout.readline() == "deaf\n"
        live_ident = Ident.of(live.pid)
        dead_dir = _owner_folder(project.tmp, "dead", *dead_ident, "deadrun0001")
        live_dir = _owner_folder(project.tmp, "live", live.pid, live_ident.started, "liverun0001")
        ownerless = project.tmp / "jaato-eval-ownerless"
        ownerless.mkdir()
        project.task("a")
        result = timed_run(project, "tasks", CEILING)
        assert result.ret == 0
        one_record_each(project, {"a@echo#0"})
        assert not dead_dir.exists(), "a dead run's folder is swept"
        assert orphan.wait(timeout=10) == -signal.SIGKILL, "and what it left running is ended"
        assert live_dir.exists() and live.poll() is None, "a live run's folder is never touched"
        assert ownerless.exists(), "a folder naming no owner is not ours to judge"
        names = {p.name for p in project.run_dirs()}
        assert {"jaato-eval-live", "jaato-eval-ownerless"} <= names
        assert "jaato-eval-dead" not in names
    finally:
        for p in (live, orphan):
            if p.poll() is None:
                p.kill()
                p.wait()
        orphan.stdout.close()


# -- a dropped session.new --------------------------------------------------------------------

class DroppingProxy:
    """A unix-socket relay to the real daemon that closes a client's connection right after
    forwarding its first `session.new` (once per proxy): the daemon makes the session, the
    client never hears of it. The daemon drops connections so only under load, so the fault
    is injected here; everything else is the real daemon."""

    def __init__(self, path: str, upstream: str):
        self.path, self.upstream, self.dropped = path, upstream, 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(16)
        self.server.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                continue
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.connect(self.upstream)
            muted = threading.Event()  # set: nothing more of the daemon's reaches the client
            threading.Thread(target=self._pipe, args=(client, up, True, muted), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, client, False, muted), daemon=True).start()

    def _pipe(self, src, dst, from_client, muted):
        try:
            while data := src.recv(65536):
                if not from_client and muted.is_set():
                    continue  # however fast the daemon answers, the client never hears it
                if from_client and b'"session.new"' in data and self.dropped == 0:
                    muted.set()
                    dst.sendall(data)
                    self.dropped += 1
                    time.sleep(0.5)  # the daemon has it; then the line goes dead
                    for s in (src, dst):
                        s.shutdown(socket.SHUT_RDWR)
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.server.close()


def test_session_new_dropped_by_the_daemon_is_sent_again_not_blocked(project):
    proxy = DroppingProxy(str(project.tmp / "drop.sock"), project.daemon.socket_path)
    try:
        project.task("first")
        result = timed_run(project, "tasks", f"--jaato-socket={proxy.path}", CEILING,
                           shared_daemon=False)
    finally:
        proxy.close()
    assert proxy.dropped == 1
    by = one_record_each(project, {"first@echo#0"})
    r = by["first@echo#0"]
    assert r["state"] == "PASS" and result.ret == 0, r
    (caveat,) = [c for c in r["notes"] if c.startswith("session.new was sent again")]
    assert "SessionNotConfirmed: the connection dropped before session.new was answered" in caveat
