"""A number read from YAML or JSON: Python's `True` is an int, so every check for
"a number" here says "and not a bool" once, for every reader of task files, profiles,
trackers and stores.
"""
from __future__ import annotations

import math
from typing import Any, TypeGuard


def is_number(value: Any, *, finite: bool = False) -> TypeGuard[int | float]:
    """An int or float, never a bool. finite=True also refuses nan, inf and ints past
    float range: no count, limit or timeout anyone meant."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if not finite:
        return True
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def is_int(value: Any) -> TypeGuard[int]:
    """An int, never a bool."""
    return isinstance(value, int) and not isinstance(value, bool)
