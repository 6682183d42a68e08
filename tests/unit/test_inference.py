"""Which profile set is better, and how sure: results/inference.py from the pivot's
cells, checked against an independent computation from the arms themselves (statsmodels'
cluster-robust standard errors, scipy's t), by properties any honest comparison has, at
the extremes, and as the blocks every medium shows."""
from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm
from document_checks import code_blocks
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import proportion_confint

from pytest_jaato_eval.results import inference, stats
from pytest_jaato_eval.results.account import account
from pytest_jaato_eval.results.formats import document
from pytest_jaato_eval.results.pivot import (WIDTH, Pivot, build_cells, headline_row,
                                             method_text, needed_text, pair_cost_text,
                                             points, render_pivot, sweep_lines)
from pytest_jaato_eval.testing.records import arm_record

STATES = {"P": "PASS", "F": "FAIL", "B": "BLOCKED"}


def arms(profile_set: str, layout: dict[str, dict[str, str]], cost: float = 0.01) -> list:
    """Records from a layout: task -> sample -> one letter per repeat (P, F, B); the sample
    "" is a task without a dataset."""
    out = []
    for task, samples in layout.items():
        for sample, states in samples.items():
            for r, s in enumerate(states):
                kw = {"sample_id": sample} if sample else {}
                where = f"{task}[{sample}]" if sample else task
                out.append(arm_record(task, profile_set, r, STATES[s], cost=cost,
                                      arm_id=f"{where}@{profile_set}#{r}", **kw))
    return out


def tasks(layout):
    return inference.tasks_of(build_cells(arms("x", layout)))


# -- the headline -----------------------------------------------------------------------------
def test_every_task_weighs_the_same_and_blocked_is_never_in_the_rate():
    layout = {"big": {f"s{i}": "PP" for i in range(10)},   # 20 arms, all PASS
              "small": {"": "FFB"}}                           # 2 exercised FAIL, 1 BLOCKED
    h = inference.headline("x", tasks(layout))
    assert h.rate == 0.5                  # (1 + 0) / 2, not 20 / 22
    assert (h.level, h.units, h.tasks, h.items) == (inference.TASK, 2, 2, 11)
    assert (h.arms, h.exercised, h.passed, h.blocked) == (23, 22, 20, 1)
    assert h.floor == pytest.approx((1 + 0) / 2)  # the small task's floor is 0/3
    assert h.cost_per_pass == pytest.approx(23 * 0.01 / 20)  # every arm's cost, per PASS


def _arm_level(layout):
    """Each exercised arm's outcome, its task, and its weight (1 / (items × repeats))."""
    values, groups, weights = [], [], []
    for g, samples in enumerate(layout.values()):
        live = {k: [c for c in v if c != "B"] for k, v in samples.items()}
        live = {k: v for k, v in live.items() if v}
        for outcomes in live.values():
            for c in outcomes:
                values.append(1.0 if c == "P" else 0.0)
                groups.append(g)
                weights.append(1 / (len(live) * len(outcomes)))
    return np.array(values), np.array(groups), np.array(weights)


def test_the_headline_is_statsmodels_cluster_robust_estimate_in_wilson_form():
    layout = {"a": {"s1": "PPF", "s2": "FF", "s3": "PB"}, "b": {"": "PPPF"},
              "c": {"u": "F", "v": "FFP"}, "d": {"": "PP"}, "e": {"w": "FP", "z": "PF"}}
    h = inference.headline("x", tasks(layout))
    y, groups, weights = _arm_level(layout)
    fit = sm.WLS(y, np.ones((len(y), 1)), weights=weights).fit(
        cov_type="cluster", cov_kwds={"groups": groups})
    p, se = float(fit.params[0]), float(fit.bse[0])
    assert h.rate == pytest.approx(p)
    n_eff = min(len(y), p * (1 - p) / se ** 2)
    assert h.effective_n == pytest.approx(n_eff)
    assert h.design_effect == pytest.approx(len(y) / n_eff)
    q = scipy_stats.t.ppf(0.975, 5 - 1)
    assert h.interval == pytest.approx(proportion_confint(
        p * n_eff, n_eff, alpha=2 * scipy_stats.norm.sf(q), method="wilson"), abs=1e-9)


