"""What `ArmRecord.from_dict` accepts, value by value (record.py).

A store is a file anybody may have written: a value of the wrong type becomes
"unknown" (None, or an empty list/mapping), and a number no reader can show or sum
(Infinity, NaN, an int of 400 digits) becomes None, each with a problem line when the
caller asks. `checker` turns one field's annotation into its check.
"""
from __future__ import annotations

import math
import typing
from typing import Any

# A JSON number we show and sum: finite, and an int small enough to be a float exactly.
_INT_LIMIT = 2 ** 53


def shown_type(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number out of range" if type(value) is int else "a non-finite number"
    return type(value).__name__


def number_or_none(value: Any) -> float | None:
    """A JSON number every reader can show and sum, or None (the rule `from_dict` applies
    to every number it keeps)."""
    t = type(value)
    if t is int:
        return value if -_INT_LIMIT <= value <= _INT_LIMIT else None
    if t is float:
        return value if math.isfinite(value) else None
    return None


def _fine_number(value: Any) -> bool:
    t = type(value)
    if t is int:
        return -_INT_LIMIT <= value <= _INT_LIMIT
    return t is float and math.isfinite(value)


MAX_DEPTH = 64  # deeper than any record we write: a store built to overflow the stack is cut


def _fine(value: Any, depth: int = 0) -> bool:
    """True when no number in `value` needs cleaning and it is not nested deeper than
    MAX_DEPTH (the common case, checked cheaply)."""
    if depth > MAX_DEPTH:
        return False
    t = type(value)
    if t is dict:
        value = value.values()
    elif t is not list:
        return t is not int and t is not float or _fine_number(value)
    for v in value:
        t = type(v)
        if t is str or v is None or t is bool:
            continue
        if t is int:
            if not -_INT_LIMIT <= v <= _INT_LIMIT:
                return False
        elif t is float:
            if not math.isfinite(v):
                return False
        elif not _fine(v, depth + 1):
            return False
    return True


def clean(value: Any, where: str, problems: list[str] | None, depth: int = 0) -> Any:
    """A JSON value with every number no reader could show (Infinity, NaN, an int of
    400 digits) replaced by None, and anything nested deeper than MAX_DEPTH cut to None.
    Small structures only: ceilings, pools, provenance."""
    if depth <= MAX_DEPTH and _fine(value, depth):
        return value
    if depth > MAX_DEPTH:
        if problems is not None:
            problems.append(f"{where}: nested deeper than {MAX_DEPTH} levels; cut")
        return None
    t = type(value)
    if t is dict:
        return {k: clean(v, f"{where}.{k}" if where else k, problems, depth + 1)
                for k, v in value.items()}
    if t is list:
        return [clean(v, f"{where}[{i}]", problems, depth + 1) for i, v in enumerate(value)]
    if problems is not None:
        problems.append(f"{where}: expected a finite number, got {shown_type(value)}")
    return None


# -- the checks, derived from the annotations ---------------------------------------------------
VERDICT_TEXT_KEYS = ("grader_id", "claim", "state", "detail")


def _verdict(value: Any) -> dict | None:
    """One grader verdict with the types readers rely on; None when not a mapping."""
    if type(value) is not dict:
        return None
    v = dict(value)
    for key in VERDICT_TEXT_KEYS:
        if type(v.get(key)) is not str:
            v[key] = "" if v.get(key) is None else str(v.get(key))
    reason = v.get("blocked_reason")
    if reason is not None and type(reason) is not str:
        v["blocked_reason"] = str(reason)
    ev = v.get("evidence")
    if type(ev) is not list:
        v["evidence"] = [] if ev is None or ev == "" else [str(ev)]
    elif any(type(x) is not str for x in ev):
        v["evidence"] = [str(x) for x in ev]
    return v


def checker(hint: Any, default: Any):
    """(check, what it expects in words) for one annotation. check(v) -> (value, bad):
    the value to keep, and whether `v` was not what the annotation allows."""
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args and optional else hint
    origin = typing.get_origin(base) or base
    if hint is Any:
        return (lambda v, p, k: (clean(v, k, p), False)), "any JSON value"
    if origin in (str, int, float, bool):
        ok = {str: lambda v: type(v) is str,
              int: lambda v: type(v) is int and _fine_number(v),
              float: lambda v: type(v) in (int, float) and _fine_number(v),
              bool: lambda v: type(v) is bool}[origin]
        what = {str: "a string", int: "an integer", float: "a number",
                bool: "true or false"}[origin]

        def check(v, p, k):
            if v is None:
                return (None, False) if optional else (default(), True)
            return (v, False) if ok(v) else (default(), True)
    elif origin is dict:
        what = "a mapping"

        def check(v, p, k):
            if type(v) is dict:
                return clean(v, k, p), False
            if v is None:  # a null mapping is an unknown one
                return (None if optional else default()), False
            return default(), True
    elif origin is list:
        (item,) = typing.get_args(base) or (Any,)
        what = "a list"
        if item is str:
            def check(v, p, k):
                if type(v) is list:
                    if all(type(x) is str for x in v):
                        return v, False
                    return [str(x) for x in v], True
                return default(), v is not None
        else:  # the verdicts: mappings, each with the types readers rely on
            def check(v, p, k):
                if type(v) is not list:
                    return default(), v is not None
                out = [x for x in map(_verdict, v) if x is not None]
                return out, len(out) != len(v)
    else:  # a type this table does not know yet: keep what was read
        what = "a value"

        def check(v, p, k):
            return v, False
    return check, what + (" or null" if optional else "")
