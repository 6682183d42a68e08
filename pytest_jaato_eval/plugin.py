"""pytest-jaato-eval: the hook table. Each hook delegates; the rules live in named modules.

    pytest_layer/   the pytest side: collect.py (task.yaml -> arm items), python_arms.py
                    (@pytest.mark.jaato tests), fixtures.py (the fixtures' bodies),
                    outcome.py (PASS/FAIL/BLOCKED on reports), run.py (the run's
                    context), worker.py (daemon, pools, workspaces, an arm's reports),
                    controller.py (store writer, pivot printer, exit status), fence.py,
                    task_folder.py, heap.py (collecting thousands of tasks), shard.py,
                    pytest_html.py; arms_found.py, the side only a run with arms loads
    arm.py          one arm, end to end, without pytest (engine/, graders/ below it)
    results/        the arm record, the store, the pivot; report/compare/validate/merge
    report/         the HTML/PDF documents

Loaded by every pytest run in the environment: this module and what it imports at the
top read options and walk folders, no more. The rest loads in one import (`_arms_found`)
when a task or an arm is first found, and registers the plugin objects that own the
run's other hooks: the controller (store, pivot, exit status) and the worker (daemon,
workspaces, an arm's reports).
"""
from __future__ import annotations

import pytest

from .pytest_layer.fence import MANIFEST, ignored, is_task_dir
from .pytest_layer.heap import HEAP_KEY, install as install_heap
from .pytest_layer.options import UsageError, add_options, read_settings
from .pytest_layer.run import CONTEXT_KEY, MarkerError, RunContext, arm_of, new_run_id
from .pytest_layer.shard import select_shard


def _arms_found():
    """The side of the hooks that only a run with arms needs: loaded once, at the first
    task or arm (or under xdist's distribution, at configure); registers the controller."""
    from .pytest_layer import arms_found  # the one lazy registration: pydantic, the task model, the store, the engine
    return arms_found


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
    # As xdist registers its DSession: under -n the workers collect, and the controller's
    # one store writer must be there before they report (X6).
    if (not workerinput and getattr(config.option, "dist", "no") != "no"
            and not config.option.collectonly):
        _arms_found().register_controller(config)
    # P4 columns, only when pytest-html is there and writes a report (its hooks exist then)
    if not workerinput and config.pluginmanager.hasplugin("html") and config.getoption(
            "htmlpath", None):
        from .pytest_layer import pytest_html  # pytest-html, optional: only when it reports
        pytest_html.register(config)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """B1 under `-n`: a pooled task's arms go to one worker, where its one pool lives."""
    from .pytest_layer.scheduling import pool_aware_scheduler  # xdist, optional: only under -n
    return pool_aware_scheduler(config, log)


def _declared_roots(task_dir):
    return _arms_found().declared_roots(task_dir)  # a task folder's manifest: a task is found


def pytest_ignore_collect(collection_path, config):
    return ignored(collection_path, _declared_roots) or None  # never a fixture or config root


def pytest_collect_directory(path, parent):  # before pytest's own Dir, after conftests
    if is_task_dir(path):  # one stat per folder walked, in every run
        return _arms_found().task_folder(path, parent)
    return None


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


# The arms' hooks are the plugin objects' own: the worker's (an arm's setup, reports and
# live phase: worker.py) and the controller's (store, pivot, exit status, the terminal's
# arm lines: controller.py). The fixtures stay here, where pytest finds them for every
# item, and delegate to the lazily loaded side.

@pytest.fixture(scope="session")
def jaato_daemon(request) -> str:
    """The socket path of the jaato daemon arms run on; one per process (per xdist worker).

    Default: with ``--jaato-socket``, that daemon; else a private daemon of this
    run, started on first use (early, in the background, once an arm is collected)
    and stopped at the end. Override it in a ``conftest.py`` to run arms on a daemon
    of your own: return its socket path. A daemon that cannot be reached makes every
    arm BLOCKED, with a record naming this fixture.
    """
    return _arms_found().jaato_daemon(request)


@pytest.fixture
def jaato_workspace(request):
    """The arm's workspace: a fresh copy of its fixture folder (a ``pathlib.Path``).

    Made before the agent starts, so a fixture of yours that requests it can seed
    files there; discarded after grading, or kept per ``--keep-workspaces`` /
    ``--keep-failed-workspaces``.
    """
    yield from _arms_found().jaato_workspace(request)


@pytest.fixture
def jaato_arm(request, jaato_daemon, jaato_workspace):
    """The arm this test is: ``id``, ``task``, ``profile_set``, ``repeat``, ``workspace``,
    and ``run(prompt)``, which runs its agent and returns the run's facts.

    A Python arm's test (``@pytest.mark.jaato(...)``) calls ``run`` and asserts on
    what the agent left; a task.yaml arm's item runs its manifest through it.
    """
    return _arms_found().jaato_arm(request, jaato_daemon, jaato_workspace)


@pytest.fixture
def jaato_regrade(request, jaato_workspace):
    """A task.yaml arm under ``--jaato-regrade``: its handle, whose ``regrade_task()``
    grades the arm's snapshot with the task's current graders (docs/regrading.md). The
    daemon (``jaato_daemon``) is asked for only when a judge grades the task."""
    return _arms_found().jaato_regrade(request, jaato_workspace)


@pytest.fixture(name="scripted_model")
def scripted_model():
    """A scripted OpenAI-compatible model on 127.0.0.1 (docs/scripted-model.md): yields
    ``start(turns, **kwargs)``; every model started through it stops at teardown."""
    yield from _arms_found().scripted_model_fixture()
