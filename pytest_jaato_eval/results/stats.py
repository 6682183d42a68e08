"""The statistics behind the pivot (P1, P3), the sweep's headline and pairs, and `compare`:
pure functions, no I/O, the standard library only (docs/statistics.md gives each formula
and its source).

A pass rate over a handful of repeats is noisy, so every rate travels with its
95% Wilson score interval; the Wilson interval (unlike p ± 1.96·se) stays inside
[0, 1] and is honest at n = 1 and at 0% / 100%. Every function answers None for
"not established" (nothing exercised, k larger than the sample), never 0.

Few clusters are the rule in agent benchmarks (a sweep of 5 tasks is 5 clusters), so
intervals over clusters use Student's t on G - 1 degrees of freedom, computed here
from its closed form rather than a normal approximation.
"""
from __future__ import annotations

import math
from collections import Counter
from statistics import NormalDist, fmean, variance
from typing import Sequence

Z95 = 1.959963984540054  # two-sided 95% normal quantile
ALPHA = 0.05             # every interval here is 95%, two-sided
POWER = 0.80             # the power a "runs needed" line plans for

Interval = tuple[float, float]


def rate(successes: int, n: int) -> float | None:
    """successes / n; None when nothing was exercised (P1: `—`, never 0%)."""
    return successes / n if n > 0 else None


def wilson(successes: int, n: int, z: float = Z95) -> Interval | None:
    """The Wilson score interval for a binomial proportion; None when n == 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..{n}, got {successes}")
    return score_interval(successes / n, n, z)


def score_interval(p: float, n: float, q: float = Z95) -> Interval:
    """Wilson's interval for a proportion p seen over n trials, n any positive real (an
    effective sample size), with the quantile q in place of z:

        (p + q²/2n ± q·sqrt(p(1-p)/n + q²/4n²)) / (1 + q²/n)

    Always inside [0, 1]; at p = 0 (p = 1) the lower (upper) bound is exactly 0 (1)."""
    q2 = q * q
    denom = 1 + q2 / n
    centre = (p + q2 / (2 * n)) / denom
    margin = q * math.sqrt(max(0.0, p * (1 - p)) / n + q2 / (4 * n * n)) / denom
    # At p = 0 or 1 one bound is exactly 0 or 1, and p is always inside: float noise must
    # not move them.
    lo = 0.0 if p <= 0 else min(p, max(0.0, centre - margin))
    hi = 1.0 if p >= 1 else max(p, min(1.0, centre + margin))
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


# -- Student's t, for few clusters -----------------------------------------------------------
_T_EXACT_DF = 1000  # beyond, the asymptotic expansions below are exact to the digits shown


def t_within(t: float, df: int) -> float:
    """A(t | df) = P(|T| <= |t|) for Student's t on df >= 1 (an integer) degrees of freedom.

    Up to 1000 df, the finite sums of Abramowitz & Stegun 26.7.3 (odd df) and 26.7.4
    (even df), exact, with θ = atan(|t| / sqrt(df)):

        odd:  (2/π)·(θ + sin θ·(cos θ + (2/3)cos³θ + … + (2·4…(df-3))/(1·3…(df-2))·cos^(df-2)θ))
        even: sin θ·(1 + (1/2)cos²θ + … + (1·3…(df-3))/(2·4…(df-2))·cos^(df-2)θ)

    Beyond, the normal approximation of A&S 26.7.8, z = t·(1 - 1/4df) / sqrt(1 + t²/2df)
    (within 2e-7 of the exact value there).
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    t = abs(t)
    if df > _T_EXACT_DF:
        return math.erf(_t_as_normal(t, df) / math.sqrt(2))
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:
        if df == 1:
            return 2 * theta / math.pi
        term = total = math.cos(theta)
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return min(1.0, 2 / math.pi * (theta + math.sin(theta) * total))
    term = total = 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return min(1.0, math.sin(theta) * total)


def _t_as_normal(t: float, df: int) -> float:
    """A&S 26.7.8: the normal deviate of t on many degrees of freedom."""
    return t * (1 - 1 / (4 * df)) / math.sqrt(1 + t * t / (2 * df))


