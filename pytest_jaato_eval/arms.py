"""What an arm is: (task, profile set, repeat), and a task's arms (X2).

Kept apart from arm.py, which runs an arm and so imports the engine and the SDK:
collecting a task needs only this (`pytest --co` never loads the engine).
"""
from __future__ import annotations

from dataclasses import dataclass

from .manifest import Task

DEFAULT_SET = "default"


@dataclass(frozen=True)
class Arm:
    """(task, profile set, repeat). `profile_set` is the set the arm actually uses."""

    task: Task
    profile_set: str | None
    repeat: int

    @property
    def set_name(self) -> str:
        return self.profile_set or DEFAULT_SET

    @property
    def id(self) -> str:
        return f"{self.task.id}@{self.set_name}#{self.repeat}"


def arms_of(task: Task, profile_sets: list[str] | None, repeats: int | None) -> list[Arm]:
    """X2: task x profile set x repeat. The CLI's sets win over the task's own."""
    sets: list[str | None] = list(profile_sets) if profile_sets else [task.profile_set]
    n = repeats if repeats is not None else task.repeats
    return [Arm(task, s, r) for s in sets for r in range(n)]
