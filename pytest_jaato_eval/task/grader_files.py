"""Which of a config root's files belong to which grader: what the agent's copy of the
config root leaves out, and what each grader's own view of it leaves out (docs/tasks.md,
"What a grader sees").

A grader's own files are the ones its manifest entry names: a script grader's `file`, a
processor's `script`, a path under `$JAATO_EVAL_CONFIG_ROOT` that a `run` command spells out
(a file or a folder), a judge's profile under every profile set. Everything else in the
config root (profiles, shared helpers, data no grader names) is shared.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .model import JudgeGrader, ProcessorGrader, ScriptGrader

# `$JAATO_EVAL_CONFIG_ROOT/a/b` or `${JAATO_EVAL_CONFIG_ROOT}/a/b` in a command, up to the
# first character a shell would end the word at.
_NAMED = re.compile(r"\$\{?JAATO_EVAL_CONFIG_ROOT\}?/([^\s\"'`;|&<>()$\\]+)")


def named_in(command: str) -> set[str]:
    """The config-root paths a shell command spells out, relative and normalised; never one
    that leaves the root."""
    out = set()
    for found in _NAMED.findall(command):
        rel = os.path.normpath(found.rstrip("/"))
        if rel not in (".", "") and not rel.startswith(".."):
            out.add(rel)
    return out


def own_files(task: Any, spec: Any) -> set[str]:
    """The config root's files `spec`, one of `task`'s graders, names (relative paths)."""
    if isinstance(spec, ScriptGrader):
        return {os.path.normpath(spec.file)} if spec.file else named_in(spec.run or "")
    if isinstance(spec, ProcessorGrader):
        return {os.path.normpath(spec.script)}
    if isinstance(spec, JudgeGrader):
        profiles = Path(task.config_root) / "profiles"
        own = set()
        for folder in [profiles, *(p for p in _folders(profiles))]:
            for suffix in (".yaml", ".yml"):
                own.add(os.path.relpath(folder / f"{spec.profile}{suffix}", task.config_root))
        return own
    return set()


def graders_own(task: Any) -> set[str]:
    """What the agent's copy of the config root leaves out: every grader's own files, but
    for a judge that runs on the agent's own profile (the agent's session needs that
    profile too)."""
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


def _folders(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except OSError:
        return []
