"""The cyclic collector's pause and freeze around a task collection (pytest_layer/heap.py):
only a run that collects a task.yaml touches it, and every run gives it back as it found it."""
from __future__ import annotations

import gc
import json
import sys
import types
import weakref
import textwrap

import pytest
import yaml

from pytest_jaato_eval.pytest_layer.heap import CollectionHeap

WATCH = """
import gc
import json
import sys
from pathlib import Path

import pytest

seen = {"before": gc.get_freeze_count()}


def pytest_itemcollected(item):
    seen.setdefault("collecting", gc.isenabled())
    seen.setdefault("threshold_collecting", gc.get_threshold()[0])


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    seen["after_collection"] = gc.isenabled()
    seen["threshold_after_collection"] = gc.get_threshold()[0]
    seen["frozen_after_collection"] = gc.get_freeze_count()


def pytest_unconfigure(config):
    Path("gc.json").write_text(json.dumps(seen))
"""


@pytest.fixture
def collector_restored():
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    (gc.enable if enabled else gc.disable)()
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def make_task(root, rel: str) -> None:
    d = root / rel
    (d / "fixture").mkdir(parents=True)
    (d / ".jaato").mkdir()
    (d / "task.yaml").write_text(yaml.safe_dump({
        "id": d.name, "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": "w"},
        "graders": [{"kind": "script", "run": "true"}]}))


def test_pause_settle_release(collector_restored):
    gc.enable()
    gc.set_threshold(700, 10, 10)
    heap = CollectionHeap()
    heap.pause()
    assert gc.isenabled() and gc.get_threshold() == (0, 10, 10)
    built = [[] for _ in range(1000)]  # tracked objects made while paused
    before = gc.get_freeze_count()
    heap.settle()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() >= before + len(built)
    heap.release()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() < len(built)  # (CPython keeps a few frozen)
    heap.release()  # idempotent
    assert gc.get_threshold() == (700, 10, 10)


def test_a_collector_already_off_is_left_alone(collector_restored):
    gc.disable()
    frozen = gc.get_freeze_count()
    heap = CollectionHeap()
    heap.pause()
    heap.settle()
    heap.release()
    assert not gc.isenabled() and gc.get_freeze_count() == frozen
    gc.enable()
    gc.set_threshold(0)  # automatic collection off the other way
    heap = CollectionHeap()
    heap.pause()
    heap.settle()
    assert gc.get_threshold()[0] == 0 and gc.get_freeze_count() == frozen


def test_release_after_a_collection_that_never_finished(collector_restored):
    gc.set_threshold(700, 10, 10)
    heap = CollectionHeap()
    heap.pause()
    heap.release()  # e.g. Ctrl-C during collection: no settle came
    assert gc.get_threshold() == (700, 10, 10)


def test_someone_elses_frozen_objects_stay_frozen(collector_restored):
    gc.set_threshold(700, 10, 10)
    kept = [[] for _ in range(1000)]
    gc.freeze()  # e.g. the outer run of a nested pytest run, or the program's own
    frozen = gc.get_freeze_count()
    heap = CollectionHeap()
    heap.pause()
    heap.settle()
    heap.release()
    assert gc.get_freeze_count() >= frozen >= len(kept)


def test_a_task_run_pauses_the_collector_only_while_collecting(pytester, collector_restored):
    gc.enable()
    gc.unfreeze()
    make_task(pytester.path, "tasks/a")
    pytester.makeconftest(textwrap.dedent(WATCH))
    threshold = gc.get_threshold()[0]
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--co", "-q", "tasks")
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((pytester.path / "gc.json").read_text())
    assert seen["collecting"] is True and seen["threshold_collecting"] == 0
    assert seen["threshold_after_collection"] == threshold
    assert seen["frozen_after_collection"] > seen["before"]
    # Given back at the run's end (CPython itself keeps a few hundred objects frozen).
    assert gc.get_threshold()[0] == threshold
    assert gc.get_freeze_count() < seen["frozen_after_collection"]


def test_a_gc_disable_made_during_collection_stands(pytester, collector_restored):
    gc.enable()
    make_task(pytester.path, "tasks/a")
    make_task(pytester.path, "tasks/zgroup/b")
    (pytester.path / "tasks" / "zgroup" / "conftest.py").write_text(
        "import gc\ngc.disable()\n")  # imported after a's task.yaml was collected
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--co", "-q", "tasks")
    assert result.ret == 0, result.stdout.str()
    assert not gc.isenabled()


