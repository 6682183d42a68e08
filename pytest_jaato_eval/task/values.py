"""task.yaml's value kinds and the complaints they make (see model.py).

Every value kind below carries three things built from one declaration: the check
(run before pydantic sees the value, so a YAML date, a 20,000-bit integer or a NUL is
refused in our words), the JSON Schema fragment an editor uses, and the phrase a
complaint names (`expected a number >= 0, got str 'x'`). A complaint is a `manifest`
error carrying its reason and the path below the field.
"""
from __future__ import annotations

import datetime
import posixpath
import re
from typing import Annotated, Any, Callable

from pydantic import BeforeValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from ..contract import PASSTHROUGH_NAME
from ..engine.resources import SIZE_PHRASE, parse_size
from ..number import is_int, is_number

# Parameters, mark arguments and the degrade ladder are handed on as JSON: a bound on how
# many values one may hold keeps a YAML alias bomb from expanding into billions of them.
MAX_JSON_VALUES = 10_000
# Each repeat is a paid arm; a typo of three zeros should not collect for minutes.
MAX_REPEATS = 1000
MARK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ERROR = "manifest"


# -- complaints -------------------------------------------------------------------------
def problem(reason: str, *at: str | int) -> PydanticCustomError:
    """A complaint about the value being validated, or about `at` below it."""
    return PydanticCustomError(ERROR, "{reason}", {"reason": reason, "at": at})


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def shown(value: Any) -> str:
    """A scalar quoted in a complaint, clipped."""
    try:
        text = repr(value)
    except ValueError:  # an int past sys.get_int_max_str_digits(): YAML reads 0x… of any size
        return f"<{value.bit_length()}-bit integer>"
    return text[:57] + "...'" if isinstance(value, str) and len(text) > 60 else text


def got(value: Any) -> str:
    if isinstance(value, (str, int, float, bool)):
        return f"{type_name(value)} {shown(value)}"
    return type_name(value)


def unpassable(text: str) -> str | None:
    """Why the OS cannot be handed `text` (argv, environment, paths), or None."""
    if "\x00" in text:
        return "holds a NUL character, which no command, path or variable can carry"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds an unpaired surrogate, which is not text"
    return None



# -- value kinds --------------------------------------------------------------------------
class Expect:
    """Field metadata: how a complaint names what the field expects."""

    def __init__(self, phrase: str):
        self.phrase = phrase


def value_kind(phrase: str, ok: Callable[[Any], bool], schema: dict,
               then: Callable[[Any], Any] | None = None) -> Any:
    def check(value: Any) -> Any:
        if value is None:
            raise problem(f"is null; expected {phrase}")
        if not ok(value):
            raise problem(f"expected {phrase}, got {got(value)}")
        if isinstance(value, str) and (why := unpassable(value)):
            raise problem(why)
        return then(value) if then else value
    return Annotated[Any, BeforeValidator(check), WithJsonSchema(schema), Expect(phrase)]


def printable(value: str) -> str:
    """Ids and set names end up in node ids, which pytest prints as they are."""
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise problem(f"holds {bad!r}; it names arms and test ids, so it must be printable text")
    return value


def task_id(value: Any) -> str:
    text = str(value).strip()
    if not text:
        raise problem("is blank; expected a non-blank id")
    return printable(text)


def under_root(value: str) -> str:
    """A path the harness reads from the config root: relative, and staying inside it."""
    norm = posixpath.normpath(value.replace("\\", "/"))
    if posixpath.isabs(norm) or norm == ".." or norm.startswith("../"):
        raise problem(f"{shown(value)} leaves the config root; expected a path relative to "
                      f"it (graders live in the config root, never in the fixture)")
    return value


