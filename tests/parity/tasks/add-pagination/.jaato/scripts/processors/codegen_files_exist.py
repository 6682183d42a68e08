"""Every file the agent claims exists in the workspace (README's codegen_files_exist)."""
from pathlib import Path


def validate(payload, context):
    root = Path(context.workspace_path)
    errors = [f"missing: {f}" for f in payload.get("files", []) if not (root / f).is_file()]
    if context.agent_params.get("capability") != "pagination":
        errors.append(f"unexpected capability {context.agent_params.get('capability')!r}")
    return errors
