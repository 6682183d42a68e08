"""Preflight: what an arm needs from its config root, checked before it costs anything.

An arm whose profile set, profile or grader file is missing cannot tell us anything
about the agent, and on a paid provider every arm of a sweep would be paid for before
the typo surfaced. So before its workspace, daemon or session, each arm's needs are
looked up in the task's config root the way jaato-server resolves them:

- profile set `S`: the folder `<config root>/profiles/S/` (the daemon silently falls
  back to `profiles/` when it is missing, which would run the arm under another set's
  profiles while the record says `S`);
- a profile `P` (the arm's own, and a judge's): a `.yaml`, `.yml` or `.json` file named
  `P` (or declaring `name: P`) in `profiles/S/`, else in `profiles/`; `S/P` pins the set;
- a processor's `script` and a script grader's `file`: a regular file inside the config
  root.

A driver arm binds no profile of its own and chooses the profiles of the sessions it
opens, so only its graders' needs are checked (a judge's profile in the arm's set); its
config root need not have a `profiles/<set>/` folder at all, as under jaato-eval. The user's `~/.jaato/profiles/` is not
looked in: a task runs the same on every machine or not at all.

`check` returns None for an arm that may run, or the one-line reason it is BLOCKED,
naming the set, the profile, the folder looked in and the close matches. Pure file-system
lookups, cached per (config root, set).
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..contract import param_collision
from ..engine.files import load_yaml
from .model import DRIVER, ScriptGrader, Task

PROFILE_SUFFIXES = (".yaml", ".yml", ".json")
# The largest profile file read to learn a `name:`; jaato's profiles are a few KiB.
MAX_PROFILE_BYTES = 1 << 20


def check(task: Task, profile_set: str | None) -> str | None:
    """None when the arm (task, profile set) may start; else why it is BLOCKED."""
    root = task.config_root
    collision = _collision(task)
    if collision:
        return collision
    if task.harness.kind != DRIVER:  # a driver arm binds no profile of its own
        effective = _pinned_set(task.harness.profile) or profile_set
        problem = ((_set_problem(root, effective) if effective is not None else None)
                   or _profile_problem(root, effective, task.harness.profile, "profile"))
        if problem:
            return problem
    needs = _Needs(root, profile_set)
    for spec in task.graders:
        problem = spec.preflight(needs)
        if problem:
            return problem
    return None


@dataclass(frozen=True)
class _Needs:
    """The checks a grader kind asks for (model.Needs), on this arm's config root and set."""

    root: Path
    profile_set: str | None

    def file(self, rel: str, what: str, *, executable: bool) -> str | None:
        return _file_problem(self.root, rel, what, executable=executable)

    def profile(self, name: str, what: str) -> str | None:
        return _profile_problem(self.root, _pinned_set(name) or self.profile_set, name, what)


def _collision(task: Task) -> str | None:
    """M9: parameter keys that collide, when that alone decides the arm's verdict.

    A driver is handed its parameters as variables, so its arm cannot start. A session
    arm's are variables only for its script graders, each BLOCKED by them: the arm is
    BLOCKED before it starts when they are all it has; with a processor or a judge it
    runs, as under jaato-eval, and they grade it."""
    if task.harness.kind == DRIVER:
        collision = param_collision(task.input.params)
        return f"input.params: {collision}" if collision else None
    if all(isinstance(g, ScriptGrader) for g in task.graders):
        collision = param_collision(task.input.agent_params)
        return f"input.agent_params: {collision}" if collision else None
    return None


def _pinned_set(profile: str | None) -> str | None:
    """jaato reads `S/P` as profile P of set S, whatever the session's set."""
    if profile and "/" in profile:
        head, _, tail = profile.partition("/")
        if head and tail and "/" not in tail:
            return head
    return None


