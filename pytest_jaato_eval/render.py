"""Untrusted text made safe to show.

Grader ids, details, evidence, blocked reasons and error texts come from task
authors, agents, daemons and scripts. Printed raw, an ESC starts a terminal
escape sequence (colours, a new window title, a cleared screen), a NUL or a
lone surrogate breaks a JUnit file or the terminal's encoder, and one 100k-char
line wrecks every table around it. Every renderer runs such text through
`safe_text` first; HTML escaping (`<`, `&`, `"`) stays the HTML renderer's job.
"""
from __future__ import annotations

from typing import Any

ELLIPSIS = "…"
TAB_WIDTH = 4


def _shown(char: str) -> str:
    """One character as it may reach a screen: printable ones as they are, the rest as
    the escape Python's repr() uses (`\\x1b`, `\\x00`, `\\u202e`, `\\ud800`)."""
    return char if char.isprintable() else repr(char)[1:-1]


def safe_text(text: Any, width: int | None = 300, *, collapse: bool = True) -> str:
    """`text` as one line with no control character in it, at most `width` characters.

    collapse=True (reasons, details, error texts): every run of whitespace, line breaks
    included, becomes one space. collapse=False (ids, evidence lines, error messages
    quoting a key): spacing is kept, tabs expanded, and a line break is shown as `\\n`.
    Anything else Python would not print — ESC, NUL, DEL, C1 controls, bidi overrides,
    zero-width characters, lone surrogates — is shown as its escape, so no terminal
    escape sequence survives. A cut is marked with `…`; width None means no bound.
    """
    text = str(text)
    if collapse:
        text = " ".join(text.split())
    if width is not None:  # each character shows as one or more: the rest is cut anyway
        text = text[: width + 1]
    if not collapse:
        text = text.expandtabs(TAB_WIDTH)
    line = text if text.isprintable() else "".join(_shown(c) for c in text)
    if width is not None and len(line) > width:
        line = line[: max(width - 1, 0)] + ELLIPSIS
    return line
