"""task.yaml -> a frozen Task (rules M1-M12 of the behaviour catalogue).

Every problem is a ManifestError whose text is one line:
``<path>: <where>: <reason>`` (M2). Nothing here talks to jaato or pytest.
"""
from __future__ import annotations

import difflib
import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .contract import param_variable
from .render import safe_text

SESSION, DRIVER = "session", "driver"
GRADER_KINDS = ("script", "processor", "judge")
BUDGET_LIMITS = ("usd", "tokens", "turns", "seconds", "tool_calls")

TOP_KEYS = ("id", "description", "environment", "input", "harness", "graders", "budget", "repeats",
            "marks")
ENVIRONMENT_KEYS = ("fixture", "config_root")
INPUT_KEYS = ("prompt", "agent", "agent_params", "params")
HARNESS_KEYS = ("kind", "profile", "profile_set", "run")
BUDGET_KEYS = BUDGET_LIMITS + ("degrade",)
GRADER_KEYS = {
    "script": ("kind", "run", "timeout_seconds", "expect_exit", "weight"),
    "processor": ("kind", "script", "timeout_seconds", "weight"),
    "judge": ("kind", "profile", "agent", "threshold", "score_field", "errors_field",
              "gate_on", "timeout_seconds", "weight"),
}
# M12: keys that look plausible in a manifest but belong to a profile.
PROFILE_KEYS = ("apparmor", "runtime_limits", "env")
# M6 / M7: which keys each harness kind refuses.
REFUSED = {
    SESSION: ("harness.run", "input.params"),
    DRIVER: ("harness.profile", "input.prompt", "input.agent", "input.agent_params"),
}
# Parameters and the degrade ladder are handed on as JSON (C2): a bound on how many values
# one may hold keeps a YAML alias bomb from expanding into billions of them.
MAX_JSON_VALUES = 10_000


class ManifestError(Exception):
    """A task.yaml that cannot be run; str() is the one-line message (M2)."""

    def __init__(self, path: Path | str, where: str, reason: str):
        # A key or a YAML problem may hold a line break, an ESC or 100k characters: the
        # line stays one printable line of bounded length whatever the file holds (M2).
        where = safe_text(where, 200, collapse=False)
        reason = safe_text(reason, 600, collapse=False)
        self.path, self.where, self.reason = str(path), where, reason
        super().__init__(f"{self.path}: {where}: {reason}" if where else f"{self.path}: {reason}")


@dataclass(frozen=True)
class GraderSpec:
    kind: str
    label: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:  # M10: the same whatever the verdict
        return f"{self.kind}:{self.label}"


@dataclass(frozen=True)
class Task:
    id: str
    manifest: Path
    description: str
    fixture: Path
    config_root: Path
    kind: str
    profile: str | None
    profile_set: str | None
    run: str | None
    prompt: str | None
    agent: str | None
    agent_params: Mapping[str, Any] | None
    params: Mapping[str, Any] | None
    graders: tuple[GraderSpec, ...]
    budget: Mapping[str, Any] | None
    repeats: int
    content_hash: str
    # pytest marks: (name, args), args None, a str, a list (positional) or a dict (keyword)
    marks: tuple[tuple[str, Any], ...] = ()

    @property
    def directory(self) -> Path:
        return self.manifest.parent

    @property
    def grader_params(self) -> Mapping[str, Any]:
        """C4: a script grader sees the arm's agent_params (session) or params (driver)."""
        return (self.params if self.kind == DRIVER else self.agent_params) or {}


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    """A scalar quoted in a complaint, clipped."""
    try:
        shown = repr(value)
    except ValueError:  # an int past sys.get_int_max_str_digits(): YAML reads 0x… of any size
        return f"<{value.bit_length()}-bit integer>"
    return shown[:57] + "...'" if isinstance(value, str) and len(shown) > 60 else shown