def nonblank(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != ""


NONBLANK = {"type": "string", "pattern": r"\S"}
Text = value_kind("a string", lambda v: isinstance(v, str), {"type": "string"})
NonBlank = value_kind("a non-blank string", nonblank, NONBLANK)
SetName = value_kind("a non-blank string", nonblank, NONBLANK, printable)
ConfigPath = value_kind("a non-blank string", nonblank, NONBLANK, under_root)
TaskId = value_kind("a string or number", lambda v: isinstance(v, str) or is_number(v, finite=True),
                    {"type": ["string", "number"]}, task_id)
Number = value_kind("a number", lambda v: is_number(v, finite=True), {"type": "number"})
NonNegative = value_kind("a number >= 0", lambda v: is_number(v, finite=True) and v >= 0,
                         {"type": "number", "minimum": 0})
Positive = value_kind("a number > 0", lambda v: is_number(v, finite=True) and v > 0,
                      {"type": "number", "exclusiveMinimum": 0})
Integer = value_kind("an integer", lambda v: is_int(v) and is_number(v, finite=True),
                     {"type": "integer"})


def at_most_max_repeats(value: int) -> int:
    if value > MAX_REPEATS:
        raise problem(f"expected an integer from 1 to {MAX_REPEATS}, got int {shown(value)} "
                      f"(each repeat is an arm: a run of its own)")
    return value


Repeats = value_kind("an integer >= 1", lambda v: is_int(v) and is_number(v, finite=True) and v >= 1,
                     {"type": "integer", "minimum": 1, "maximum": MAX_REPEATS},
                     at_most_max_repeats)

SampleLimit = value_kind("an integer >= 1", lambda v: is_int(v) and is_number(v, finite=True) and v >= 1,
                         {"type": "integer", "minimum": 1})


def json_problem(value: Any, dates: bool = False) -> PydanticCustomError | None:
    """The first reason `value` is not plain JSON (C2): parameters, mark arguments and
    the degrade ladder are handed on as JSON, so a YAML set, !!binary or a
    self-referencing alias is refused here, not at grading. `dates`: a YAML date or
    timestamp passes too (a task's parameters hand it on as its str(), C2).
    Iterative: depth is free."""
    left = MAX_JSON_VALUES
    todo: list[tuple[Any, tuple, tuple[int, ...]]] = [(value, (), ())]
    while todo:
        node, at, ancestors = todo.pop()
        left -= 1
        if left < 0:
            return problem(f"holds more than {MAX_JSON_VALUES} values")
        if isinstance(node, str):
            if why := unpassable(node):
                return problem(why, *at)
        elif is_number(node):
            if not is_number(node, finite=True):
                return problem(f"expected a finite number, got {shown(node)}", *at)
        elif isinstance(node, (dict, list)):
            if id(node) in ancestors:
                return problem("contains itself (a YAML alias to its own anchor)", *at)
            inner = ancestors + (id(node),)
            children: list[tuple[Any, tuple, tuple[int, ...]]] = []
            if isinstance(node, list):
                children = [(item, at + (i,), inner) for i, item in enumerate(node)]
            else:
                for key, item in node.items():
                    if not isinstance(key, str):
                        return problem(f"key {shown(key)} is of type {type_name(key)}; "
                                       f"keys must be strings", *at)
                    children += [(key, at, inner), (item, at + (key,), inner)]
            todo.extend(reversed(children))  # depth first, in document order
        elif dates and isinstance(node, datetime.date):
            continue
        elif node is not None and not isinstance(node, bool):
            return problem(f"expected a JSON value (string, number, boolean, null, list or "
                           f"mapping), got {type_name(node)}", *at)
    return None


def plain_json(value: Any) -> Any:
    if (err := json_problem(value)) is not None:
        raise err
    return value


def params(value: Any, dates: bool = False) -> Any:
    for key in value:
        if not isinstance(key, str):
            raise problem(f"key {shown(key)} is of type {type_name(key)}; keys must be strings")
    if (err := json_problem(value, dates)) is not None:
        raise err
    return value  # keys that collide: M9, preflight.py


def input_params(value: Any) -> Any:
    return params(value, dates=True)


JSON = {"description": "plain JSON: string, number, boolean, null, list or mapping"}
Params = value_kind("a mapping", lambda v: isinstance(v, dict), {"type": "object"}, params)
# A task's parameters: plain JSON, and also what YAML reads as a date or a timestamp
# (`TRADE_DATE: 2026-08-28` unquoted), handed on as jaato-eval hands it on: its str()
# (C2), so a grader reads `"2026-08-28"` in both engines.
InputParams = value_kind("a mapping", lambda v: isinstance(v, dict), {"type": "object"},
                         input_params)
# What the schema says of them (model.py puts it in both fields' descriptions).
DATES = ("plain JSON values; an unquoted YAML date or timestamp is handed on as its text, "
         "as jaato-eval does: the session gets 2026-08-28, a grader's JAATO_EVAL_PARAM_<KEY> "
         "the JSON string \"2026-08-28\" (quotes included) and JAATO_EVAL_PARAMS the same "
         "string inside its JSON; quote the date to hand on plain text")
Ladder = value_kind("a list", lambda v: isinstance(v, list),
                    {"type": "array", "items": JSON}, plain_json)


def a_list(phrase: str = "a list", *, nonempty: str | None = None) -> BeforeValidator:
    def check(value: Any) -> Any:
        if value is None:
            raise problem(f"is null; expected {phrase}")
        if not isinstance(value, list):  # not a set, tuple or mapping pydantic would take
            raise problem(f"expected {phrase}, got {got(value)}")
        if nonempty and not value:
            raise problem(nonempty)
        return value
    return BeforeValidator(check)


def mark(entry: Any) -> tuple[str, Any]:
    """`smoke`, or `{name: args}` with args a string, a list, a mapping or null."""
    if isinstance(entry, str):
        name, args = entry, None
    elif isinstance(entry, dict) and len(entry) == 1:
        ((name, args),) = entry.items()
        if not isinstance(name, str):
            raise problem(f"marker name {shown(name)} is of type {type_name(name)}; "
                          f"expected a marker name")
        if args is not None and not isinstance(args, (str, list, dict)):
            raise problem(f"arguments of {name!r} are {got(args)}; expected a string, a list "
                          f"(positional arguments), a mapping (keyword arguments) or null",
                          name)
        if args is not None:
            plain_json(args)
    else:
        raise problem(f"expected a marker name or a one-key mapping {{name: arguments}}, "
                      f"got {got(entry) if not isinstance(entry, dict) else f'a mapping of {len(entry)} keys'}")
    if not MARK_NAME.fullmatch(name):
        raise problem(f"marker name {shown(name)} is not an identifier (letters, digits, _)")
    return name, args


MARK_ARGS = {"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "object"},
                       {"type": "null"}]}
