"""The statistics behind the pivot (P1, P3), the sweep's headline and pairs, and compare:
stats.py, checked against independent computations (published values, brute-force
enumeration, scipy and statsmodels)."""
from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

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


# -- Student's t, computed: checked against scipy ------------------------------------------
DFS = [1, 2, 3, 4, 5, 6, 7, 9, 10, 29, 30, 100, 999, 1000, 1001, 5000, 200_000]


@pytest.mark.parametrize("df", DFS)
def test_t_distribution_matches_scipy(df):
    t_dist = scipy_stats.t(df)
    for prob in (0.51, 0.8, 0.9, 0.975, 0.995, 0.9995, 0.99999):
        assert stats.t_quantile(prob, df) == pytest.approx(t_dist.ppf(prob), rel=1e-9)
        assert stats.t_quantile(1 - prob, df) == pytest.approx(t_dist.ppf(1 - prob), rel=1e-9)
    for t in (0.0, 0.3, 1.0, 1.96, 3.0, 8.0, 40.0):
        assert stats.t_two_sided_p(t, df) == pytest.approx(2 * t_dist.sf(t), abs=3e-7)
        assert stats.t_two_sided_p(-t, df) == stats.t_two_sided_p(t, df)


@given(st.integers(1, 3000), st.floats(0.5001, 0.99999))
def test_t_quantile_inverts_the_distribution(df, prob):
    t = stats.t_quantile(prob, df)
    # Past 1000 df both are asymptotic expansions, each within 2e-7 of the exact value.
    assert stats.t_within(t, df) == pytest.approx(2 * prob - 1, abs=1e-9 if df <= 1000 else 5e-7)
    assert t >= stats.t_quantile(prob, df + 1)  # heavier tails with fewer df


def test_t_refuses_what_has_no_answer():
    with pytest.raises(ValueError):
        stats.t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        stats.t_within(1.0, 0)
    assert stats.t_quantile(0.5, 4) == 0.0


# -- Wilson at an effective sample size: statsmodels' Wilson -------------------------------
@given(st.floats(0.0, 1.0), st.floats(0.5, 500.0), st.floats(1.0, 15.0))
def test_score_interval_is_statsmodels_wilson_at_any_n_and_quantile(p, n, q):
    alpha = 2 * scipy_stats.norm.sf(q)  # the level whose z is q
    lo, hi = proportion_confint(p * n, n, alpha=alpha, method="wilson")
    got = stats.score_interval(p, n, q)
    assert got == pytest.approx((max(0.0, lo), min(1.0, hi)), abs=1e-9)
    assert 0.0 <= got[0] <= p <= got[1] <= 1.0


# -- clustered intervals: statsmodels' cluster-robust standard errors ------------------------
def _cluster_se(values, groups, weights):
    """statsmodels' CR1 standard error of a weighted mean (intercept-only WLS)."""
    fit = sm.WLS(np.asarray(values, float), np.ones((len(values), 1)),
                 weights=np.asarray(weights, float)).fit(
        cov_type="cluster", cov_kwds={"groups": np.asarray(groups)})
    return float(fit.params[0]), float(fit.bse[0])


def test_mean_and_se_is_the_cluster_robust_standard_error():
    # Arms of 4 tasks, each weighing 1 in all (weight 1/arms): statsmodels sees arms.
    tasks = [[1, 1, 0], [0, 0], [1, 1, 1, 1], [1, 0, 0, 0, 1]]
    values = [v for t in tasks for v in t]
    groups = [g for g, t in enumerate(tasks) for _ in t]
    weights = [1 / len(t) for t in tasks for _ in t]
    mean, se = stats.mean_and_se([sum(t) / len(t) for t in tasks])
    assert (mean, se) == pytest.approx(_cluster_se(values, groups, weights), rel=1e-9)


