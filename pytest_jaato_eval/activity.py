"""What the arm this process runs is doing now: its phase, for whoever shows that a run is
alive (pytest_layer/liveness.py).

A process runs one arm at a time (pytest runs its items one after another; each xdist
worker is a process of its own), so this is the process's one `Activity`. The engine says
each phase as it enters it (`ACTIVITY.phase("opening the session")`, a turn, a retry);
the pytest layer begins and ends the arm. A phase change costs a lock and a call to
each listener; nothing is printed from here.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Callable


@dataclass(frozen=True)
class Doing:
    """An arm's state, as said last: which arm, since when (time.time(): it crosses
    processes), its phase, and the retries jaato made (with the last one's words)."""
    arm_id: str
    started: float
    phase: str = "setting up"
    retries: int = 0
    last_retry: str = ""
    stage: str = ""   # a part of the arm whose own phases follow it ("grading": a judge's turns)

    def said(self, now: float | None = None) -> str:
        """`write-file@echo#0: 42 s, turn 3; 2 retries (rate-limit: …)`."""
        elapsed = max((now if now is not None else time.time()) - self.started, 0.0)
        text = f"{self.arm_id}: {elapsed:.0f} s, " + ", ".join(
            part for part in (self.stage, self.phase) if part)
        if self.retries:
            text += (f"; {self.retries} {'retry' if self.retries == 1 else 'retries'}"
                     + (f" ({self.last_retry})" if self.last_retry else ""))
        return text

    def to_dict(self) -> dict:
        return {"arm_id": self.arm_id, "started": self.started, "phase": self.phase,
                "retries": self.retries, "last_retry": self.last_retry, "stage": self.stage}


class Activity:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now: Doing | None = None
        self._listeners: list[Callable[[Doing | None], None]] = []

    @property
    def now(self) -> Doing | None:
        return self._now

    def listen(self, listener: Callable[[Doing | None], None]) -> None:
        """Call `listener` with the new state at every change (None: no arm runs)."""
        with self._lock:
            if listener not in self._listeners:
                self._listeners.append(listener)

    def begin(self, arm_id: str) -> None:
        self._set(Doing(arm_id, time.time()))

    def phase(self, text: str) -> None:
        """The running arm entered a phase; said only while an arm runs."""
        self._change(lambda d: replace(d, phase=text))

    def stage(self, text: str) -> None:
        """The running arm entered a part of its own (grading): the phases said from now
        on (a judge's session, its turns) are that part's."""
        self._change(lambda d: replace(d, stage=text, phase=""))

    def retry(self, text: str) -> None:
        """jaato retried a call of the running arm (a provider's 429, a dropped stream)."""
        self._change(lambda d: replace(d, retries=d.retries + 1, last_retry=text[:120]))

    def end(self) -> None:
        self._set(None)

    def _change(self, how: Callable[[Doing], Doing]) -> None:
        with self._lock:
            if self._now is None:
                return
            self._now = how(self._now)
            now, listeners = self._now, list(self._listeners)
        for listener in listeners:
            listener(now)

    def _set(self, doing: Doing | None) -> None:
        with self._lock:
            self._now = doing
            listeners = list(self._listeners)
        for listener in listeners:
            listener(doing)


ACTIVITY = Activity()
