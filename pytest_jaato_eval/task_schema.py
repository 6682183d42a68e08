"""task.yaml, declared: pydantic models that are both the checker and the JSON Schema.

Every value kind below carries three things built from one declaration: the check
(run before pydantic sees the value, so a YAML date, a 20,000-bit integer or a NUL is
refused in our words), the JSON Schema fragment an editor uses, and the phrase a
complaint names (`expected a number >= 0, got str 'x'`). A problem travels out of
pydantic as a `manifest` error carrying its reason and the path below the field; the
loader turns the first one into the one-line ManifestError. pydantic's own multi-line
text never reaches a user.

Imported on the first task.yaml only: a pytest run without tasks never pays for pydantic.
"""
from __future__ import annotations

import difflib
import math
import posixpath
import re
from typing import Annotated, Any, Callable, Literal, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationError,
                      WithJsonSchema, model_validator)
from pydantic_core import PydanticCustomError

from .contract import PASSTHROUGH_NAME, param_variable
from .manifest import BUDGET_LIMITS, DRIVER, GRADER_KINDS, SESSION

# Keys that look plausible in a manifest but belong to a profile (M12).
PROFILE_KEYS = ("apparmor", "runtime_limits", "env")
# Which keys each harness kind refuses (M6-M8).
REFUSED = {
    SESSION: ("harness.run", "input.params"),
    DRIVER: ("harness.profile", "input.prompt", "input.agent", "input.agent_params"),
}
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


def finite(value: Any) -> bool:
    """nan, inf and ints past float range are no count, limit or timeout anyone meant."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value)


def unpassable(text: str) -> str | None:
    """Why the OS cannot be handed `text` (argv, environment, paths), or None."""
    if "\x00" in text:
        return "holds a NUL character, which no command, path or variable can carry"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds an unpaired surrogate, which is not text"
    return None


def unknown_key(key: str, known: tuple[str, ...]) -> str:
    if key in PROFILE_KEYS:
        return (f"unknown key; {key} is a profile setting: declare it in the profile "
                f"under the config root's profiles/, not in task.yaml")
    hint = difflib.get_close_matches(key, known, n=1)
    close = f" (did you mean {hint[0]!r}?)" if hint else ""
    return f"unknown key{close}; known keys: {', '.join(known)}"


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
TaskId = value_kind("a string or number", lambda v: isinstance(v, str) or is_number(v),
                    {"type": ["string", "number"]}, task_id)
Number = value_kind("a number", is_number, {"type": "number"})
NonNegative = value_kind("a number >= 0", lambda v: is_number(v) and v >= 0,
                         {"type": "number", "minimum": 0})
Positive = value_kind("a number > 0", lambda v: is_number(v) and v > 0,
                      {"type": "number", "exclusiveMinimum": 0})
Integer = value_kind("an integer", lambda v: is_number(v) and isinstance(v, int),
                     {"type": "integer"})


def at_most_max_repeats(value: int) -> int:
    if value > MAX_REPEATS:
        raise problem(f"expected an integer from 1 to {MAX_REPEATS}, got int {shown(value)} "
                      f"(each repeat is an arm: a run of its own)")
    return value


Repeats = value_kind("an integer >= 1", lambda v: is_number(v) and isinstance(v, int) and v >= 1,
                     {"type": "integer", "minimum": 1, "maximum": MAX_REPEATS},
                     at_most_max_repeats)


def json_problem(value: Any) -> PydanticCustomError | None:
    """The first reason `value` is not plain JSON (C2): parameters, mark arguments and
    the degrade ladder are handed on as JSON, so a YAML date, set, !!binary or a
    self-referencing alias is refused here, not at grading. Iterative: depth is free."""
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
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            if not finite(node):
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
        elif node is not None and not isinstance(node, bool):
            return problem(f"expected a JSON value (string, number, boolean, null, list or "
                           f"mapping), got {type_name(node)}", *at)
    return None


def plain_json(value: Any) -> Any:
    if (err := json_problem(value)) is not None:
        raise err
    return value


def params(value: Any) -> Any:
    seen: dict[str, str] = {}
    for key in value:
        if not isinstance(key, str):
            raise problem(f"key {shown(key)} is of type {type_name(key)}; keys must be strings")
        var = param_variable(key)
        if var in seen:  # M9
            raise problem(f"keys {seen[var]!r} and {key!r} both map to ${var}; rename one")
        seen[var] = key
    return plain_json(value)


JSON = {"description": "plain JSON: string, number, boolean, null, list or mapping"}
Params = value_kind("a mapping", lambda v: isinstance(v, dict), {"type": "object"}, params)
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
Confidence = value_kind("a number from 0 to 1", lambda v: is_number(v) and 0 <= v <= 1,
                        {"type": "number", "minimum": 0, "maximum": 1})
Contamination = value_kind("block or caveat", lambda v: v in ("block", "caveat"),
                           {"enum": ["block", "caveat"]})


# -- sections -----------------------------------------------------------------------------
class Section(BaseModel):
    """A mapping whose keys are all declared: unknown ones are refused by name (M12)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        if data is None:
            raise problem("is null; expected a mapping")
        if not isinstance(data, dict):
            raise problem(f"expected a mapping, got {type_name(data)}")
        for key in data:
            if not isinstance(key, str):
                raise problem(f"key {shown(key)} is of type {type_name(key)}; keys must be strings")
        known = tuple(cls.model_fields)
        for key in data:
            if key not in known:
                raise problem(unknown_key(key, known), key)
        for name, info in cls.model_fields.items():
            if info.is_required() and name not in data:
                raise problem(f"missing; expected {expected(info)}", name)
        cls.check_raw(data)
        return data

    @classmethod
    def check_raw(cls, data: dict) -> None:
        """Rules on the raw mapping that come before any value's own check."""