Mark = Annotated[Any, BeforeValidator(mark), WithJsonSchema({"anyOf": [
    {"type": "string", "pattern": f"^{MARK_NAME.pattern}$"},
    {"type": "object", "minProperties": 1, "maxProperties": 1,
     "patternProperties": {f"^{MARK_NAME.pattern}$": MARK_ARGS},
     "additionalProperties": False}]})]


PassName = value_kind("a variable name (NAME or PREFIX*)",
                      lambda v: isinstance(v, str) and PASSTHROUGH_NAME.fullmatch(v) is not None,
                      {"type": "string", "pattern": PASSTHROUGH_NAME.pattern})
Passthrough = Annotated[tuple[PassName, ...], a_list(), Expect("a list"),
                        Field(description="variables this process may inherit: NAME, or "
                                          "PREFIX* (never a credential-looking name)")]


def scale(value: list) -> tuple[float, float]:
    low, high = value
    if not low < high:
        raise problem(f"expected [lowest, highest] with lowest < highest, got {shown(value)}")
    return low, high


# A judge's rubric scale, [lowest, highest]: declared, it is checked (G5).
Scale = value_kind("a list of two numbers [lowest, highest]",
                   lambda v: isinstance(v, list) and len(v) == 2
                   and all(is_number(x, finite=True) for x in v),
                   {"type": "array", "items": {"type": "number"}, "minItems": 2,
                    "maxItems": 2}, scale)
Contamination = value_kind("block or caveat", lambda v: v in ("block", "caveat"),
                           {"enum": ["block", "caveat"]})
Size = value_kind(SIZE_PHRASE, lambda v: parse_size(v) is not None,
                  {"anyOf": [{"type": "integer", "minimum": 1},
                             {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[KMGTkmgt]?(i?[Bb])?\s*$"}]},
                  parse_size)
