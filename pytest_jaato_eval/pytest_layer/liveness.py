"""That a long arm is alive, shown the pytest way while it runs.

Each arm says its phase as it goes (activity.py: setting up, opening the session, turn N,
a tool, grading, jaato's retries). The controller shows it for every arm running longer
than `LIVE_AFTER` seconds:

- on a terminal (pytest's writer does markup), one live line under pytest's current line,
  `jaato-eval: write-file@echo#0: 42 s, turn 3; 1 retry (rate_limit: ...)`, redrawn every
  second and cleared before pytest writes anything of its own;
- elsewhere (a CI log, a file), a line per running arm every `--jaato-heartbeat` seconds.

It writes to the terminal through a descriptor of its own, taken before any test runs,
so pytest's capture of the test (the arm) being run never swallows it. Under `-n` each
worker publishes its arm's state as a small file in its run folder (`publish`), which the
controller reads; without `-n` it reads the process's own `ACTIVITY`.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from ..activity import ACTIVITY, Doing
from ..render import safe_text
from . import outcome
from .fence import MANIFEST
from .run import arm_of, worker_of

LIVE_AFTER = 5.0   # seconds an arm runs before it is shown to be alive
TICK = 1.0         # how often the live line is redrawn (and the heartbeats looked at)
STATE_FILE = "activity.json"
PLUGIN_NAME = "jaato-eval-liveness"
PREFIX = "jaato-eval:"


# -- the arm's side: what it is doing, said where the controller reads it ------------------
_PUBLISHING = pytest.StashKey[bool]()


def arm_begins(item: Any) -> None:
    """An arm's setup begins: its clock starts (pytest_runtest_setup). An xdist worker
    publishes what its arms do for the controller, from its first arm on."""
    arm = arm_of(item)
    if arm is None:
        return
    config = item.config
    if hasattr(config, "workerinput") and not config.stash.get(_PUBLISHING, False):
        config.stash[_PUBLISHING] = True
        ACTIVITY.listen(publish(worker_of(config).run_dir))
    ACTIVITY.begin(arm.id)


def arm_ends() -> None:
    """An item's last report is out (pytest_runtest_logfinish): no arm runs here now."""
    if ACTIVITY.now is not None:
        ACTIVITY.end()


def publish(folder: Path) -> Callable[[Doing | None], None]:
    """A listener writing the arm's state to `folder`/activity.json (an xdist worker's run
    folder, which the controller reads and an agent's sandbox hides), atomically."""
    target, partial = folder / STATE_FILE, folder / f".{STATE_FILE}.partial"

    def write(doing: Doing | None) -> None:
        try:
            if doing is None:
                target.unlink(missing_ok=True)
                return
            partial.write_text(json.dumps(doing.to_dict()))
            os.replace(partial, target)
        except OSError:  # a state not said is a line not printed, never a failed arm
            pass
    return write


