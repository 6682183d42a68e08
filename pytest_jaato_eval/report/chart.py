"""The "can a cheaper model do this?" picture: pass rate (with its 95% interval) against
mean cost per arm, one point per profile set, as inline SVG (no script, no fonts fetched).

This module does the geometry; templates/chart.html draws it (html.chart_svg).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..results import inference, stats
from ..results.pivot import Cell, interval_text, money, pct

# Distinguishable in colour and in greyscale print (Okabe-Ito, dark first).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
LEGEND_CHARS = 34


@dataclass
class Point:
    profile_set: str
    passed: int
    exercised: int
    cost: float | None  # what an exercised arm cost (inference.cost_per_arm)
    expected: int = 0  # FAIL arms that ran under an xfail mark
    # The set's headline (results/inference.py), the same figures as the report's table;
    # without one, the arms pooled.
    headline: inference.Headline | None = None
    cost_partial: bool = False  # some part of some arm's cost unknown: `cost` is a lower bound

    @property
    def rate(self) -> float | None:
        if self.headline is not None:
            return self.headline.rate
        return stats.rate(self.passed, self.exercised)

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.headline is not None:
            return self.headline.interval
        return stats.wilson(self.passed, self.exercised)


def profile_points(cells: list[Cell]) -> list[Point]:
    """One point per profile set: its headline (every task weighing the same), and the
    mean cost of its exercised arms."""
    by_set: dict[str, list[Cell]] = {}
    for c in cells:
        by_set.setdefault(c.profile_set, []).append(c)
    points = []
    for name, group in sorted(by_set.items()):
        tasks = inference.tasks_of(group)
        cost, partial = inference.cost_per_arm(tasks)
        points.append(Point(name, sum(c.passed for c in group), sum(c.exercised for c in group),
                            cost, sum(c.expected_failures for c in group),
                            inference.headline(name, tasks), partial))
    return points


def _nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `top`."""
    if top <= 0:
        top = 1.0
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade from below `lo` to above `hi` (decades only when the span is
    wide), starting and ending a step beyond the data so no point sits on the frame."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1,) if last - first > 2 else (1, 2, 5)
    ticks = [m * 10.0 ** e for e in range(first - 1, last + 2) for m in steps]
    below = [t for t in ticks if t < lo * 0.999]
    above = [t for t in ticks if t > hi * 1.001]
    return [t for t in ticks if below[-1] <= t <= above[0]]


def _tick_label(value: float) -> str:
    return "$" + (f"{value:.6f}".rstrip("0").rstrip(".") or "0")


def x_scale(costs: list[float]) -> tuple[list[float], bool]:
    """Ticks for the cost axis, and whether it is logarithmic: a cheap model can cost a
    hundredth of a dear one, and a linear axis would stack every cheap set at $0."""
    positive = [c for c in costs if c > 0]
    if positive and len(positive) == len(costs) and max(positive) / min(positive) >= 20:
        return _log_ticks(min(positive), max(positive)), True
    return _nice_ticks(max(costs or [0.0]) * 1.1), False


@dataclass
class Mark:
    """One plotted profile set: its interval bar, its point and its legend entry."""
    colour: str
    x: float
    y: float
    y_lo: float
    y_hi: float
    legend_x: float
    legend_y: float
    name: str
    label: str


@dataclass
class Layout:
    width: int
    height: int
    left: float
    top: float
    plot_width: float
    plot_height: float
    log: bool
    y_ticks: list[tuple[float, str]] = field(default_factory=list)   # (y, label)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)   # (x, label)
    marks: list[Mark] = field(default_factory=list)


def layout(points: list[Point], width: int = 720, height: int = 330) -> Layout:
    """Where everything goes; points without a rate or a cost are left to `unplotted`."""
    plotted = [p for p in points if p.rate is not None and p.cost is not None]
    left, right, top, bottom = 64, 250, 16, 48
    height = max(height, top + 34 * len(plotted) + 8)  # room for every legend entry
    pw, ph = width - left - right, height - top - bottom
    xticks, log = x_scale([p.cost for p in plotted if p.cost is not None])  # all of them

    def x(v: float) -> float:
        if log:
            lo, hi = math.log10(xticks[0]), math.log10(xticks[-1])
            return left + pw * (math.log10(v) - lo) / (hi - lo)
        return left + pw * v / xticks[-1]

    def y(v: float) -> float:
        return top + ph * (1 - v)

    out = Layout(width, height, left, top, pw, ph, log,
                 y_ticks=[(y(t), f"{100 * t:.0f}%") for t in (0, 0.25, 0.5, 0.75, 1.0)],
                 x_ticks=[(x(t), _tick_label(t)) for t in xticks])
    for i, p in enumerate(plotted):
        assert p.rate is not None and p.cost is not None and p.interval is not None
        lo, hi = p.interval
        out.marks.append(Mark(
            PALETTE[i % len(PALETTE)], x(p.cost), y(p.rate), y(lo), y(hi),
            left + pw + 16, top + 8 + 34 * i, _clip(p.profile_set, LEGEND_CHARS),
            f"{pct(p.rate)} ({interval_text(p.interval)}) · {money(p.cost, p.cost_partial)}/arm "
            f"· n={p.exercised}" + (f" · {p.expected} xfail" if p.expected else "")))
    return out


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def unplotted(points: list[Point]) -> list[str]:
    """Why a profile set has no point: said, never silently dropped."""
    lines = []
    for p in points:
        if p.rate is None:
            lines.append(f"{p.profile_set}: no arm exercised (every arm BLOCKED), pass rate —")
        elif p.cost is None:
            lines.append(f"{p.profile_set}: pass rate {pct(p.rate)}, but no arm reported a cost "
                         f"(unknown, not free)")
    return lines
