"""An arm's two sides: what its agent saw, and what grades it, each part hashed apart.

Every record carries both (`agent_side`, `grader_side`: part -> a 16-hex-digit digest).
A regrade (--jaato-regrade, docs/regrading.md) runs a task's current graders on what an
earlier run's agent left, so it is only honest when the agent of that run saw what the
task gives an agent now: an arm whose agent side differs is refused, naming the parts
that changed. The grader side is what a regrade is for, and is recorded so that `compare`
can say what changed.

The agent's side of an arm:

- `fixture`: the fixture's files (the workspace the agent started from);
- `prompt`: the prompt it was given (a driver arm: the `harness.run` command);
- `agent`: the persona (`input.agent`);
- `agent_params`: its parameters (a driver arm: `input.params`), rendered for its sample;
- `harness`: the harness kind, the profile name, the profile set, what the driver is
  passed of the environment;
- `profile`: the profile file the session binds, from the set's folder or the regular tier;
- `config`: every other file of the config root the agent's copy holds (what jaato reads
  for a session, task/session_files.py);
- `sample`: which dataset row it ran on (a driver, which is handed the whole row: the
  row too; a session agent sees the row only through its prompt and parameters).

The graders' side: `graders` (every grader as declared, in order, and the contamination
mode), `files` (the config root's files the agent's copy leaves out, and the session's files
a grader names) and `sample` (the row's fields, which graders read: a corrected answer key
is a grader change).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from . import grader_files, session_files
from .arms import Arm
from .model import DRIVER, Task
from .preflight import PROFILE_SUFFIXES
from .tree import files_digest, tree_digest

DIGITS = 16

def _h(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:DIGITS]


@functools.lru_cache(maxsize=4096)
def _tree(base: str, leave_out: frozenset[str]) -> str:
    """A folder's digest, once per process (a task's folders do not change in a run)."""
    return tree_digest(Path(base), leave_out)[:DIGITS]


@functools.lru_cache(maxsize=4096)
def _files(base: str, names: frozenset[str]) -> str:
    return files_digest(Path(base), sorted(names))[:DIGITS]


def profile_files(config_root: Path, profile_set: str | None, profile: str | None) -> list[str]:
    """The files (relative to the config root) that hold the profile a session binds:
    `P.yaml|.yml|.json` in `profiles/<set>/`, else in `profiles/` (as the preflight finds
    it); `S/P` pins the set. Empty when no file is named after the profile."""
    if not profile:
        return []
    head, _, tail = profile.partition("/")
    if head and tail and "/" not in tail:
        profile_set, profile = head, tail
    tiers = ([os.path.join("profiles", profile_set)] if profile_set else []) + ["profiles"]
    for tier in tiers:
        found = [os.path.join(tier, profile + s) for s in PROFILE_SUFFIXES
                 if os.path.isfile(os.path.join(config_root, tier, profile + s))]
        if found:
            return found
    return []


def agent_side(arm: Arm, config_root: Path, prompt: str | None = None) -> dict[str, str]:
    """What the arm's agent saw, part by part. `config_root`: the copy the arm's session is
    given its own copy of (without what session_files leaves out); `prompt`: an arm
    written in Python passes the prompt it ran with."""
    task: Task = arm.task
    driver = task.harness.kind == DRIVER
    harness = task.harness
    bound = [] if driver else profile_files(config_root, arm.profile_set, harness.profile)
    sample = arm.sample
    return {
        "fixture": _tree(str(task.fixture), frozenset()),
        "prompt": _h(harness.run if driver else (prompt if prompt is not None else arm.prompt)),
        "agent": _h(task.input.agent),
        "agent_params": _h(_plain(arm.params if driver else arm.agent_params)),
        "harness": _h([harness.kind, harness.profile, arm.set_name,
                       list(harness.env_passthrough or ())]),
        "profile": _files(str(config_root), frozenset(bound)) if bound else _h(None),
        "config": _tree(str(config_root),
                        session_files.left_out(task, config_root)
                        | {os.path.normpath(p) for p in bound}),
        "sample": _h(None if sample is None else
                     [sample.id, _plain(sample.fields) if driver else None]),
    }


def grader_side(arm: Arm, config_root: Path) -> dict[str, str]:
    """What grades the arm, part by part."""
    task: Task = arm.task
    declared = [g.model_dump(mode="json") for g in task.graders]
    sample = arm.sample
    named = grader_files.graders_own(task)
    sessions = frozenset(k for k in session_files.kept(task, config_root)
                         if not any(k == n or k.startswith(n + os.sep) for n in named))
    return {
        "graders": _h([declared, task.contamination]),
        "files": _tree(str(config_root), sessions),
        "sample": _h(None if sample is None else _plain(sample.fields)),
    }


def _plain(value: Mapping[str, Any] | None) -> Any:
    return None if value is None else json.loads(json.dumps(dict(value), default=str))


def changed(then: Any, now: Mapping[str, str]) -> list[str]:
    """The agent-side parts that differ between a record's `then` and `now`, by name; a
    part only one side knows counts as changed. `then` not a mapping: everything."""
    if not isinstance(then, dict):
        return list(now)
    return [part for part in sorted(set(then) | set(now)) if then.get(part) != now.get(part)]
