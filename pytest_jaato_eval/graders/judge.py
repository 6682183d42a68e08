"""The judge grader (G5): a second session, on the arm's own daemon, scores the arm.

Its guards come first and open no session: a judge is the expensive grader, and
scoring an arm on half the input its siblings were scored on is worse than a gap.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..engine.session import Ceiling, SessionArmSpec, run_session_arm
from ..manifest import GraderSpec
from ..verdict import PASS, Verdict
from .context import GraderContext

LISTING_LIMIT = 200


def _listing(workspace: Path) -> list[str]:
    files = []
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = sorted(d for d in dirnames if d != ".jaato")
        files += [str(Path(dirpath, f).relative_to(workspace)) for f in sorted(filenames)
                  if not (dirpath == str(workspace) and f == ".env")]
    return files[:LISTING_LIMIT]


def judge_prompt(ctx: GraderContext, spec: GraderSpec) -> str:
    facts = {"turns": ctx.turns, "finish_reason": ctx.finish_reason,
             "termination_reason": ctx.termination_reason}
    return "\n".join([
        "You are grading the work an agent left in this workspace.",
        "Files in the workspace:",
        *[f"  {f}" for f in _listing(ctx.workspace)],
        "The agent's completion payload:",
        json.dumps(ctx.payload, indent=2, sort_keys=True, default=str),
        f"Run facts: {json.dumps(facts, sort_keys=True)}",
        f"Score the work. You MUST finish by calling signal_completion with "
        f"`{spec.options['score_field']}` (a number from 0 to 1) and "
        f"`{spec.options['errors_field']}` (a list; empty unless you could not grade).",
    ])


def _gate(spec: GraderSpec, ctx: GraderContext) -> str | None:
    states = {v.grader_id: v.state for v in ctx.verdicts}
    for gate in spec.options["gate_on"]:
        state = states.get(gate)
        if state is None:
            return f"gate {gate} not run"
        if state != PASS:
            return f"gate {gate}={state}"
    return None


def grade_judge(spec: GraderSpec, ctx: GraderContext) -> Verdict:
    opts = spec.options
    claim = f"judge {opts['profile']} scores >= {opts['threshold']:g}"
    if ctx.unsigned:
        return Verdict.blocked(spec.id, claim, f"the agent never signed off ({ctx.error}); "
                               f"the judge would score it without its payload")
    truncated = ctx.truncation_reason
    if truncated:
        return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
    gated = _gate(spec, ctx)
    if gated:
        return Verdict.blocked(spec.id, claim, gated)
    if not ctx.socket_path:
        return Verdict.blocked(spec.id, claim, "no daemon socket: the arm ran on none")
    run = run_session_arm(SessionArmSpec(  # G5: the SAME daemon as the arm
        socket_path=ctx.socket_path, workspace=ctx.workspace, config_root=ctx.config_root,
        profile=opts["profile"], prompt=judge_prompt(ctx, spec), agent=opts.get("agent"),
        ceiling=Ceiling(opts["timeout_seconds"], f"{spec.id} timeout_seconds",
                        what="judge session", remedy="raise the judge's timeout_seconds")))
    evidence = [f"judge session {run.session_id or '—'} ({run.model or '—'})"]
    if run.blocked_reason:
        return Verdict.blocked(spec.id, claim, f"judge session: {run.blocked_reason}", evidence)
    payload = run.payload
    if not isinstance(payload, dict):
        return Verdict.blocked(spec.id, claim, "the judge returned no payload (did its profile "
                               "declare a completion_payload_schema?)", evidence)
    evidence.append(json.dumps(payload, sort_keys=True, default=str)[:2000])
    errors = payload.get(opts["errors_field"])
    if errors:
        return Verdict.blocked(spec.id, claim, f"the judge could not grade: {errors}", evidence)
    score = payload.get(opts["score_field"])
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return Verdict.blocked(spec.id, claim, f"{opts['score_field']} is {score!r}, not a number",
                               evidence)
    if score >= opts["threshold"]:
        return Verdict.passed(spec.id, claim, f"score {score:g}", evidence)
    return Verdict.failed(spec.id, claim, f"score {score:g} < {opts['threshold']:g}", evidence)
