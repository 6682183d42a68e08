"""SIGTERM as Ctrl-C, for the run's own processes (a daemon, arms, workers)."""
from __future__ import annotations

import signal
import threading
from typing import Any


class SigtermAsInterrupt:
    """SIGTERM ends the run like Ctrl-C, so what the run started is stopped, not orphaned.

    Installed only once the run has something of its own to stop (a daemon, an arm's
    processes, workers running arms) and only over the default handler; the previous
    handler comes back at the end of the run.
    """

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed: Any = None

    def install(self) -> None:
        if self._installed is not None or threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_DFL:
            return  # somebody already handles it: theirs stands

        def _interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        try:
            signal.signal(signal.SIGTERM, _interrupt)
        except ValueError:
            return
        self._previous, self._installed = previous, _interrupt

    def restore(self) -> None:
        if self._installed is not None and threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGTERM) is self._installed:
                signal.signal(signal.SIGTERM, self._previous)
            self._installed = None