def t_two_sided_p(t: float, df: int) -> float:
    """The two-sided p-value of a t statistic: P(|T| >= |t|) = I_x(df/2, 1/2) with
    x = df/(df + t²) (A&S 26.7.1 and 26.5.27), the regularized incomplete beta function
    computed directly in the tail, so a p-value far below 1e-12 keeps its digits (1 - A
    would cancel to the last bit of A); beyond 1000 df, erfc of the normal deviate."""
    if df > _T_EXACT_DF:
        return math.erfc(_t_as_normal(abs(t), df) / math.sqrt(2))
    return min(1.0, max(0.0, incomplete_beta(df / (df + t * t), df / 2, 0.5)))


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), from its continued fraction
    (A&S 26.5.8) evaluated by the modified Lentz method, on the side where it converges
    fast (x < (a+1)/(a+b+2)), else by I_x(a, b) = 1 - I_{1-x}(b, a)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - incomplete_beta(1 - x, b, a)
    log_front = (a * math.log(x) + b * math.log1p(-x)
                 + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))
    tiny = 1e-300

    def nonzero(value: float) -> float:
        return tiny if abs(value) < tiny else value

    c, d = 1.0, 1.0 / nonzero(1 - (a + b) * x / (a + 1))
    f = d
    for m in range(1, 400):
        # the even term d_2m, then the odd term d_2m+1 of the fraction
        for coeff in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                      -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 / nonzero(1 + coeff * d)
            c = nonzero(1 + coeff / c)
            f *= c * d
        if abs(c * d - 1) < 1e-16:
            break
    return math.exp(log_front) * f / a


