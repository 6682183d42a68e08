"""Which of a config root's files belong to which grader: what each grader's own view of
it leaves out (docs/tasks.md, "What a grader sees"), and which of the session's files a
grader names too (preflight says so).

A grader's own files are the ones its manifest entry names: a script grader's `file`, a
processor's `script`, a path under `$JAATO_EVAL_CONFIG_ROOT` that a `run` command spells out
(a file or a folder), a judge's profile under every profile set. Everything else in the
config root (profiles, shared helpers, data no grader names) every grader sees; the agent's
copy holds only what jaato reads for a session, whatever a grader names
(task/session_files.py).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import session_files
from .model import AnyGrader, JudgeGrader

def own_files(task: Any, spec: AnyGrader) -> set[str]:
    """The config root's files `spec`, one of `task`'s graders, names (relative paths)."""
    return spec.own_files(Path(task.config_root))


def graders_own(task: Any) -> set[str]:
    """Every grader's own files, but for a judge that runs on the agent's own profile (the
    agent's session binds that profile too). The agent's copy of the config root is not
    drawn from this (task/session_files.py): it holds only what a session reads."""
    own: set[str] = set()
    for spec in task.graders:
        if isinstance(spec, JudgeGrader) and spec.profile == task.harness.profile:
            continue
        own |= own_files(task, spec)
    return own


def hidden_from(task: Any, index: int) -> set[str]:
    """What grader `index`'s view of the config root leaves out: the files the other graders
    name and it does not."""
    mine = own_files(task, task.graders[index])
    others: set[str] = set()
    for i, spec in enumerate(task.graders):
        if i != index:
            others |= own_files(task, spec)
    return {rel for rel in others - mine
            if not any(_within(m, rel) for m in mine)}  # a folder of its own stays whole


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def shared_with_session(task: Any) -> list[str]:
    """One line per grader whose own files are also the session's (task/session_files.py):
    the agent's copy keeps them, so the agent can read what that grader reads there."""
    session = session_files.kept(task)
    lines = []
    for index, spec in enumerate(task.graders):
        if isinstance(spec, JudgeGrader):
            continue  # a judge's profile is left out of the agent's copy unless the session binds it
        both = sorted(rel for rel in own_files(task, spec)
                      if any(_within(rel, k) or _within(k, rel) for k in session))
        if both:
            lines.append(f"graders[{index}] ({spec.id}) names what the agent's session reads "
                         f"too: {', '.join(both)}; the agent's copy of the config root keeps "
                         f"it, so keep no answer there")
    return lines