def test_one_task_takes_its_samples_as_units_and_one_item_its_repeats():
    h = inference.headline("x", tasks({"t": {"a": "PP", "b": "PF", "c": "FF"}}))
    assert (h.level, h.units, h.rate) == (inference.SAMPLE, 3, 0.5)
    assert h.interval == pytest.approx(stats.clustered_rate([1, 0.5, 0], 6)[0])
    h = inference.headline("x", tasks({"t": {"": "PPFB"}}))
    assert (h.level, h.units) == (inference.ARM, 3)
    assert h.interval == stats.wilson(2, 3)  # the pivot cell's own interval


@pytest.mark.parametrize("layout, rate, lo, hi", [
    ({"a": {"": "PP"}, "b": {"": "PPP"}}, 1.0, 0.025 ** 0.5, 1.0),       # 100% everywhere
    ({"a": {"": "FF"}, "b": {"": "F"}, "c": {"": "FFF"}}, 0.0, 0.0, 1 - 0.025 ** (1 / 3)),
    ({"t": {"": "P"}}, 1.0, stats.wilson(1, 1)[0], 1.0),                # one task, one repeat
    ({"t": {"": "F"}}, 0.0, 0.0, stats.wilson(0, 1)[1]),
])
def test_extremes_stay_in_the_unit_interval_and_are_never_certain(layout, rate, lo, hi):
    h = inference.headline("x", tasks(layout))
    assert h.rate == rate
    assert h.interval == pytest.approx((lo, hi))
    assert 0 < hi - lo < 1


def test_all_blocked_says_nothing_and_divides_by_nothing():
    h = inference.headline("x", tasks({"a": {"": "BB"}, "b": {"s": "B"}}))
    assert (h.rate, h.interval, h.units, h.floor, h.cost_per_pass) == (None, None, 0, 0.0, None)
    assert h.design_effect is None
    p = inference.pair("x", tasks({"a": {"": "BB"}}), "y", tasks({"a": {"": "PP"}}))
    assert (p.diff, p.interval, p.p, p.needed) == (None, None, None, None)
    assert (p.left_items, p.left_arms) == (1, 4)
    line = "\n".join(sweep_lines(build_cells(arms("x", {"a": {"": "BB"}})
                                             + arms("y", {"a": {"": "PP"}}))))
    assert "x                    —        —  —             2     0%          —" in line
    assert "  no item exercised by both" in line
    assert "  left out: 1 item (4 arms) BLOCKED or not run under one set" in line


# -- a pair ------------------------------------------------------------------------------------
def test_a_pair_is_statsmodels_clustered_paired_t_on_item_level_differences():
    a = {"t1": {"s1": "PF", "s2": "FF"}, "t2": {"": "PPF"}, "t3": {"x": "F", "y": "P"},
         "t4": {"": "FF"}}
    b = {"t1": {"s1": "PP", "s2": "PF"}, "t2": {"": "PPP"}, "t3": {"x": "P", "y": "P"},
         "t4": {"": "FP"}}
    p = inference.pair("a", tasks(a), "b", tasks(b))
    # Independently: item-level differences, each task weighing 1, clustered by task.
    d, groups, weights = [], [], []
    for g, task in enumerate(a):
        for sample in a[task]:
            def share(s):
                return s.count("P") / len(s)
            d.append(share(b[task][sample]) - share(a[task][sample]))
            groups.append(g)
            weights.append(1 / len(a[task]))
    fit = sm.WLS(np.array(d), np.ones((len(d), 1)), weights=np.array(weights)).fit(
        cov_type="cluster", cov_kwds={"groups": np.array(groups)})
    mean, se = float(fit.params[0]), float(fit.bse[0])
    q = scipy_stats.t.ppf(0.975, 3)
    assert p.diff == pytest.approx(mean)
    assert p.interval == pytest.approx((mean - q * se, min(1.0, mean + q * se)))
    assert p.p == pytest.approx(2 * scipy_stats.t.sf(mean / se, 3))
    assert (p.level, p.units, p.better, p.worse, p.same) == (inference.TASK, 4, 5, 0, 1)


def test_missing_and_blocked_items_are_left_out_and_counted():
    a = {"t1": {"s1": "P", "s2": "BB", "s3": "F"}, "t2": {"": "P"}, "t3": {"": "F"}}
    b = {"t1": {"s1": "P", "s2": "PP", "s3": "P"}, "t2": {"": "F"}}   # t3 not run at all
    p = inference.pair("a", tasks(a), "b", tasks(b))
    assert (p.left_items, p.left_arms) == (2, 4 + 1)   # s2 (2 + 2 arms), t3 (1 arm)
    assert p.units == 2 and p.diffs == pytest.approx([0.5, -1.0])


