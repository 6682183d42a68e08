"""A busy machine is not a fault: what a starved host does to an arm, against the real daemon.

The daemon's own cause of a failed session start is in the reason; the arm ceiling counts
from the session's creation, not from a daemon that was slow to answer; a process that
cannot start a thread still ends every arm with its record and the run with its summary.
"""
from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
from jaato_project import WRITER, processes_mentioning

from pytest_jaato_eval.engine.session import Ceiling, SessionArmSpec, run_session_arm

pytestmark = pytest.mark.faults


def test_a_failed_session_start_names_the_daemons_cause(project):
    # A profile that binds no model: the runner's bootstrap fails, and the daemon answers
    # session.new with "see the ConfigurationError emitted during init for the cause",
    # an error event it sent just before.
    project.task("nomodel", profile={k: v for k, v in WRITER.items() if k != "model"})
    result = project.run("tasks")
    (r,) = project.records()
    assert r["state"] == "BLOCKED" and result.ret == 2
    reason = r["blocked_reason"]
    assert reason.startswith("SessionInitializationError: session initialization failed: ")
    assert "RunnerBootstrapFailed" in reason and "model_name is empty" in reason
    assert "emitted during init" not in reason
    # Nothing was spent before the session existed: it was sent again, and the record says so.
    assert any(c.startswith("session.new was sent again (try 2 of at most 3, before any "
                            "model call)") for c in r["notes"]), r["notes"]


def _arm(daemon, tmp, ceiling: float) -> SessionArmSpec:
    config_root = tmp / "config"
    (config_root / "profiles" / "echo").mkdir(parents=True)
    import yaml
    (config_root / "profiles" / "echo" / "writer.yaml").write_text(yaml.safe_dump(WRITER))
    ws = tmp / "ws"
    ws.mkdir()
    (ws / ".env").write_text("JAATO_PROFILE_SET=echo\n")
    return SessionArmSpec(socket_path=daemon.socket_path, workspace=ws,
                          config_root=config_root, profile="writer", prompt="Write READY.",
                          ceiling=Ceiling(ceiling, source="the test"))


def test_the_ceiling_counts_from_the_session_not_from_a_slow_daemon(daemon, project):
    # The daemon is frozen (SIGSTOP) for twice the ceiling while the arm connects and asks
    # for its session, as a starved host's daemon is: that time is not the arm's.
    spec = _arm(daemon, project.tmp, ceiling=4)
    out: list = []
    arm = threading.Thread(target=lambda: out.append(run_session_arm(spec)), daemon=True)
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        arm.start()
        time.sleep(8)
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
    arm.join(240)
    (run,) = out
    assert run.blocked_reason is None, run.blocked_reason
    assert run.session_id and (spec.workspace / "answer.txt").read_text() == "READY\n"


def test_the_ceiling_still_cuts_the_session_and_stops_it_on_the_daemon(daemon, project,
                                                                      scripted_model):
    from pytest_jaato_eval.testing.model_server import Turn
    model = scripted_model([Turn.hang()])
    spec = _arm(daemon, project.tmp, ceiling=3)
    model.write_profile(spec.config_root, "writer", profile_set="echo")
    run = run_session_arm(spec)
    assert run.blocked_reason.startswith("arm ceiling: the arm ran past 3 s")
    assert run.session_id and run.termination_reason == "operator_request"


class LateRelay:
    """A socket that refuses connections (bound, not listening: ECONNREFUSED, as a daemon
    restarting on its path does) for `refuse` seconds, then relays to the real daemon."""

    def __init__(self, path: str, upstream: str, refuse: float):
        self.path, self.upstream = path, upstream
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.refused_until = time.monotonic() + refuse
        self.thread = threading.Thread(target=self._serve, args=(refuse,), daemon=True)
        self.thread.start()

    def _serve(self, refuse: float) -> None:
        time.sleep(refuse)
        self.server.listen(8)
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.connect(self.upstream)
            for a, b in ((client, up), (up, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def test_a_refused_connection_before_the_session_is_tried_again(daemon, project):
    spec = _arm(daemon, project.tmp, ceiling=600)
    relay = LateRelay(str(project.tmp / "late.sock"), daemon.socket_path, refuse=3)
    try:
        spec.socket_path = relay.path
        run = run_session_arm(spec)
    finally:
        relay.close()
    assert run.blocked_reason is None, run.blocked_reason
    assert (spec.workspace / "answer.txt").read_text() == "READY\n"
    (caveat,) = [c for c in run.caveats if c.startswith("the daemon refused the connection")]
    assert "Connection refused" in caveat and "before any model call" in caveat


THREADLESS = """\
import pytest_jaato_eval.workspace as workspace


class _NoThreads:  # a process at its thread limit: every start fails
    Lock = workspace.threading.Lock

    class Thread:
        def __init__(self, *a, **kw):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")


workspace.threading = _NoThreads
"""


def test_no_thread_for_the_workspace_clean_up_still_ends_every_arm(project):
    project.task("a", repeats=2)
    project.write("conftest.py", THREADLESS)
    result = project.run("tasks")
    records = project.records()
    assert sorted(r["arm_id"] for r in records) == ["a@echo#0", "a@echo#1"]
    assert {r["state"] for r in records} == {"PASS"}
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)  # no ERROR at teardown
    text = result.stdout.str() + result.stderr.str()
    assert "cannot join thread" not in text and "Traceback" not in text
    assert "store:" in text  # the run's summary
    # The workspaces were removed in the arm's own thread instead.
    assert [d for d in project.run_dirs() if any(d.rglob("seed.txt"))] == []
    assert processes_mentioning(str(project.tmp)) == []
