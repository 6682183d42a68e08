"""The jaato files that point the daemon's ``vllm`` provider at a scripted model: the
profile, the workspace ``.env`` line, and the pricing table that gives a turn a cost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

# A schema that lets a scripted agent finish with signal_completion(answer=...).  Without a
# completion_payload_schema a scripted agent that cannot recognise its own earlier calls
# loops until the context overflows (measured; see design.md).
DEFAULT_COMPLETION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def vllm_profile(
    url: str,
    model: str,
    name: str = "scripted",
    *,
    plugins: Iterable[str] = ("file_edit(preload)", "permission"),
    completion_payload_schema: Mapping[str, Any] | None = DEFAULT_COMPLETION_SCHEMA,
    unload_grace_seconds: float | None = 0,
    host: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A jaato profile (as a dict) whose ``vllm`` provider talks to the server at ``url``.

    ``host=False`` leaves ``plugin_configs.vllm.host`` out, so the provider takes
    ``VLLM_HOST`` from the session's environment (see :func:`write_env`) -- the way
    to keep a task's profile static while the port changes every run.  The
    ``permission`` plugin, when listed, gets ``defaultPolicy: allow`` so tools run
    unattended.  ``extra`` keys are merged in at the top level (a ``plugin_configs``
    given there is merged with the generated one).
    """
    plugin_list = list(plugins)
    plugin_configs: dict[str, Any] = {"vllm": {"host": url} if host else {}}
    if any(p.split("(")[0] == "permission" for p in plugin_list):
        plugin_configs["permission"] = {"policy": {"defaultPolicy": "allow"}}
    plugin_configs.update(extra.pop("plugin_configs", {}) or {})
    prof: dict[str, Any] = {
        "name": name,
        "provider": "vllm",
        "model": model,
        "plugins": plugin_list,
        "plugin_configs": plugin_configs,
    }
    if completion_payload_schema is not None:
        prof["completion_payload_schema"] = dict(completion_payload_schema)
    if unload_grace_seconds is not None:
        prof["runtime_limits"] = {"unload_grace_seconds": unload_grace_seconds}
    prof.update(extra)
    return prof


def write_profile(config_root: str | Path, profile: Mapping[str, Any],
                  profile_set: str | None = None) -> Path:
    """Write ``profile`` to ``<config_root>/profiles/[<profile_set>/]<name>.yaml`` (as JSON,
    which is valid YAML) and return the path."""
    folder = Path(config_root) / "profiles"
    if profile_set:
        folder = folder / profile_set
    path = folder / f"{profile['name']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(profile), indent=2) + "\n", encoding="utf-8")
    return path


def write_env(workspace: str | Path, wanted: Mapping[str, str]) -> Path:
    """Set ``wanted`` in ``<workspace>/.env``, keeping the file's other lines.  The daemon
    reads that file into the session's environment when the client passes
    ``env_file=".env"``."""
    path = Path(workspace) / ".env"
    kept = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            key = line.split("=", 1)[0].strip()
            if key.startswith("export "):
                key = key[len("export "):].strip()
            if key not in wanted:
                kept.append(line)
    kept.extend(f"{k}={v}" for k, v in wanted.items())
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def pricing(model: str, *, input_per_token: float, output_per_token: float,
            cache_read_per_token: float | None = None) -> dict[str, Any]:
    """A jaato pricing table entry for ``model`` (LiteLLM field names)."""
    entry: dict[str, float] = {"input_cost_per_token": input_per_token,
                               "output_cost_per_token": output_per_token}
    if cache_read_per_token is not None:
        entry["cache_read_input_token_cost"] = cache_read_per_token
    return {model: entry}


def write_pricing(workspace: str | Path, table: Mapping[str, Any]) -> Path:
    """Write a pricing ``table`` to ``<workspace>/.jaato/pricing.json``, where the daemon
    looks for it.  Then a turn costs ``prompt_tokens * input + completion_tokens *
    output`` -- the only way to give a ``vllm`` turn a cost."""
    path = Path(workspace) / ".jaato" / "pricing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(table), indent=2) + "\n", encoding="utf-8")
    return path
