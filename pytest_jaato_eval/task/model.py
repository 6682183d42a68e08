"""A task, as the rest of the plugin sees it: task.yaml's sections as pydantic models
built from the value kinds (values.py), and `Task` the whole file (M3-M12), validated
once, with what the loader (load.py) resolved: where its files are, and its samples.

Imported on the first task only: a pytest run without tasks never pays for pydantic.
"""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Protocol, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, model_validator

from .samples import Sample
from .spelled import absolute_in, named_in
from .tree import TaskTree
from .values import (DATES, ConfigPath, Contamination, Expect, InputParams, Integer, Ladder,
                     Mark, NonBlank, NonNegative, Number, Params, Passthrough, Positive,
                     Repeats, SampleLimit, Scale, SetName, Size, TaskId, Text, a_list, got, problem,
                     shown, type_name, value_kind)

SESSION, DRIVER = "session", "driver"
GRADER_KINDS = ("script", "processor", "judge", "match")
BUDGET_LIMITS = ("usd", "tokens", "turns", "seconds", "tool_calls")

# Keys that look plausible in a manifest but belong to a profile (M12).
PROFILE_KEYS = ("apparmor", "runtime_limits", "env")
# Which keys each harness kind refuses (M6-M8).
REFUSED = {
    SESSION: ("harness.run", "input.params"),
    DRIVER: ("harness.profile", "input.prompt", "input.agent", "input.agent_params"),
}


def unknown_key(key: str, known: tuple[str, ...]) -> str:
    if key in PROFILE_KEYS:
        return (f"unknown key; {key} is a profile setting: declare it in the profile "
                f"under the config root's profiles/, not in task.yaml")
    hint = difflib.get_close_matches(key, known, n=1)
    close = f" (did you mean {hint[0]!r}?)" if hint else ""
    return f"unknown key{close}; known keys: {', '.join(known)}"


class Section(BaseModel):
    """A mapping whose keys are all declared: unknown ones are refused by name (M12)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # Optional keys whose null (`agent_params:` with nothing under it) means absent, as
    # jaato-eval reads them; any other null is refused by its value's check.
    NULL_IS_ABSENT: ClassVar[tuple[str, ...]] = ()
    EMPTY_IS_ABSENT: ClassVar[tuple[str, ...]] = ()

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
        data = {k: v for k, v in data.items()
                if not (v is None and k in cls.NULL_IS_ABSENT or v == {} and k in cls.EMPTY_IS_ABSENT)}
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
    NULL_IS_ABSENT = ("agent", "agent_params", "params")
    prompt: Annotated[NonBlank, Field(description="session arms: the prompt")] = None
    agent: Annotated[NonBlank, Field(description="session arms: a persona")] = None
    agent_params: Annotated[InputParams, Field(description="session arms: parameters, also "
                                                           "handed to script graders: " + DATES)] = None
    params: Annotated[InputParams, Field(description="driver arms: the driver's input: "
                                                     + DATES)] = None


def harness_kind(value: Any) -> str:
    if value not in (SESSION, DRIVER):
        raise problem(f"unknown kind {value!r}; expected one of {SESSION}, {DRIVER}")
    return value


class Harness(Section):
    NULL_IS_ABSENT = ("profile_set",)
    kind: Annotated[value_kind("a string", lambda v: isinstance(v, str),
                               {"enum": [SESSION, DRIVER]}, harness_kind),
                    Field(description="session (default) or driver")] = SESSION
    profile: Annotated[NonBlank, Field(description="session arms: the profile to bind")] = None
    profile_set: Annotated[SetName, Field(description="the profile set; --profile-set "
                                                      "overrides it")] = None
    run: Annotated[NonBlank, Field(description="driver arms: the shell command that is "
                                               "the arm")] = None
    env_passthrough: Passthrough = ()


class Needs(Protocol):
    """What preflight (task/preflight.py) checks when a grader kind asks: each a problem, or
    None when it is there."""

    def file(self, rel: str, what: str, *, executable: bool) -> str | None: ...

    def profile(self, name: str, what: str) -> str | None: ...


class Grader(Section):
    """What every grader kind declares, and what makes a kind: each kind below says its own
    files, what preflight checks, what contamination guards and whether it needs the daemon;
    its grading is graders/'s table. A method left to this base raises, and
    tests/unit/test_grader_kinds.py calls every one on every kind of `AnyGrader`."""

    timeout_seconds: Positive = None  # each kind's own default: see `timeout`
    weight: NonNegative = 1
    DEFAULT_TIMEOUT: ClassVar[float] = 600
    NEEDS_DAEMON: ClassVar[bool] = False  # a regrade starts a daemon only for such a kind
    if TYPE_CHECKING:
        kind: str

    @property
    def label(self) -> str:
        raise NotImplementedError

    @property
    def id(self) -> str:
        """M10: how reports and `gate_on` name it, the same whatever the verdict."""
        return f"{self.kind}:{self.label}"

    @property
    def timeout(self) -> float:
        return self.DEFAULT_TIMEOUT if self.timeout_seconds is None else self.timeout_seconds

    def own_files(self, config_root: Path) -> set[str]:
        """The config root's files this grader names (relative paths): the other graders'
        views of the config root leave them out (task/grader_files.py)."""
        raise NotImplementedError

    def preflight(self, needs: Needs) -> str | None:
        """Why the arm is BLOCKED before it starts for this grader's sake, or None."""
        raise NotImplementedError

    def guarded(self, config_root: Path) -> list[str]:
        """The paths, besides the config root, the agent must not reach for this grader
        (contamination.py)."""
        raise NotImplementedError