def test_clustered_rate_is_wilson_at_the_effective_n_with_t():
    units = [2 / 3, 0.0, 1.0, 0.4]
    arms = 14
    (lo, hi), n_eff = stats.clustered_rate(units, arms)
    p = sum(units) / 4
    se2 = np.var(units, ddof=1) / 4
    assert n_eff == pytest.approx(min(arms, p * (1 - p) / se2))
    q = scipy_stats.t.ppf(0.975, 3)
    expected = proportion_confint(p * n_eff, n_eff, alpha=2 * scipy_stats.norm.sf(q),
                                  method="wilson")
    assert (lo, hi) == pytest.approx(expected, abs=1e-9)


def test_clustered_rate_caps_the_effective_n_at_the_arms():
    # Tasks closer together than coins would be: no credit beyond the arms themselves.
    (lo, hi), n_eff = stats.clustered_rate([0.5, 0.5, 0.5, 0.55], 8)
    assert n_eff == 8
    assert (lo, hi) == pytest.approx(stats.score_interval(0.5125, 8, scipy_stats.t.ppf(0.975, 3)))


@pytest.mark.parametrize("units", [1, 2, 3, 10, 59])
def test_no_spread_is_the_clopper_pearson_bound(units):
    # Every unit at 100%: the two-sided 95% Clopper-Pearson interval for units/units
    # (one-sided 97.5% on its open side), at the level the other intervals print.
    lo, hi = stats.no_spread_interval(1.0, units, 0.0, 1.0)
    assert lo == pytest.approx(scipy_stats.beta.ppf(0.025, units, 1))
    assert lo == pytest.approx(proportion_confint(units, units, alpha=0.05, method="beta")[0])
    assert hi == 1.0
    assert stats.no_spread_interval(0.0, units, 0.0, 1.0) == pytest.approx((0.0, 1 - lo))
    d_lo, d_hi = stats.no_spread_interval(0.0, units, -1.0, 1.0)
    assert (d_lo, d_hi) == pytest.approx((-(1 - lo), 1 - lo))
    if units == 59:
        assert 1 - lo == pytest.approx(3.69 / 59, rel=0.04)  # the rule of three at 97.5%


# -- the paired difference: scipy's paired t and statsmodels' clustered one -----------------
def test_paired_difference_is_the_paired_t_test():
    a = [0.5, 1.0, 0.0, 0.75, 1.0, 0.25]
    b = [1.0, 1.0, 0.5, 0.5, 1.0, 1.0]
    d, (lo, hi), p = stats.paired_difference([y - x for x, y in zip(a, b)])
    test = scipy_stats.ttest_rel(b, a)
    assert p == pytest.approx(test.pvalue, rel=1e-9)
    ci = test.confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert d == pytest.approx(np.mean(b) - np.mean(a))


def test_paired_difference_is_clustered_on_item_level_differences():
    # Items of 3 tasks (samples), each task weighing 1: statsmodels' cluster-robust t on the
    # item-level differences (weights 1/items), with G - 1 degrees of freedom.
    items = {"a": [1.0, 0.0, 0.5], "b": [-1.0, 0.0], "c": [0.5, 1.0, 1.0, 0.0]}
    values = [v for vs in items.values() for v in vs]
    groups = [g for g, vs in enumerate(items.values()) for _ in vs]
    weights = [1 / len(vs) for vs in items.values() for _ in vs]
    mean, se = _cluster_se(values, groups, weights)
    d, (lo, hi), p = stats.paired_difference([sum(vs) / len(vs) for vs in items.values()])
    q = scipy_stats.t.ppf(0.975, 2)
    assert d == pytest.approx(mean)
    assert (lo, hi) == pytest.approx((max(-1, mean - q * se), min(1, mean + q * se)))
    assert p == pytest.approx(2 * scipy_stats.t.sf(abs(mean / se), 2))


def test_paired_difference_of_single_binary_items_approaches_mcnemar():
    # One repeat, one item per task: the differences are -1, 0, +1, and the paired t and
    # McNemar's test (asymptotic, no continuity correction) agree as tasks grow.
    b, c, n = 40, 20, 400
    table = [[100, b], [c, n - 100 - b - c]]
    diffs = [-1] * b + [1] * c + [0] * (n - b - c)
    assert stats.paired_difference(diffs)[2] == pytest.approx(
        mcnemar(table, exact=False, correction=False).pvalue, rel=0.05)


