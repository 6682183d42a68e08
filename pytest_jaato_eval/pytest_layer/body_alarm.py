"""The rest of the arm ceiling, for a Python arm's test body after `jaato_arm.run()`.

The handle arms it when the agent's run ends (fixtures.py); the worker disarms it when the
call's report is made (worker.py). Past it, the body is BLOCKED (a hang in the test), or the
agent's FAIL when it was reading a file the agent left (a trap).
"""
from __future__ import annotations

import os
import signal
import threading
from pathlib import Path


class BodyOverran(Exception):
    """The test body, the arm's grader, ran past what the arm ceiling left it: BLOCKED."""


class _Overran:
    """The body's alarm: what it was doing when the arm ceiling came says whose it is."""

    def __init__(self, workspace: Path, previous):
        self.workspace = workspace
        self.previous = previous  # the handler it stands in for, given back at the end

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
    previous = signal.getsignal(signal.SIGALRM)
    if isinstance(previous, _Overran):  # armed again by a second run() in the same body
        previous = previous.previous
    signal.signal(signal.SIGALRM, _Overran(workspace, previous))
    signal.setitimer(signal.ITIMER_REAL, max(seconds_left, 1.0))


def end_guard() -> None:
    """Disarm the body's alarm, if one is armed, and give back the handler it stood in for.
    Called at the call's report and again when each test ends, whatever phase armed it (a
    `run()` in a fixture whose setup then failed has no call): an alarm left armed would go
    off in a later test, or end the process that runs pytest."""
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        handler = signal.getsignal(signal.SIGALRM)
        if isinstance(handler, _Overran):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, handler.previous)