def test_a_run_without_tasks_leaves_the_collector_alone(pytester, collector_restored):
    gc.enable()
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    # A test inside a task's fixture, named on the command line: pytest walks the task
    # folder on the way and builds its task.yaml's node, but no task is collected.
    make_task(pytester.path, "tasks/a")
    (pytester.path / "tasks" / "a" / "fixture" / "test_fx.py").write_text(
        "def test_fx():\n    pass\n")
    pytester.makeconftest(textwrap.dedent(WATCH))
    threshold = gc.get_threshold()[0]
    for args in (["test_plain.py"], ["tasks/a/fixture/test_fx.py"]):
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", *args)
        assert result.ret == 0, result.stdout.str()
        seen = json.loads((pytester.path / "gc.json").read_text())
        assert seen["threshold_collecting"] == threshold, args  # never paused: never frozen
        assert gc.isenabled() and gc.get_threshold()[0] == threshold


class _Node:
    """A tracked object in a cycle, as pytest's items are (item <-> its keywords)."""

    def __init__(self):
        self.me = self


def run_heap(session, nodes: int, ends_process: bool = True) -> list[weakref.ref]:
    heap = CollectionHeap(process_ends_with_run=ends_process)
    heap.pause()
    session.items = [_Node() for _ in range(nodes)]
    probes = [weakref.ref(n) for n in session.items]
    heap.settle(session)
    heap.release()
    return probes


def test_release_lets_the_session_drop_its_items_and_frees_them(collector_restored):
    gc.set_threshold(700, 10, 10)
    session = types.SimpleNamespace(items=[])
    probes = run_heap(session, 100)
    assert session.items == []
    gc.collect()  # what the interpreter's exit does first
    assert all(p() is None for p in probes), "garbage after release, not at module teardown"


def test_release_gives_the_session_a_new_list_and_leaves_the_old_one(collector_restored):
    held = []

    class Session:  # someone (a hook recorder) holds the list the run collected into
        items: list = []

        def __setattr__(self, name, value):
            if name == "items" and value:
                held.append(value)
            object.__setattr__(self, name, value)

    session = Session()
    probes = run_heap(session, 10)
    gc.collect()
    assert session.items == [] and len(held[0]) == 10
    assert all(p() is not None for p in probes)


def test_a_program_keeps_its_sessions_items(collector_restored):
    session = types.SimpleNamespace(items=[])
    probes = run_heap(session, 10, ends_process=False)
    gc.collect()
    assert len(session.items) == 10 and all(p() is not None for p in probes)


def test_no_pass_at_release_for_a_run_that_was_never_paused(collector_restored):
    session = types.SimpleNamespace(items=[_Node()])
    heap = CollectionHeap(process_ends_with_run=True)
    heap.settle(session)  # no task was collected: no pause came
    heap.release()
    assert len(session.items) == 1


AT_EXIT = """
import atexit
import gc

log = open("flushed.txt", "w")  # never closed: the exit flushes it
log.write("written at import\\n")
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count()))


class Summary:
    def pytest_sessionfinish(self, session, exitstatus):
        # Opened after collection, left to the interpreter to flush and close.
        self.out = open("summary.txt", "w")
        self.out.write(f"{session.testscollected} collected\\n")


def pytest_configure(config):
    config.pluginmanager.register(Summary(), "summary")
"""


@pytest.mark.parametrize("how", ["command", "program", "nested"])
def test_nothing_stays_frozen_and_the_exit_finalises_as_usual(pytester, how):
    make_task(pytester.path, "tasks/a")
    make_task(pytester.path, "tasks/b")
    (pytester.path / "tasks" / "conftest.py").write_text(AT_EXIT)
    args = ["-p", "no:cacheprovider", "--co", "-q", "tasks"]
    inner = (f"pytest.main({args!r})\n"
             "print('after main:', gc.get_freeze_count())\n")
    if how == "command":  # `python -m pytest`: pytest's console entry point
        result = pytester.run(sys.executable, "-m", "pytest", *args)
    elif how == "program":  # a program calling pytest.main() and going on
        result = pytester.run(sys.executable, "-c", "import gc, sys, pytest\n" + inner)
    else:  # a run inside a test of a `pytest` command that itself has no task
        (pytester.path / "test_outer.py").write_text(
            "import gc\nimport pytest\n\n\ndef test_outer():\n" +
            textwrap.indent(inner, "    "))
        result = pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s",
                              "test_outer.py")
    out = result.stdout.str()
    assert int(out.split("frozen at exit:")[1].split()[0]) < 1_000  # CPython keeps a few
    if how != "command":
        assert int(out.split("after main:")[1].split()[0]) < 1_000
    assert (pytester.path / "flushed.txt").read_text() == "written at import\n"
    assert (pytester.path / "summary.txt").read_text() == "2 collected\n"


