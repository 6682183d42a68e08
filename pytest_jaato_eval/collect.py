"""task.yaml files become pytest items: one ArmItem per task x profile set x repeat (X2)."""
from __future__ import annotations

import re

import pytest

from . import outcome
from .arm import Arm, arms_of, run_arm
from .engine.budget import ceiling_warning
from .manifest import ManifestError, load_task
from .run import EvalRun

RUN_KEY = pytest.StashKey[EvalRun]()
MANIFEST_NAME = "task.yaml"


def _node_safe(text: str) -> str:
    """Node names must not contain `::` or whitespace; keep everything else readable."""
    return re.sub(r"\s+", "_", text.replace("::", ":_:"))


class TaskFile(pytest.File):
    """One task.yaml. A bad manifest is this file's collection error: one line (M2)."""

    def collect(self):
        run = self.config.stash[RUN_KEY]
        task = load_task(self.path)
        first = run.task_paths.setdefault(task.id, self.path)
        if first != self.path:  # M1
            raise ManifestError(self.path, "id", f"task id {task.id!r} is also declared by "
                                                 f"{first}; task ids must be unique")
        settings = run.settings
        for done in run.resumed.values():  # R3: resuming on a changed task would mix two tasks
            if done.get("task_id") == task.id and done.get("task_hash") not in (None, task.content_hash):
                raise ManifestError(self.path, "resume", (
                    f"task {task.id!r} changed since {settings.store} was written (its manifest, "
                    f"fixture or config root differs); run without --resume to start a new store"))
        warning = ceiling_warning(task.id, task.budget, settings.ceiling.seconds)
        if warning:  # B4
            self.warn(pytest.PytestWarning(warning))
        for arm in arms_of(task, settings.profile_sets, settings.repeats):
            name = f"{_node_safe(task.id)}[{_node_safe(arm.set_name)}-r{arm.repeat}]"
            item = ArmItem.from_parent(self, name=name, arm=arm)
            item.add_marker(pytest.mark.jaato)
            item.extra_keyword_matches.update({task.id, arm.set_name, arm.id})
            yield item

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ManifestError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)


class ArmItem(pytest.Item):
    """One arm. Its test is the arm's run; its assertions are the graders."""

    def __init__(self, *, arm: Arm, **kwargs):
        super().__init__(**kwargs)
        self.arm = arm
        self.record: dict | None = None

    def runtest(self) -> None:
        run = self.config.stash[RUN_KEY]
        self.record = run_arm(self.arm, run.daemon, run.arm_settings(), run)
        # JUnit reads properties off the item's reports (X7).
        self.user_properties.extend(outcome.junit_properties(self.record))
        outcome.raise_for(self.record)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, outcome.ArmFailed):
            return outcome.verdict_table(excinfo.value.record)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, 0, self.arm.id


def deselect_resumed(config, items) -> None:
    """R3: with --resume, arms already in the store are deselected, not run again."""
    run = config.stash[RUN_KEY]
    if not run.done:
        return
    done = [i for i in items if isinstance(i, ArmItem) and i.arm.id in run.done]
    if done:
        items[:] = [i for i in items if i not in done]
        config.hook.pytest_deselected(items=done)


def collect_file(file_path, parent):
    """pytest_collect_file: only files named task.yaml are tasks."""
    if file_path.name == MANIFEST_NAME:
        return TaskFile.from_parent(parent, path=file_path)
    return None