def test_paired_difference_without_spread_is_bounded_not_certain():
    d, iv, p = stats.paired_difference([0.0] * 5)
    assert (d, p) == (0.0, 1.0) and iv[0] < 0 < iv[1]
    d, iv, p = stats.paired_difference([1.0] * 5)   # every task flipped to PASS
    assert p == pytest.approx(2 * 2 ** -5) and iv[1] == 1.0
    assert (iv[0] > 0) == (p < 0.05)  # the bound and its p-value agree
    d, iv, p = stats.paired_difference([1.0] * 6)
    assert p == pytest.approx(2 * 2 ** -6) and iv[0] > 0 and p < 0.05


@pytest.mark.parametrize("g", [2, 3, 5, 6, 8])
@pytest.mark.parametrize("d", [1.0, -1.0, 0.5, -0.25])
def test_no_spread_is_two_sided_like_every_other_interval(g, d):
    # All G tasks show d: the p-value is the two-sided one (at d = ±1, scipy's two-sided
    # sign test of G in G), and the interval leaves 0 out exactly when p < 5%: a
    # one-sided 5% test here would fire twice as often as the paired t beside it.
    _, iv, p = stats.paired_difference([d] * g)
    assert p == pytest.approx(min(1.0, 2 * (1 + abs(d)) ** -g))
    if abs(d) == 1:
        assert p == pytest.approx(scipy_stats.binomtest(g, g, 0.5).pvalue)
    assert (iv[0] > 0 or iv[1] < 0) == (p < 0.05)


# -- one item's repeats: Newcombe's hybrid score interval ----------------------------------
@pytest.mark.parametrize("a, b, lo, hi", [
    # Newcombe (1998), Table II, method 10: the difference b - a.
    ((48, 80), (56, 70), 0.0524, 0.3339),
    ((3, 10), (9, 10), 0.1705, 0.8090),
    ((0, 20), (0, 10), -0.1611, 0.2775),
    ((0, 20), (10, 10), 0.6791, 1.0),
    ((0, 10), (10, 10), 0.6075, 1.0),
])
def test_newcombe_matches_published_values(a, b, lo, hi):
    assert stats.newcombe_difference(*a, *b)[1] == pytest.approx((lo, hi), abs=5e-5)


@given(st.integers(1, 40), st.integers(1, 40), st.data())
def test_newcombe_is_statsmodels_and_its_p_value_inverts_it(n_a, n_b, data):
    x_a, x_b = data.draw(st.integers(0, n_a)), data.draw(st.integers(0, n_b))
    d, (lo, hi) = stats.newcombe_difference(x_a, n_a, x_b, n_b)
    expected = confint_proportions_2indep(x_b, n_b, x_a, n_a, method="newcomb", compare="diff")
    assert (lo, hi) == pytest.approx(tuple(map(float, expected)), abs=1e-9)
    assert -1 <= lo <= d <= hi <= 1
    p = stats.newcombe_p(x_a, n_a, x_b, n_b)
    assert 0 <= p <= 1
    if 1e-12 < p < 1:  # at the level 1 - p the interval's edge is 0
        z = scipy_stats.norm.isf(p / 2)
        edge = stats.newcombe_difference(x_a, n_a, x_b, n_b, z)[1]
        assert min(abs(edge[0]), abs(edge[1])) == pytest.approx(0, abs=1e-6)
    assert (p < 0.05) == (lo > 0 or hi < 0) or abs(p - 0.05) < 1e-6


@pytest.mark.parametrize("x_a, x_b", [(21, 0), (0, 21), (40, 1)])
def test_newcombe_p_keeps_its_precision_far_in_the_tail(x_a, x_b):
    n = 21 if max(x_a, x_b) <= 21 else 40
    p = stats.newcombe_p(x_a, n, x_b, n)
    assert 0 < p < 1e-5
    edge = stats.newcombe_difference(x_a, n, x_b, n, scipy_stats.norm.isf(p / 2))[1]
    assert min(abs(edge[0]), abs(edge[1])) == pytest.approx(0, abs=1e-7)


