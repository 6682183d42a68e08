"""--jaato-shard I/N: the split itself (pure logic).

The items here are stand-ins with the two attributes the split reads (a node id and
the arm's task), since the split never looks at anything else; the option's usage
errors (a pytest run each) are in tests/e2e/test_shard_usage_e2e.py, and the end-to-end
run of three shards against real daemons in test_shard_e2e.py.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest

from pytest_jaato_eval.pytest_layer.shard import Shard, assign, parse_shard, split, task_id_of


class FakeItem:
    def __init__(self, nodeid: str, task: str | None = None, marker=None, originalname=None):
        self.nodeid = nodeid
        self.name = nodeid.rsplit("::", 1)[-1]
        self.originalname = originalname
        if task is not None:
            self.arm = SimpleNamespace(task=SimpleNamespace(id=task))
        self._marker = marker

    def get_closest_marker(self, name):
        return self._marker if name == "jaato" else None


def suite(seed: int = 0) -> list[FakeItem]:
    """40 tasks of 1-9 arms each (sets x repeats), and a few ordinary tests."""
    rnd = random.Random(seed)
    items = []
    for t in range(40):
        task = f"task-{t:02d}"
        for s in ("echo", "other")[: rnd.randint(1, 2)]:
            for r in range(rnd.randint(1, 4)):
                items.append(FakeItem(f"tasks/{task}/task.yaml::{task}[{s}-r{r}]", task))
    items += [FakeItem(f"tests/test_plain.py::test_{i}") for i in range(5)]
    return items


def shards_of(items, total):
    return [split(items, Shard(i, total))[0] for i in range(1, total + 1)]


@pytest.mark.parametrize("total", [1, 2, 3, 7, 60])
def test_shards_are_disjoint_and_cover_every_item(total):
    items = suite()
    shards = shards_of(items, total)
    ids = [item.nodeid for shard in shards for item in shard]
    assert sorted(ids) == sorted(i.nodeid for i in items)  # every item exactly once
    for i in range(1, total + 1):
        kept, dropped = split(items, Shard(i, total))
        assert {x.nodeid for x in kept}.isdisjoint({x.nodeid for x in dropped})
        assert len(kept) + len(dropped) == len(items)


def test_every_arm_of_a_task_is_in_one_shard():
    items = suite(1)
    tasks = [{task_id_of(i) for i in shard} - {None} for shard in shards_of(items, 4)]
    assert all(tasks)
    assert sum(len(t) for t in tasks) == len(set().union(*tasks)) == 40  # no task in two


def test_the_split_does_not_depend_on_collection_order():
    items = suite(2)
    expected = [sorted(i.nodeid for i in s) for s in shards_of(items, 3)]
    for seed in range(5):
        shuffled = list(items)
        random.Random(seed).shuffle(shuffled)
        assert [sorted(i.nodeid for i in s) for s in shards_of(shuffled, 3)] == expected
        # ...and a shard's items keep the order they were collected in
        kept = split(shuffled, Shard(2, 3))[0]
        assert kept == [i for i in shuffled if i in kept]


def test_the_split_is_the_same_in_another_interpreter_with_another_hash_seed():
    weights = {f"task:t{i}": 1 + i % 5 for i in range(50)}
    code = ("import json, sys; from pytest_jaato_eval.pytest_layer.shard import assign; "
            "print(json.dumps(assign(json.loads(sys.argv[1]), 4)))")
    outs = {subprocess.run([sys.executable, "-c", code, json.dumps(weights)], check=True,
                           capture_output=True, text=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
            for seed in ("1", "2", "random")}
    assert len(outs) == 1
    assert json.loads(outs.pop()) == assign(weights, 4)


def test_shards_are_balanced_by_arm_count():
    weights = {f"task:t{i}": w for i, w in enumerate([9, 7, 6, 5, 4, 4, 3, 2, 2, 1, 1, 1])}
    owner = assign(weights, 3)
    loads = [sum(w for u, w in weights.items() if owner[u] == s) for s in (1, 2, 3)]
    assert sorted(loads) == [15, 15, 15]
    # More shards than units: each unit alone, the rest empty.
    assert sorted(assign({"task:a": 3, "task:b": 1}, 4).values()) == [1, 2]


def test_python_arms_shard_by_their_test_not_by_parameter():
    marker = SimpleNamespace(args=(), kwargs={"profile": "writer"})
    arms = [FakeItem(f"tests/test_py.py::test_writes[{s}-r{r}]", marker=marker,
                     originalname="test_writes") for s in ("a", "b") for r in range(3)]
    assert {task_id_of(a) for a in arms} == {"tests/test_py.py::test_writes"}
    # An arm given as the `jaato_arm` parameter names its task itself.
    given = FakeItem("tests/test_py.py::test_other[a-r0]", originalname="test_other")
    given.callspec = SimpleNamespace(params={"jaato_arm": SimpleNamespace(
        task=SimpleNamespace(id="tests/test_py.py::test_other"))})
    assert task_id_of(given) == "tests/test_py.py::test_other"
    plain = FakeItem("tests/test_x.py::test_y[1]", marker=SimpleNamespace(args=(), kwargs={}))
    assert task_id_of(plain) is None  # a bare `jaato` mark (YAML arms carry one) is no task
    owners = {i for i in range(1, 4) if set(split(arms, Shard(i, 3))[0]) == set(arms)}
    assert len(owners) == 1


@pytest.mark.parametrize("text", ["0/3", "4/3", "x/y", "1/0", "3", "", "1/3/5", "-1/3"])
def test_bad_shard_values_are_refused(text):
    with pytest.raises(ValueError) as exc:
        parse_shard(text)
    assert "\n" not in str(exc.value) and "I/N" in str(exc.value)


def test_good_shard_values():
    assert parse_shard("2/3") == Shard(2, 3) and str(parse_shard(" 1/1 ")) == "1/1"