class ScriptGrader(Grader):
    kind: Literal["script"]
    run: Annotated[NonBlank, Field(description="a shell command, run in the workspace")] = None
    file: Annotated[ConfigPath, Field(description="a script under the config root: .py runs "
                                                  "with $JAATO_EVAL_PYTHON, anything else "
                                                  "directly")] = None
    expect_exit: Integer = 0
    env_passthrough: Passthrough = ()

    @property
    def label(self) -> str:
        return self.run if self.run is not None else self.file

    def own_files(self, config_root: Path) -> set[str]:
        return {os.path.normpath(self.file)} if self.file else named_in(self.run or "")

    def preflight(self, needs: Needs) -> str | None:
        if not self.file:
            return None
        return needs.file(self.file, f"grader {self.id}: script",
                          executable=not self.file.endswith(".py"))

    def guarded(self, config_root: Path) -> list[str]:
        if self.file:
            return [str(Path(config_root) / self.file)]
        return [word for word in absolute_in(self.run or "") if os.path.exists(word)]

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

    @property
    def label(self) -> str:
        return self.script

    def own_files(self, config_root: Path) -> set[str]:
        return {os.path.normpath(self.script)}

    def preflight(self, needs: Needs) -> str | None:
        return needs.file(self.script, f"grader {self.id}: processor", executable=False)

    def guarded(self, config_root: Path) -> list[str]:
        return [str(Path(config_root) / self.script)]


def one_or_list(value: Any) -> Any:
    """`gate_on: "script:x"` is one gate, as jaato-eval reads it."""
    return [value] if isinstance(value, str) else value