def expected(info: Any) -> str:
    for meta in info.metadata:
        if isinstance(meta, Expect):
            return meta.phrase
    return "a mapping"


class Environment(Section):
    fixture: Annotated[NonBlank, Field(description="the fixture directory, copied into "
                                                   "every arm's workspace; relative to task.yaml")]
    config_root: Annotated[NonBlank, Field(description="the read-only config root (profiles, "
                                                       "graders); relative to task.yaml")]


class Input(Section):
    prompt: Annotated[NonBlank, Field(description="session arms: the prompt")] = None
    agent: Annotated[NonBlank, Field(description="session arms: a persona")] = None
    agent_params: Annotated[Params, Field(description="session arms: parameters, also "
                                                      "handed to script graders")] = None
    params: Annotated[Params, Field(description="driver arms: the driver's input")] = None


def harness_kind(value: Any) -> str:
    if value not in (SESSION, DRIVER):
        raise problem(f"unknown kind {value!r}; expected one of {SESSION}, {DRIVER}")
    return value


class Harness(Section):
    kind: Annotated[value_kind("a string", lambda v: isinstance(v, str),
                               {"enum": [SESSION, DRIVER]}, harness_kind),
                    Field(description="session (default) or driver")] = SESSION
    profile: Annotated[NonBlank, Field(description="session arms: the profile to bind")] = None
    profile_set: Annotated[SetName, Field(description="the profile set; --profile-set "
                                                      "overrides it")] = None
    run: Annotated[NonBlank, Field(description="driver arms: the shell command that is "
                                               "the arm")] = None
    env_passthrough: Passthrough = ()


class Grader(Section):
    timeout_seconds: Positive = None  # each kind's own default
    weight: NonNegative = 1


class ScriptGrader(Grader):
    kind: Literal["script"]
    run: Annotated[NonBlank, Field(description="a shell command, run in the workspace")] = None
    file: Annotated[ConfigPath, Field(description="a script under the config root: .py runs "
                                                  "with $JAATO_EVAL_PYTHON, anything else "
                                                  "directly")] = None
    expect_exit: Integer = 0
    env_passthrough: Passthrough = ()

    @classmethod
    def check_raw(cls, data: dict) -> None:
        if ("run" in data) == ("file" in data):
            raise problem("give either run (a shell command) or file (a script under the "
                          "config root), not both" if "run" in data else
                          "missing; expected run (a shell command) or file (a script under "
                          "the config root)", "file" if "file" in data else "run")


class ProcessorGrader(Grader):
    kind: Literal["processor"]
    script: Annotated[ConfigPath, Field(description="a file under the config root defining "
                                                    "validate(payload, context)")]
    env_passthrough: Passthrough = ()


class JudgeGrader(Grader):
    kind: Literal["judge"]
    profile: Annotated[NonBlank, Field(description="the judge's profile")]
    agent: NonBlank = None
    threshold: Number = 0.7
    score_field: NonBlank = "score"
    errors_field: NonBlank = "errors"
    gate_on: Annotated[tuple[NonBlank, ...], a_list(), Expect("a list"),
                       Field(description="grader ids that must PASS first")] = ()
    needs_human_below: Annotated[Confidence, Field(description="a judge confidence under it "
                                                               "is BLOCKED for human review")] = None


def grader_kind(value: Any) -> Any:
    if value is None or not isinstance(value, dict):
        raise problem(f"expected a mapping, got {type_name(value)}")
    if "kind" not in value:
        raise problem("missing; expected a string", "kind")
    kind = value["kind"]
    if not isinstance(kind, str):
        raise problem(f"expected a string, got {got(kind)}" if kind is not None else
                      "is null; expected a string", "kind")
    if kind not in GRADER_KINDS:
        raise problem(f"unknown kind {kind!r}; expected one of {', '.join(GRADER_KINDS)}",
                      "kind")
    return value


GraderItem = Annotated[Union[ScriptGrader, ProcessorGrader, JudgeGrader],
                       Field(discriminator="kind"), BeforeValidator(grader_kind)]


class Budget(Section):
    usd: NonNegative = None
    tokens: NonNegative = None
    turns: NonNegative = None
    seconds: NonNegative = None
    tool_calls: NonNegative = None
    degrade: Ladder = None

    @model_validator(mode="after")
    def _a_limit(self) -> "Budget":
        if all(getattr(self, k) is None for k in BUDGET_LIMITS):
            raise problem(f"no limit declared; expected at least one of {', '.join(BUDGET_LIMITS)}")
        return self