# -- how much more to run: statsmodels' power --------------------------------------------
@pytest.mark.parametrize("sd, delta", [(1.0, 0.5), (0.3, 0.1), (0.5, 0.4), (0.2, 0.05),
                                       (0.45, 0.3), (0.2357, 0.8333), (0.5, 0.6), (0.01, 0.5)])
def test_units_needed_matches_the_t_test_power(sd, delta):
    # statsmodels solves the noncentral t's power exactly; the t-quantile formula is the
    # textbook approximation of it, within a unit.
    exact = TTestPower().solve_power(effect_size=delta / sd, alpha=0.05, power=0.8,
                                     nobs=None) if delta / sd < 20 else 2.0
    assert abs(stats.units_needed(sd * sd, delta) - max(2, math.ceil(exact))) <= 1
    assert stats.units_needed(0.0, 0.1) is None and stats.units_needed(1.0, 0.0) is None


@pytest.mark.parametrize("pa, pb", [(0.5, 0.7), (0.1, 0.3), (0.9, 0.6)])
def test_two_sample_size_matches_the_normal_power(pa, pb):
    delta = abs(pb - pa)
    effect = delta / math.sqrt((pa * (1 - pa) + pb * (1 - pb)) / 2)
    exact = NormalIndPower().solve_power(effect_size=effect, alpha=0.05, power=0.8)
    assert stats.two_sample_size(pa, pb, delta) == math.ceil(exact)
    assert stats.two_sample_size(1.0, 1.0, 0.1) is None


def test_repeats_factor_reaches_the_power_it_promises():
    total, within, units, delta = 0.09, 0.06, 20, 0.2
    k = stats.repeats_factor(total, within, units, delta)
    between = total - within
    q = scipy_stats.t.ppf(0.975, units - 1) + scipy_stats.t.ppf(0.8, units - 1)
    assert q * q * (between + within / k) / units == pytest.approx(delta ** 2)
    # When the tasks alone differ more than the target allows, no number of repeats will do.
    assert stats.repeats_factor(0.5, 0.01, 6, 0.2) is None


# -- tail p-values, the exact sign test, Holm ---------------------------------------------------
@pytest.mark.parametrize("t, df", [(8.0, 200), (20.0, 30), (40.0, 40), (50.0, 5), (300.0, 3),
                                   (1.5, 3), (0.1, 9), (3.0, 1), (12.0, 2)])
def test_a_tiny_p_value_keeps_its_digits(t, df):
    # 1 - A(t) cancels below ~1e-12 (it read 2.2e-16 in JSON); the tail is computed directly.
    p = stats.t_two_sided_p(t, df)
    assert p == pytest.approx(2 * scipy_stats.t.sf(t, df), rel=1e-9)
    assert p > 0


@pytest.mark.parametrize("up, down", [(0, 4), (4, 0), (1, 3), (3, 9), (0, 0), (5, 5), (2, 17)])
def test_the_sign_test_is_scipys_exact_binomial_test(up, down):
    expected = 1.0 if up + down == 0 else scipy_stats.binomtest(up, up + down, 0.5).pvalue
    assert stats.sign_test_p(up, down) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_holm_rejects_what_statsmodels_holm_rejects(seed):
    rng = np.random.default_rng(seed)
    ps = list(rng.uniform(0, 0.06, size=int(rng.integers(1, 8))))
    ours = stats.holm(ps)
    assert [rejected for _, rejected in ours] == list(multipletests(ps, 0.05, "holm")[0])
    # Each p is tested at alpha/(m - i), i its rank among the p-values.
    ranks = np.argsort(np.argsort(ps))
    assert [level for level, _ in ours] == pytest.approx([0.05 / (len(ps) - r) for r in ranks])


def test_holm_gives_equal_p_values_the_same_step():
    assert stats.holm([0.01, 0.01, 0.5]) == [(0.05 / 3, True), (0.05 / 3, True), (0.05, False)]
    assert stats.holm([]) == []