class JudgeGrader(Grader):
    """G5. The keys jaato-eval reads, and ours, each read only when the task declares it:
    a rubric written for jaato-eval gets jaato-eval's verdict."""

    kind: Literal["judge"]
    NULL_IS_ABSENT = ("agent", "gate_on", "socket_path")
    DEFAULT_TIMEOUT: ClassVar[float] = 300
    NEEDS_DAEMON: ClassVar[bool] = True  # its session runs on the arm's daemon
    DEFAULT_CONFIDENCE_SCALE: ClassVar[tuple[float, float]] = (0, 1)
    profile: Annotated[NonBlank, Field(description="the judge's profile")]
    agent: NonBlank = None
    threshold: Annotated[Number, Field(description="PASS when the score is at or above it, "
                                                   "on the rubric's own scale")] = 0.7
    score_field: NonBlank = "score"
    score_scale: Annotated[Scale, Field(description="optional [lowest, highest]: a score "
                                                    "outside it is BLOCKED")] = None
    errors_field: Annotated[NonBlank, Field(description="a non-empty value there: the judge "
                                                        "could not grade (BLOCKED)")] = "errors"
    defects_field: Annotated[NonBlank, Field(description="optional: a non-empty list there "
                                                         "FAILS the arm")] = None
    gate_on: Annotated[tuple[NonBlank, ...], a_list(), BeforeValidator(one_or_list),
                       Expect("a list"),
                       Field(description="grader ids that must PASS first (one id, or a "
                                         "list)")] = ()
    needs_human_below: Annotated[Number, Field(description="a judge `confidence` under it "
                                                           "is BLOCKED for human review")] = None
    confidence_scale: Annotated[Scale, Field(description="the scale `confidence` is on "
                                                         "(default [0, 1]); with "
                                                         "needs_human_below")] = None
    socket_path: Annotated[NonBlank, Field(description="jaato-eval's; not used: the judge "
                                                       "runs on its arm's daemon")] = None

    @property
    def label(self) -> str:
        return self.profile

    def own_files(self, config_root: Path) -> set[str]:
        """Its profile's file under every profile set."""
        profiles = Path(config_root) / "profiles"
        try:
            sets = [p for p in profiles.iterdir() if p.is_dir()]
        except OSError:
            sets = []
        return {os.path.relpath(folder / f"{self.profile}{suffix}", config_root)
                for folder in [profiles, *sets] for suffix in (".yaml", ".yml")}

    def preflight(self, needs: Needs) -> str | None:
        return needs.profile(self.profile, f"grader {self.id}: judge profile")

    def guarded(self, config_root: Path) -> list[str]:
        return []  # its profile is in the config root, guarded whole

    @property
    def confidence_range(self) -> tuple[float, float]:
        return self.confidence_scale or self.DEFAULT_CONFIDENCE_SCALE

    @model_validator(mode="after")
    def _on_its_scales(self) -> "JudgeGrader":
        """The threshold on the declared score scale; needs_human_below on the confidence
        scale, which is read only with it."""
        if self.score_scale and not within(self.threshold, self.score_scale):
            raise problem(f"{self.threshold:g} is off the score_scale {span(self.score_scale)}; "
                          f"expected a threshold on it", "threshold")
        if self.needs_human_below is None:
            if self.confidence_scale is not None:
                raise problem("read only with needs_human_below; add it, or drop this key",
                              "confidence_scale")
        elif not within(self.needs_human_below, self.confidence_range):
            raise problem(f"expected a number from {span(self.confidence_range)} (the "
                          f"confidence_scale), got {got(self.needs_human_below)}",
                          "needs_human_below")
        return self


def within(value: float, scale: tuple[float, float]) -> bool:
    return scale[0] <= value <= scale[1]


def span(scale: tuple[float, float]) -> str:
    return f"{scale[0]:g} to {scale[1]:g}"


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


def gate_aliases(ids: list[str]) -> dict[str, str]:
    """M10: the id jaato-eval gives a graded processor (`processor:<file name>`) -> its id
    here, for each file name only one of `ids` has."""
    names: dict[str, list[str]] = {}
    for gid in ids:
        if gid.startswith("processor:"):
            names.setdefault("processor:" + gid.rsplit("/", 1)[-1], []).append(gid)
    return {alias: found[0] for alias, found in names.items()
            if len(found) == 1 and alias not in ids}


def match_schema(schema: dict) -> None:
    """One of contains and pattern; no timeout_seconds (refused by check_raw too)."""
    schema["oneOf"] = [{"required": ["contains"]}, {"required": ["pattern"]}]
    schema["properties"].pop("timeout_seconds", None)


def match_expect(value: Any) -> str:
    if value not in ("present", "absent"):
        raise problem(f"expected present or absent, got {got(value)}")
    return value


