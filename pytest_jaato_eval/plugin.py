"""pytest-jaato-eval: the hook table. Each hook delegates; the rules live in named modules.

    collect.py      task.yaml -> arm items (X2)     python_arms.py  @pytest.mark.jaato tests
    fence.py        never collect a fixture or config root       shard.py  --jaato-shard I/N
    fixtures.py     jaato_daemon, jaato_workspace, jaato_arm, scripted_model
    arm.py          one arm, end to end              outcome.py      PASS/FAIL/BLOCKED (X3, X4, X7)
    run.py          run settings (stash) + the worker: daemon, pools, workspaces (X1)
    controller.py   store writer + pivot printer + exit status (X5, X6)
    report/         HTML/PDF report, pytest-html columns (P4); commands.py: report/compare/validate

Loaded by every pytest run in the environment: this module imports only what the
hooks need, and everything else (the SDK, the engine, the reports, the scripted
model) loads when a task or an arm is first found.
"""
from __future__ import annotations

import pytest

from .fixtures import jaato_arm, jaato_daemon, jaato_workspace, scripted_model  # noqa: F401
from .options import UsageError, add_options, read_settings
from .run import CONTEXT_KEY, WORKER_KEY, RunContext, arm_of, new_run_id

MANIFEST_NAME = "task.yaml"


def pytest_addoption(parser):
    add_options(parser)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "jaato(config_root, fixture, profile, profile_set=None, repeats=1): an arm "
                   "of a jaato task; on a test taking `jaato_arm`, the test is an arm written in "
                   "Python (docs/python-arms.md)")
    try:
        settings = read_settings(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    workerinput = getattr(config, "workerinput", None) or {}
    config.stash[CONTEXT_KEY] = RunContext(
        settings, workerinput.get("jaato_run_id") or new_run_id(),
        parent_dir=workerinput.get("jaato_run_root"))
    if not workerinput:  # one store writer, one pivot printer, whatever -n is (X6)
        from .controller import Controller
        config.pluginmanager.register(Controller(config.stash[CONTEXT_KEY]),
                                      "jaato-eval-controller")
        if config.pluginmanager.hasplugin("html"):  # P4 columns: hooks pytest-html declares
            from .report import pytest_html
            pytest_html.register(config)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """B1 under `-n`: a pooled task's arms go to one worker, where its one pool lives."""
    from .scheduling import pool_aware_scheduler
    return pool_aware_scheduler(config, log)


def pytest_ignore_collect(collection_path, config):
    from .fence import ignored
    return ignored(collection_path) or None  # never a fixture or config root


def pytest_collect_file(file_path, parent):
    if file_path.name == MANIFEST_NAME:
        from .collect import collect_file
        return collect_file(file_path, parent)
    return None


def pytest_generate_tests(metafunc):
    if "jaato_arm" in metafunc.fixturenames and metafunc.definition.get_closest_marker("jaato"):
        from .python_arms import parametrize
        parametrize(metafunc)


@pytest.hookimpl(tryfirst=True)  # before anything that deselects per machine (--resume, -k)
def pytest_collection_modifyitems(config, items):
    if config.option.jaato_shard:
        from .shard import select_shard
        select_shard(config, items)  # every machine splits the same collection


def pytest_itemcollected(item):
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "jaato_arm" in callspec.params and arm_of(item) is None:
        from .outcome import identity_properties
        from .run import ARM_KEY
        arm = callspec.params["jaato_arm"]
        item.stash[ARM_KEY] = arm
        item.user_properties.extend(identity_properties(arm))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if arm_of(item) is not None:
        from .outcome import on_report
        on_report(item, call, report, item.config.stash[WORKER_KEY])
    return report


def pytest_report_teststatus(report, config):
    if getattr(report, "jaato_record", None) is not None:
        from .outcome import report_status
        return report_status(report)
    return None
