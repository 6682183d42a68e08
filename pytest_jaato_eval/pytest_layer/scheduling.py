"""xdist scheduling that keeps a pooled task's arms on one worker (B1, X6).

Each worker runs arms on its own private daemon, and a cascade pool lives on one
daemon, so every arm of a task with `budget:` must run on the same worker. Other
arms spread one by one, as under `--dist load`. (xdist's own `loadgroup` relies on
rewriting node ids, which pytest 9 no longer honours.)
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

from ..task.load import ManifestError, load_task
from .fence import MANIFEST


def pool_aware_scheduler(config, log):
    """Used for xdist's default `--dist load`; any other --dist the user chose stands."""
    if config.getvalue("dist") != "load":
        return None
    return _PoolAwareScheduling(config, log)


class _PoolAwareScheduling(LoadScopeScheduling):
    def __init__(self, config, log=None):
        super().__init__(config, log)
        self._root = Path(config.rootpath)

    def remove_node(self, node):
        """A crashed worker: its arm is BLOCKED, never run again; the rest is re-queued.

        (LoadScopeScheduling would re-queue the crashing item too, crashing worker
        after worker; plain `load` does not, and neither do we.)
        """
        workload = self.assigned_work.pop(node)
        if not self._pending_of(workload):
            return None
        crashitem = next(nodeid for unit in workload.values()
                         for nodeid, done in unit.items() if not done)
        for unit in workload.values():
            if crashitem in unit:
                unit[crashitem] = True
        self.workqueue.update({scope: unit for scope, unit in workload.items()
                               if not all(unit.values())})
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        if Path(path).name == MANIFEST and _pooled(str(self._root / path)):
            return path  # the whole task is one unit of work
        return nodeid  # every other item is its own unit: plain load balancing


@lru_cache(maxsize=None)
def _pooled(manifest: str) -> bool:
    try:
        return bool(load_task(manifest).budget)
    except ManifestError:
        return False
