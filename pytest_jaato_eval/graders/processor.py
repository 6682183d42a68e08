"""The processor grader (G3): `validate(payload, context)` from a file in the config root."""
from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path

from ..manifest import GraderSpec
from ..verdict import Verdict
from .context import GraderContext, UnfaithfulLedger


def grade_processor(spec: GraderSpec, ctx: GraderContext) -> Verdict:
    script = spec.options["script"]
    claim = f"{script} validate() returns no errors"
    truncated = ctx.truncation_reason
    if ctx.payload is None:
        if ctx.unsigned:
            return Verdict.blocked(spec.id, claim, f"no payload: the agent never signed off "
                                   f"({ctx.error}); the completion schema is not implicated")
        if truncated:
            return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
        return Verdict.blocked(spec.id, claim, "no payload: the profile declared no "
                               "completion_payload_schema, or the agent never completed")
    if truncated:  # G3: like the other graders
        return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
    path = (Path(ctx.config_root) / script).resolve()
    if not path.is_file():
        return Verdict.blocked(spec.id, claim, f"processor {script} not found under the config "
                               f"root ({path})")
    name = f"_jaato_eval_processor_{uuid.uuid4().hex}"
    try:
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is the processor's fault, not the agent's
        return Verdict.blocked(spec.id, claim, f"import failed: {type(exc).__name__}: {exc}")
    finally:
        sys.modules.pop(name, None)
    validate = getattr(module, "validate", None)
    if not callable(validate):
        return Verdict.blocked(spec.id, claim, f"{script} defines no validate(payload, context)")
    try:
        errors = validate(ctx.payload, ctx)
    except UnfaithfulLedger as exc:
        return Verdict.blocked(spec.id, claim, f"it read context.tool_calls, but the ledger is "
                               f"not faithful: {exc}")
    except Exception as exc:  # noqa: BLE001
        return Verdict.blocked(spec.id, claim, f"validate() raised {type(exc).__name__}: {exc}")
    if not isinstance(errors, list):
        return Verdict.blocked(spec.id, claim, f"validate() returned {type(errors).__name__}, "
                               f"expected a list of errors")
    if errors:
        return Verdict.failed(spec.id, claim, f"{len(errors)} error(s)", [str(e) for e in errors])
    return Verdict.passed(spec.id, claim, "no errors")
