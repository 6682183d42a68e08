"""A cell of the pivot (task x profile set): the aggregates of its latest arms (P1-P3),
the digest of blocked reasons, and how a figure reads when it is shown.

Figures are formatted here once, for the terminal and the HTML report alike: unknown
is a dash, never 0 (P2).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from . import stats
from ..render import safe_text
from ..verdict import FAIL, PASS

DASH = "—"  # unknown, never 0 (P2)


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 arm`, `2 arms`: every count a person reads."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


@dataclass(slots=True)
class ArmSummary:
    """What the pivot keeps of one arm: enough for the cells, `compare`, the run pins,
    and the byte offset of its record for readers that want the whole of it."""
    arm_id: str
    task_id: str
    profile_set: str
    repeat: int
    state: str | None
    blocked_reason: str | None
    payload_hash: str | None
    cost: float | None
    tokens: float | None
    run_id: str | None = None
    task_hash: str | None = None
    provenance: tuple | None = None   # PROVENANCE_PINS values, shared between arms
    offset: int | None = None
    judged: bool = False              # a grader opened a session of its own (a judge)
    judge_cost: float | None = None   # what it cost, when reported
    xfail: str | None = None          # ran under an xfail mark: "xfail", or "strict"
    sample_id: str | None = None      # the dataset row it ran on


@dataclass
class Cell:
    task_id: str
    profile_set: str
    passed: int = 0
    failed: int = 0
    blocked: int = 0
    cost: float | None = None
    tokens: float | None = None
    cost_unknown: int = 0      # arms whose cost nobody reported (P2)
    tokens_unknown: int = 0
    exercised_cost: float = 0.0   # summed over the exercised arms that reported a cost
    exercised_costed: int = 0
    payloads: Counter = field(default_factory=Counter)  # answers of exercised arms
    unanswered: int = 0        # exercised arms that left no payload
    reasons: Counter = field(default_factory=Counter)
    arms: list[ArmSummary] = field(default_factory=list)
    judged: int = 0            # arms a judge graded (a session of its own)
    judge_cost: float | None = None
    judge_cost_unknown: int = 0   # judged arms whose judge reported no cost
    expected_failures: int = 0    # FAIL arms that ran under an xfail mark: not the run's FAIL
    strict_passes: int = 0        # PASS arms under a strict xfail mark: the run's FAIL
    # A dataset task's samples, each its own tally: pass@k, pass^k and det are about the
    # repeats of one input, so they are taken per sample and averaged over the samples.
    samples: dict[str, "SampleTally"] = field(default_factory=dict)

    def add(self, a: ArmSummary) -> None:
        self.arms.append(a)
        if a.sample_id is not None:
            self.samples.setdefault(a.sample_id, SampleTally()).add(a)
        if a.state == PASS:
            self.passed += 1
            if a.xfail == "strict":
                self.strict_passes += 1
        elif a.state == FAIL:
            self.failed += 1
            if a.xfail is not None:
                self.expected_failures += 1
        else:  # BLOCKED, or a state nobody knows: never counted as a verdict on the agent
            self.blocked += 1
            self.reasons[reason_key(a.blocked_reason or f"state {a.state!r}")] += 1
        if a.state in (PASS, FAIL):
            if a.payload_hash is None:
                self.unanswered += 1
            else:
                self.payloads[a.payload_hash] += 1
            if a.cost is not None:
                self.exercised_cost += a.cost
                self.exercised_costed += 1
        if a.cost is None:
            self.cost_unknown += 1
        else:
            self.cost = a.cost if self.cost is None else self.cost + a.cost
        if a.judged:
            self.judged += 1
            if a.judge_cost is None:
                self.judge_cost_unknown += 1
            else:
                self.judge_cost = (a.judge_cost if self.judge_cost is None
                                   else self.judge_cost + a.judge_cost)
        if a.tokens is None:
            self.tokens_unknown += 1
        else:
            self.tokens = a.tokens if self.tokens is None else self.tokens + a.tokens

    @property
    def fails_the_run(self) -> bool:
        """Whether the cell's arms failed the run as pytest judged it: a FAIL not expected
        by an xfail mark, or a PASS a strict xfail mark did not expect."""
        return self.failed > self.expected_failures or self.strict_passes > 0

    @property
    def fail_text(self) -> str:
        """The fail count, with the expected failures among them (`3 (1 xfail)`)."""
        return f"{self.failed} ({self.expected_failures} xfail)" if self.expected_failures \
            else str(self.failed)

    @property
    def total_cost(self) -> float | None:
        """The agent's cost and the judge's together (either alone when the other is unknown)."""
        if self.cost is None and self.judge_cost is None:
            return None
        return (self.cost or 0.0) + (self.judge_cost or 0.0)

    @property
    def total_cost_partial(self) -> bool:
        return self.total_cost is not None and (self.cost_unknown + self.judge_cost_unknown) > 0

    @property
    def arms_total(self) -> int:
        return self.passed + self.failed + self.blocked

    @property
    def exercised(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        return stats.rate(self.passed, self.exercised)  # P1: BLOCKED is not in the denominator

    @property
    def interval(self) -> tuple[float, float] | None:
        return stats.wilson(self.passed, self.exercised)

    @property
    def floor(self) -> float | None:
        """The pass rate if every BLOCKED arm had failed: what a pessimist may claim."""
        return stats.rate(self.passed, self.arms_total)

    @property
    def answered(self) -> int:
        """Exercised arms that produced a payload: the only ones that can agree."""
        return self.exercised - self.unanswered

    @property
    def det(self) -> float | None:
        """P3, jaato-eval's number: the largest group of exercised arms with one payload, over
        every exercised arm; 0 when no two agree (a group of one is no agreement); None
        under two answers. An arm without a payload stays in the denominator: it did not
        reproduce the answer, and det_text says how many answered."""
        if self.samples:
            return _mean(t.det for t in self.samples.values())
        if self.answered < 2:
            return None
        modal = self.payloads.most_common(1)[0][1]
        return modal / self.exercised if modal > 1 else 0.0

    @property
    def det_text(self) -> str:
        """`det` as shown: with how many answered when some exercised arm did not, a dash
        included (`— (1 of 2 answered)`: it is a dash because one answered), as jaato-eval."""
        text = pct(self.det)
        if self.unanswered:
            text += f" ({self.answered} of {self.exercised} answered)"
        return text

    def pass_at(self, k: int | None) -> float | None:
        if k is not None and self.samples:
            return _mean(stats.pass_at_k(t.passed + t.failed, t.passed, k)
                         for t in self.samples.values())
        return None if k is None else stats.pass_at_k(self.exercised, self.passed, k)

    def pass_hat(self, k: int | None) -> float | None:
        if k is not None and self.samples:
            return _mean(stats.pass_hat_k(t.passed + t.failed, t.passed, k)
                         for t in self.samples.values())
        return None if k is None else stats.pass_hat_k(self.exercised, self.passed, k)

    @property
    def attempts(self) -> list[int]:
        """The exercised arms of each attempt group: of each sample, or of the cell."""
        if self.samples:
            return [t.passed + t.failed for t in self.samples.values()]
        return [self.exercised]

    @property
    def mean_cost(self) -> float | None:
        """Mean cost of an exercised arm, over the exercised arms that reported one."""
        return self.exercised_cost / self.exercised_costed if self.exercised_costed else None


# What the pivot reads of a record, decided by the record's own checks (the usage
# numbers by the same rule, read without copying the rest of `usage`).


def default_k(cells: list[Cell]) -> int | None:
    """One k for the whole pivot, so pass@k compares across cells: the fewest exercised
    repeats of one input (a cell, or a dataset's sample) among those with repeats (at
    least 2); None when nothing was repeated."""
    ns = [n for c in cells for n in c.attempts if n >= 2]
    return min(ns) if ns else None


@dataclass(slots=True)
class SampleTally:
    """One sample's arms in a cell: what pass@k and det need."""
    passed: int = 0
    failed: int = 0
    payloads: Counter = field(default_factory=Counter)

    def add(self, a: ArmSummary) -> None:
        if a.state in (PASS, FAIL):
            if a.state == PASS:
                self.passed += 1
            else:
                self.failed += 1
            if a.payload_hash is not None:
                self.payloads[a.payload_hash] += 1

    @property
    def det(self) -> float | None:
        """The cell's det rule, within the sample."""
        if sum(self.payloads.values()) < 2:
            return None
        modal = self.payloads.most_common(1)[0][1]
        return modal / (self.passed + self.failed) if modal > 1 else 0.0