def test_one_item_compares_its_repeats_as_two_samples():
    p = inference.pair("a", tasks({"t": {"": "PPPPFFFFFB"}}), "b", tasks({"t": {"": "PPPPPPPPF"}}))
    assert (p.level, p.units) == (inference.ARM, 18)
    d, iv = stats.newcombe_difference(4, 9, 8, 9)
    assert p.diff == pytest.approx(d) and p.interval == pytest.approx(iv)
    assert p.p == pytest.approx(stats.newcombe_p(4, 9, 8, 9))


def test_runs_needed_when_undecided():
    rng = random.Random(7)
    a = {f"t{i}": {"": "".join(rng.choice("PF") for _ in range(4))} for i in range(6)}
    b = {t: {"": "".join(rng.choice("PPF") for _ in range(4))} for t in a}
    p = inference.pair("a", tasks(a), "b", tasks(b))
    assert not p.decided and p.needed is not None
    n = p.needed
    # It plans for the declared smallest difference worth finding, not the one just seen
    # (power computed for the observed difference says nothing the p-value did not).
    assert n.delta == inference.DEFAULT_DETECT != pytest.approx(abs(p.diff))
    assert n.units_now == 6 and n.repeats_now == 4
    assert n.units == stats.units_needed(np.var(p.diffs, ddof=1), n.delta) and n.units > 6
    # The same question for a larger difference asked for (20 points): fewer runs.
    asked = inference.pair("a", tasks(a), "b", tasks(b), detect=0.20).needed
    assert asked.delta == 0.20 and asked.units < n.units
    # Decided pairs plan nothing.
    sure = inference.pair("a", tasks({f"t{i}": {"": "FFFF"} for i in range(8)}),
                          "b", tasks({f"t{i}": {"": "PPPP" if i else "PPPF"} for i in range(8)}))
    assert sure.decided and sure.needed is None


def test_a_sweep_already_enough_for_the_difference_asked_says_so():
    rng = random.Random(11)
    a = {f"t{i}": {"": "".join(rng.choice("PF") for _ in range(3))} for i in range(60)}
    b = {t: {"": "".join(rng.choice("PF") for _ in range(3))} for t in a}
    p = inference.pair("a", tasks(a), "b", tasks(b), detect=0.5)
    assert not p.decided and p.needed.units < 60
    assert needed_text(p.needed).endswith(f"{p.needed.units} tasks (now 60): enough already")


@pytest.mark.parametrize("x, shown", [(0, "+0"), (-0.0004, "-0.04"), (0.00002, "+0.002"),
                                      (-0.003, "-0.3"),
                                      (0.0051, "+1"), (-1, "-100"), (0.125, "+12")])
def test_points_never_read_minus_zero(x, shown):
    assert points(x) == shown


# -- properties ----------------------------------------------------------------------------------
layouts = st.dictionaries(
    st.sampled_from(["t1", "t2", "t3", "t4", "t5"]),
    st.dictionaries(st.sampled_from(["", "s1", "s2", "s3"]), st.text("PPFB", min_size=1,
                                                                    max_size=4),
                    min_size=1, max_size=3),
    min_size=1, max_size=5)


def _reversed(iv):
    return None if iv is None else (-iv[1], -iv[0])


@settings(max_examples=80, deadline=None)
@given(layouts, layouts)
def test_swapping_the_sets_flips_the_sign(a, b):
    ab = inference.pair("a", tasks(a), "b", tasks(b))
    ba = inference.pair("b", tasks(b), "a", tasks(a))
    assert (ab.diff is None) == (ba.diff is None)
    if ab.diff is not None:
        assert ba.diff == pytest.approx(-ab.diff)
        assert ba.interval == pytest.approx(_reversed(ab.interval))
        assert ba.p == pytest.approx(ab.p)
        assert (ab.better, ab.worse) == (ba.worse, ba.better)
        assert -1 <= ab.interval[0] <= ab.diff <= ab.interval[1] <= 1
        assert 0 <= ab.p <= 1


@settings(max_examples=80, deadline=None)
@given(layouts)
def test_a_set_against_itself_differs_by_0_with_0_inside(a):
    p = inference.pair("a", tasks(a), "a2", tasks(a))
    h = inference.headline("a", tasks(a))
    if h.rate is None:
        assert p.diff is None
        return
    assert p.diff == 0 and p.interval[0] <= 0 <= p.interval[1] and p.p == 1
    assert (p.better, p.worse) == (0, 0) and p.same == p.better + p.worse + p.same
    assert 0 <= h.interval[0] <= h.rate <= h.interval[1] <= 1


