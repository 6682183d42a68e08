"""The public fixtures of an arm: `jaato_daemon`, `jaato_workspace`, `jaato_arm`.

Every arm, YAML or Python, gets them through pytest's own fixture machinery, so
a project's `conftest.py` fixtures run around its arms like around any test,
and a fixture that errors in setup makes the arm BLOCKED (outcome.py). This module
loads in every pytest run: the worker, the engine, the SDK and the scripted model
are imported where a fixture first uses them.
"""
from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping

import pytest

from ..engine.files import read_text_bounded
from ..results.record import ArmRecord
from ..testing.fixture import scripted_model_fixture  # the server loads when a model starts
from .outcome import raise_for
from .run import ARM_KEY, HANDLE_KEY, WORKSPACE_KEY, worker_of


@pytest.fixture(scope="session")
def jaato_daemon(request) -> str:
    """The socket path of the jaato daemon arms run on; one per process (per xdist worker).

    Default: with ``--jaato-socket``, that daemon; else a private daemon of this
    run, started on first use (early, in the background, once an arm is collected)
    and stopped at the end. Override it in a ``conftest.py`` to run arms on a daemon
    of your own: return its socket path. A daemon that cannot be reached makes every
    arm BLOCKED, with a record naming this fixture.
    """
    from .worker import Worker  # a test that is no arm may use the daemon too: made here
    return Worker.of(request.config).socket()


@pytest.fixture
def jaato_workspace(request) -> Iterator[Path]:
    """The arm's workspace: a fresh copy of its fixture folder (a ``pathlib.Path``).

    Made before the agent starts, so a fixture of yours that requests it can seed
    files there; discarded after grading, or kept per ``--keep-workspaces`` /
    ``--keep-failed-workspaces``.
    """
    arm = _arm(request)
    if getattr(request.node, "arm", None) is None:
        # A Python arm is preflighted here: after the project's own fixtures (which may
        # write its profile), before its workspace and session. A task.yaml arm's item
        # checks before any fixture.
        from .python_arms import preflight_check
        preflight_check(request.node)
    worker = worker_of(request.config)
    settings = worker.arm_settings()
    from ..arm import make_workspace
    ws = make_workspace(arm, settings, worker.arm_state)
    request.node.stash[WORKSPACE_KEY] = ws
    yield ws
    if ws not in worker.arm_state.kept:
        worker.discard(ws)


@pytest.fixture
def jaato_arm(request, jaato_daemon, jaato_workspace) -> "ArmHandle":
    """The arm this test is: ``id``, ``task``, ``profile_set``, ``repeat``, ``workspace``,
    and ``run(prompt)``, which runs its agent and returns the run's facts.

    A Python arm's test (``@pytest.mark.jaato(...)``) calls ``run`` and asserts on
    what the agent left; a task.yaml arm's item runs its manifest through it.
    """
    handle = ArmHandle(_arm(request), jaato_workspace, jaato_daemon, worker_of(request.config))
    request.node.stash[HANDLE_KEY] = handle
    return handle


@pytest.fixture
def jaato_regrade(request, jaato_workspace) -> "ArmHandle":
    """A task.yaml arm under ``--jaato-regrade``: its handle, whose ``regrade_task()``
    grades the arm's snapshot with the task's current graders (docs/regrading.md). The
    daemon (``jaato_daemon``) is asked for only when a judge grades the task."""
    arm = _arm(request)
    from ..arm import needs_daemon  # the SDK: only when an arm runs
    socket = request.getfixturevalue("jaato_daemon") if needs_daemon(arm.task) else None
    handle = ArmHandle(arm, jaato_workspace, socket, worker_of(request.config))
    request.node.stash[HANDLE_KEY] = handle
    return handle


@pytest.fixture(name="scripted_model")
def scripted_model():
    """A scripted OpenAI-compatible model on 127.0.0.1 (docs/scripted-model.md): yields
    ``start(turns, **kwargs)``; every model started through it stops at teardown."""
    yield from scripted_model_fixture()


def _arm(request):
    arm = request.node.stash.get(ARM_KEY, None)
    if arm is None:
        pytest.fail(f"{request.node.nodeid}: jaato_arm and jaato_workspace belong to an arm: "
                    f"a task.yaml, or a test marked @pytest.mark.jaato(config_root=..., "
                    f"fixture=..., profile=...)", pytrace=False)
    return arm


class EnvironmentFault(Exception):
    """The agent's run taught us nothing (daemon, provider, ceiling, pool): BLOCKED."""


class BodyOverran(Exception):
    """The test body, the arm's grader, ran past what the arm ceiling left it: BLOCKED."""


class _Overran:
    """The body's alarm: what it was doing when the arm ceiling came says whose it is."""

    def __init__(self, workspace: Path):
        self.workspace = workspace

    def __call__(self, signum, frame):
        reading = _reading(self.workspace)
        if reading:  # what the agent made held the body: its FAIL, like a trap
            raise AssertionError(f"the test body ran past the arm ceiling (--arm-timeout) "
                                 f"while reading {reading}, which the agent left in its "
                                 f"workspace: read what an agent makes with jaato_arm.read()")
        raise BodyOverran("the test body ran past the arm ceiling (--arm-timeout) left after "
                          "the agent's run: a hang in the test, not a verdict on the agent")


def _reading(workspace: Path) -> str | None:
    """A file or folder of the workspace this process holds open (relative), if any."""
    root = os.path.realpath(workspace)
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == root or target.startswith(root + os.sep):
            return os.path.relpath(target, root)
    return None


