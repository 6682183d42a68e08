"""The cyclic collector's pause and freeze around a task collection (pytest_layer/heap.py):
only a run that collects a task.yaml touches it, and every run gives it back as it found it."""
from __future__ import annotations

import gc
import json
import textwrap

import pytest
import yaml

from pytest_jaato_eval.pytest_layer.heap import CollectionHeap

WATCH = """
import gc
import json
from pathlib import Path

import pytest

seen = {"before": gc.get_freeze_count()}


def pytest_itemcollected(item):
    seen.setdefault("collecting", gc.isenabled())


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    seen["after_collection"] = gc.isenabled()
    seen["frozen_after_collection"] = gc.get_freeze_count()


def pytest_unconfigure(config):
    Path("gc.json").write_text(json.dumps(seen))
"""


@pytest.fixture
def collector_restored():
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_pause_settle_release(collector_restored):
    gc.enable()
    heap = CollectionHeap()
    heap.pause()
    assert not gc.isenabled()
    built = [[] for _ in range(1000)]  # tracked objects made while paused
    before = gc.get_freeze_count()
    heap.settle()
    assert gc.isenabled() and gc.get_freeze_count() >= before + len(built)
    heap.release()
    assert gc.isenabled() and gc.get_freeze_count() < len(built)  # (CPython keeps a few frozen)
    heap.release()  # idempotent
    assert gc.isenabled()


def test_a_collector_already_off_is_left_alone(collector_restored):
    gc.disable()
    frozen = gc.get_freeze_count()
    heap = CollectionHeap()
    heap.pause()
    heap.settle()
    assert not gc.isenabled() and gc.get_freeze_count() == frozen
    heap.release()
    assert not gc.isenabled() and gc.get_freeze_count() == frozen


def test_release_after_a_collection_that_never_finished(collector_restored):
    gc.enable()
    heap = CollectionHeap()
    heap.pause()
    heap.release()  # e.g. Ctrl-C during collection: no settle came
    assert gc.isenabled()


def test_a_task_run_pauses_the_collector_only_while_collecting(pytester, collector_restored):
    gc.enable()
    d = pytester.path / "tasks" / "a"
    (d / "fixture").mkdir(parents=True)
    (d / ".jaato").mkdir()
    (d / "task.yaml").write_text(yaml.safe_dump({
        "id": "a", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": "w"},
        "graders": [{"kind": "script", "run": "true"}]}))
    pytester.makeconftest(textwrap.dedent(WATCH))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--co", "-q", "tasks")
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((pytester.path / "gc.json").read_text())
    assert seen["collecting"] is False and seen["after_collection"] is True
    assert seen["frozen_after_collection"] > seen["before"]
    # Given back at the run's end (CPython itself keeps a few hundred objects frozen).
    assert gc.isenabled() and gc.get_freeze_count() < seen["frozen_after_collection"]


def test_a_run_without_tasks_leaves_the_collector_alone(pytester, collector_restored):
    gc.enable()
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    pytester.makeconftest(textwrap.dedent(WATCH))
    frozen = gc.get_freeze_count()
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((pytester.path / "gc.json").read_text())
    assert seen["collecting"] is True and seen["frozen_after_collection"] == frozen
    assert gc.isenabled()