def _hint(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    if close:
        return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"
    if candidates:
        shown = ", ".join(sorted(candidates)[:10])
        return f" (there: {shown}{', …' if len(candidates) > 10 else ''})"
    return ""


def _set_problem(root: Path, name: str) -> str | None:
    if name in _set_names(root):
        return None
    return (f"profile set {name!r} not found{_hint(name, _set_names(root))}: no folder "
            f"{root / 'profiles' / name}/")


def _profile_problem(root: Path, profile_set: str | None, profile: str, what: str) -> str | None:
    name = profile.partition("/")[2] if _pinned_set(profile) else profile
    tiers = ([root / "profiles" / profile_set] if profile_set else []) + [root / "profiles"]
    known: list[str] = []
    for folder in tiers:  # the set's folder first, then the regular tier, as jaato does
        names, _ = _profiles_in(folder)
        if name in names:
            return None
        known += [n for n in names if n not in known]
    for folder in tiers:
        broken = _profiles_in(folder)[1]
        if name in broken:
            return f"{what} {profile!r}: {folder / broken[name][0]} {broken[name][1]}"
    looked = " and ".join(f"{t}/" for t in tiers)
    in_set = f" of profile set {profile_set!r}" if profile_set else " (no profile set)"
    return (f"{what} {profile!r}{in_set} not found{_hint(name, known)}: looked in {looked} "
            f"for {name}{'|'.join(PROFILE_SUFFIXES)}")


def _file_problem(root: Path, relative: str, what: str, *, executable: bool = False) -> str | None:
    path = root / relative
    try:
        resolved = path.resolve()
        inside = resolved.is_relative_to(root.resolve())
        regular = resolved.is_file()
    except (OSError, RuntimeError, ValueError) as exc:
        return f"{what} {relative} cannot be resolved under the config root: {exc}"
    if not inside:
        return f"{what} {relative} resolves to {resolved}, outside the config root {root}"
    if not regular:
        siblings = _files_near(path.parent)
        state = "is not a regular file" if resolved.exists() else "not found"
        return f"{what} {relative} {state}{_hint(path.name, siblings)}: looked for {path}"
    if executable and not os.access(resolved, os.X_OK):
        return (f"{what} {relative} is not executable: mark it executable (chmod +x), or "
                f"write it in Python (.py runs with $JAATO_EVAL_PYTHON)")
    return None


# -- what is in the config root (cached: every arm of a task asks the same) ----------------
@lru_cache(maxsize=65536)
def _set_names(root: Path) -> list[str]:
    try:
        with os.scandir(root / "profiles") as it:
            return sorted(e.name for e in it if e.is_dir())
    except OSError:
        return []


def _files_near(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as it:
            return sorted(e.name for e in it if e.is_file())
    except OSError:
        return []


@lru_cache(maxsize=65536)
def _profiles_in(folder: Path) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The profile names a folder declares (a file's `name:`, else its stem), and the
    files that do not parse: `{stem: (file name, why)}`."""
    names: list[str] = []
    broken: dict[str, tuple[str, str]] = {}
    try:
        with os.scandir(folder) as it:
            entries = sorted((e for e in it if e.is_file()), key=lambda e: e.name)
    except OSError:
        return names, broken
    for entry in entries:
        stem, suffix = os.path.splitext(entry.name)
        if suffix not in PROFILE_SUFFIXES:
            continue
        data, error = _read_profile(Path(entry.path), suffix)
        if error:
            broken.setdefault(stem, (entry.name, error))
            continue
        declared = data.get("name") if isinstance(data.get("name"), str) else None
        names.append(declared or stem)
    return names, broken


def _read_profile(path: Path, suffix: str) -> tuple[dict[str, Any], str | None]:
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            return {}, f"larger than {MAX_PROFILE_BYTES} bytes"
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if suffix == ".json" else load_yaml(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError, RecursionError) as exc:
        return {}, f"does not parse: {_parse_error(exc)}"
    if not isinstance(data, dict):
        return {}, "does not parse: expected a mapping"
    return data, None


def _parse_error(exc: BaseException) -> str:
    """A parser's complaint in one line, with where: `line 3, column 7: mapping values are
    not allowed here` (YAML's problem mark, JSON's line and column)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if isinstance(exc, yaml.YAMLError) and mark is not None:
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or "invalid YAML"
        context = getattr(exc, "context", None)
        said = f"{context}: {problem}" if context and context != problem else problem
        return f"line {mark.line + 1}, column {mark.column + 1}: {' '.join(said.split())}"
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def clear_cache() -> None:
    """Forget what was looked up (a long-lived process whose config roots change)."""
    for cached in (_set_names, _profiles_in):
        cached.cache_clear()