def _mean(values: Iterable[float | None]) -> float | None:
    """The mean of the known values; None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


# Ids in a reason (sessions, UUIDs, hashes) would split one cause into many digest lines.
_IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
                  r"|\b[0-9a-f]{16,}\b", re.IGNORECASE)


def reason_key(reason: str, width: int = 160) -> str:
    """A blocked reason as one digest line: whitespace collapsed, ids elided, control
    characters shown as escapes, truncated (render.safe_text)."""
    return safe_text(_IDS.sub("…", " ".join(str(reason).split())), width)


def digest(cells: list[Cell]) -> list[tuple[Cell, str, int]]:
    """P1: every blocked reason with its count, most frequent first."""
    rows = [(c, reason, n) for c in cells for reason, n in c.reasons.most_common()]
    return sorted(rows, key=lambda d: -d[2])  # stable: ties keep task order


# -- figures as text -----------------------------------------------------------------------
def pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.0f}%"


def interval_text(iv: tuple[float, float] | None) -> str:
    return DASH if iv is None else f"{100 * iv[0]:.0f}–{100 * iv[1]:.0f}%"


def money(x: float | None, partial: bool = False) -> str:
    return DASH if x is None else f"${x:.4f}{'+' if partial else ''}"


def count(x: float | None, partial: bool = False) -> str:
    return DASH if x is None else f"{x:,.0f}{'+' if partial else ''}"
