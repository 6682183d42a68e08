"""Pure-logic pieces of the harness's defences, each fed what an attacker would leave."""
from __future__ import annotations

import asyncio
import collections
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from pytest_jaato_eval import launch, processes, sweep, workspace
from pytest_jaato_eval.pytest_layer import fence
from pytest_jaato_eval.pytest_layer.task_folder import declared_roots
from pytest_jaato_eval.engine import leftovers
from pytest_jaato_eval.engine.accounting import count_nudges, tracker_record
from pytest_jaato_eval.engine.budget import profile_ceiling
from pytest_jaato_eval.engine.daemon import harness_free
from pytest_jaato_eval.engine.driver import LINE_CAP, _pump
from pytest_jaato_eval.engine.files import read_bounded


# -- bounded reads --------------------------------------------------------------------------

def test_read_bounded_never_opens_a_fifo_a_device_or_a_link_out(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "pipe")
    (ws / "dev").symlink_to("/dev/zero")
    (ws / "out").symlink_to("/etc/hostname")
    (ws / "big").write_bytes(b"x" * 5000)
    done = []
    t = threading.Thread(target=lambda: done.append(read_bounded(ws / "pipe", root=ws)))
    t.start()
    t.join(5)
    assert done == [None], "a FIFO is refused at once, never waited on"
    assert read_bounded(ws / "dev", root=ws) is None
    assert read_bounded(ws / "out", root=ws) is None
    assert read_bounded(Path("/dev/zero")) is None
    assert read_bounded(ws / "big", limit=100, root=ws) == b"x" * 100


def test_nudge_counting_reads_no_planted_fifo_huge_file_or_folder_link(tmp_path):
    ws = tmp_path / "ws"
    logs = ws / ".jaato" / "logs"
    logs.mkdir(parents=True)
    os.mkfifo(logs / "session_S_a.log")
    with open(logs / "session_S_b.log", "wb") as f:
        f.truncate(4 << 30)  # sparse: 4 GiB of NUL, read only up to the cap
    (logs / "session_S_c.log").write_text("[DEBUG] COMPLETION_NUDGE: 1\n")
    started = time.monotonic()
    assert count_nudges(ws, "S", None) is None  # the huge log read in part: count unknown
    (logs / "session_S_b.log").unlink()
    assert count_nudges(ws, "S", None) == 1
    assert time.monotonic() - started < 30
    # the whole logs folder as a link out of the workspace: nothing is read through it
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "session_T_x.log").write_text("[DEBUG] COMPLETION_NUDGE: 1\n")
    ws2 = tmp_path / "ws2"
    (ws2 / ".jaato").mkdir(parents=True)
    (ws2 / ".jaato" / "logs").symlink_to(other)
    assert count_nudges(ws2, "T", None) is None


def test_tracker_record_of_any_shape_is_a_dict_or_none(tmp_path):
    folder = tmp_path / ".jaato" / "sessions"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text("[1, 2]")
    (folder / "b.json").write_text("[" * 100000 + "]" * 100000)
    os.mkfifo(folder / "c.json")
    for sid in "abc":
        assert tracker_record(tmp_path, sid) is None


@pytest.mark.parametrize("text", [
    "inherits: 5\nbudget_control: {limits: {usd: 1}}",
    "budget_control: {limits: [5]}",
    "budget_control: 5\ninherits: {a: 1}",
    "x: " + "[" * 50000 + "]" * 50000,
    "inherits: ../../../../etc/passwd",
    "inherits: [p]\nbudget_control: {limits: {usd: .nan, tokens: 3}}",  # a cycle through itself
])
def test_profile_ceiling_reader_never_raises(tmp_path, text):
    (tmp_path / "profiles" / "echo").mkdir(parents=True)
    (tmp_path / "profiles" / "echo" / "p.yaml").write_text(text)
    result = profile_ceiling(tmp_path, "echo", "p")
    assert result is None or all(isinstance(v, (int, float)) for v in result.values())