def _finite(value: Any) -> bool:
    """nan, inf and ints past float range are no count, limit or timeout anyone meant."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _unpassable(text: str) -> str | None:
    """Why the OS cannot be handed `text` (argv, environment, paths), or None."""
    if "\x00" in text:
        return "holds a NUL character, which no command, path or variable can carry"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds an unpaired surrogate, which is not text"
    return None


class _Reader:
    """Checks one manifest, naming the file and the key in every complaint."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, reason: str) -> ManifestError:
        return ManifestError(self.path, where, reason)

    def mapping(self, value: Any, where: str, known: tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where or "top level",
                            f"expected a mapping, got {_type_name(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(where or "top level",
                                f"key {key!r} is of type {_type_name(key)}; keys must be strings")
        for key in value:
            if key not in known:
                raise self.fail(self.join(where, key), self._unknown(key, known))
        return value

    @staticmethod
    def join(where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    @staticmethod
    def _unknown(key: str, known: tuple[str, ...]) -> str:
        if key in PROFILE_KEYS:
            return (f"unknown key; {key} is a profile setting: declare it in the profile "
                    f"under the config root's profiles/, not in task.yaml")
        hint = difflib.get_close_matches(key, known, n=1)
        close = f" (did you mean {hint[0]!r}?)" if hint else ""
        return f"unknown key{close}; known keys: {', '.join(known)}"

    def get(self, node: dict, where: str, key: str, kind: str, *, required=False,
            default: Any = None) -> Any:
        full = self.join(where, key)
        if key not in node:
            if required:
                raise self.fail(full, f"missing; expected {kind}")
            return default
        value = node[key]
        if value is None:
            raise self.fail(full, f"is null; expected {kind}")
        return self.check(value, full, kind)

    def check(self, value: Any, where: str, kind: str) -> Any:
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value)
        ok = {
            "a string": isinstance(value, str),
            "a non-blank string": isinstance(value, str) and value.strip() != "",
            "a mapping": isinstance(value, dict),
            "a list": isinstance(value, list),
            "an integer": number and isinstance(value, int),
            "a number": number,
            "a number >= 0": number and value >= 0,
            "a number > 0": number and value > 0,
            "an integer >= 1": number and isinstance(value, int) and value >= 1,
            "a string or number": isinstance(value, str) or number,
        }[kind]
        if not ok:
            raise self.fail(where, f"expected {kind}, got {_type_name(value)} {_shown(value)}"
                            if isinstance(value, (str, int, float, bool))
                            else f"expected {kind}, got {_type_name(value)}")
        if isinstance(value, str) and (why := _unpassable(value)):
            raise self.fail(where, why)
        return value

    def printable(self, value: str, where: str) -> str:
        """Ids and set names end up in node ids, which pytest prints as they are."""
        if not value.isprintable():
            bad = next(c for c in value if not c.isprintable())
            raise self.fail(where, f"holds {bad!r}; it names arms and test ids, so it must be "
                                   f"printable text")
        return value

    def json_value(self, value: Any, where: str) -> Any:
        """C2: parameters and the degrade ladder are handed on as JSON, so a YAML date,
        set, !!binary or self-referencing alias is refused here, not at grading."""
        left = [MAX_JSON_VALUES]

        def walk(node: Any, at: str, ancestors: tuple[int, ...]) -> None:
            left[0] -= 1
            if left[0] < 0:
                raise self.fail(where, f"holds more than {MAX_JSON_VALUES} values")
            if isinstance(node, str):
                if why := _unpassable(node):
                    raise self.fail(at, why)
            elif isinstance(node, (int, float)) and not isinstance(node, bool):
                if not _finite(node):
                    raise self.fail(at, f"expected a finite number, got {_shown(node)}")
            elif isinstance(node, (dict, list)):
                if id(node) in ancestors:
                    raise self.fail(at, "contains itself (a YAML alias to its own anchor)")
                inner = ancestors + (id(node),)
                if isinstance(node, list):
                    for i, item in enumerate(node):
                        walk(item, f"{at}[{i}]", inner)
                    return
                for key, item in node.items():
                    if not isinstance(key, str):
                        raise self.fail(at, f"key {_shown(key)} is of type {_type_name(key)}; "
                                            f"keys must be strings")
                    walk(key, at, inner)
                    walk(item, self.join(at, key), inner)
            elif node is not None and not isinstance(node, bool):
                raise self.fail(at, f"expected a JSON value (string, number, boolean, null, "
                                    f"list or mapping), got {_type_name(node)}")

        walk(value, where, ())
        return value

    def directory(self, value: str, where: str) -> Path:
        try:
            resolved = (self.path.parent / value).resolve()
            is_dir, exists = resolved.is_dir(), resolved.exists()
        except (OSError, RuntimeError) as exc:  # a name too long, a symlink loop
            raise self.fail(where, f"{_shown(value)} cannot be resolved: "
                                   f"{getattr(exc, 'strerror', None) or exc}") from None
        if not is_dir:
            what = "is not a directory" if exists else "does not exist"
            raise self.fail(where, f"{value!r} resolves to {resolved}, which {what}")
        return resolved

    def params(self, value: dict, where: str) -> dict:
        seen: dict[str, str] = {}
        for key in value:
            if not isinstance(key, str):
                raise self.fail(where, f"key {key!r} is of type {_type_name(key)}; keys must be strings")
            var = param_variable(key)
            if var in seen:  # M9
                raise self.fail(where, f"keys {seen[var]!r} and {key!r} both map to ${var}; "
                                       f"rename one")
            seen[var] = key
        return self.json_value(value, where)


