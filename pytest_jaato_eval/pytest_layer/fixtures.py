"""The bodies of an arm's public fixtures: `jaato_workspace`, `jaato_arm`, `jaato_regrade`;
and `ArmHandle`, the arm as its test sees it.

plugin.py declares the fixtures (pytest finds them there, for every item collected), each
delegating here through the lazy load (arms_found.py), so a project's `conftest.py`
fixtures run around its arms like around any test, and a fixture that errors in setup
makes the arm BLOCKED (outcome.py). What runs an arm (arm.py, the SDK) loads at its first
need (run.arm_side).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

import pytest

from ..engine.agent_run import AgentRun
from ..engine.daemon import DaemonError
from ..engine.files import read_text_bounded
from ..results.record import ArmRecord
from ..workspace import release
from .body_alarm import guard_body
from .outcome import raise_for
from .python_arms import preflight_check
from .run import ARM_KEY, HANDLE_KEY, WORKSPACE_KEY, arm_side, regrade_side, worker_of


def jaato_workspace(request) -> Iterator[Path]:
    arm = _arm(request)
    if getattr(request.node, "arm", None) is None:
        # A Python arm is preflighted here: after the project's own fixtures (which may
        # write its profile), before its workspace and session. A task.yaml arm's item
        # checks before any fixture.
        preflight_check(request.node)
    worker = worker_of(request.config)
    settings = worker.arm_settings()
    ws = arm_side().make_workspace(arm, settings, worker.arm_state)
    request.node.stash[WORKSPACE_KEY] = ws
    yield ws
    release(worker.arm_state.held.pop(ws, None))  # its arm's agent never ran, or a regrade
    if ws not in worker.arm_state.kept:
        worker.discard(ws)


def jaato_arm(request, jaato_daemon: str, jaato_workspace: Path) -> "ArmHandle":
    handle = ArmHandle(_arm(request), jaato_workspace, jaato_daemon, worker_of(request.config))
    request.node.stash[HANDLE_KEY] = handle
    return handle


def jaato_regrade(request, jaato_workspace: Path) -> "ArmHandle":
    arm = _arm(request)
    handle = ArmHandle(arm, jaato_workspace, None, worker_of(request.config))
    if regrade_side().needs_daemon(arm.task):
        # Asked for when a judge is about to grade: an arm refused or left unrestored
        # starts no daemon.
        handle.ask_daemon = lambda: request.getfixturevalue("jaato_daemon")
    request.node.stash[HANDLE_KEY] = handle
    return handle


def _arm(request):
    arm = request.node.stash.get(ARM_KEY, None)
    if arm is None:
        pytest.fail(f"{request.node.nodeid}: jaato_arm and jaato_workspace belong to an arm: "
                    f"a task.yaml, or a test marked @pytest.mark.jaato(config_root=..., "
                    f"fixture=..., profile=...)", pytrace=False)
    return arm


class EnvironmentFault(Exception):
    """The agent's run taught us nothing (daemon, provider, ceiling, pool): BLOCKED."""


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


class _DaemonOnDemand:
    """A regrade's daemon: `jaato_daemon` asked for at its first use."""

    def __init__(self, ask: Callable[[], str], worker):
        self.ask, self.worker = ask, worker

    def ensure(self) -> str:
        return _Daemon(self.ask(), self.worker).ensure()

    def owned(self) -> None:
        return None  # a regrade runs no agent: nothing of its daemon's is watched


class ArmHandle:
    """One arm, as its test sees it."""

    def __init__(self, arm, workspace: Path, socket: str | None, worker):
        self.arm = arm
        self.workspace = Path(workspace)
        self.socket = socket
        self._worker = worker
        self.agent_run: Any = None  # the engine's AgentRun, once run() was called
        self.agent_verdict: Any = None  # the agent's own act that FAILS the arm (arm.agent_act)
        self.record: ArmRecord | None = None  # a task.yaml arm's record, once run
        self.ask_daemon: Callable[[], str] | None = None  # a regrade's judge's daemon

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
        engine = arm_side()
        assert self.socket is not None  # jaato_arm's: only a regrade's handle has none
        daemon = _Daemon(self.socket, self._worker)
        try:
            socket = daemon.ensure()
        except DaemonError as exc:
            self.agent_run = AgentRun(blocked_reason=str(exc))
        else:
            one = engine.ArmRun(self.arm, self._worker.arm_settings(), self._worker.arm_state,
                                ws=self.workspace, socket=socket)
            self.agent_run = engine.run_agent(one, self._worker, prompt=prompt,
                                              owned=daemon.owned())
        run = self.agent_run
        moved = engine.replaced_workspace(self.workspace, self._worker.arm_state)
        if moved is not None:  # before the test reads anything through its path
            self.agent_verdict = engine.agent_act(run, None, self._worker.arm_settings()) if (
                run.exhausted) else moved  # past a limit its files were removed: that first
            raise AssertionError(self.agent_verdict.detail)
        if run.blocked_reason:
            raise EnvironmentFault(run.blocked_reason)
        ceiling = self._worker.arm_settings().ceiling.seconds
        if ceiling:  # armed first: a test that swallows the error below is bounded too
            guard_body(ceiling - (run.duration_seconds or 0.0), self.workspace)
        # The traps are looked for through the descriptor held on the workspace as made;
        # then it is let go: the body reads by path, and a folder it holds open is what the
        # body's alarm takes for a read of the agent's files.
        held = self._worker.arm_state.held.pop(self.workspace, None)
        try:
            planted = engine.traps(run, self.workspace, self._worker.arm_settings(), held)
        finally:
            release(held)
        self.agent_verdict = engine.agent_act(run, self.workspace, self._worker.arm_settings(),
                                              planted=planted)
        if self.agent_verdict is not None:  # its FAIL, whatever the test does next (a trap
            raise AssertionError(self.agent_verdict.detail)  # would hang the test's reads)
        return RunFacts(payload=run.payload, ledger=engine.ledger_of(run.history), usage=MappingProxyType(dict(run.usage)),
                        finish_reason=run.finish_reason, session_id=run.session_id,
                        model=run.model, turns=run.turns,
                        history=None if run.history is None else tuple(run.history))

    def read(self, relpath: str, limit: int = 16 * 1024 * 1024) -> str | None:
        """A file the agent left, as text: its first `limit` bytes, or None when it is
        missing, not a regular file, or a link out of the workspace. Never blocks."""
        return read_text_bounded(self.workspace / relpath, limit, root=self.workspace)

    def regrade_task(self) -> None:
        """A task.yaml arm under --jaato-regrade: its snapshot graded again, no agent."""
        daemon = (_DaemonOnDemand(self.ask_daemon, self._worker) if self.ask_daemon
                  else None)
        self.record = regrade_side().regrade_arm(self.arm, daemon, self._worker.arm_settings(),
                                                 self._worker.arm_state, self.workspace)
        raise_for(self.record)

    def run_task(self) -> None:
        """A task.yaml arm: its manifest's session or driver, then its graders."""
        assert self.socket is not None  # jaato_arm's: only a regrade's handle has none
        self.record = arm_side().run_arm(self.arm, _Daemon(self.socket, self._worker),
                              self._worker.arm_settings(), self._worker.arm_state, self._worker,
                              ws=self.workspace)
        raise_for(self.record)
