"""The statistics behind the pivot and compare (P1, P3): stats.py, checked against
independent computations (published values, brute-force enumeration)."""
from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_jaato_eval.results import stats


def test_rate_is_unknown_when_nothing_was_exercised():
    assert stats.rate(0, 0) is None  # P1: `—`, never 0%
    assert stats.rate(1, 2) == 0.5


@pytest.mark.parametrize("k, n, lo, hi", [
    # Reference values of the 95% Wilson score interval (Newcombe 1998, Table I,
    # and direct evaluation of the closed form).
    (1, 2, 0.0945, 0.9055),
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
])
def test_wilson_matches_published_values(k, n, lo, hi):
    got = stats.wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-4)


def test_wilson_is_unknown_at_n_zero_and_refuses_impossible_counts():
    assert stats.wilson(0, 0) is None
    with pytest.raises(ValueError):
        stats.wilson(3, 2)


@given(st.integers(0, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))
       .filter(lambda t: t[1] > 0))
def test_wilson_contains_the_estimate_and_stays_in_unit_interval(kn):
    k, n = kn
    lo, hi = stats.wilson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def _brute(n: int, c: int, k: int, need_all: bool) -> float:
    """Every k-subset of n attempts (c passing): the share where any / all pass."""
    attempts = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    hits = sum((all if need_all else any)(attempts[i] for i in s) for s in subsets)
    return hits / len(subsets)


@given(st.integers(1, 9).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_and_pass_hat_k_are_the_unbiased_estimators(nck):
    n, c, k = nck
    assert stats.pass_at_k(n, c, k) == pytest.approx(_brute(n, c, k, need_all=False))
    assert stats.pass_hat_k(n, c, k) == pytest.approx(_brute(n, c, k, need_all=True))


def test_pass_at_k_edges():
    assert stats.pass_at_k(5, 3, 1) == pytest.approx(0.6)     # pass@1 is the pass rate
    assert stats.pass_at_k(5, 3, 2) == pytest.approx(0.9)
    assert stats.pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert stats.pass_at_k(2, 0, 2) == 0.0 and stats.pass_hat_k(2, 2, 2) == 1.0
    # A sample smaller than k cannot answer: unknown, not 0.
    assert stats.pass_at_k(2, 1, 3) is None and stats.pass_hat_k(2, 1, 3) is None
    assert stats.pass_at_k(3, 1, 0) is None


def test_det():
    assert stats.det(Counter(), 3) is None and stats.det(Counter(a=1), 2) is None  # under two
    assert stats.det(Counter(a=2, b=1), 3) == pytest.approx(2 / 3)
    assert stats.det(Counter(a=1, b=1), 2) == 0.0  # no two agree
    assert stats.det(Counter(a=2), 4) == 0.5       # an arm without an answer stays counted


def test_clearly_below_needs_disjoint_intervals():
    assert stats.clearly_below((0.0, 0.3), (0.5, 1.0))
    assert not stats.clearly_below((0.0, 0.6), (0.5, 1.0))
    assert not stats.clearly_below(None, (0.5, 1.0))