# -- driver output ----------------------------------------------------------------------------

class _Stream:
    def __init__(self, data: bytes, step: int):
        self.data, self.step = data, step

    async def read(self, n):
        chunk, self.data = self.data[:min(n, self.step)], self.data[min(n, self.step):]
        return chunk


@pytest.mark.parametrize("step", [1, 7, 65536])
def test_driver_output_lines_are_cut_whatever_their_size(step):
    tail = collections.deque(maxlen=40)
    data = b"a\n" + b"x" * 300_000 + b"\nmid\n" + b"y" * 5000 + b"\ntail"
    asyncio.run(_pump(_Stream(data, step), tail))
    assert [t[:1] for t in tail] == ["a", "x", "m", "y", "t"]
    assert all(len(t) <= LINE_CAP + 40 for t in tail)
    assert tail[1].endswith(f"[line cut at {LINE_CAP} bytes]") and tail[-1] == "tail"


# -- clean-up: exact paths --------------------------------------------------------------------

def test_session_tmp_clean_up_removes_exact_recorded_paths_only(tmp_path):
    ws = tmp_path / "run" / "workspaces" / "a@echo#0"
    ours = tmp_path / "jaato-S1"
    ours.mkdir()
    (ours / "trace.log").write_text(f"cwd={ws}/src\n")
    prefix_only = tmp_path / "jaato-S2"  # another run's workspace that merely starts like ours
    prefix_only.mkdir()
    (prefix_only / "trace.log").write_text(f"cwd={ws}2/src\n")
    not_recorded = tmp_path / "jaato-S3"  # names our workspace, but is no session of ours
    not_recorded.mkdir()
    (not_recorded / "trace.log").write_text(f"cwd={ws}\n")
    link = tmp_path / "jaato-S4"
    link.symlink_to(ours)
    removed = sweep.remove_session_tmp([("S1", ws), ("S2", ws), ("S4", ws), ("../x", ws)],
                                       tmp_path)
    assert removed == 1
    assert not ours.exists() and prefix_only.exists() and not_recorded.exists()
    assert link.is_symlink()


