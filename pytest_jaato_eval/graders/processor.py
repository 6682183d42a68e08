"""The processor grader (G3): `validate(payload, context)` from a file in the config root.

The processor runs in a child process (processor_child.py) in isolated mode, with
the curated environment (contract.py), in a scratch directory, under its
`timeout_seconds`. Nothing it does - exit, interrupt, loop, flood its output -
reaches the run: every outcome is a verdict with a one-line reason, and what it
printed is kept as a bounded, masked tail.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from .. import faults
from ..contract import ParamCollision
from ..task.model import ProcessorGrader
from ..verdict import Verdict
from ..workspace import WorkspaceError
from .context import GraderContext
from .output import TailReader, evidence as output_evidence, program_of, run_bounded
from .script import _signame

CHILD = Path(__file__).with_name("processor_child.py")
RESULT_BYTES = 1024 * 1024


def processor_path(config_root: Path, script: str) -> tuple[Path | None, str | None]:
    """(the file, None) when `script` names a file inside the config root, after every
    `..` and symlink is resolved; else (None, why not)."""
    root = Path(config_root).resolve()
    path = (root / script).resolve()
    if path != root and root not in path.parents:
        return None, (f"processor {script} resolves to {path}, outside the config root "
                      f"{root}; processors are loaded from the config root only")
    if not path.is_file():
        return None, f"processor {script} not found under the config root ({path})"
    return path, None


def _sample(sample) -> dict | None:
    """The arm's dataset row, as plain JSON for the child."""
    return json.loads(json.dumps(dict(sample.fields), default=str)) if sample is not None else None


# What a processor's context holds of the agent's run, as the engine observed it.
RUN_FACTS = ("payload", "history", "turns", "finish_reason", "termination_reason",
             "termination_detail", "error_type", "error", "completion_gap", "unsigned")


def _child_input(ctx: GraderContext, path: Path) -> dict:
    ledger = ctx.ledger
    return {
        "script": str(path),
        "module_name": f"_jaato_eval_processor_{uuid.uuid4().hex}",
        "payload": ctx.run.payload,
        "context": {
            "workspace": str(ctx.workspace), "config_root": str(ctx.config_root),
            "params": dict(ctx.params), **{key: getattr(ctx.run, key) for key in RUN_FACTS},
            "sample": _sample(ctx.sample), "sample_id": getattr(ctx.sample, "id", None),
            "usage": dict(ctx.run.usage), "socket_path": ctx.socket_path,
            "cascade_id": ctx.cascade_id, "truncation_reason": ctx.truncation_reason,
            "verdicts": [v.to_dict() for v in ctx.verdicts],
            "prior_verdicts": {v.grader_id: v.state for v in ctx.verdicts},
            "ledger": {"faithful": ledger.faithful, "reason": ledger.reason,
                       "entries": list(ledger.entries)},
        },
    }