class MatchGrader(Grader):
    """G7: a text or a regular expression looked for in one file the agent left, read by
    the harness itself: no process, no daemon."""

    kind: Literal["match"]
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=match_schema)
    path: Annotated[NonBlank, Field(description="the file to read, relative to the workspace")]
    contains: Annotated[Text, Field(description="a text the file must hold")] = None
    pattern: Annotated[NonBlank, Field(description="a Python regular expression searched "
                                                   "for in the file (re.search, MULTILINE)")] = None
    expect: Annotated[value_kind("a string", lambda v: isinstance(v, str),
                                 {"enum": ["present", "absent"]}, match_expect),
                      Field(description="present (default): PASS when found; absent: PASS "
                                        "when not found")] = "present"

    @property
    def label(self) -> str:
        return self.path

    @classmethod
    def check_raw(cls, data: dict) -> None:
        if ("contains" in data) == ("pattern" in data):
            raise problem("give either contains (a text) or pattern (a regular expression), "
                          "not both" if "pattern" in data else "missing; expected contains "
                          "(a text) or pattern (a regular expression)",
                          "pattern" if "pattern" in data else "contains")
        if isinstance(data.get("pattern"), str):
            try:
                re.compile(data["pattern"])
            except re.error as exc:
                raise problem(f"not a regular expression: {exc}", "pattern") from None
        if "timeout_seconds" in data:
            raise problem("not read: a match grader runs nothing to wait on; drop this key",
                          "timeout_seconds")
        path = data.get("path")
        if isinstance(path, str) and (os.path.isabs(path) or ".." in Path(path).parts):
            raise problem(f"{path!r} leaves the workspace; expected a path relative to it",
                          "path")

    def own_files(self, config_root: Path) -> set[str]:
        return set()

    def preflight(self, needs: Needs) -> str | None:
        return None

    def guarded(self, config_root: Path) -> list[str]:
        return []


AnyGrader = Union[ScriptGrader, ProcessorGrader, JudgeGrader, MatchGrader]
GraderItem = Annotated[AnyGrader, Field(discriminator="kind"), BeforeValidator(grader_kind)]


def dataset_file(value: Any) -> Any:
    """`dataset: rows.jsonl` is short for `dataset: {file: rows.jsonl}`."""
    return {"file": value} if isinstance(value, str) else value


class Dataset(Section):
    """The task's samples: a file beside task.yaml, or rows written here."""

    file: Annotated[NonBlank, Field(description="a .jsonl or .csv file of rows, relative to "
                                                "task.yaml")] = None
    rows: Annotated[tuple[Params, ...], a_list(nonempty="empty; expected at least one row"),
                    Expect("a list"), Field(description="the rows, inline")] = None
    id: Annotated[NonBlank, Field(description="the field holding each row's id (default "
                                              "id; a row without it is row-<n>)")] = "id"
    limit: Annotated[SampleLimit, Field(description="run only the first N samples "
                                                    "(--jaato-samples overrides it)")] = None

    @classmethod
    def check_raw(cls, data: dict) -> None:
        if ("file" in data) == ("rows" in data):
            raise problem("give either file (a .jsonl or .csv file beside task.yaml) or rows "
                          "(inline), not both" if "file" in data else
                          "missing; expected file (a .jsonl or .csv file beside task.yaml) or "
                          "rows (a list of mappings)", "rows" if "rows" in data else "file")


class Budget(Section):
    NULL_IS_ABSENT = ("degrade",)
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

    def limits(self) -> dict[str, float]:
        """The limits declared, by name: the pool's (B1)."""
        return {k: getattr(self, k) for k in BUDGET_LIMITS if getattr(self, k) is not None}

    def as_dict(self) -> dict[str, Any]:
        """The limits, and the degrade ladder if declared: what the pool is declared with."""
        return self.limits() | ({} if self.degrade is None else {"degrade": self.degrade})


class Snapshot(Section):
    """What each arm keeps of what its graders graded (docs/regrading.md)."""

    max_mb: Annotated[NonNegative, Field(description="the largest workspace (its files and "
                                                     "the run's facts, in MB before "
                                                     "compression) kept as a snapshot; 0 "
                                                     "keeps none (default: ini "
                                                     "jaato_snapshot_max_mb, else 32)")] = None


class Resources(Section):
    """What each arm's agent may use, where the run's defaults (the ini keys
    jaato_memory_limit, jaato_disk_limit) are not enough, or too much for a test."""

    memory: Annotated[Size, Field(description="its sandbox's memory, jaato's daemon included "
                                              "(default 8G)")] = None
    disk: Annotated[Size, Field(description="what it may add to the folders it can write "
                                            "(default 10G)")] = None