def _copies(layout, k):
    """The same tasks k times over, as new tasks: identical data repeated."""
    return {f"{t}~{i}": items for i in range(k) for t, items in layout.items()}


def _width(iv):
    return iv[1] - iv[0]


@settings(max_examples=60, deadline=None)
@given(layouts, layouts, st.integers(2, 4))
def test_intervals_narrow_as_identical_data_is_repeated(a, b, k):
    # k and k + 1 copies of the tasks: the same estimate over more clusters. (One task
    # against two is a change of units, samples or repeats to tasks, not more of the same.)
    h1, hk = (inference.headline("a", tasks(_copies(a, n))) for n in (k, k + 1))
    if h1.rate is not None:
        assert hk.rate == pytest.approx(h1.rate)
        assert _width(hk.interval) <= _width(h1.interval) + 1e-12
    p1, pk = (inference.pair("a", tasks(_copies(a, n)), "b", tasks(_copies(b, n)))
              for n in (k, k + 1))
    if p1.diff is not None:
        assert pk.diff == pytest.approx(p1.diff)
        assert _width(pk.interval) <= _width(p1.interval) + 1e-12


def test_repeating_a_tasks_repeats_does_not_narrow_the_clustered_interval():
    # Clustering: copies of the same outcomes within a task add no task to learn from.
    once = {"a": {"": "PF"}, "b": {"": "PP"}, "c": {"": "FF"}}
    twice = {t: {"": s * 2} for t, items in once.items() for s in items.values()}
    assert (inference.headline("x", tasks(twice)).interval
            == inference.headline("x", tasks(once)).interval)


# -- the blocks, in every medium ---------------------------------------------------------------
def sweep_records():
    rng = random.Random(3)
    out = []
    for name, good in (("cheap", "PFF"), ("strong", "PPF")):
        out += arms(name, {t: {s: "".join(rng.choice(good) for _ in range(2))
                               for s in ("s1", "s2")} for t in ("alpha", "beta", "gamma")},
                    cost=0.01 if name == "cheap" else 0.04)
    return out


def test_every_medium_carries_the_headline_and_the_pair():
    acc = account(Pivot.of_records(sweep_records()))
    cells = acc.cells
    text = "\n".join(render_pivot(cells))
    assert "Profile sets over the sweep (every task weighs the same):" in text
    assert "strong − cheap" in text and "95% CI" in text and "p=" in text
    md = document(acc, "markdown")
    assert "| profile set | pass rate | 95% CI | over |" in md and "**strong − cheap**" in md
    data = json.loads(document(acc, "json"))
    assert [h["profile_set"] for h in data["profile_sets"]] == ["cheap", "strong"]
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"], pair["unit"], pair["units"]) == ("cheap", "strong", "task", 3)
    assert pair["cost_per_arm_usd"] == pytest.approx({"a": 0.01, "b": 0.04})
    assert -1 <= pair["ci95"][0] <= pair["difference"] <= pair["ci95"][1] <= 1
    rows = [r.split(",") for r in document(acc, "csv").splitlines()]
    header = rows[0]
    sets = [dict(zip(header, r)) for r in rows[1:] if r[header.index("scope")] == "profile set"]
    assert [(s["task"], s["profile_set"], s["unit"], s["units"]) for s in sets] == [
        ("", "cheap", "task", "3"), ("", "strong", "task", "3")]
    assert float(sets[0]["pass_rate"]) == data["profile_sets"][0]["pass_rate"]


def test_one_cell_without_samples_adds_no_block():
    cells = build_cells(arms("x", {"t": {"": "PF"}}))
    assert sweep_lines(cells) == []


@pytest.mark.parametrize("names", [("a", "b"), ("x" * 70, "y" * 70), ("é" * 5, "set-" * 30),
                                   ("one", "two", "three", "four")])
def test_each_line_of_the_blocks_fits_80_columns(names):
    records = []
    for i, name in enumerate(names):
        records += arms(name, {f"task-{t}": {f"s{s}": "PF"[(t + s + i) % 2] * 3 + "B"
                                             for s in range(3)} for t in range(4)},
                        cost=123.4567)
        records += arms(name, {"task-x": {f"r{r}": "B" if i else "P" for r in range(999)}})
    lines = sweep_lines(build_cells(records), detect=0.003)  # a tiny effect: huge counts
    assert lines and all(len(line) <= WIDTH for line in lines), [
        line for line in lines if len(line) > WIDTH]