class Manifest(Section):
    """task.yaml (M3-M12)."""

    model_config = ConfigDict(title="jaato task (task.yaml)")

    id: Annotated[TaskId, Field(description="unique across the run")]
    description: Text = ""
    environment: Annotated[Environment, Expect("a mapping")]
    input: Annotated[Input, Expect("a mapping")] = Input()
    harness: Annotated[Harness, Expect("a mapping")]
    graders: Annotated[list[GraderItem], a_list(nonempty="empty; expected at least one grader"),
                       Expect("a list"), Field(min_length=1)]
    budget: Annotated[Budget, Expect("a mapping"),
                      Field(description="the task pool, shared by the task's arms")] = None
    repeats: Repeats = 1
    marks: Annotated[tuple[Mark, ...], a_list(), Expect("a list"),
                     Field(description="pytest marks: `smoke` or {name: arguments}")] = ()
    contamination: Annotated[Contamination, Field(description="block (default): an arm whose "
                                                              "agent reached the answer key is "
                                                              "BLOCKED; caveat: a caveat")] = "block"

    @classmethod
    def check_raw(cls, data: dict) -> None:
        """M8: a key of the other harness kind is named with the kind, before its value."""
        harness, inp = data.get("harness"), data.get("input")
        kind = harness.get("kind", SESSION) if isinstance(harness, dict) else None
        if not isinstance(kind, str) or kind not in REFUSED:
            return
        for dotted in REFUSED[kind]:
            section, key = dotted.split(".")
            node = harness if section == "harness" else inp
            if isinstance(node, dict) and key in node:
                raise problem(f"{dotted} is not read under harness.kind: {kind}; drop it, "
                              f"or change the kind", section, key)

    @model_validator(mode="after")
    def _per_kind(self) -> "Manifest":
        """M6 / M7: what each harness kind requires."""
        needed = ((("harness", "profile"), ("input", "prompt")) if self.harness.kind == SESSION
                  else (("harness", "run"),))
        for section, key in needed:
            if getattr(getattr(self, section), key) is None:
                raise problem("missing; expected a non-blank string", section, key)
        return self


# -- the loader's side --------------------------------------------------------------------
def validate(doc: Any) -> Manifest:
    """The model of a parsed task.yaml; raises Invalid(where, reason)."""
    try:
        return Manifest.model_validate(doc)
    except ValidationError as exc:
        raise Invalid(*first_problem(exc)) from None
    except RecursionError:
        raise Invalid("", "nested too deeply to check") from None


class Invalid(Exception):
    def __init__(self, where: str, reason: str):
        super().__init__(where, reason)
        self.where, self.reason = where, reason


def first_problem(exc: ValidationError) -> tuple[str, str]:
    """(where, reason) of the first problem. A grader's location carries its kind as
    pydantic's union tag (`graders.0.script.run`): the tag is no key of the file."""
    error = exc.errors(include_url=False, include_input=False)[0]
    loc = list(error["loc"])
    for i in range(len(loc) - 2):
        if loc[i] == "graders" and isinstance(loc[i + 1], int) and loc[i + 2] in GRADER_KINDS:
            del loc[i + 2]
            break
    ctx = error.get("ctx") or {}
    if error["type"] == ERROR:
        return dotted(loc + list(ctx.get("at", ()))), str(ctx.get("reason"))
    if error["type"] == "missing":
        return dotted(loc), "missing"
    # A check pydantic made itself: its first line, in its words.
    return dotted(loc), str(error.get("msg", "invalid")).splitlines()[0]


def dotted(loc: list) -> str:
    where = ""
    for part in loc:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where


def json_schema() -> dict:
    """The JSON Schema of task.yaml, for editors and the `schema` command."""
    schema = Manifest.model_json_schema()
    session = {"properties": {"harness": {"required": ["profile"]},
                              "input": {"required": ["prompt"]}}, "required": ["input"]}
    driver = {"properties": {"harness": {"required": ["run"]}}}
    schema["allOf"] = [{
        "if": {"properties": {"harness": {"properties": {"kind": {"const": DRIVER}},
                                          "required": ["kind"]}}},
        "then": driver, "else": session}]
    _drop_null_defaults(schema)
    script = schema["$defs"]["ScriptGrader"]
    script["oneOf"] = [{"required": ["run"]}, {"required": ["file"]}]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _drop_null_defaults(node: Any) -> None:
    """`default: null` on a string field reads as an invitation to write null."""
    if isinstance(node, dict):
        if node.get("default", 0) is None:
            del node["default"]
        for child in node.values():
            _drop_null_defaults(child)
    elif isinstance(node, list):
        for child in node:
            _drop_null_defaults(child)


def cmd_schema(_args: Any = None) -> int:
    """`python -m pytest_jaato_eval schema`: the schema on stdout."""
    import json
    print(json.dumps(json_schema(), indent=2))
    return 0