def test_owner_gone_only_for_a_named_owner_that_no_longer_runs(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    sweep.write_owner(live, "r1")
    assert not sweep.owner_gone(live)
    assert not sweep.owner_gone(tmp_path)  # no owner file: never judged gone
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ident = processes.Ident.of(child.pid)
    child.wait()
    dead = tmp_path / "dead"
    dead.mkdir()
    (dead / "owner.json").write_text(
        f'{{"pid": {child.pid}, "started": {ident.started if ident else 1.0}, "run_id": "r2"}}')
    assert sweep.owner_gone(dead)



def _age(folder: Path, seconds: float) -> None:
    then = time.time() - seconds
    for p in [*folder.rglob("*"), folder]:
        os.utime(p, (then, then), follow_symlinks=False)


def test_a_late_remnant_in_the_agents_folder_is_swept_too(tmp_path):
    """Arms work in `workspaces/.arms/`: an outside daemon's late tracker there is a
    remnant as it is one level up; a kept workspace's file there is not."""
    late = tmp_path / "jaato-eval-late"
    jaato = late / "workspaces" / workspace.AGENTS / "a@echo#0" / ".jaato"
    jaato.mkdir(parents=True)
    (jaato / ".artifact_tracker.json").write_text("{}")
    kept = tmp_path / "jaato-eval-kept"
    shutil.copytree(late, kept)
    (kept / "workspaces" / workspace.AGENTS / "a@echo#0" / "answer.txt").write_text("x")
    for folder in (late, kept):
        _age(folder, sweep.REMNANT_AGE + 60)
    assert [sweep.is_late_remnant(late), sweep.is_late_remnant(kept)] == [True, False]


def test_a_late_remnant_of_an_outside_daemon_is_swept_and_nothing_else_is(tmp_path):
    """An outside daemon's tracker and session record written after the run removed its
    folder (in an xdist worker's folder too): no owner file, only
    `workspaces/<arm>/.jaato/{.artifact_tracker.json,sessions/<id>.json}`. Swept once old. A
    fresh one, an owned folder, a kept workspace's other files (its `.env`, other files under
    `.jaato/`), an empty workspace, a link or a file elsewhere are not remnants."""
    def remnant(name: str, *extra: str, inside: str = "") -> Path:
        folder = tmp_path / f"jaato-eval-{name}"
        jaato = folder / inside / "workspaces" / "a@echo#0" / ".jaato"
        jaato.mkdir(parents=True)
        (jaato / ".artifact_tracker.json").write_text("{}")
        for path in extra:  # a path ending in "/" is a folder
            if path.endswith("/"):
                (folder / path).mkdir(parents=True)
            else:
                (folder / path).parent.mkdir(parents=True, exist_ok=True)
                (folder / path).write_text("x")
        return folder

    old = remnant("old")
    in_worker = remnant("xdist", inside="jaato-eval-gw0")
    fresh = remnant("fresh")
    kept_file = remnant("kept", "workspaces/a@echo#0/answer.txt")
    kept_jaato_only = remnant("kept2", "workspaces/b@echo#0/.jaato/profiles/p.yaml")
    with_record = remnant("rec", "workspaces/a@echo#0/.jaato/sessions/s1.json")
    kept_env = remnant("env", "workspaces/a@echo#0/.env",
                       "workspaces/a@echo#0/.jaato/sessions/s1.json")
    empty_workspace = remnant("empty", "workspaces/b@echo#0/")
    elsewhere = remnant("elsewhere", "daemon/daemon.log")
    owned = remnant("owned")
    sweep.write_owner(owned, "live-run")
    linked = remnant("linked")
    (linked / "workspaces" / "a@echo#0" / ".jaato" / "link").symlink_to("/etc")
    others = (fresh, kept_file, kept_jaato_only, kept_env, empty_workspace, elsewhere, owned,
              linked)
    for folder in (old, in_worker, with_record, *others):
        if folder is not fresh:
            _age(folder, sweep.REMNANT_AGE + 60)
    swept = [old, in_worker, with_record]
    assert [sweep.is_late_remnant(f) for f in swept] == [True] * 3
    assert [sweep.is_late_remnant(f) for f in others] == [False] * len(others)
    assert sorted(sweep.sweep_dead_runs(tmp_path)) == sorted(swept)
    assert not any(f.exists() for f in swept)
    assert all(f.exists() for f in others)


# -- process trees ----------------------------------------------------------------------------

def test_a_tree_finds_a_double_forked_child_by_its_marker_and_ends_it():
    proc, tree = processes.start(
        ["sh", "-c", "(setsid sh -c 'trap \"\" TERM; exec sleep 4301' &) ; exit 0"])
    processes.wait(proc, tree, 30)
    time.sleep(0.3)
    escaped = processes.marked(tree.marker)
    assert escaped, "the re-parented child still carries the tree's marker"
    tree.kill(grace=0.3)
    assert processes.wait_gone(escaped, 5)


@pytest.mark.parametrize("watch", ["pidfd", "polling"])
def test_wait_returns_the_exit_code_notes_children_and_times_out(monkeypatch, watch):
    """The leader's wait, woken by its pidfd or (a kernel without one) by polling: the exit
    code of a quick and of a slower leader, descendants noted while it runs, and a leader
    still running at its timeout raises TimeoutExpired, unreaped."""
    if watch == "polling":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    proc, tree = processes.start("exit 7", shell=True)
    assert processes.wait(proc, tree, 10) == 7
    proc, tree = processes.start("sleep 4304 & sleep 0.4; exit 5", shell=True)
    assert processes.wait(proc, tree, 10) == 5
    assert any(i.pid != proc.pid for i in tree.seen), "the child seen while the leader ran"
    tree.kill(grace=0.3)
    proc, tree = processes.start(["sleep", "4305"])
    with pytest.raises(subprocess.TimeoutExpired):
        processes.wait(proc, tree, 0.3)
    assert proc.returncode is None and proc.poll() is None
    tree.kill(grace=0.3)
    assert proc.wait(5) < 0  # ended by the clean-up's signal


@pytest.mark.parametrize("way", ["setpriv", "preexec_fn"])
def test_a_tree_dies_with_the_process_that_started_it(way):
    """A harness killed outright (SIGKILL: no clean-up runs) the moment a grader started
    leaves no grader running: the parent-death signal is armed before start() returns."""
    if way == "setpriv" and launch._setpriv() is None:
        pytest.skip("util-linux's setpriv is not on this machine")
    choose = "launch._setpriv = lambda: None; " if way == "preexec_fn" else ""
    code = ("import time; from pytest_jaato_eval import launch, processes; " + choose +
            "proc, tree = processes.start(['sleep', '4302']); print(proc.pid, flush=True); "
            "time.sleep(60)")
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        grader = processes.Ident.of(int(starter.stdout.readline()))
        assert grader is not None and grader.alive()
    finally:
        starter.kill()  # at once: no time for anything but what start() already did
        starter.wait()
    assert processes.wait_gone([grader], 5), "the grader outlived the harness"


@pytest.mark.parametrize("way", ["setpriv", "preexec_fn"])
def test_a_program_that_cannot_run_is_refused_at_start(tmp_path, monkeypatch, way):
    """Popen's own errors reach the caller, whichever way the tree starts: a grader says
    "could not start", never a misleading exit code."""
    if way == "preexec_fn":
        monkeypatch.setattr(launch, "_setpriv", lambda: None)
    with pytest.raises(FileNotFoundError):
        processes.start(["no-such-program-4303"])
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        processes.start([str(plain)])
    proc, tree = processes.start("exit 3", shell=True)
    assert processes.wait(proc, tree, 10) == 3


def test_a_grader_whose_escaped_child_holds_its_output_still_returns():
    """The documented limit (a child that clears its environment and leaves the session
    before any snapshot is not found) must not become a hang: the grader's verdict comes
    from its exit code, and its evidence says the output was abandoned."""
    import psutil

    from pytest_jaato_eval.graders.output import DRAIN_WAIT, run_bounded
    since = time.time() - 1
    started = time.monotonic()
    done = run_bounded("(setsid env -i sleep 4306 &) ; exit 0", timeout=5, shell=True)
    took = time.monotonic() - started
    try:
        assert done.code == 0 and done.out.abandoned
        assert b"still held open" in done.out.tail()
        assert took < 5 + 3 * DRAIN_WAIT
    finally:  # ours, found by what we started and when: ended by pid
        for proc in psutil.process_iter(["cmdline", "create_time"]):
            if proc.info["cmdline"] == ["sleep", "4306"] and proc.info["create_time"] >= since:
                proc.kill()


def until(probe, size: int = 1, wait: float = 10.0):
    """probe()'s value once it is truthy (and holds `size` items when sized), or fail."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            value = probe()
        except (psutil.Error, OSError):
            value = None
        if value and (not hasattr(value, "__len__") or len(value) >= size):
            return value
        time.sleep(0.02)
    pytest.fail(f"not seen within {wait:g} s")


def test_what_appears_below_a_daemon_during_an_arm_is_ended_but_new_runner_slots(tmp_path):
    """A stand-in daemon (real processes; the real one is in test_hostile_harness.py): a
    "template" child and its "slot" exist before the arm. During it the template forks a
    new slot (jaato's pool refilling: kept), the old slot starts a child and the daemon
    adopts another, found stopped (an agent's leftovers: ended, and said)."""
    for name in ("t", "s", "d"):
        os.mkfifo(tmp_path / name)
    slot = "read z < s; sleep 4803 & wait"
    template = f"sh -c {shlex.quote(slot)} & read x < t; sleep 4801 & wait"
    daemon = f"sh -c {shlex.quote(template)} & read y < d; sleep 4802 & wait"
    proc, tree = processes.start(daemon, shell=True, cwd=tmp_path)
    try:
        time.sleep(0.3)  # the template and its slot are older than the arm
        with leftovers.ended_after(leftovers.Owned(proc.pid, tree.marker)) as found:
            for name in ("t", "s", "d"):
                (tmp_path / name).write_text("go\n")
            sleeps = until(lambda: {" ".join(p.cmdline()): p for p in
                                    psutil.Process(proc.pid).children(recursive=True)
                                    if p.name() == "sleep"}, size=3)
            sleeps["sleep 4802"].suspend()  # already stopped: a later arm's agent could resume it
        alive = {" ".join(p.cmdline()) for p in psutil.Process(proc.pid).children(recursive=True)
                 if p.status() != psutil.STATUS_ZOMBIE}
        assert "sleep 4801" in alive and not {"sleep 4802", "sleep 4803"} & alive, alive
        assert found.lost is None and len(found.said) == 1, found
        assert "left 2 process(es)" in found.said[0]
        assert "sleep 4802" in found.said[0] and "sleep 4803" in found.said[0]
    finally:
        tree.kill(grace=0)
        proc.wait()


FORKER = """
import os, sys, time
path = sys.argv[1]
while not os.path.exists(path + ".stop"):  # a new pid every 2 ms: each parent exits at once
    if os.fork():
        os._exit(0)
    with open(path, "a") as out:
        out.write("x\\n")
    time.sleep(0.002)
"""
SUBREAPER = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans below stay below, as jaato's
sys.stdin.readline()
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.05)
"""


def test_a_leftover_that_forks_as_it_is_hunted_is_stopped_whole(tmp_path):
    """A leftover that walks (forks a new pid every 2 ms, its parent exiting) under a
    subreaper daemon, as jaato's is: each pass stops (SIGSTOP) what it finds, so the walk
    ends, and then all of it is killed; the file it writes stands still after."""
    marks = tmp_path / "marks"
    proc, tree = processes.start([sys.executable, "-c", SUBREAPER, FORKER, str(marks)],
                                 stdin=subprocess.PIPE)
    try:
        time.sleep(0.3)
        with leftovers.ended_after(leftovers.Owned(proc.pid, tree.marker)) as found:
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            until(lambda: marks.exists() and marks.stat().st_size > 100)
        assert found.lost is None and found.said and "ended before grading" in found.said[0]
        size = marks.stat().st_size
        time.sleep(0.3)
        assert size > 0 and marks.stat().st_size == size, "the walk went on"
    finally:
        (tmp_path / "marks.stop").touch()  # a walk that escaped ends by itself
        tree.kill(grace=0)
        proc.wait()


VFORKER = """
import os, sys
# glibc's posix_spawn is a vfork: this process waits uninterruptibly ('D') until its child
# execs, and the child first opens a FIFO nobody writes, so it waits there, before its exec.
os.posix_spawn("/bin/true", ["true"], dict(os.environ),
               file_actions=[(os.POSIX_SPAWN_OPEN, 3, sys.argv[1], os.O_RDONLY, 0)])
"""


def test_a_leftover_caught_in_a_vfork_is_ended_not_taken_for_one_still_forking(tmp_path):
    """A shell that vforks a child to run a command (dash does, for each one) waits in
    uninterruptible sleep until the child execs. A walk that stops the child before its
    exec leaves the shell waiting for good: it can start nothing, and it is killed with the
    rest; its arm is graded, not BLOCKED as if its leftovers still forked."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc, tree = processes.start(["sh", "-c", 'read go; "$0" -c "$1" "$2" & wait',
                                  sys.executable, VFORKER, str(fifo)], stdin=subprocess.PIPE)
    try:
        time.sleep(0.3)
        with leftovers.ended_after(leftovers.Owned(proc.pid, tree.marker)) as found:
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            spawner = until(lambda: [p for p in psutil.Process(proc.pid).children()
                                     if p.children()])[0]
            until(lambda: spawner.status() == psutil.STATUS_DISK_SLEEP)
        assert found.lost is None, found.lost
        assert found.said and "left 2 process(es)" in found.said[0], found.said
        assert not psutil.Process(proc.pid).children(recursive=True) or all(
            p.status() == psutil.STATUS_ZOMBIE
            for p in psutil.Process(proc.pid).children(recursive=True))
    finally:
        tree.kill(grace=0)
        proc.wait()


