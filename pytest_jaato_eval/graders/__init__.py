"""Graders: each turns an arm into a Verdict and never raises (G1-G5, G7)."""
from __future__ import annotations

from typing import Any, Callable

from ..activity import ACTIVITY
from ..task.model import AnyGrader, JudgeGrader, MatchGrader, ProcessorGrader, ScriptGrader
from ..verdict import Verdict
from .context import GraderContext
from .judge import grade_judge
from .match import grade_match
from .processor import grade_processor
from .script import grade_script

# How each grader kind grades (task/model.py declares the rest of a kind);
# tests/unit/test_grader_kinds.py holds that every kind of `AnyGrader` is here.
GRADE: dict[type, Callable[[Any, GraderContext], Verdict]] = {
    ScriptGrader: grade_script,
    ProcessorGrader: grade_processor,
    JudgeGrader: grade_judge,
    MatchGrader: grade_match,
}


def grade(spec: AnyGrader, ctx: GraderContext) -> Verdict:
    """The grader's own kind grades it."""
    return GRADE[type(spec)](spec, ctx)


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
