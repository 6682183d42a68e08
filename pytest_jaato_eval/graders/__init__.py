"""Graders: each turns an arm into a Verdict and never raises (G1-G5)."""
from __future__ import annotations

from ..activity import ACTIVITY
from ..task.model import AnyGrader, ProcessorGrader, ScriptGrader
from ..verdict import Verdict
from .context import GraderContext
from .judge import grade_judge
from .processor import grade_processor
from .script import grade_script

def grade(spec: AnyGrader, ctx: GraderContext) -> Verdict:
    """The grader's own kind grades it."""
    if isinstance(spec, ScriptGrader):
        return grade_script(spec, ctx)
    if isinstance(spec, ProcessorGrader):
        return grade_processor(spec, ctx)
    return grade_judge(spec, ctx)


def run_graders(specs: tuple[AnyGrader, ...], ctx: GraderContext) -> list[Verdict]:
    """Run graders in manifest order; each sees the verdicts before it, its own view of the
    config root (`ctx.config_roots`) and, for its process, the workspace as the agent left
    it (`GraderContext.confined`)."""
    for index, spec in enumerate(specs):
        ACTIVITY.stage(f"grading {spec.id}")  # the live line names the grader at work
        try:
            verdict = grade(spec, ctx.for_grader(index))
        except Exception as exc:  # noqa: BLE001 - a grader never raises: it is BLOCKED
            verdict = Verdict.blocked(spec.id, spec.kind, f"grader raised {type(exc).__name__}: {exc}")
        ctx.verdicts.append(verdict)
    return list(ctx.verdicts)