def test_a_daemon_killed_before_its_leftovers_are_looked_for_leaves_the_arm_ungraded():
    """The agent's leftover kills the daemon first (it runs as the same user): what it left
    can no longer be told by ancestry, so the arm is not graded (BLOCKED), and what still
    carries the daemon's marker is ended."""
    proc, tree = processes.start("sleep 4805 & wait", shell=True)
    try:
        time.sleep(0.05)
        with leftovers.ended_after(leftovers.Owned(proc.pid, tree.marker)) as found:
            late = subprocess.Popen(["sh", "-c", "exec sleep 4806"],
                                    env={**os.environ, processes.TREE_VAR: tree.marker})
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert found.lost and "died before what the agent left running" in found.lost
        assert late.wait(5) == -signal.SIGKILL, "what carried the marker was ended"
    finally:
        tree.kill(grace=0)


def confined_arm(tmp_path, kind: str):
    """An arm of a `kind` harness in the sandbox, on a socket that is not there: all
    agent_faults reads of it."""
    from types import SimpleNamespace
    from pytest_jaato_eval.arm import ArmRun, ArmSettings, ArmState
    from pytest_jaato_eval.engine.ceiling import Ceiling
    settings = ArmSettings(workspace_root=tmp_path, keep_workspaces="never",
                           ceiling=Ceiling(0), run_id="r", sandbox="bwrap")
    task = SimpleNamespace(config_root=tmp_path, harness=SimpleNamespace(kind=kind))
    return ArmRun(SimpleNamespace(task=task), settings, ArmState(), ws=tmp_path,
                  socket=str(tmp_path / "s"))