class Task(Section):
    """A task: task.yaml (M3-M12), its sections as the file gives them, and what the
    loader resolved once it was valid. The arms read the shortcuts below (kind, profile,
    prompt, ...) rather than the sections."""

    model_config = ConfigDict(title="jaato task (task.yaml)")
    NULL_IS_ABSENT = ("description", "input", "budget")
    EMPTY_IS_ABSENT = ("budget",)  # `budget: {}` declares no pool, as under jaato-eval

    id: Annotated[TaskId, Field(description="unique across the run")]
    description: Text = ""
    environment: Annotated[Environment, Expect("a mapping")]
    input: Annotated[Input, Expect("a mapping")] = Input()
    harness: Annotated[Harness, Expect("a mapping")]
    graders: Annotated[tuple[GraderItem, ...],
                       a_list(nonempty="empty; expected at least one grader"), Expect("a list"),
                       Field(json_schema_extra={"minItems": 1})]  # a tuple min_length gives minLength
    budget: Annotated[Budget, Expect("a mapping"),
                      Field(description="the task pool, shared by the task's arms")] = None
    repeats: Repeats = 1
    dataset: Annotated[Dataset, BeforeValidator(dataset_file), Expect("a mapping or a file name"),
                       Field(description="the samples each arm is run on (docs/tasks.md, "
                                         "Datasets)")] = None
    marks: Annotated[tuple[Mark, ...], a_list(), Expect("a list"),
                     Field(description="pytest marks: `smoke` or {name: arguments}")] = ()
    snapshot: Annotated[Snapshot, Expect("a mapping"),
                        Field(description="each arm's snapshot, for a regrade")] = None
    resources: Annotated[Resources, Expect("a mapping"),
                         Field(description="raise (or lower) the memory and disk each arm's "
                                           "agent may use")] = None
    contamination: Annotated[Contamination, Field(description="block (default): an arm whose "
                                                              "agent reached the answer key "
                                                              "FAILS, the calls named; caveat: "
                                                              "a caveat")] = "block"

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
    def _per_kind(self) -> "Task":
        """M6 / M7: what each harness kind requires."""
        needed = ((("harness", "profile"), ("input", "prompt")) if self.harness.kind == SESSION
                  else (("harness", "run"),))
        for section, key in needed:
            if getattr(getattr(self, section), key) is None:
                raise problem("missing; expected a non-blank string", section, key)
        self._gates()
        return self

    def _gates(self) -> None:
        """A judge's gate_on names a grader that runs before it, by its id: found here,
        not as "gate ... not run" after the paid session."""
        ids = [g.id for g in self.graders]
        for i, g in enumerate(self.graders):
            for j, gate in enumerate(g.gate_on if isinstance(g, JudgeGrader) else ()):
                if gate in ids[:i] or gate in gate_aliases(ids[:i]):
                    continue
                later = " runs after this judge;" if gate in ids[i:] else " is no grader of this task;"
                valid = ", ".join(repr(x) for x in ids[:i]) or "none (no grader runs before it)"
                raise problem(f"{gate!r}{later} expected the id of a grader before it: {valid}",
                              "graders", i, "gate_on", j)


# -- what the loader resolved: no key of the file --------------------------------------
    _manifest: Path = PrivateAttr()
    _fixture: Path = PrivateAttr()
    _config_root: Path = PrivateAttr()
    # The dataset's rows (samples.py): every arm runs on one; none, the task is one sample.
    _samples: tuple[Sample, ...] = PrivateAttr(default=())
    _tree: TaskTree | None = PrivateAttr(default=None)

    def found_at(self, manifest: Path, fixture: Path, config_root: Path,
                 samples: tuple[Sample, ...] = (), tree: TaskTree | None = None) -> "Task":
        """This task with where its files are, resolved: set once, by its loader."""
        if "_manifest" in (self.__pydantic_private__ or {}):
            raise RuntimeError(f"task {self.id!r} is already found at {self._manifest}")
        self._manifest, self._fixture, self._config_root = manifest, fixture, config_root
        self._samples, self._tree = samples, tree
        return self

    @property
    def manifest(self) -> Path:
        return self._manifest

    @property
    def fixture(self) -> Path:
        return self._fixture

    @property
    def config_root(self) -> Path:
        return self._config_root

    @property
    def samples(self) -> tuple[Sample, ...]:
        return self._samples

    @property
    def directory(self) -> Path:
        return self._manifest.parent

    @property
    def content_hash(self) -> str:
        """What --resume compares (R3): hashed on first read, once per task."""
        if self._tree is None:
            self._tree = TaskTree.of(self._manifest.read_bytes(), self._fixture,
                                     self._config_root)
        return self._tree.digest()