def t_quantile(prob: float, df: int) -> float:
    """The quantile of Student's t: the t with P(T <= t) = prob, for 0 < prob < 1.

    Up to 1000 df, Newton's method on A(t | df) = 2·prob - 1, started from the first
    term of the Cornish-Fisher expansion (A&S 26.7.5); A is concave in t > 0, so after
    one step the iterates approach the root from below. Beyond, the expansion's first
    four terms (exact to 1e-13 there). One df is the Cauchy's tan(π(prob - 1/2)).
    """
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    if prob == 0.5:
        return 0.0
    if prob < 0.5:
        return -t_quantile(1 - prob, df)
    if df == 1:
        return math.tan(math.pi * (prob - 0.5))
    z = NormalDist().inv_cdf(prob)
    if df > _T_EXACT_DF:
        g = ((z ** 3 + z) / 4,
             (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
        return z + sum(gi / df ** (i + 1) for i, gi in enumerate(g))
    target = 2 * prob - 1
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    t = z + (z ** 3 + z) / (4 * df)
    for _ in range(60):
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = (t_within(t, df) - target) / (2 * density)
        t = max(t - step, t / 2)  # never past 0: A is only concave on t > 0
        if abs(step) <= 1e-12 * max(1.0, t):
            break
    return t


# -- intervals over clusters -----------------------------------------------------------------
def no_spread_interval(value: float, units: int, low: float, high: float,
                       alpha: float = ALPHA) -> Interval:
    """Every one of `units` units showed `value`: no spread to estimate a standard error
    from. A share π of the population's units unlike `value` lets all of them agree with
    probability (1-π)^units, so π <= 1 - (alpha/2)^(1/units) with confidence 1 - alpha/2
    on each side (the Clopper-Pearson bound for units of units; "the rule of three" at
    one-sided 5%); the mean then lies within value·(1-π) + [low, high]·π, the range a
    unit can take being [low, high]: a two-sided 1 - alpha interval, as every other."""
    share = 1 - (alpha / 2) ** (1 / units)
    return value * (1 - share) + low * share, value * (1 - share) + high * share


def no_spread_p(d: float, units: int) -> float:
    """The two-sided p-value `no_spread_interval` inverts: 2·(1+|d|)^-G, twice the largest
    chance that G units all show d when the mean is 0 (1 when d is 0)."""
    return 1.0 if d == 0 else min(1.0, 2 * (1 + abs(d)) ** -units)


def mean_and_se(values: Sequence[float]) -> tuple[float, float]:
    """The mean of G cluster values and its cluster-robust standard error with equal
    cluster weights: sqrt(s² / G), s² the sample variance (the CR1 sandwich of Cameron &
    Miller 2015 for a mean of cluster means, G/(G-1) included). Needs G >= 2."""
    return fmean(values), math.sqrt(variance(values) / len(values))


def clustered_rate(units: Sequence[float], arms: int,
                   alpha: float = ALPHA) -> tuple[Interval, float | None]:
    """The interval of a rate that is the mean of G >= 2 unit rates (tasks as clusters),
    and the effective sample size behind it (None where none applies).

    Wilson's interval at the effective sample size n* = p(1-p)/se², se the
    cluster-robust standard error, capped at the exercised arms (a design effect under 1
    is not credited), with t(G-1) in place of z: Korn & Graubard's (1998) degrees-of-
    freedom adjustment, in the Wilson form Franco et al. (2019) recommend. When every
    unit has the same rate there is no spread: `no_spread_interval`."""
    p, se = mean_and_se(units)
    if se <= 0:
        return no_spread_interval(p, len(units), 0.0, 1.0, alpha), None
    n_eff = min(float(arms), p * (1 - p) / (se * se))
    return score_interval(p, n_eff, t_quantile(1 - alpha / 2, len(units) - 1)), n_eff


def paired_difference(diffs: Sequence[float],
                      alpha: float = ALPHA) -> tuple[float, Interval, float]:
    """The mean of G >= 2 paired unit differences (each in [-1, 1]), its two-sided
    interval and the two-sided p-value of "no difference": the cluster-robust paired t,
    mean ± t(G-1)·se with se = sqrt(s²/G) (Miller 2024, with Cameron & Miller's t(G-1)
    for few clusters), clipped to [-1, 1]; p from the same statistic, so p < alpha
    exactly when the interval leaves 0 out. With no spread, the `no_spread_interval`
    and its p-value `no_spread_p`."""
    d = fmean(diffs)
    g = len(diffs)
    sd2 = variance(diffs)
    if sd2 <= 0:
        return d, no_spread_interval(d, g, -1.0, 1.0, alpha), no_spread_p(d, g)
    se = math.sqrt(sd2 / g)
    q = t_quantile(1 - alpha / 2, g - 1)
    return d, (max(-1.0, d - q * se), min(1.0, d + q * se)), t_two_sided_p(d / se, g - 1)


def sign_test_p(up: int, down: int) -> float:
    """The exact two-sided sign test (the exact McNemar test, McNemar 1947; Conover 1999,
    3.4): of the `up + down` units that changed, the chance under "no difference" (each
    way with probability 1/2) of a split as uneven as this one or more, both tails:
    min(1, 2·P(Bin(n, 1/2) <= min(up, down)))."""
    n = up + down
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(up, down) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def holm(ps: Sequence[float], alpha: float = ALPHA) -> list[tuple[float, bool]]:
    """Holm's (1979) step-down over m hypotheses: the i-th smallest p-value (i from 0) is
    tested at alpha/(m-i), and the steps stop at the first that fails; the chance of any
    false rejection stays at most alpha whatever the p-values' dependence, and Holm
    rejects everything Bonferroni does. Equal p-values share the strictest of their
    steps, so equal evidence gets an equal interval. For each hypothesis, in the order
    given: the level its step tests at, and whether it is rejected."""
    m = len(ps)
    out: list[tuple[float, bool]] = [(alpha, False)] * m
    going, level, last = True, alpha, None
    for i, k in enumerate(sorted(range(m), key=lambda j: ps[j])):
        if ps[k] != last:
            level, last = alpha / (m - i), ps[k]
        going = going and ps[k] < level
        out[k] = (level, going)
    return out


def newcombe_difference(passed_a: int, n_a: int, passed_b: int, n_b: int,
                        z: float = Z95) -> tuple[float, Interval]:
    """pb - pa for two independent binomial samples (one item's repeats under two
    profile sets), and Newcombe's (1998) hybrid score interval (his method 10) built
    from the two Wilson intervals (la, ua), (lb, ub):

        [d - sqrt((pb-lb)² + (ua-pa)²),  d + sqrt((ub-pb)² + (pa-la)²)]

    Always inside [-1, 1]."""
    pa, pb = passed_a / n_a, passed_b / n_b
    wa, wb = wilson(passed_a, n_a, z), wilson(passed_b, n_b, z)
    assert wa is not None and wb is not None  # both n > 0: divided by above
    (la, ua), (lb, ub) = wa, wb
    d = pb - pa
    return d, (max(-1.0, d - math.hypot(pb - lb, ua - pa)),
               min(1.0, d + math.hypot(ub - pb, pa - la)))


def newcombe_p(passed_a: int, n_a: int, passed_b: int, n_b: int) -> float:
    """The p-value the hybrid score interval inverts: 2·Φ(-z*), z* the quantile at
    which the interval's edge reaches 0 (its bounds move out as z grows), found by
    bisection; 1 when the samples agree."""
    d, _ = newcombe_difference(passed_a, n_a, passed_b, n_b, 0.0)
    if d == 0:
        return 1.0
    edge = 1 if d < 0 else 0  # the bound that moves toward 0

    def reaches(z: float) -> bool:
        iv = newcombe_difference(passed_a, n_a, passed_b, n_b, z)[1]
        return iv[edge] >= 0 if d < 0 else iv[edge] <= 0

    lo, hi = 0.0, 40.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return min(1.0, math.erfc(hi / math.sqrt(2)))  # 2·Φ(-z) by erfc: exact far in the tail


# -- how much more to run ----------------------------------------------------------------------
def units_needed(var: float, delta: float, alpha: float = ALPHA,
                 power: float = POWER) -> int | None:
    """The fewest units G >= 2 for a paired t on G units whose differences vary with
    variance `var` to detect a mean difference `delta` at `power`, two-sided at `alpha`:
    the smallest G with G >= (t(G-1, 1-alpha/2) + t(G-1, power))² · var / delta²
    (the normal formula of Miller 2024, with t quantiles for few units). None when var
    or delta is not positive."""
    if var <= 0 or delta <= 0:
        return None
    nd = NormalDist()
    # The normal formula is a lower bound (t quantiles exceed z); the answer lies a few
    # units above it at most.
    g = max(2, math.ceil((nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power)) ** 2 * var / delta ** 2))
    while True:
        q = t_quantile(1 - alpha / 2, g - 1) + t_quantile(power, g - 1)
        if q * q * var / delta ** 2 <= g:
            return g
        g += 1


def repeats_factor(total_var: float, within_var: float, units: int, delta: float,
                   alpha: float = ALPHA, power: float = POWER) -> float | None:
    """How many times today's repeats the same units need to detect `delta`: a unit's
    difference varies as between + within/k at k times the repeats (between = total -
    within, the part more repeats cannot shrink: the design effect of clustering), and a
    paired t on `units` units needs that under units·delta²/(t(units-1, 1-alpha/2) +
    t(units-1, power))². None when no k suffices (the tasks differ too much)."""
    q = t_quantile(1 - alpha / 2, units - 1) + t_quantile(power, units - 1)
    target = units * delta ** 2 / (q * q)
    between = max(0.0, total_var - within_var)
    if within_var <= 0 or target <= between:
        return None
    return within_var / (target - between)


def two_sample_size(pa: float, pb: float, delta: float, alpha: float = ALPHA,
                    power: float = POWER) -> int | None:
    """Repeats per side for two independent proportions to detect `delta`:
    (z(1-alpha/2) + z(power))² · (pa(1-pa) + pb(1-pb)) / delta² (Fleiss, Levin & Paik
    2003, chapter 4, without the continuity correction). None when both sides are certain."""
    var = pa * (1 - pa) + pb * (1 - pb)
    if var <= 0 or delta <= 0:
        return None
    nd = NormalDist()
    return math.ceil((nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power)) ** 2 * var / delta ** 2)