ENDS = """
import pytest
from pytest_jaato_eval.pytest_layer.heap import process_ends_with_run


def pytest_configure(config):
    ends = process_ends_with_run(config)
    print("ends with run:", ends)
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker:  # a worker's output is not shown: it says so in a file
        with open("worker-ends.txt", "a") as out:
            out.write(f"{worker} {ends}\\n")
"""


@pytest.mark.parametrize("how, ends", [("command", True), ("program", False),
                                       ("nested", False), ("xdist worker", True)])
def test_only_the_pytest_command_and_a_worker_end_with_their_run(pytester, how, ends):
    pytester.makeconftest(ENDS)
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    args = ["-p", "no:cacheprovider", "-s", "test_one.py"]
    if how == "command":
        result = pytester.run(sys.executable, "-m", "pytest", *args)
    elif how == "program":
        result = pytester.run(sys.executable, "-c", f"import pytest; pytest.main({args!r})")
    elif how == "xdist worker":
        result = pytester.run(sys.executable, "-m", "pytest", *args, "-n", "1")
    else:  # a pytest command whose test runs pytest in-process, and builds a config itself
        (pytester.path / "test_outer.py").write_text(textwrap.dedent(f"""
            import pytest
            from pytest_jaato_eval.pytest_layer.heap import process_ends_with_run

            pytest_plugins = ["pytester"]


            def test_outer(pytester):
                pytester.makeconftest({ENDS!r})
                pytester.makepyfile(test_in="def test_in():\\n    pass\\n")
                assert pytest.main(["-p", "no:cacheprovider", "-s", "test_in.py"]) == 0
                config = pytester.parseconfigure("test_in.py")
                print("ends with run:", process_ends_with_run(config))
        """))
        result = pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s",
                              "test_outer.py")
    said = [line for line in result.outlines if line.startswith("ends with run:")]
    if how == "xdist worker":
        assert said == ["ends with run: True"], result.outlines  # the controller's
        assert (pytester.path / "worker-ends.txt").read_text() == "gw0 True\n"
    elif how == "nested":  # the outer command's, then the two inner ones
        assert said == ["ends with run: True", "ends with run: False",
                        "ends with run: False"], result.outlines
    else:
        assert said == [f"ends with run: {ends}"], result.outlines


def test_a_hook_recorder_still_sees_the_sessions_items(pytester):
    """pytester's in-process run keeps the session it recorded as it was."""
    make_task(pytester.path, "tasks/a")
    rec = pytester.inline_run("-p", "no:cacheprovider", "--co", "--profile-set=s0", "tasks")
    assert len(rec.getcall("pytest_collection_finish").session.items) == 1


LATE_READER = """
seen = {}


def pytest_configure(config):  # registered before the plugin's: runs after it
    config.add_cleanup(lambda: print("items at the end:", len(seen["session"].items)))


def pytest_sessionstart(session):
    seen["session"] = session
"""


@pytest.mark.parametrize("how, left", [("command", 0), ("program", 1)])
def test_the_pytest_command_lets_go_of_its_items_a_program_does_not(pytester, how, left):
    make_task(pytester.path, "tasks/a")
    pytester.makeconftest(LATE_READER)
    args = ["-p", "no:cacheprovider", "--co", "-q", "--profile-set=s0", "tasks"]
    if how == "command":
        result = pytester.run(sys.executable, "-m", "pytest", *args)
    else:
        result = pytester.run(sys.executable, "-c", f"import pytest; pytest.main({args!r})")
    assert f"items at the end: {left}" in result.stdout.str(), result.stdout.str()
