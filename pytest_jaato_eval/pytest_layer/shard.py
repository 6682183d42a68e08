"""`--jaato-shard I/N`: which of the collected arms this machine runs (docs/running.md).

A sweep split over N machines must agree, on every machine, about which shard owns
which arm — without the machines talking to each other. So the split is a pure
function of what is collected and N:

- The unit is a task's sample: all of its arms (every profile set and repeat) go to
  one shard, so a sample's sets are compared on one machine. A task with a budget
  pool is one unit whatever its samples, so its pool lives on one machine's daemon;
  so is a task without samples. An item that is not an arm (an ordinary test in the
  same run) is a unit of its own, keyed by node id.
- Units are dealt heaviest first (most arms), each to the shard with the fewest arms
  so far (the lowest index on a tie). Equal weights are ordered by a SHA-256 of the
  unit's key, not by collection order and not by Python's per-process salted hash(),
  so the same checkout and command line give the same split on any machine, Python
  and collection order, and neighbouring task ids do not crowd into one shard.

The split is computed over everything collected, before `-k`, `-m` or `--resume`
deselect anything, so those compose: each applies within the shard.
"""
from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from .run import ARM_KEY


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(text: str) -> Shard:
    """`I/N` with 1 <= I <= N. ValueError carries the one line the user sees."""
    expected = "expected I/N, shard I of N with 1 <= I <= N (e.g. 2/3)"
    index, sep, total = str(text).strip().partition("/")
    try:
        if not sep:
            raise ValueError
        shard = Shard(int(index), int(total))
    except ValueError:
        raise ValueError(f"{expected}, got {text!r}") from None
    if shard.total < 1:
        raise ValueError(f"{expected}, got {text!r}: N must be at least 1")
    if not 1 <= shard.index <= shard.total:
        raise ValueError(f"{expected}, got {text!r}: I counts from 1 to N "
                         f"(a 0-based index, like Kubernetes' JOB_COMPLETION_INDEX, needs +1)")
    return shard


def task_id_of(item) -> str | None:
    """The task an item is an arm of, or None for an item that is no arm. The one place
    the split learns an item's task.

    A YAML arm carries its arm; an arm written in Python (a test function marked
    `@pytest.mark.jaato(...)`) gets it as its `jaato_arm` parameter, and its task id
    is its test's node id without the parameters.
    """
    arm = getattr(item, "arm", None)
    if arm is None:
        callspec = getattr(item, "callspec", None)
        arm = callspec.params.get("jaato_arm") if callspec is not None else None
    task_id = getattr(getattr(arm, "task", None), "id", None)
    if isinstance(task_id, str):
        return task_id
    marker = item.get_closest_marker("jaato") if hasattr(item, "get_closest_marker") else None
    if marker is not None and (marker.args or marker.kwargs):
        original = getattr(item, "originalname", None)
        if original and item.nodeid.endswith(item.name):
            return item.nodeid[: len(item.nodeid) - len(item.name)] + original
        return item.nodeid
    return None


def unit_of(item) -> str:
    """What is kept together in one shard: the item's task's sample (the task, when it
    has a budget pool), or else the item itself."""
    task = task_id_of(item)
    if task is None:
        return f"item:{item.nodeid}"
    arm = _arm_of(item)
    sample = getattr(arm, "sample", None)
    if sample is not None and not getattr(arm.task, "budget", None):
        return f"sample:{task}[{sample.id}]"
    return f"task:{task}"


def _arm_of(item):
    """The item's arm as collection left it (with its sample), if it is one."""
    stash = getattr(item, "stash", None)
    return stash.get(ARM_KEY, None) if stash is not None else getattr(item, "arm", None)


def _stable(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def assign(weights: dict[str, int], total: int) -> dict[str, int]:
    """unit -> its shard (1-based), by weight: heaviest first, each to the lightest shard.

    Depends only on the weights and `total`, never on the order of `weights`.
    """
    loads = [(0, i) for i in range(1, total + 1)]  # (arms so far, shard index)
    out: dict[str, int] = {}
    for unit in sorted(weights, key=lambda u: (-weights[u], _stable(u), u)):
        load, index = heapq.heappop(loads)
        out[unit] = index
        heapq.heappush(loads, (load + weights[unit], index))
    return out


def split(items: Iterable, shard: Shard) -> tuple[list, list]:
    """(kept, deselected) for this shard, both in collection order."""
    items = list(items)
    units = [unit_of(item) for item in items]
    owner = assign(dict(Counter(units)), shard.total)
    kept: list = []
    dropped: list = []
    for item, unit in zip(items, units):
        (kept if owner[unit] == shard.index else dropped).append(item)
    return kept, dropped


def select_shard(config, items: list) -> None:
    """pytest_collection_modifyitems: keep this shard's items; report the rest deselected.

    Must run before anything that deselects per machine (`--resume`), so every machine
    splits the same collection.
    """
    if not getattr(config.option, "jaato_shard", None):
        return
    kept, dropped = split(items, parse_shard(config.option.jaato_shard))  # checked at configure
    if dropped:
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)