# -- docs/statistics.md, as written ------------------------------------------------------------
DOC = Path(__file__).parents[2] / "docs" / "statistics.md"
# The sweep the page's example describes: four tasks, one with a dataset of four samples.
EXAMPLE = {
    "small": {"fix-bug": {"": "PFF"}, "refactor": {"": "PPFB"}, "rename": {"": "PPP"},
              "summarise": {"a": "PF", "b": "FF", "c": "PP", "d": "FF"}},
    "large": {"fix-bug": {"": "PPF"}, "refactor": {"": "PPP"}, "rename": {"": "PPP"},
              "summarise": {"a": "PP", "b": "PF", "c": "PP", "d": "PP"}},
}


def _blocks(kind: str) -> list[str]:
    return [text for info, text in code_blocks(DOC) if info == kind]


def test_the_pages_example_is_what_the_sweep_prints():
    records = (arms("small", EXAMPLE["small"], cost=0.002)
               + arms("large", EXAMPLE["large"], cost=0.012))
    printed = sweep_lines(build_cells(records))
    (shown,) = [b for b in _blocks("") if b.startswith("Profile sets over the sweep")]
    assert shown.splitlines() == printed[1:]


def test_the_pages_commands_run_as_written(tmp_path):
    from store_lines import arm, write
    before = [arm(t, "echo", r, "PASS") for t in "abcdef" for r in range(10)]
    after = [arm(t, "echo", r, "FAIL" if t != "f" else "PASS") for t in "abcdef"
             for r in range(10)]
    write(tmp_path / "before.jsonl", before)
    write(tmp_path / "after.jsonl", after)
    (block,) = [b for b in _blocks("bash") if "compare before.jsonl after.jsonl" in b]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    said = []
    for line in block.strip().splitlines():
        assert shlex.split(line.split("  #")[0])[:3] == ["python", "-m", "pytest_jaato_eval"]
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PATH": path})
        said.append((done.returncode, done.stdout))
    (c1, out1), (c2, out2), (c3, out3) = said
    assert c1 == 1 and "regressed: profile set echo: -83 pts" in out1
    assert c2 == 1 and "lies below -5 pts (the margin)" in out2
    assert c3 == 1 and "Profile sets over the sweep" in out3  # the report exits as the run


def test_one_repeat_near_100_percent_takes_the_exact_sign_test():
    # Ten tasks, one item and one repeat each: four go PASS -> FAIL, none the other way. The
    # paired t calls it a regression (p = 0.037); the exact sign test (McNemar's, exact)
    # says four discordant pairs, all one way, happen 12.5% of the time under no change.
    base = {f"t{i}": {"": "P"} for i in range(10)}
    new = {f"t{i}": {"": "F" if i < 4 else "P"} for i in range(10)}
    p = inference.pair("base", tasks(base), "new", tasks(new))
    diffs = [-1.0] * 4 + [0.0] * 6
    assert scipy_stats.ttest_1samp(diffs, 0).pvalue < 0.05   # what the t alone would say
    assert p.method == inference.SIGN_TEST and p.df == 9   # the interval beside it: the t's
    assert method_text(p) == ("p by exact sign test, which decides; CI by paired t: "
                              f"se {100 * scipy_stats.sem(diffs):.1f} pts, 9 df")
    assert p.p == pytest.approx(scipy_stats.binomtest(0, 4, 0.5).pvalue) == 0.125
    assert not p.below() and not p.decided
    # Repeats make each task's difference a share: the t is back, and named with its se, df.
    two = inference.pair("base", tasks({t: {"": "PP"} for t in base}), "new",
                         tasks({t: {"": v[""] * 2} for t, v in new.items()}))
    assert (two.method, two.df) == (inference.PAIRED_T, 9)
    assert two.se == pytest.approx(np.std(diffs, ddof=1) / np.sqrt(10))


