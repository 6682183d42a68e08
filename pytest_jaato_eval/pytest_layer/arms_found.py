"""What a run that has arms loads: the hook table's side for task.yaml files and
`@pytest.mark.jaato` tests, and the plugin objects that own the rest.

plugin.py imports this module once: at the first task folder, task.yaml or `jaato` marker
it sees, at the first use of one of its fixtures, or at configure when xdist distributes
(the workers collect; the controller learns of arms from their reports). A run with
none of these never loads it. It and the modules below it import what they use at the
top: pydantic and the task model (collect.py, python_arms.py), the store, pivot and
reports (controller.py), the engine (worker.py); arm.py and the SDK load when an arm
first runs (run.arm_side).

The plugin objects are registered where they apply: the `Controller` (with `Liveness`)
once per run on the controller process, here, when the run is first known to have tasks
or arms; the `Worker` in each process that collects an arm (`Worker.of`).
"""
from __future__ import annotations

from pathlib import Path

from ..task import preflight
from ..testing.fixture import scripted_model_fixture
from .collect import TaskFile
from .controller import Controller
from .fixtures import jaato_arm, jaato_regrade, jaato_workspace
from .liveness import PLUGIN_NAME as LIVENESS, Liveness
from .python_arms import (MarkerErrorNode, check_takes_arm, collected, first_samples,
                          parametrize)
from .run import CONTEXT_KEY, CONTROLLER
from .stored import StoredArms
from .task_folder import collect_task_folder, declared_roots
from .worker import Worker

__all__ = ["collected", "declared_roots", "first_samples", "jaato_arm", "jaato_daemon",
           "jaato_regrade", "jaato_workspace", "marker_error", "parametrize_arm",
           "register_controller", "scripted_model_fixture", "task_file", "task_folder"]


def register_controller(config) -> None:
    """The run's one store writer and pivot printer (X6), registered once, on the
    controller only (never on an xdist worker); with it the live line of long arms."""
    if hasattr(config, "workerinput") or config.pluginmanager.has_plugin(CONTROLLER):
        return
    # A process may run pytest more than once (an IDE, pytest.main in a loop): each run
    # reads its config roots afresh.
    preflight.clear_cache()
    controller = Controller(config.stash[CONTEXT_KEY], StoredArms.of(config))
    config.pluginmanager.register(controller, CONTROLLER)
    heartbeat = controller.settings.heartbeat
    if heartbeat:  # a long arm shows it is alive (--jaato-heartbeat 0: silent)
        config.pluginmanager.register(Liveness(config, heartbeat, controller.workers_folder),
                                      LIVENESS)


def task_folder(path: Path, parent):
    register_controller(parent.config)
    return collect_task_folder(path, parent)


def task_file(parent, path: Path) -> TaskFile:
    register_controller(parent.config)
    return TaskFile.from_parent(parent, path=path)


def parametrize_arm(metafunc) -> None:
    """A `@pytest.mark.jaato` test: checked to take `jaato_arm`, then one item per arm."""
    register_controller(metafunc.config)
    check_takes_arm(metafunc)
    parametrize(metafunc)


def marker_error(collector, name: str, message: str) -> MarkerErrorNode:
    """A marker mistake: that test's collection error; the module's other tests still collect."""
    register_controller(collector.config)
    return MarkerErrorNode.from_parent(collector, name=name, message=message)


def jaato_daemon(request) -> str:
    """The default daemon: this process's worker's (a test that is no arm may use it too)."""
    return Worker.of(request.config).socket()