def test_a_daemon_gone_is_the_agents_act_only_after_its_session_began(tmp_path):
    """A daemon the arm before ended can still look alive to the next arm's `ensure` for a
    moment on a loaded machine, and that arm then fails to open its session. Nothing of
    that arm's agent ever ran: its arm stays BLOCKED, never FAILs for an act of the agent
    before it. Once an agent's session did begin, a daemon gone under it is that agent's
    act, and the daemon's owner is told to start it afresh for the next arm."""
    from pytest_jaato_eval.arm import agent_faults
    from pytest_jaato_eval.engine.agent_run import AgentRun
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    restarts: list[int] = []
    owned = leftovers.Owned(gone.pid, "marker", restart=lambda: restarts.append(1))
    one = confined_arm(tmp_path, "session")
    unborn = AgentRun(blocked_reason="daemon: could not connect")
    assert agent_faults(one, unborn, owned, tmp_path) is None
    assert restarts == []
    ran = AgentRun(session_id="20261202_000000", session_ids=["20261202_000000"])
    fault = agent_faults(one, ran, owned, tmp_path)
    assert fault and "ended during the agent's session" in fault
    assert restarts == [1]


def test_a_driver_arm_whose_driver_ran_answers_for_its_daemon_without_session_records(tmp_path):
    """A driver arm knows its sessions by the records the daemon writes into the agent's
    workspace, which the agent can remove. Once its driver ran, a daemon gone is the agent's
    act whether or not a record is left; a driver arm that never got to start its driver
    (the daemon unreachable) is not."""
    from pytest_jaato_eval.arm import agent_faults
    from pytest_jaato_eval.engine.agent_run import AgentRun
    gone = subprocess.Popen(["true"])
    gone.wait()
    restarts: list[int] = []
    owned = leftovers.Owned(gone.pid, "marker", restart=lambda: restarts.append(1))
    one = confined_arm(tmp_path, "driver")
    unborn = AgentRun(blocked_reason="daemon: could not connect")
    assert agent_faults(one, unborn, owned, tmp_path) is None
    assert restarts == []
    erased = AgentRun(duration_seconds=2.5, error_type="DriverStoppedShort")  # no record left
    fault = agent_faults(one, erased, owned, tmp_path)
    assert fault and "ended during the agent's session" in fault
    assert restarts == [1]


