"""The store's arms as this run found them at its start: what `--resume` keeps (R3) and what
`--jaato-regrade` grades again.

Read once per process, on first use, by the side that has arms (the worker's collection, the
controller's summary): `RunContext` stays the run's frozen facts, and a run without tasks
never reads a store.
"""
from __future__ import annotations

import functools
from typing import Any

import pytest

from ..results.record import ArmRecord
from ..results.stores import latest_by_arm, read_records
from ..verdict import BLOCKED
from .run import CONTEXT_KEY

STORED_KEY = pytest.StashKey["StoredArms"]()


class StoredArms:
    """The stored arms this run resumes from or grades again, each read on first use."""

    def __init__(self, settings: Any):
        self.settings = settings

    @classmethod
    def of(cls, config) -> "StoredArms":
        """This process's one reading (config.stash), made at its first use."""
        stored = config.stash.get(STORED_KEY, None)
        if stored is None:
            stored = config.stash[STORED_KEY] = cls(config.stash[CONTEXT_KEY].settings)
        return stored

    @functools.cached_property
    def resumed(self) -> dict[str, ArmRecord]:
        """R3: with --resume, every stored arm, its latest record (a repeated id counts
        once)."""
        store = self.settings.store
        if not self.settings.resume or not store.exists():
            return {}
        return latest_by_arm(read_records(store))

    @functools.cached_property
    def done(self) -> dict[str, ArmRecord]:
        """The stored arms not to run again: all of them, or with --retry-blocked those whose
        latest record is not BLOCKED (a BLOCKED arm taught us nothing about the agent)."""
        if not self.settings.retry_blocked:
            return self.resumed
        return {arm: r for arm, r in self.resumed.items() if r.state != BLOCKED}

    @functools.cached_property
    def regraded(self) -> dict[str, ArmRecord]:
        """With --jaato-regrade, the arms of the store graded again: each arm's latest
        record."""
        if self.settings.regrade is None:
            return {}
        return latest_by_arm(read_records(self.settings.regrade))

    @functools.cached_property
    def resumed_hashes(self) -> dict[str, set[str]]:
        """Task id -> the task hashes its stored arms carry: R3's check, one lookup per
        task instead of a pass over the whole store per task."""
        out: dict[str, set[str]] = {}
        for record in self.resumed.values():
            if record.task_id is not None and record.task_hash is not None:
                out.setdefault(record.task_id, set()).add(record.task_hash)
        return out