def grade_processor(spec: ProcessorGrader, ctx: GraderContext) -> Verdict:
    script = spec.script
    claim = f"{script} validate() returns no errors"
    truncated = ctx.truncation_reason
    if ctx.run.payload is None:
        if ctx.run.unsigned:
            return Verdict.blocked(spec.id, claim, f"no payload: the agent never signed off "
                                   f"({ctx.run.error}); the completion schema is not implicated")
        if truncated:
            return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
        return Verdict.blocked(spec.id, claim, "no payload: the profile declared no "
                               "completion_payload_schema, or the agent never completed")
    if truncated:  # G3: like the other graders
        return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
    path, refused = processor_path(ctx.config_root, script)
    if refused:
        return Verdict.blocked(spec.id, claim, refused)
    try:
        env = ctx.contract_env(spec.env_passthrough)
    except ParamCollision:
        # A processor is handed the parameters as a mapping (its context), as under
        # jaato-eval: keys that collide only as variables are no fault of its.
        env = ctx.contract_env(spec.env_passthrough, per_key=False)
    assert path is not None  # refused otherwise, above
    scratch = Path(tempfile.mkdtemp(prefix="jaato-processor-"))
    try:
        return _run_child(spec, ctx, claim, path, env, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_child(spec: ProcessorGrader, ctx: GraderContext, claim: str, path: Path, env: dict,
               scratch: Path) -> Verdict:
    script, timeout = spec.script, spec.timeout
    given, result = scratch / "input.json", scratch / "result.json"
    try:
        given.write_text(json.dumps(_child_input(ctx, path), default=str), encoding="utf-8")
    except (TypeError, ValueError, OSError) as exc:
        return Verdict.blocked(spec.id, claim, f"the arm's context could not be handed to the "
                               f"processor: {type(exc).__name__}: {exc}")
    argv = [sys.executable, "-I", "-B", str(CHILD), str(given), str(result)]
    try:
        with ctx.confined(argv, writable=[scratch], readable=[CHILD, ctx.workspace]) as confined:
            done = run_bounded(confined.argv, timeout=timeout, cwd=scratch, env=env,
                               pass_fds=confined.pass_fds)
            oom = faults.oom_of(confined.oom_killed(), False, True)
    except WorkspaceError as exc:
        return Verdict.blocked(spec.id, claim, str(exc))
    except OSError as exc:
        return Verdict.blocked(spec.id, claim, f"could not start the processor: {exc}")
    code, out = done.code, done.out
    if code is None:
        # The author's Python runs the agent's files only if it chose to: the table decides.
        agents = program_of(done.running, ctx.workspace)
        said = f"{script} timed out after {timeout:g} s (timeout_seconds)"
        if faults.timed_out(agents).agents:
            return Verdict.failed(spec.id, claim, f"{said}, running {agents}, a file of the "
                                  f"workspace", _printed(out, ctx))
        return Verdict.blocked(spec.id, claim, f"{said}, at import or in validate()",
                               _printed(out, ctx))
    printed = _printed(out, ctx)
    try:
        with open(result, "rb") as fh:
            answer = json.loads(fh.read(RESULT_BYTES))
        outcome = answer["outcome"]
    except (OSError, ValueError, KeyError, TypeError):
        if oom is not None:  # its own cgroup's OOM kill, met reading the agent's files
            return Verdict.failed(spec.id, claim, f"{script} killed by SIGKILL: "
                                  f"{faults.oom_said(oom, ctx.memory_limit)}", printed)
        how = f"killed by {_signame(-code)}" if code < 0 else f"exited {code}"
        return Verdict.blocked(spec.id, claim, f"{script} {how} without a verdict", printed)
    return _verdict(spec, claim, answer, outcome, printed)


def _printed(out: TailReader, ctx: GraderContext) -> list[str]:
    lines = output_evidence(out.tail(), out.total, ctx.mask)
    return [f"printed: {line}" for line in lines]


def _verdict(spec: ProcessorGrader, claim: str, answer: dict, outcome: str,
             printed: list[str]) -> Verdict:
    script = spec.script
    error = " ".join(str(answer.get("error", "")).split())
    if outcome == "import":
        return Verdict.blocked(spec.id, claim, f"import failed: {error}", printed)
    if outcome == "no_validate":
        return Verdict.blocked(spec.id, claim, f"{script} defines no validate(payload, context)",
                               printed)
    if outcome == "unfaithful":
        return Verdict.blocked(spec.id, claim, f"it read context.tool_calls, but the ledger is "
                               f"not faithful: {error}", printed)
    if outcome == "raised":
        return Verdict.blocked(spec.id, claim, f"validate() raised {error}", printed)
    if outcome == "not_a_list":
        return Verdict.blocked(spec.id, claim, f"validate() returned {answer.get('type')}, "
                               f"expected a list of errors", printed)
    errors = [str(e) for e in answer.get("errors") or []]
    count = answer.get("count", len(errors))
    if not isinstance(count, int) or count < len(errors):
        count = len(errors)
    if count:
        if count > len(errors):
            errors.append(f"[… {count - len(errors)} more; evidence keeps the first "
                          f"{len(errors)} errors]")
        return Verdict.failed(spec.id, claim, f"{count} error(s)", errors + printed)
    return Verdict.passed(spec.id, claim, "no errors", printed)
