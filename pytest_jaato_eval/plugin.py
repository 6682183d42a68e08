"""pytest-jaato-eval: the hook table. Each hook delegates; the rules live in named modules.

    collect.py     task.yaml -> arms (X2)          outcome.py  PASS/FAIL/BLOCKED (X3, X4, X7)
    arm.py         one arm, end to end              run.py      daemon + store lifecycle (X1)
    controller.py  store writer + pivot printer (X5, X6)
    report/        HTML/PDF report, pytest-html columns (P4); commands.py: report/compare/validate
"""
from __future__ import annotations

import signal

import pytest

from . import outcome
from .collect import RUN_KEY, collect_file, deselect_resumed
from .controller import Controller
from .options import UsageError, add_options, read_settings
from .run import EvalRun, new_run_id
from .shard import select_shard
from .testing.model_server import scripted_model_fixture

# For task authors' own tests: a scripted OpenAI-compatible model on 127.0.0.1
# (docs/scripted-model.md). A fixture, so it lives with the hooks pytest loads.
scripted_model = pytest.fixture(scripted_model_fixture, name="scripted_model")


def pytest_addoption(parser):
    add_options(parser)


def pytest_configure(config):
    config.addinivalue_line("markers", "jaato: an arm of a jaato task (task.yaml)")
    try:
        settings = read_settings(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    workerinput = getattr(config, "workerinput", None)
    workerinput = workerinput or {}
    run = EvalRun(settings, workerinput.get("jaato_run_id") or new_run_id(),
                  controller=not workerinput, parent_dir=workerinput.get("jaato_run_root"))
    config.stash[RUN_KEY] = run
    if not workerinput:  # one store writer, one pivot printer, whatever -n is (X6)
        config.pluginmanager.register(Controller(run), "jaato-eval-controller")
        if config.pluginmanager.hasplugin("html"):  # P4 columns: hooks pytest-html declares
            from .report import pytest_html
            pytest_html.register(config)
    _stop_on_sigterm()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist: every worker shares the controller's run id, and keeps its run folder
    under the controller's, so nothing a crashed worker leaves is lost track of."""
    run = node.config.stash[RUN_KEY]
    node.workerinput["jaato_run_id"] = run.run_id
    node.workerinput["jaato_run_root"] = run.worker_root()


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """B1 under `-n`: a pooled task's arms go to one worker, where its one pool lives."""
    from .scheduling import pool_aware_scheduler
    return pool_aware_scheduler(config, log)


def pytest_collect_file(file_path, parent):
    return collect_file(file_path, parent)


@pytest.hookimpl(tryfirst=True)  # before anything that deselects per machine (--sw, a conftest)
def pytest_collection_modifyitems(config, items):
    select_shard(config, items)  # first: every machine splits the same collection
    deselect_resumed(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    record = getattr(item, "record", None)
    if call.when == "call" and record is not None:
        outcome.mark_report(report, item, record)
    return report


def pytest_report_teststatus(report, config):
    return outcome.report_status(report)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    run = session.config.stash.get(RUN_KEY, None)
    if run is None:
        return
    run.wind_down()  # the daemon stops while pytest reports; run.finish() at unconfigure
    kept = run.kept_folder()
    if kept is not None and run.controller:
        session.config.pluginmanager.get_plugin("jaato-eval-controller").notes.append(
            f"kept workspaces: {kept}")
    if run.controller:
        session.exitstatus = outcome.fold_exit_status(session.exitstatus, len(run.blocked))


def pytest_unconfigure(config):
    run = config.stash.get(RUN_KEY, None)
    if run is not None:
        run.finish()  # stops the daemon for good, removes what the run made


def _stop_on_sigterm() -> None:
    """SIGTERM ends the run like Ctrl-C, so the private daemon is stopped, not orphaned."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        def _interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        try:
            signal.signal(signal.SIGTERM, _interrupt)
        except ValueError:  # not the main thread
            pass