def guard_body(seconds_left: float, workspace: Path) -> None:
    """The rest of the arm ceiling, for the test body after `run()`: an alarm that raises
    BodyOverran in it (the main thread, as pytest and xdist run tests), or the agent's FAIL
    when the body was reading a file of `workspace` then. `end_guard` at the call's end (a
    second at least). Nothing without SIGALRM, or in another thread."""
    if not hasattr(signal, "setitimer") or (
            threading.current_thread() is not threading.main_thread()):
        return
    signal.signal(signal.SIGALRM, _Overran(workspace))
    signal.setitimer(signal.ITIMER_REAL, max(seconds_left, 1.0))


def end_guard() -> None:
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        if isinstance(signal.getsignal(signal.SIGALRM), _Overran):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)


@dataclass(frozen=True)
class RunFacts:
    """What a Python arm's test may assert on, from its agent's run."""

    payload: Any
    ledger: Any
    usage: Mapping[str, Any]  # read-only
    finish_reason: str | None
    session_id: str | None
    model: str | None
    turns: int
    history: tuple | None


class _Daemon:
    """The socket from `jaato_daemon`; our own private daemon is started again if it died."""

    def __init__(self, socket: str, worker):
        self.socket, self.worker = socket, worker

    def ensure(self) -> str:
        if self.worker.owns(self.socket):
            return self.worker.ensure()
        return self.socket

    def owned(self):
        return self.worker.daemon.owned() if self.worker.owns(self.socket) else None


class ArmHandle:
    """One arm, as its test sees it."""

    def __init__(self, arm, workspace: Path, socket: str, worker):
        self.arm = arm
        self.workspace = Path(workspace)
        self.socket = socket
        self._worker = worker
        self.agent_run: Any = None  # the engine's AgentRun, once run() was called
        self.agent_verdict: Any = None  # the agent's own act that FAILS the arm (arm.agent_act)
        self.record: ArmRecord | None = None  # a task.yaml arm's record, once run

    @property
    def id(self) -> str:
        return self.arm.id

    @property
    def task(self):
        return self.arm.task

    @property
    def profile_set(self) -> str:
        return self.arm.set_name

    @property
    def repeat(self) -> int:
        return self.arm.repeat

    def __repr__(self) -> str:
        return f"<jaato arm {self.id} in {self.workspace}>"

    def run(self, prompt: str) -> RunFacts:
        """Run the arm's agent on `prompt` to its end; the facts of the run.

        Raises EnvironmentFault when the run taught us nothing: the arm is BLOCKED
        whatever the test does next.
        """
        if self.agent_run is not None:
            raise RuntimeError(f"{self.id}: an arm runs its agent once")
        if not isinstance(prompt, str) or not prompt.strip():
            raise TypeError("jaato_arm.run(prompt): the prompt must be a non-blank string")
        from ..arm import run_agent
        from ..engine.daemon import DaemonError
        from ..engine.session import AgentRun
        daemon = _Daemon(self.socket, self._worker)
        try:
            socket = daemon.ensure()
        except DaemonError as exc:
            self.agent_run = AgentRun(blocked_reason=str(exc))
        else:
            self.agent_run, _, _ = run_agent(self.arm, socket, self.workspace,
                                             self._worker.arm_settings(),
                                             self._worker.arm_state, self._worker,
                                             prompt=prompt, owned=daemon.owned())
        run = self.agent_run
        if run.blocked_reason:
            raise EnvironmentFault(run.blocked_reason)
        ceiling = self._worker.arm_settings().ceiling.seconds
        if ceiling:  # armed first: a test that swallows the error below is bounded too
            guard_body(ceiling - (run.duration_seconds or 0.0), self.workspace)
        from ..arm import agent_act
        self.agent_verdict = agent_act(run, self.workspace, self._worker.arm_settings())
        if self.agent_verdict is not None:  # its FAIL, whatever the test does next (a trap
            raise AssertionError(self.agent_verdict.detail)  # would hang the test's reads)
        from ..graders.ledger import ledger_of
        return RunFacts(payload=run.payload, ledger=ledger_of(run.history), usage=MappingProxyType(dict(run.usage)),
                        finish_reason=run.finish_reason, session_id=run.session_id,
                        model=run.model, turns=run.turns,
                        history=None if run.history is None else tuple(run.history))

    def read(self, relpath: str, limit: int = 16 * 1024 * 1024) -> str | None:
        """A file the agent left, as text: its first `limit` bytes, or None when it is
        missing, not a regular file, or a link out of the workspace. Never blocks."""
        return read_text_bounded(self.workspace / relpath, limit, root=self.workspace)

    def regrade_task(self) -> None:
        """A task.yaml arm under --jaato-regrade: its snapshot graded again, no agent."""
        from ..arm import regrade_arm
        daemon = _Daemon(self.socket, self._worker) if self.socket else None
        self.record = regrade_arm(self.arm, daemon, self._worker.arm_settings(),
                                  self._worker.arm_state, self.workspace)
        raise_for(self.record)

    def run_task(self) -> None:
        """A task.yaml arm: its manifest's session or driver, then its graders."""
        from ..arm import run_arm
        self.record = run_arm(self.arm, _Daemon(self.socket, self._worker),
                              self._worker.arm_settings(), self._worker.arm_state, self._worker,
                              ws=self.workspace)
        raise_for(self.record)
