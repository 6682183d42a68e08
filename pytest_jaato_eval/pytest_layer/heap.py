"""Python's cyclic garbage collector, kept off what collecting tasks builds.

Collecting thousands of arms allocates a few hundred thousand objects that live for
the whole session: the items, their marks and fixture closures, the tasks. Each time
enough of them pile up, the cyclic collector walks all of them again for garbage that
is not there, and pytest's own `gc.collect()` passes at the end walk them once more:
measured, a third of the CPU of `pytest --co` on 15,000 arms (bench/RESULTS.md). So,
only in a process that collects a task.yaml:

- from the first task collected to the end of collection, the collector is paused;
- at the end of collection, everything alive is frozen (`gc.freeze()`): left out of
  every later pass; what the arms allocate afterwards is collected as usual;
- as pytest's last clean-up, after its own final passes, everything is unfrozen, so
  the interpreter's last collection at exit (or the caller of `pytest.main()`, when
  it goes on) still finds and finalises it.

Where the collector is already off, nothing is touched. `gc.unfreeze()` has no
partial form: it also returns what was frozen before the run (CPython 3.12 starts with a
few hundred interpreter objects frozen), which only makes them visible to the collector.
"""
from __future__ import annotations

import gc

import pytest


class CollectionHeap:
    """One pytest run's pause and freeze of the collector; `release` undoes both."""

    def __init__(self) -> None:
        self._paused = False
        self._frozen = False

    def pause(self) -> None:
        """A task is being collected: no collector passes until collection ends."""
        if self._paused or self._frozen:
            return
        if gc.isenabled():
            gc.disable()
            self._paused = True

    def settle(self) -> None:
        """Collection is over: freeze what it built, and let the collector run again."""
        if not self._paused:
            return
        self._paused = False
        gc.freeze()
        self._frozen = True
        gc.enable()

    def release(self) -> None:
        """The run is over: everything frozen goes back to the collector."""
        if self._paused:
            self._paused = False
            gc.enable()
        if self._frozen:
            self._frozen = False
            gc.unfreeze()


HEAP_KEY = pytest.StashKey[CollectionHeap]()


def install(config) -> CollectionHeap:
    """The run's heap, released by a clean-up registered now, at configure: pytest runs
    clean-ups last-in first-out, so this one runs after pytest's own final collections."""
    heap = config.stash[HEAP_KEY] = CollectionHeap()
    config.add_cleanup(heap.release)
    return heap
