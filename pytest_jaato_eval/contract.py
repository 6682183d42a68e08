"""The environment table a driver and a script grader are handed (C1-C4).

One builder for both, so the driver and the grader that scores it can never
disagree about a name or a value.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Mapping

CONTRACT_VERSION = "1"
PREFIX = "JAATO_EVAL"


class ParamCollision(ValueError):
    """Two parameter keys that map to one variable (M9 at parse time, G2 at grade time)."""


def param_variable(key: str) -> str:
    """C1: JAATO_EVAL_PARAM_<KEY>, upper-cased, anything outside [A-Z0-9_] -> '_'."""
    return f"{PREFIX}_PARAM_" + re.sub(r"[^A-Z0-9_]", "_", key.upper())


def encode(value: Any) -> str:
    """C2: strings verbatim, everything else as JSON (true, null, {"a": 1})."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def build_contract_env(
    *,
    workspace: Path | str,
    config_root: Path | str,
    params: Mapping[str, Any] | None,
    socket: str | None = None,
    cascade_id: str | None = None,
    python: str | None = sys.executable,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Return a full process environment: `base` (default os.environ) plus the contract."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
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
    for key, value in params.items():
        var = param_variable(str(key))
        if var in owners:
            raise ParamCollision(f"parameters {owners[var]!r} and {key!r} both map to ${var}")
        owners[var] = str(key)
        env[var] = encode(value)
    # C1: only when known; absent means unset, never empty.
    for name, value in (("SOCKET", socket), ("CASCADE_ID", cascade_id), ("PYTHON", python)):
        if value:
            env[f"{PREFIX}_{name}"] = str(value)
    return env
