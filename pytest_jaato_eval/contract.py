"""The environment table a driver and a script grader are handed (C1-C4).

One builder for both, so the driver and the grader that scores it can never
disagree about a name or a value. The base under the contract is curated, not
inherited: the processes it is handed to run in (or read) what the agent left,
so they get the basics a shell needs, a hardened Python and Git, and only the
variables the task names (`env_passthrough`). docs/security.md has the model.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from .redact import is_secret_name

CONTRACT_VERSION = "1"
PREFIX = "JAATO_EVAL"


class ParamCollision(ValueError):
    """Two parameter keys that map to one variable (M9 at parse time, G2 at grade time)."""


def param_variable(key: str) -> str:
    """C1: JAATO_EVAL_PARAM_<KEY>, upper-cased, anything outside [A-Z0-9_] -> '_'."""
    return f"{PREFIX}_PARAM_" + re.sub(r"[^A-Z0-9_]", "_", key.upper())


def param_collision(params: Mapping[str, Any] | None) -> str | None:
    """M9: the first two keys that map to one variable, said; else None."""
    seen: dict[str, str] = {}
    for key in params or {}:
        var = param_variable(str(key))
        if var in seen:
            return f"keys {seen[var]!r} and {key!r} both map to ${var}; rename one"
        seen[var] = str(key)
    return None


def encode(value: Any) -> str:
    """C2: strings verbatim, everything else as JSON (true, null, {"a": 1}); what JSON has
    no form for (a YAML date) as the JSON string of its str(), as jaato-eval writes it."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


# What every process gets from the parent environment: what a shell, a compiler and a
# test runner need to behave normally, and nothing that authenticates anybody.
BASIC_NAMES = ("HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM",
               "TMPDIR", "COLUMNS", "LINES", "NO_COLOR", "SOURCE_DATE_EPOCH")
BASIC_PREFIXES = ("LC_",)
# Set on top of the base: Python never puts the working directory (the agent's
# workspace) or a user site on sys.path, nor writes bytecode into the config root;
# Git neither reads the developer's configuration (credential helpers) nor runs the
# workspace's hooks, fsmonitor or pager.
HARDENING = {
    "PYTHONSAFEPATH": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_CONFIG_COUNT": "3",
    "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": os.devnull,
    "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false",
    "GIT_CONFIG_KEY_2": "core.pager", "GIT_CONFIG_VALUE_2": "cat",
}
PASSTHROUGH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")
# Variables that decide what code an interpreter, a shell or a loader runs: a pattern
# (`PYTHON*`, `GIT_*`, `*`) never sweeps one in; a task that needs one names it exactly.
CODE_PREFIXES = ("PYTHON", "GIT_", "LD_", "BASH_ENV", "ENV", "PERL5", "RUBYOPT", "RUBYLIB",
                 "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS")


def safe_path(value: str, workspace: Path | str | None = None) -> str:
    """PATH without the entries that resolve a bare command name in the working
    directory: empty and relative ones, and any inside the workspace."""
    ws = os.path.realpath(workspace) if workspace else None
    kept = []
    for entry in value.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if ws and (real == ws or real.startswith(ws + os.sep)):
            continue
        if entry not in kept:
            kept.append(entry)
    return os.pathsep.join(kept) or os.defpath


def curated_env(passthrough: Sequence[str] = (), base: Mapping[str, str] | None = None,
                workspace: Path | str | None = None) -> dict[str, str]:
    """The base environment of a grader, processor or driver.

    `passthrough` names variables the task asks for; `NAME*` passes a prefix, but
    never a credential-looking variable (redact.py's rule) nor one that decides what code
    runs (CODE_PREFIXES): those pass only when named exactly, so a pattern cannot sweep one
    in. PATH and the hardening are set last: no passed name undoes them.
    """
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items()
           if k in BASIC_NAMES or k.startswith(BASIC_PREFIXES)}
    for name in passthrough:
        if name.endswith("*"):
            prefix = name[:-1]
            env.update({k: v for k, v in base.items() if k.startswith(prefix)
                        and not is_secret_name(k) and not k.startswith(CODE_PREFIXES)})
        elif name in base:
            env[name] = base[name]
    # Last, so no name the task passes undoes them.
    env["PATH"] = safe_path(base.get("PATH", os.defpath), workspace)
    env.update(HARDENING)
    return env


def build_contract_env(
    *,
    workspace: Path | str,
    config_root: Path | str,
    params: Mapping[str, Any] | None,
    socket: str | None = None,
    cascade_id: str | None = None,
    python: str | None = sys.executable,
    base: Mapping[str, str] | None = None,
    passthrough: Sequence[str] = (),
    sample: Any = None,
    author_modules: Path | str | None = None,
    per_key: bool = True,
) -> dict[str, str]:
    """Return a full process environment: the curated base plus the contract.

    `base` replaces the curated base as it is (tests); `passthrough` is the task's
    `env_passthrough` list. `author_modules`: the harness's copy of the task's fixture, put
    first on PYTHONPATH so the author's own packages import (`python -m pkg.score`) while
    the workspace stays off sys.path (PYTHONSAFEPATH): a module the agent wrote or changed
    is never imported, the author's original is. `per_key=False`: no JAATO_EVAL_PARAM_<KEY>
    variables, only JAATO_EVAL_PARAMS (a process handed its parameters some other way).
    """
    if base is None:
        base = curated_env(passthrough, workspace=workspace)
    env = {k: v for k, v in base.items()
           if not k.startswith(PREFIX)}  # C3: nothing leaks from an outer run
    params = dict(params or {})
    env.update({
        PREFIX: "1",
        f"{PREFIX}_CONTRACT": CONTRACT_VERSION,
        f"{PREFIX}_WORKSPACE": str(workspace),
        f"{PREFIX}_CONFIG_ROOT": str(config_root),
        f"{PREFIX}_PARAMS": json.dumps(params, sort_keys=True, default=str),
    })
    owners: dict[str, str] = {}
    for key, value in params.items() if per_key else ():
        var = param_variable(str(key))
        if var in owners:
            raise ParamCollision(f"parameters {owners[var]!r} and {key!r} both map to ${var}; "
                                 f"rename one")
        owners[var] = str(key)
        env[var] = encode(value)
    if sample is not None:  # a dataset task's row (samples.Sample): its id and fields
        env[f"{PREFIX}_SAMPLE_ID"] = sample.id
        env[f"{PREFIX}_SAMPLE"] = json.dumps(dict(sample.fields), sort_keys=True, default=str)
    if author_modules:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(author_modules), env.get("PYTHONPATH")) if p)
    # C1: only when known; absent means unset, never empty.
    for name, value in (("SOCKET", socket), ("CASCADE_ID", cascade_id), ("PYTHON", python)):
        if value:
            env[f"{PREFIX}_{name}"] = str(value)
    return env
