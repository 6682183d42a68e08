"""pytest-jaato-eval: the hook table. Each hook delegates; the rules live in named modules.

    pytest_layer/   the pytest side: collect.py (task.yaml -> arm items), python_arms.py
                    (@pytest.mark.jaato tests), fixtures.py (jaato_daemon, jaato_workspace,
                    jaato_arm), outcome.py (PASS/FAIL/BLOCKED on reports), run.py (the run's
                    context), worker.py (daemon, pools, workspaces), controller.py (store
                    writer, pivot printer, exit status), fence.py, task_folder.py,
                    heap.py (collecting thousands of tasks), shard.py, pytest_html.py
    arm.py          one arm, end to end, without pytest (engine/, graders/ below it)
    results/        the arm record, the store, the pivot; report/compare/validate/merge
    report/         the HTML/PDF documents

Loaded by every pytest run in the environment: this module imports only what the
hooks need, and everything else (the SDK, the engine, the reports, the scripted
model) loads when a task or an arm is first found.
"""
from __future__ import annotations

import pytest

from .pytest_layer.controller import Controller
from .pytest_layer.fence import MANIFEST, ignored, is_task_dir
from .pytest_layer.fixtures import (  # noqa: F401 - pytest finds fixtures in the plugin module
    end_guard, jaato_arm, jaato_daemon, jaato_regrade, jaato_workspace, scripted_model)
from .pytest_layer.heap import HEAP_KEY, install as install_heap
from .pytest_layer.liveness import PLUGIN_NAME as LIVENESS, Liveness, arm_begins, arm_ends
from .pytest_layer.options import UsageError, add_options, read_settings
from .pytest_layer.outcome import label, on_report
from .pytest_layer.progress import teststatus
from .pytest_layer.run import CONTEXT_KEY, WORKER_KEY, MarkerError, RunContext, arm_of, new_run_id
from .pytest_layer.shard import select_shard
from .pytest_layer.task_folder import collect_task_folder


def pytest_addoption(parser):
    add_options(parser)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "jaato(config_root, fixture, profile, profile_set=None, repeats=1): an arm "
                   "of a jaato task; on a test taking `jaato_arm`, the test is an arm written in "
                   "Python (docs/python-arms.md)")
    install_heap(config)
    try:
        settings = read_settings(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    workerinput = getattr(config, "workerinput", None) or {}
    config.stash[CONTEXT_KEY] = RunContext(
        settings, workerinput.get("jaato_run_id") or new_run_id(),
        parent_dir=workerinput.get("jaato_run_root"), worker_id=workerinput.get("workerid"))
    if not workerinput:  # one store writer, one pivot printer, whatever -n is (X6)
        controller = Controller(config.stash[CONTEXT_KEY])
        config.pluginmanager.register(controller, "jaato-eval-controller")
        if settings.heartbeat:  # a long arm shows it is alive (--jaato-heartbeat 0: silent)
            config.pluginmanager.register(
                Liveness(config, settings.heartbeat, controller.workers_folder), LIVENESS)
        # P4 columns, only when pytest-html is there and writes a report (its hooks exist then)
        if config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None):
            from .pytest_layer import pytest_html  # pytest-html, optional: only when it reports
            pytest_html.register(config, controller)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """B1 under `-n`: a pooled task's arms go to one worker, where its one pool lives."""
    from .pytest_layer.scheduling import pool_aware_scheduler  # xdist: only under -n
    return pool_aware_scheduler(config, log)


def pytest_ignore_collect(collection_path, config):
    return ignored(collection_path) or None  # never a fixture or config root


def pytest_collect_directory(path, parent):  # before pytest's own Dir, after conftests
    if is_task_dir(path):  # one stat per folder walked, in every run
        return collect_task_folder(path, parent)
    return None


def _arms_found():
    """The side of the hooks that only a run with arms needs (task.yaml files, `jaato`
    markers): loaded once, at the first of them; a run with neither never imports it."""
    from .pytest_layer import arms_found  # the one lazy load: pydantic, the task model, the worker
    return arms_found


def pytest_collect_file(file_path, parent):
    if file_path.name == MANIFEST:
        return _arms_found().task_file(parent, file_path)
    return None


@pytest.hookimpl(trylast=True)  # after the test's own parametrize: its samples come first
def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("jaato"):
        _arms_found().parametrize_arm(metafunc)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    try:
        return (yield)
    except MarkerError as exc:  # that test's error; the module's other tests still collect
        return _arms_found().marker_error(collector, name, str(exc))


# A wrapper, so before every other impl (a conftest's tryfirst too): whatever deselects per
# machine (--resume, -k, a conftest) comes after the split, and every machine splits alike.
@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    if config.option.jaato_samples:  # Python arms' (a task.yaml collects only N samples)
        _arms_found().first_samples(config, items, config.option.jaato_samples)
    if config.option.jaato_shard:
        select_shard(config, items)  # every machine splits the same collection
    return (yield)


def pytest_collection_finish(session):
    heap = session.config.stash.get(HEAP_KEY, None)
    if heap is not None:
        heap.settle(session)  # the collector runs again; what collection built is frozen


def pytest_itemcollected(item):
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "jaato_arm" in callspec.params and arm_of(item) is None:
        _arms_found().collected(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    arm = arm_of(item)
    if arm is not None:
        if call.when == "call":
            end_guard()  # the body's share of the arm ceiling ends with it
        label(item, arm)  # before the report copies the item's user properties
    report = yield
    if arm is not None:
        on_report(item, call, report, item.config.stash[WORKER_KEY])
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    arm_begins(item)  # the arm's clock and phase, for the live line (liveness.py)


def pytest_runtest_logfinish(nodeid, location):
    arm_ends()


def pytest_report_teststatus(report, config):
    return teststatus(report, config)  # an arm's line, its verdict, cost and time; else None