@pytest.mark.parametrize("watch", ["pidfd", "polling"])
def test_a_grader_is_read_as_it_prints_in_the_waiting_thread(monkeypatch, watch):
    """Output beyond the pipe's buffer is read while the grader runs (it would block on a
    full pipe otherwise), counted whole and kept as its tail; one that never stops printing
    is cut at its timeout. No thread reads it, so none is left behind."""
    import threading

    from pytest_jaato_eval.graders.output import TAIL_BYTES, run_bounded
    if watch == "polling":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    monkeypatch.setattr(threading.Thread, "start", lambda self: pytest.fail("a thread started"))
    code = "import sys; sys.stdout.write('x' * 3_000_000 + 'END'); sys.exit(3)"
    done = run_bounded([sys.executable, "-c", code], timeout=30)
    assert (done.code, done.out.total, done.out.abandoned) == (3, 3_000_003, False)
    assert len(done.out.tail()) == TAIL_BYTES and done.out.tail().endswith(b"xEND")
    started = time.monotonic()
    done = run_bounded("yes flood", shell=True, timeout=0.5)
    assert done.code is None and done.out.total > TAIL_BYTES
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("way", ["setpriv", "preexec_fn"])
def test_a_program_is_found_on_a_relative_path_from_the_childs_folder(tmp_path, monkeypatch, way):
    if way == "preexec_fn":
        monkeypatch.setattr(launch, "_setpriv", lambda: None)
    (tmp_path / "bin").mkdir()
    prog = tmp_path / "bin" / "prog"
    prog.write_text("#!/bin/sh\nexit 7\n")
    prog.chmod(0o755)
    monkeypatch.chdir("/")
    for cwd, path in ((tmp_path, "bin"), (tmp_path / "bin", "")):
        proc, tree = processes.start(["prog"], cwd=cwd, env={"PATH": path})
        assert processes.wait(proc, tree, 10) == 7