def test_five_tasks_three_broken_on_every_repeat_pass_the_gate():
    # What docs/statistics.md says of few tasks: the gate is blind there. Five tasks, three
    # going from every repeat passing to every repeat failing, two unchanged: p = 0.07.
    base = {f"t{i}": {"": "PPP"} for i in range(5)}
    new = {f"t{i}": {"": "FFF" if i < 3 else "PPP"} for i in range(5)}
    p = inference.pair("base", tasks(base), "new", tasks(new))
    assert p.p == pytest.approx(scipy_stats.ttest_1samp([-1, -1, -1, 0, 0], 0).pvalue)
    assert 0.05 < p.p < 0.08 and not p.below()
    # Even all five broken is not enough at two-sided 5% (p = 2·2^-5); six tasks are.
    every = inference.pair("base", tasks(base), "new", tasks({t: {"": "FFF"} for t in base}))
    assert not every.below() and every.p == pytest.approx(2 * 2 ** -5)
    six = {f"t{i}": {"": "PPP"} for i in range(6)}
    every = inference.pair("base", tasks(six), "new", tasks({t: {"": "FFF"} for t in six}))
    assert every.below() and every.p == pytest.approx(2 * 2 ** -6)


def test_cost_per_pass_keeps_the_known_part_of_an_arm_whose_judge_reported_none():
    # Two PASS arms, each $0.01 of agent; one judge reported $0.005, the other nothing. The
    # agent's part of the second is known and counts: ($0.02 + $0.005) / 2, marked `+`.
    judged = [arm_record("t", "x", 0, "PASS", cost=0.01, judge_usage={"cost_usd": 0.005}),
              arm_record("t", "x", 1, "PASS", cost=0.01, judge_usage={"cost_usd": None})]
    cells = build_cells(judged)
    (h,) = inference.headlines(cells)
    assert h.cost_per_pass == pytest.approx(0.025 / 2) and h.unpriced == 1
    assert h.spent == pytest.approx(cells[0].total_cost)   # the pivot's own cell agrees
    assert headline_row(h)["cost/PASS"] == "$0.0125+"
    # A pair's cost per arm: the same parts, and the same mark.
    p = inference.pair("a", inference.tasks_of(cells), "b", inference.tasks_of(cells))
    assert p.cost_a == pytest.approx(0.0125) and p.cost_partial
    assert pair_cost_text(p) == "cost per arm: $0.0125+ → $0.0125+"  # bounds: no difference


def test_pass_at_k_says_which_samples_it_left_out():
    # Sample b ran one exercised repeat (its other BLOCKED): pass@2 cannot be taken of it.
    records = arms("x", {"t": {"a": "PF", "b": "PB", "c": "FF"}})
    (cell,) = build_cells(records)
    assert cell.short_of(2) == 1
    assert cell.pass_at(2) == pytest.approx((1.0 + 0.0) / 2)
    assert cell.per_input_text(cell.pass_at(2), 2) == "50% (2 of 3 samples)"
    doc = document(account(Pivot.of_records(records)), "json")
    assert json.loads(doc)["cells"][0]["pass_at_k_samples_left_out"] == 1


def test_compare_and_the_chart_cost_an_arm_as_the_pair_line_does():
    from pytest_jaato_eval.report import chart
    from pytest_jaato_eval.results.compare import GroupChange, cost_delta_text
    # The live run: the judge of one arm reported no cost. Its regrade: no agent ran, the
    # agent's part is the same, every judge reported $0.005.
    live = [arm_record("t", "x", 0, "PASS", cost=0.01, judge_usage={"cost_usd": 0.005}),
            arm_record("t", "x", 1, "PASS", cost=0.01, judge_usage={"cost_usd": None})]
    regraded = [arm_record("t", "x", r, "PASS", cost=0.01, judge_usage={"cost_usd": 0.005})
                for r in (0, 1)]
    (base,), (new,) = build_cells(live), build_cells(regraded)
    # Some part unknown on one side: the two bounds, never a difference nobody knows
    # (by the old rule, agent and judge each over the arms that reported: +$0.0000).
    assert cost_delta_text(GroupChange("t", "x", base, new)) == "$0.0125+ → $0.0150"
    (point,) = chart.profile_points([base])
    assert (point.cost, point.cost_partial) == (pytest.approx(0.0125), True)
    assert "$0.0125+/arm" in chart.layout([point]).marks[0].label
    p = inference.pair("a", inference.tasks_of([base]), "b", inference.tasks_of([new]))
    assert pair_cost_text(p) == "cost per arm: $0.0125+ → $0.0150"
    # Every part known on both sides: the difference, and the judge's share of it.
    (again,) = build_cells(regraded)
    assert cost_delta_text(GroupChange("t", "x", new, again)) == "+$0.0000 (judge +$0.0000)"