def load_task(path: Path | str) -> Task:
    """Parse and check one task.yaml. Raises ManifestError, and nothing else."""
    path = Path(path)
    r = _Reader(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise r.fail("", f"cannot read: {exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "yaml"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise r.fail(where, f"not valid YAML: {problem}") from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. absurd timestamps
        raise r.fail("yaml", f"not valid YAML: {exc}") from None
    if doc is None:
        raise r.fail("", "empty file; expected a task mapping with id, environment, harness, graders")
    top = r.mapping(doc, "", TOP_KEYS)

    task_id = r.get(top, "", "id", "a string or number", required=True)
    task_id = str(task_id).strip()
    if not task_id:
        raise r.fail("id", "is blank; expected a non-blank id")
    r.printable(task_id, "id")
    description = r.get(top, "", "description", "a string", default="")

    env = r.mapping(r.get(top, "", "environment", "a mapping", required=True),
                    "environment", ENVIRONMENT_KEYS)
    fixture = r.directory(r.get(env, "environment", "fixture", "a non-blank string",
                                required=True), "environment.fixture")
    config_root = r.directory(r.get(env, "environment", "config_root", "a non-blank string",
                                    required=True), "environment.config_root")

    harness = r.mapping(r.get(top, "", "harness", "a mapping", required=True),
                        "harness", HARNESS_KEYS)
    kind = r.get(harness, "harness", "kind", "a string", default=SESSION)
    if kind not in (SESSION, DRIVER):
        raise r.fail("harness.kind", f"unknown kind {kind!r}; expected one of {SESSION}, {DRIVER}")
    inp = r.mapping(r.get(top, "", "input", "a mapping", default={}), "input", INPUT_KEYS)

    for dotted in REFUSED[kind]:  # M8
        section, key = dotted.split(".")
        if key in (harness if section == "harness" else inp):
            raise r.fail(dotted, f"{dotted} is not read under harness.kind: {kind}; drop it, "
                                 f"or change the kind")

    profile_set = r.get(harness, "harness", "profile_set", "a non-blank string")
    if profile_set is not None:
        r.printable(profile_set, "harness.profile_set")
    profile = run = prompt = agent = agent_params = params = None
    if kind == SESSION:  # M6
        profile = r.get(harness, "harness", "profile", "a non-blank string", required=True)
        prompt = r.get(inp, "input", "prompt", "a non-blank string", required=True)
        agent = r.get(inp, "input", "agent", "a non-blank string")
        agent_params = r.get(inp, "input", "agent_params", "a mapping")
        if agent_params is not None:
            r.params(agent_params, "input.agent_params")
    else:  # M7
        run = r.get(harness, "harness", "run", "a non-blank string", required=True)
        params = r.get(inp, "input", "params", "a mapping")
        if params is not None:
            r.params(params, "input.params")

    graders = _graders(r, r.get(top, "", "graders", "a list", required=True))
    budget = _budget(r, r.get(top, "", "budget", "a mapping"))
    repeats = r.get(top, "", "repeats", "an integer >= 1", default=1)
    marks = _marks(r, r.get(top, "", "marks", "a list", default=[]))

    return Task(
        id=task_id, manifest=path.resolve(), description=description, fixture=fixture,
        config_root=config_root, kind=kind, profile=profile, profile_set=profile_set, run=run,
        prompt=prompt, agent=agent, agent_params=agent_params, params=params,
        graders=graders, budget=budget, repeats=repeats, marks=marks,
        content_hash=content_hash(path.resolve(), fixture, config_root),
    )


def _graders(r: _Reader, items: list) -> tuple[GraderSpec, ...]:
    if not items:
        raise r.fail("graders", "empty; expected at least one grader")
    specs = []
    for i, item in enumerate(items):
        where = f"graders[{i}]"
        if not isinstance(item, dict):
            raise r.fail(where, f"expected a mapping, got {_type_name(item)}")
        kind = r.get(item, where, "kind", "a string", required=True)
        if kind not in GRADER_KINDS:
            raise r.fail(f"{where}.kind", f"unknown kind {kind!r}; expected one of "
                                          f"{', '.join(GRADER_KINDS)}")
        r.mapping(item, where, GRADER_KEYS[kind])
        opts: dict[str, Any] = {}
        if kind == "script":
            opts["run"] = r.get(item, where, "run", "a non-blank string", required=True)
            opts["expect_exit"] = r.get(item, where, "expect_exit", "an integer", default=0)
            label = opts["run"]
        elif kind == "processor":
            opts["script"] = r.get(item, where, "script", "a non-blank string", required=True)
            label = opts["script"]
        else:
            opts["profile"] = r.get(item, where, "profile", "a non-blank string", required=True)
            opts["agent"] = r.get(item, where, "agent", "a non-blank string")
            opts["threshold"] = r.get(item, where, "threshold", "a number", default=0.7)
            opts["score_field"] = r.get(item, where, "score_field", "a non-blank string",
                                        default="score")
            opts["errors_field"] = r.get(item, where, "errors_field", "a non-blank string",
                                         default="errors")
            gate = r.get(item, where, "gate_on", "a list", default=[])
            for j, g in enumerate(gate):
                r.check(g, f"{where}.gate_on[{j}]", "a non-blank string")
            opts["gate_on"] = tuple(gate)
            label = opts["profile"]
        default_timeout = 600 if kind != "judge" else 300
        opts["timeout_seconds"] = r.get(item, where, "timeout_seconds", "a number > 0",
                                        default=default_timeout)
        opts["weight"] = r.get(item, where, "weight", "a number >= 0", default=1)
        specs.append(GraderSpec(kind=kind, label=label, options=opts))
    return tuple(specs)


def _marks(r: _Reader, items: list) -> tuple[tuple[str, Any], ...]:
    out = []
    for i, entry in enumerate(items):
        where = f"marks[{i}]"
        if isinstance(entry, dict) and len(entry) == 1:
            (name, args), = entry.items()
        elif isinstance(entry, str):
            name, args = entry, None
        else:
            raise r.fail(where, f"expected a marker name or a one-key mapping {{name: args}}, "
                                f"got {_type_name(entry)}")
        if not isinstance(name, str) or not name.isidentifier():
            raise r.fail(where, f"{_shown(name)} is not a marker name; expected an identifier "
                                f"such as smoke or xfail")
        if args is not None and not isinstance(args, (str, list, dict)):
            raise r.fail(f"{where}.{name}", f"expected a string, a list (positional arguments) "
                                            f"or a mapping (keyword arguments), got "
                                            f"{_type_name(args)}")
        if isinstance(args, dict):
            for key in args:
                if not isinstance(key, str) or not key.isidentifier():
                    raise r.fail(f"{where}.{name}", f"keyword {_shown(key)} is not an identifier")
        out.append((name, r.json_value(args, f"{where}.{name}")))
    return tuple(out)


def _budget(r: _Reader, budget: dict | None) -> dict | None:
    if budget is None:
        return None
    r.mapping(budget, "budget", BUDGET_KEYS)
    out: dict[str, Any] = {}
    for key in BUDGET_LIMITS:
        value = r.get(budget, "budget", key, "a number >= 0")
        if value is not None:
            out[key] = value
    degrade = r.get(budget, "budget", "degrade", "a list")
    if degrade is not None:
        out["degrade"] = r.json_value(degrade, "budget.degrade")
    if not any(k in out for k in BUDGET_LIMITS):
        raise r.fail("budget", f"no limit declared; expected at least one of {', '.join(BUDGET_LIMITS)}")
    return out


_SKIPPED_NAMES = {".git", "__pycache__", ".DS_Store"}


def skipped_in_fixture(name: str) -> bool:
    """W1: what a workspace copy leaves out (shared with the content hash)."""
    return name in _SKIPPED_NAMES or name.endswith(".pyc")


def content_hash(manifest: Path, fixture: Path, config_root: Path) -> str:
    """sha256 over the manifest, fixture and config root: what --resume checks (R3)."""
    h = hashlib.sha256()
    h.update(manifest.read_bytes())
    for base in (fixture, config_root):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not skipped_in_fixture(d))
            for name in sorted(filenames):
                if skipped_in_fixture(name):
                    continue
                p = Path(dirpath, name)
                h.update(str(p.relative_to(base)).encode() + b"\0")
                try:
                    h.update(os.readlink(p).encode() if p.is_symlink() else p.read_bytes())
                except OSError:
                    h.update(b"<unreadable>")
    return h.hexdigest()