# -- collection fence -------------------------------------------------------------------------

def test_fence_names_declared_and_default_roots(tmp_path):
    def ignored(path):  # the manifest's roots as the plugin reads them once a task is found
        return fence.ignored(path, declared_roots)

    task = tmp_path / "t"
    task.mkdir()
    (task / "task.yaml").write_text("environment: {fixture: repo/src, config_root: cfg}\n")
    for name in ("repo", "cfg", "fixture", ".jaato", "docs"):
        (task / name).mkdir()
    (task / "up").symlink_to("/")
    assert ignored(task / "repo") and ignored(task / "cfg")
    assert ignored(task / "fixture") and ignored(task / ".jaato")
    assert ignored(task / "up")
    assert not ignored(task / "docs") and not ignored(task / "task.yaml")
    other = tmp_path / "other"
    other.mkdir()
    (other / "into").symlink_to(task / "repo" if (task / "repo").exists() else task)
    (other / "root").symlink_to("/")
    assert ignored(other / "into") and ignored(other / "root")
    assert not ignored(other)


def test_a_shared_daemon_under_xdist_gets_the_runner_pool_advice():
    """With --jaato-socket and -n N the run says what jaato-eval's sweep says for
    --concurrency N: the daemon needs JAATO_RUNNER_POOL_SIZE >= N warm slots."""
    from types import SimpleNamespace

    from pytest_jaato_eval.pytest_layer.controller import pool_advice

    def config(n):
        return SimpleNamespace(option=SimpleNamespace(numprocesses=n))

    shared = SimpleNamespace(socket="/tmp/d.sock")
    (line,) = pool_advice(config(4), shared)
    assert "JAATO_RUNNER_POOL_SIZE>=4" in line and "/tmp/d.sock" in line
    assert pool_advice(config(1), shared) == pool_advice(config(None), shared) == []
    assert pool_advice(config(4), SimpleNamespace(socket=None)) == []  # a private daemon per worker


