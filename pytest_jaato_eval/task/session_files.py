"""What jaato reads from a config root for a session: the only files the agent's copy of
the config root holds (docs/security.md, "The agent's copy of the config root").

The list follows jaato-server's own loaders, each reading `<config root>/<name>` when a
session's `JAATO_CONFIG_ROOT` is set:

- `profiles/`: every profile file (`.yaml`, `.yml`, `.json`) of the regular tier and of each
  set's folder (`subagent/config.py`'s `discover_profiles`: the session's set, then the
  regular tier, which holds the bases a profile `inherits`; a qualified `set/name` makes it
  read any set's folder, so no set is left out);
- the folders jaato's plugins read their config from: `agents/`, `commands/`, `prompts/`,
  `skills/` (`prompt_library`), `references/`, `templates/` (`template`), `instructions/`
  and `system_instructions.md` (`jaato_runtime`), `spawn_schemas/`, `completion_schemas/`,
  `services/` (`service_connector`);
- the JSON knobs read from the root itself: `gc.json` (`gc`), `permissions.json`
  (`permission`), `formatters.json` (`core`), `thinking.json`;
- any file or folder of the config root a kept profile names in one of its values (a
  prompt, an instruction file, a plugin's config file).

A driver's own files its command spells (`$JAATO_EVAL_CONFIG_ROOT/drive.py`) are kept: the
driver is handed the agent's copy. The judge's profile is left out unless the session binds
it too (a judge reads the harness's copy). Everything else (scripts, data, a grader's expected output) is not the
agent's to read, whether or not a grader's command spells its path.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Iterator

import yaml

from ..engine.files import load_yaml
from .model import DRIVER, JudgeGrader, Task
from .spelled import named_in

PROFILE_SUFFIXES = (".yaml", ".yml", ".json")
FOLDERS = ("agents", "commands", "prompts", "skills", "references", "templates",
           "instructions", "spawn_schemas", "completion_schemas", "services")
FILES = ("system_instructions.md", "gc.json", "permissions.json", "formatters.json",
         "thinking.json")
# A profile larger than this is not read for the names it holds (jaato's are a few KiB).
MAX_PROFILE_BYTES = 1 << 20


def judge_profiles(task: Task) -> frozenset[str]:
    """The profile names only a judge binds (a judge on the session's own profile shares it)."""
    return frozenset(g.profile.rpartition("/")[2] for g in task.graders
                     if isinstance(g, JudgeGrader) and g.profile != task.harness.profile)


def driver_files(task: Task) -> frozenset[str]:
    """What a driver's command spells under `$JAATO_EVAL_CONFIG_ROOT` (the driver is handed
    the agent's copy: the author's code, which its sessions' agents may read)."""
    return frozenset(named_in(task.harness.run or "")) if task.harness.kind == DRIVER \
        else frozenset()


def kept(task: Task, config_root: Path | None = None) -> frozenset[str]:
    """The paths (relative to the config root; a folder stands for all it holds) the
    agent's copy keeps."""
    root = Path(config_root if config_root is not None else task.config_root)
    return _kept(str(root), judge_profiles(task), driver_files(task))


def left_out(task: Task, config_root: Path | None = None) -> frozenset[str]:
    """The config root's entries the agent's copy leaves out: every file and folder that is
    neither kept nor on the way to something kept (relative paths, outermost only)."""
    root = Path(config_root if config_root is not None else task.config_root)
    return _left_out(str(root), judge_profiles(task), driver_files(task))


@functools.lru_cache(maxsize=256)
def _kept(root: str, judges: frozenset[str], driver: frozenset[str]) -> frozenset[str]:
    out = {name for name in (*FOLDERS, *FILES, *driver)
           if os.path.lexists(os.path.join(root, name))}
    profiles = [rel for rel in _profile_files(root)
                if os.path.splitext(os.path.basename(rel))[0] not in judges]
    out.update(profiles)
    for rel in profiles:
        out.update(_named_by(root, rel))
    return frozenset(out)


@functools.lru_cache(maxsize=256)
def _left_out(root: str, judges: frozenset[str], driver: frozenset[str]) -> frozenset[str]:
    keep = _kept(root, judges, driver)
    ways = {os.path.dirname(k) for k in keep}
    for way in list(ways):
        while way:
            way = os.path.dirname(way)
            ways.add(way)
    out: set[str] = set()
    for folder, dirs, names in os.walk(root):
        here = os.path.relpath(folder, root)
        for name in [*dirs, *names]:
            rel = os.path.normpath(os.path.join(here, name))
            if rel not in keep and rel not in ways:
                out.add(rel)
        dirs[:] = [d for d in dirs
                   if os.path.normpath(os.path.join(here, d)) in ways
                   and os.path.normpath(os.path.join(here, d)) not in keep]
    return frozenset(out)


def _profile_files(root: str) -> list[str]:
    """`profiles/*` and `profiles/<set>/*` with a profile's suffix (jaato scans no deeper)."""
    base = os.path.join(root, "profiles")
    found = []
    for folder in [base, *_subfolders(base)]:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(PROFILE_SUFFIXES) and os.path.isfile(path):
                found.append(os.path.relpath(path, root))
    return found


def _subfolders(folder: str) -> list[str]:
    try:
        return [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _named_by(root: str, profile: str) -> set[str]:
    """The config root's files and folders a profile names in one of its string values,
    relative to the root or to the profile's own folder; never a profile or a set's folder
    (a word such as `echo` names a set: the profiles are kept by their own rule)."""
    path = os.path.join(root, profile)
    try:
        if os.path.getsize(path) > MAX_PROFILE_BYTES:
            return set()
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text) if path.endswith(".json") else load_yaml(text)
    except (OSError, ValueError, yaml.YAMLError):  # a broken profile: preflight says so
        return set()
    out = set()
    real_root = os.path.realpath(root)
    for value in _strings(data):
        for base in (root, os.path.dirname(path)):
            candidate = os.path.normpath(os.path.join(base, value))
            rel = os.path.relpath(candidate, root)
            if (not rel.startswith("..") and rel != "." and rel.split(os.sep)[0] != "profiles"
                    and os.path.lexists(candidate)
                    and os.path.realpath(candidate).startswith(real_root + os.sep)):
                out.add(rel)
    return out


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if value and len(value) < 4096 and "\n" not in value and "\0" not in value:
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
