"""What an arm is: (task, sample, profile set, repeat), and a task's arms (X2).

Kept apart from arm.py, which runs an arm and so imports the engine and the SDK:
collecting a task needs only this (`pytest --co` never loads the engine).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .model import DRIVER, Task
from .samples import Sample, first, render

DEFAULT_SET = "default"


@dataclass(frozen=True)
class Arm:
    """(task, sample, profile set, repeat). `profile_set` is the set the arm actually uses;
    `sample` is None for a task without samples."""

    task: Task
    profile_set: str | None
    repeat: int
    sample: Sample | None = None

    @property
    def set_name(self) -> str:
        return self.profile_set or DEFAULT_SET

    @property
    def sample_id(self) -> str | None:
        return self.sample.id if self.sample is not None else None

    @property
    def id(self) -> str:
        sample = f"[{self.sample.id}]" if self.sample is not None else ""
        return f"{self.task.id}{sample}@{self.set_name}#{self.repeat}"

    @property
    def ids(self) -> tuple[str, ...]:
        """Its id, and the id jaato-eval gives the same arm when it runs under the task's
        own set without --profile-set (`@default`): a store of either names it (R3)."""
        if self.profile_set is None or self.profile_set != self.task.harness.profile_set:
            return (self.id,)
        sample = f"[{self.sample.id}]" if self.sample is not None else ""
        return (self.id, f"{self.task.id}{sample}@{DEFAULT_SET}#{self.repeat}")

    # What the agent and the graders are given: the task's, rendered for the sample.
    @property
    def prompt(self) -> str | None:
        return render(self.task.input.prompt, self.sample)

    @property
    def agent_params(self) -> Mapping[str, Any] | None:
        return render(self.task.input.agent_params, self.sample)

    @property
    def params(self) -> Mapping[str, Any] | None:
        return render(self.task.input.params, self.sample)

    @property
    def grader_params(self) -> Mapping[str, Any]:
        """C4: a script grader sees the arm's agent_params (session) or params (driver)."""
        return (self.params if self.task.harness.kind == DRIVER else self.agent_params) or {}


def arms_of(task: Task, profile_sets: Sequence[str] | None, repeats: int | None,
            samples: int | None = None) -> list[Arm]:
    """X2: task x sample x profile set x repeat. The CLI's sets win over the task's own;
    `samples` (--jaato-samples) over the dataset's limit."""
    sets: list[str | None] = list(profile_sets) if profile_sets else [task.harness.profile_set]
    n = repeats if repeats is not None else task.repeats
    if samples is None and task.dataset is not None:
        samples = task.dataset.limit
    rows: tuple[Sample | None, ...] = first(task.samples, samples) or (None,)
    return [Arm(task, s, r, row) for row in rows for s in sets for r in range(n)]