def test_children_are_read_whole_past_the_kernels_one_page_per_read():
    """/proc/PID/task/TID/children hands out one page per read (about 680 pids): a tree of
    more children than that is seen whole, so a loop hidden behind many zombies is found."""
    n = 900
    parent = subprocess.Popen(
        ["sh", "-c", f"i=0; while [ $i -lt {n} ]; do sleep 120 & i=$((i+1)); done; "
                     f"echo started; exec sleep 120"],
        stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert parent.stdout.readline().strip() == b"started"
        assert len(processes.children(parent.pid)) == n
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


@pytest.mark.parametrize("plant", ["link", "fifo", "folder", "nothing"])
def test_the_harness_never_writes_its_own_file_through_what_was_left_at_its_path(
        tmp_path, plant):
    """The daemon's log and pid file, a transcript: a link there (to a checkout's
    conftest.py), a FIFO (whose open would wait forever for a reader) or a folder is removed,
    never written through or waited on, and the file is made anew."""
    from pytest_jaato_eval.engine.files import open_own, read_tail, write_own
    from pytest_jaato_eval.results import transcripts

    victim = tmp_path / "conftest.py"
    victim.write_text("# the checkout's\n")
    store = tmp_path / "results.jsonl"
    name = transcripts.file_name("a@echo#0", "run")
    paths = [tmp_path / "daemon.out", tmp_path / "daemon.pid",
             transcripts.folder_of(store) / f".{name}.partial"]  # where a transcript once went
    paths[2].parent.mkdir()
    for path in paths:
        if plant == "link":
            path.symlink_to(victim)
        elif plant == "fifo":
            os.mkfifo(path)
        elif plant == "folder":
            (path / "inside").mkdir(parents=True)
    assert read_tail(paths[0]) is None  # nothing there is read, or waited on
    fd = open_own(paths[0])
    os.write(fd, b"daemon says\n")
    os.close(fd)
    write_own(paths[1], "123\n")
    written = transcripts.write(store, name, b"transcript")
    assert victim.read_text() == "# the checkout's\n"
    assert read_tail(paths[0]) == "daemon says\n" and paths[1].read_text() == "123\n"
    assert written.read_bytes() == b"transcript" and not written.is_symlink()
    for path in paths[:2]:
        assert path.is_file() and not path.is_symlink()
    fd = open_own(paths[0])  # a regular file of ours: appended to
    os.write(fd, b"again\n")
    os.close(fd)
    assert read_tail(paths[0], 6) == "again\n"


def test_the_daemons_environment_names_nothing_of_the_harness():
    """The daemon hands its environment to every tool of the agent's: pytest's variables,
    an outer eval run's, coverage's and the developer's shell's are left out, and the
    process marker it carries names neither the run nor pytest's pid."""
    given = {"PATH": "/usr/bin", "HOME": "/h", "PYTEST_CURRENT_TEST": "t.py::t (call)",
             "PYTEST_XDIST_WORKER": "gw0", "_PYTEST_RAISE": "1", "JAATO_EVAL_X": "1",
             "COV_CORE_SOURCE": "x", "OLDPWD": "/home/dev/secret", "PWD": "/home/dev",
             "_": "/usr/bin/pytest", "OPENAI_API_KEY": "k", "JAATO_PROVIDER": "echo"}
    assert harness_free(given) == {"PATH": "/usr/bin", "HOME": "/h", "OPENAI_API_KEY": "k",
                                   "JAATO_PROVIDER": "echo"}
    assert "pytest" not in processes.TREE_VAR.lower()
    tag = processes.run_prefix("20261207-run-42")
    assert "20261207" not in tag and tag.endswith(":") and tag == processes.run_prefix(
        "20261207-run-42")
