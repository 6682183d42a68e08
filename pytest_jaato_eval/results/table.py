"""The one fixed-width table, and the rule that fits it to a terminal's width.

`table_lines` lays out a header and rows, columns two spaces apart. `fit` makes such a
table fit `width` columns by one stated rule, so a table never wraps in the terminal it
is printed to:

1. every column, when the widest line fits;
2. else the optional columns go, the least read first (the highest `rank`; ties: the
   rightmost first), until the table fits; the columns of rank 0 always stay;
3. else the text columns (ids) are *stacked*: each row's ids on a line of their own,
   its figures on the next, indented; an id longer than the width is cut with `…`.

What was left out is returned, so the caller can say so under the table (and where the
whole table is). Any block printed in the terminal (the pivot, a comparison) fits by
this rule: give each column a rank.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..render import safe_text

GAP = "  "
STACK_INDENT = "  "


@dataclass(frozen=True)
class Column:
    """One column: its header, whether it holds numbers (aligned right), whether it is an
    id (stacked above the figures when even the kept columns do not fit), and its rank:
    0 always shown, higher dropped sooner."""
    header: str
    right: bool = False
    rank: int = 0
    text: bool = False


@dataclass
class Fitted:
    lines: list[str]
    shown: list[Column]
    dropped: list[Column] = field(default_factory=list)
    stacked: bool = False


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]],
                right: Iterable[str] = ()) -> list[str]:
    """Fixed-width lines, the header first: columns two spaces apart, those in `right`
    (numbers) aligned right; no trailing blanks."""
    table, right = [list(header)] + [list(r) for r in rows], set(right)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [GAP.join(v.rjust(w) if h in right else v.ljust(w)
                     for h, v, w in zip(header, row, widths)).rstrip() for row in table]


def _lines(columns: Sequence[Column], rows: Sequence[dict[str, str]]) -> list[str]:
    return table_lines([c.header for c in columns], [[r[c.header] for c in columns] for r in rows],
                       right={c.header for c in columns if c.right})


def _widest(lines: Sequence[str]) -> int:
    return max((len(line) for line in lines), default=0)


def fit(columns: Sequence[Column], rows: Sequence[dict[str, str]],
        width: int | None) -> Fitted:
    """The table of `rows` (header -> text) fitted to `width` by the module's rule;
    width None: every column, as it is."""
    shown = list(columns)
    lines = _lines(shown, rows)
    if width is None or _widest(lines) <= width:
        return Fitted(lines, shown)
    dropped: list[Column] = []
    for column in _least_read_first(columns):
        shown.remove(column)
        dropped.append(column)
        lines = _lines(shown, rows)
        if _widest(lines) <= width:
            return Fitted(lines, shown, dropped)
    return _stacked(columns, rows, width)


def _least_read_first(columns: Sequence[Column]) -> list[Column]:
    """The optional columns in the order they are dropped: the highest rank first, and
    among equals the rightmost."""
    return sorted((c for c in columns if c.rank > 0),
                  key=lambda c: (c.rank, columns.index(c)), reverse=True)


def _stacked(columns: Sequence[Column], rows: Sequence[dict[str, str]], width: int) -> Fitted:
    """Ids on a line of their own (`a @ b`), the figures under them, indented: the
    figures get the whole width, and the optional ones go, the least read first, only
    while they still do not fit."""
    ids = [c for c in columns if c.text]
    figures = [c for c in columns if not c.text]
    dropped: list[Column] = []
    room = width - len(STACK_INDENT)
    body = _lines(figures, rows)
    for column in _least_read_first(figures):
        if _widest(body) <= room:
            break
        figures.remove(column)
        dropped.append(column)
        body = _lines(figures, rows)
    lines = [safe_text(" @ ".join(c.header for c in ids), width, collapse=False),
             STACK_INDENT + body[0]]
    for row, figures_line in zip(rows, body[1:]):
        lines.append(safe_text(" @ ".join(row[c.header] for c in ids), width, collapse=False))
        lines.append(STACK_INDENT + figures_line)
    return Fitted(lines, ids + figures, dropped, stacked=True)


def wrap(text: str, width: int | None, indent: str = "") -> list[str]:
    """A line of prose (a legend, a reason) broken at spaces to fit `width`; the lines
    after the first indented by `indent`. A word longer than the width is cut by
    the width, never dropped."""
    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False) or [text]
