"""The three-state verdict and the roll-up rule (G6).

BLOCKED means "we learned nothing about the thing under test": an environment
fault. It never enters a pass-rate denominator and is always shown.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

PASS, FAIL, BLOCKED = "PASS", "FAIL", "BLOCKED"
STATES = (PASS, FAIL, BLOCKED)


@dataclass
class Verdict:
    grader_id: str
    claim: str
    state: str
    detail: str = ""
    evidence: list[str] = field(default_factory=list)
    blocked_reason: str | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"unknown verdict state {self.state!r}")
        if self.state == BLOCKED and not self.blocked_reason:
            self.blocked_reason = self.detail or "blocked without a stated reason"  # G6

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def passed(cls, grader_id: str, claim: str, detail: str = "", evidence=()) -> "Verdict":
        return cls(grader_id, claim, PASS, detail, list(evidence))

    @classmethod
    def failed(cls, grader_id: str, claim: str, detail: str, evidence=()) -> "Verdict":
        return cls(grader_id, claim, FAIL, detail, list(evidence))

    @classmethod
    def blocked(cls, grader_id: str, claim: str, reason: str, evidence=()) -> "Verdict":
        return cls(grader_id, claim, BLOCKED, reason, list(evidence), reason)


def roll_up(verdicts: Iterable[Verdict], blocked_before_grading: str | None = None
            ) -> tuple[str, str | None]:
    """G6: (state, blocked_reason) of an arm from its grader verdicts."""
    if blocked_before_grading:
        return BLOCKED, blocked_before_grading
    verdicts = list(verdicts)
    if any(v.state == FAIL for v in verdicts):
        return FAIL, None
    blocked = [v for v in verdicts if v.state == BLOCKED]
    if blocked:
        return BLOCKED, "; ".join(f"{v.grader_id}: {v.blocked_reason}" for v in blocked)
    if not verdicts:
        return BLOCKED, "no grader returned a verdict"
    return PASS, None


def blocked_grader(verdicts: Any) -> str | None:
    """`<grader id>: <reason>` of the first BLOCKED verdict (as stored: dicts): why an arm is
    BLOCKED when a grader, not the arm, was (an unsigned arm, and every such arm of
    jaato-eval's, leaves the arm's blocked_reason unset)."""
    for v in verdicts if isinstance(verdicts, (list, tuple)) else ():
        if isinstance(v, Mapping) and v.get("state") == BLOCKED and v.get("blocked_reason"):
            return f"{v.get('grader_id')}: {v['blocked_reason']}"
    return None


def failed_grader(verdicts: Any) -> str | None:
    """`<grader id>: <detail>` of the first FAIL verdict (as stored: dicts), and how many
    more failed: why an arm FAILED, in one line, as a BLOCKED arm says its reason."""
    failed = [v for v in (verdicts if isinstance(verdicts, (list, tuple)) else ())
              if isinstance(v, Mapping) and v.get("state") == FAIL]
    if not failed:
        return None
    first = failed[0]
    detail = str(first.get("detail") or "").strip() or str(first.get("claim") or "failed")
    more = f" (and {len(failed) - 1} more failing grader{'s' * (len(failed) > 2)})" \
        if len(failed) > 1 else ""
    return f"{first.get('grader_id')}: {detail}{more}"


# What a grader kind cannot establish, said once per arm it graded (the record's `caveats`,
# which readers such as jaato-server's results reader print verbatim as instrument limits).
INSTRUMENT_CAVEATS = {
    "judge": ("Graded by a judge: a language model scoring another model's work. It is not a "
              "calibrated instrument, and its error rate is not known to be zero; read a "
              "judge-graded verdict as an indication, not a measurement."),
}


def instrument_caveats(grader_ids: Iterable[str | None]) -> list[str]:
    """The caveats of the grader kinds among `grader_ids`, each once, in first-seen order."""
    said: list[str] = []
    for gid in grader_ids:
        caveat = INSTRUMENT_CAVEATS.get(str(gid or "").split(":", 1)[0])
        if caveat and caveat not in said:
            said.append(caveat)
    return said
