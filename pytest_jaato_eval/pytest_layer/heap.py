"""Python's cyclic garbage collector, kept off what collecting tasks builds.

Collecting thousands of arms allocates a few hundred thousand objects that live for
the whole session: the items, their marks and fixture closures, the tasks. Each time
enough of them pile up, the cyclic collector walks all of them again for garbage that
is not there, and pytest's own `gc.collect()` passes at the end walk them once more:
measured, about a third of the CPU of `pytest --co` on 15,000 arms (bench/JOURNAL.md).
So, only in a process that collects a task.yaml:

- from the first task collected to the end of collection, automatic collections are
  paused (generation 0's threshold set to 0; `gc.isenabled()` is left alone, so a
  `gc.disable()` made meanwhile by anyone else stands);
- at the end of collection, one young-generation pass frees what collection threw
  away, and what is left alive is frozen (`gc.freeze()`): out of every later pass,
  pytest's final ones included; what the arms allocate is collected as usual;
- as pytest's last clean-up, after its own final passes, it is unfrozen. Where only the
  interpreter's exit follows the run (the `pytest` command, an xdist worker), the
  session also lets go of its list of items (a new empty list: whoever else holds the
  old one keeps it), so the items, with the nodes and tasks only they held, are
  garbage for the exit's first pass. Left reachable until the exit's module teardown,
  they would be walked by each of its passes before the last one freed them: about
  0.4 s more at 15,000 arms. A program that called `pytest.main()` keeps its session
  as it was.

`gc.unfreeze()` has no partial form, so nothing is frozen where someone else already
froze objects after this module was imported (a program's own `gc.freeze()`, or the
outer run of a nested, in-process pytest run): their frozen objects stay frozen. Where
automatic collection is already off, nothing is touched.
"""
from __future__ import annotations

import gc
import sys
from types import FrameType

import _pytest.config as pytest_config
import pytest

# What was frozen before any run here: CPython itself starts with a few hundred objects
# frozen. More than this at collection's end means someone else froze objects.
_FROZEN_AT_IMPORT = gc.get_freeze_count()


class CollectionHeap:
    """One pytest run's pause and freeze of the collector; `release` undoes both."""

    def __init__(self, *, process_ends_with_run: bool | None = None) -> None:
        self._thresholds: tuple[int, ...] | None = None  # set while paused
        self._frozen = False
        self._done = False
        self._session = None  # whose items are let go at release
        self._ends_process = process_ends_with_run  # None: asked when tasks were collected

    def pause(self) -> None:
        """A task is being collected: no automatic passes until collection ends."""
        if self._thresholds is not None or self._done:
            return
        thresholds = gc.get_threshold()
        if gc.isenabled() and thresholds[0] > 0:
            self._thresholds = thresholds
            gc.set_threshold(0, *thresholds[1:])

    def settle(self, session=None) -> None:
        """Collection is over: free its garbage, freeze what lives, collect again as before."""
        if self._thresholds is None:
            return
        thresholds, self._thresholds = self._thresholds, None
        self._done = True
        self._session = session
        if self._ends_process is None and session is not None:
            self._ends_process = process_ends_with_run(session.config)
        gc.collect(0)
        if gc.get_freeze_count() <= _FROZEN_AT_IMPORT:
            gc.freeze()
            self._frozen = True
        if gc.get_threshold()[0] == 0:  # unless someone set their own meanwhile
            gc.set_threshold(*thresholds)

    def release(self) -> None:
        """The run is over: the collector as it was, everything frozen given back, and
        where the process ends with the run, the session's items let go."""
        if self._thresholds is not None:  # collection never finished (Ctrl-C, an error)
            thresholds, self._thresholds = self._thresholds, None
            if gc.get_threshold()[0] == 0:
                gc.set_threshold(*thresholds)
        if self._frozen:
            self._frozen = False
            gc.unfreeze()
        session, self._session = self._session, None
        if session is not None and self._ends_process:
            session.items = []  # a new list: whoever holds the old one keeps it


HEAP_KEY = pytest.StashKey[CollectionHeap]()


def _entry_points() -> tuple[frozenset, frozenset]:
    """The code of pytest's entry functions: (the run's own, the console's)."""
    def codes(*names: str) -> frozenset:
        return frozenset(getattr(pytest_config, n).__code__ for n in names
                         if hasattr(pytest_config, n))

    return codes("main", "_main"), codes("console_main", "_console_main")


def process_ends_with_run(config) -> bool:
    """Whether only the interpreter's exit follows this run: an xdist worker, or the
    `pytest` command, i.e. the entry function holding this very `config` was called by
    pytest's console entry point (which pytest documents as not for programmatic use).
    A program's `pytest.main()`, a run nested in a test and a config made without
    `main` (pytester's `parseconfigure`) are not."""
    if hasattr(config, "workerinput"):
        return True
    runs, console = _entry_points()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code in runs and frame.f_locals.get("config") is config:
            break
        frame = frame.f_back
    while frame is not None and frame.f_code in runs:
        frame = frame.f_back  # main() calls _main() in pytest 9
    return frame is not None and frame.f_code in console


def install(config) -> CollectionHeap:
    """The run's heap, released by a clean-up registered now, at configure: pytest runs
    clean-ups last-in first-out, so this one runs after pytest's own final collections."""
    heap = config.stash[HEAP_KEY] = CollectionHeap()
    config.add_cleanup(heap.release)
    return heap
