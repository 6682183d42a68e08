"""The statistics behind the pivot and `compare` (P1, P3): pure functions, no I/O.

A pass rate over a handful of repeats is noisy, so every rate travels with its
95% Wilson score interval; the Wilson interval (unlike p ± 1.96·se) stays inside
[0, 1] and is honest at n = 1 and at 0% / 100%. Every function answers None for
"not established" (nothing exercised, k larger than the sample), never 0.
"""
from __future__ import annotations

import math
from collections import Counter

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def rate(successes: int, n: int) -> float | None:
    """successes / n; None when nothing was exercised (P1: `—`, never 0%)."""
    return successes / n if n > 0 else None


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for a binomial proportion; None when n == 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..{n}, got {successes}")
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    margin = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At p = 0 or 1 one bound is exactly 0 or 1; float noise must not move it.
    lo = 0.0 if successes == 0 else max(0.0, centre - margin)
    hi = 1.0 if successes == n else min(1.0, centre + margin)
    return lo, hi


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k (Chen et al. 2021): P(at least one of k draws without replacement
    from n attempts, c of which passed, passes) = 1 - C(n-c, k) / C(n, k).

    None when the sample cannot answer it (k < 1 or k > n).
    """
    if k < 1 or n < k:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass^k (tau-bench's reliability): P(all k draws pass) = C(c, k) / C(n, k).

    None when the sample cannot answer it (k < 1 or k > n).
    """
    if k < 1 or n < k:
        return None
    return math.comb(c, k) / math.comb(n, k)


def det(answers: Counter, exercised: int) -> float | None:
    """P3: the largest group of exercised arms with one answer, over every exercised arm
    (one without an answer included); 0 when no two agree (a group of one is no
    agreement); None under two answers."""
    if sum(answers.values()) < 2:
        return None
    modal = answers.most_common(1)[0][1]
    return modal / exercised if modal > 1 else 0.0


def clearly_below(new: tuple[float, float] | None, base: tuple[float, float] | None) -> bool:
    """True when the NEW interval lies wholly below the BASE one: a drop noise cannot explain."""
    return new is not None and base is not None and new[1] < base[0]