def read_published(path: Path) -> Doing | None:
    """A worker's published state: a small regular file, never followed through a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = json.loads(os.read(fd, 4096) or b"null")
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(data, dict):
        return None
    try:
        return Doing(str(data["arm_id"]), float(data["started"]), str(data.get("phase", "")),
                     int(data.get("retries", 0)), str(data.get("last_retry", "")),
                     str(data.get("stage", "")))
    except (KeyError, TypeError, ValueError):
        return None


# -- the controller's side: showing it -----------------------------------------------------
class Liveness:
    """The controller's live line (a terminal) or heartbeat lines (a log). Its thread runs
    from the run's loop to its finish; every write of its own, and every report pytest
    writes, holds one lock, so the two never interleave."""

    def __init__(self, config: Any, heartbeat: float,
                 workers_folder: Callable[[], Path | None]):
        self.config = config
        self.heartbeat = heartbeat
        self.workers_folder = workers_folder   # under -n: the workers' run folders' parent
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tw: Any = None
        self._fd: int | None = None
        self._live = False             # a live line is drawn under pytest's current line
        self._tty = False
        self._said: dict[str, float] = {}   # arm id -> when its last heartbeat was written
        # arm id -> when its outcome line went out: an attempt begun before then is over,
        # though its state lingers until the item's teardown (or a worker's next write)
        # clears it; one begun after (a rerun plugin's) is shown again.
        self._reported: dict[str, float] = {}

    # -- hooks ---------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session) -> None:
        """Started only for a run with arms: a run without tasks gets no thread."""
        if any(arm_of(item) is not None for item in session.items):
            self.start(session.config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        if any(i.split("::", 1)[0].endswith(MANIFEST) for i in ids):  # task.yaml arms
            self.start(node.config)

    def start(self, config) -> None:
        if self._thread is not None or self._stop.is_set() or config.option.collectonly:
            return
        tr = config.pluginmanager.get_plugin("terminalreporter")
        tw = getattr(tr, "_tw", None)
        if tw is None:
            return
        try:
            tw._file.flush()
            self._fd = os.dup(tw._file.fileno())  # the terminal itself, past any capture
        except (AttributeError, OSError, ValueError):
            return
        self._tw = tw
        # A live line moves the cursor: only on a terminal (a log that keeps colours, as some
        # CI pages do, gets heartbeat lines)
        try:
            self._tty = bool(tw.hasmarkup and tw._file.isatty())
        except (AttributeError, ValueError):
            self._tty = False
        self._thread = threading.Thread(target=self._run, name="jaato-eval-liveness",
                                        daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had: the run goes on, silent as before
            self._thread = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report):
        if self._thread is None and outcome.arm_identity(report) is not None:
            self.start(self.config)  # under -n, a Python arm is known by its reports
        with self.quiet():
            record = outcome.record_of(report)
            if record is not None:
                self._reported[record.arm_id] = time.time()
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid, location):
        with self.quiet():
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid, location):
        with self.quiet():
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session) -> None:
        self.stop()

    def pytest_unconfigure(self, config) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            self._clear()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """While pytest (or a line of ours) writes: the live line is not there."""
        with self._lock:
            self._clear()
            yield

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(TICK):
            try:
                self._tick([d for d in self._running() if time.time() - d.started >= LIVE_AFTER])
            except Exception:  # noqa: BLE001 - a line not drawn must never end the run
                return

    def _tick(self, running: list[Doing]) -> None:
        """Say what runs. `running` was looked at before the lock was taken: an arm whose
        outcome line pytest wrote meanwhile is over, and is not said to be running."""
        with self._lock:
            if self._stop.is_set():
                return
            running = [d for d in running
                       if d.started > self._reported.get(d.arm_id, float("-inf"))]
            if self._tty:
                self._draw(running)
            elif self.heartbeat:
                self._beat(running)

    def _running(self) -> list[Doing]:
        found = [ACTIVITY.now] if ACTIVITY.now is not None else []
        folder = self.workers_folder()
        if folder is not None:
            for child in sorted(folder.glob(f"*/{STATE_FILE}")):
                doing = read_published(child)
                if doing is not None:
                    found.append(doing)
        return found

    def _width(self) -> int:
        return max(self._tw.fullwidth - 1, 20)

    def _draw(self, running: list[Doing]) -> None:
        """The live line, one line under pytest's current one; the cursor is put back at
        the end of pytest's line, where pytest's next write expects it."""
        self._clear()
        if not running:
            return
        text = safe_text(f"{PREFIX} " + " · ".join(d.said() for d in running), self._width(),
                         collapse=True)
        column = self._tw.width_of_current_line + 1
        self._write(f"\n\x1b[2K\x1b[2m{text}\x1b[0m\x1b[1A\x1b[{column}G")
        self._live = True

    def _clear(self) -> None:
        if self._live:
            column = self._tw.width_of_current_line + 1
            self._write(f"\x1b[1B\r\x1b[2K\x1b[1A\x1b[{column}G")
            self._live = False

    def _beat(self, running: list[Doing]) -> None:
        """A line for each arm running past the heartbeat since its last line."""
        now = time.time()
        for doing in running:
            last = self._said.get(doing.arm_id, doing.started)
            if now - last < self.heartbeat:
                continue
            self._said[doing.arm_id] = now
            line = safe_text(f"{PREFIX} still running: {doing.said(now)}", self._width(),
                             collapse=True)
            # A whole line, its newline with it (a log shows a line when it ends), on a line
            # of its own; pytest's writer is told it is at the start of the next.
            self._write(("\n" if self._tw.width_of_current_line else "") + line + "\n")
            self._tw._current_line = ""
            if self.config.get_verbosity() > 0:  # -v: pytest names the item again
                tr = self.config.pluginmanager.get_plugin("terminalreporter")
                if tr is not None:
                    tr.currentfspath = None

    def _write(self, text: str) -> None:
        if self._fd is not None:
            data = text.encode("utf-8", "replace")
            while data:
                data = data[os.write(self._fd, data):]


def liveness_of(config: Any) -> Liveness | None:
    return config.pluginmanager.get_plugin(PLUGIN_NAME)
