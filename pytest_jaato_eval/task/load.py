"""task.yaml -> a frozen Task (rules M1-M12 of the behaviour catalogue).

The format is declared in model.py; this module reads the file, hands the document to
the model, and gives the Task it validated the task's folders, resolved, and its
samples. A problem travels out of pydantic as a `manifest` error carrying its reason and
the path below the field; the first one becomes a ManifestError whose text is one
line, ``<path>: <where>: <reason>`` (M2): pydantic's own multi-line text never reaches
a user. Nothing here talks to jaato or pytest.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..engine.files import load_yaml
from ..render import safe_text
from . import samples
from .model import DRIVER, GRADER_KINDS, Budget, Harness, Input, JudgeGrader, Task
from .samples import Sample
from .tree import TaskTree, TreeError, list_tree
from .values import ERROR, shown


class ManifestError(Exception):
    """A task.yaml that cannot be run; str() is the one-line message (M2)."""

    def __init__(self, path: Path | str, where: str, reason: str):
        # A key or a YAML problem may hold a line break, an ESC or 100k characters: the
        # line stays one printable line of bounded length whatever the file holds (M2).
        where = safe_text(where, 200, collapse=False)
        reason = safe_text(reason, 600, collapse=False)
        self.path, self.where, self.reason = str(path), where, reason
        super().__init__(f"{self.path}: {where}: {reason}" if where else f"{self.path}: {reason}")


def load_task(path: Path | str) -> Task:
    """Parse and check one task.yaml. Raises ManifestError, and nothing else."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(path, "", f"cannot read: {exc}") from None
    try:
        doc = _parsed.pop(raw, None)
        if doc is None:
            doc = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "yaml"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(path, where, f"not valid YAML: {problem}") from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. absurd timestamps
        raise ManifestError(path, "yaml", f"not valid YAML: {exc}") from None
    if doc is None:
        raise ManifestError(path, "", "empty file; expected a task mapping with id, "
                                      "environment, harness, graders")
    try:
        task = Task.model_validate(doc)
    except ValidationError as exc:
        where, reason = first_problem(exc)
        raise ManifestError(path, where or "top level", reason) from None
    except RecursionError:
        raise ManifestError(path, "top level", "nested too deeply to check") from None

    try:  # the task's folder, resolved once for its manifest, fixture and config root
        folder = os.path.realpath(os.path.dirname(path) or os.curdir)
        manifest = Path(_resolved_in(folder, path.name)[0])
    except (OSError, RuntimeError, ValueError) as exc:
        raise ManifestError(path, "", f"cannot resolve its folder: {exc}") from None
    fixture = _directory(path, folder, task.environment.fixture, "environment.fixture")
    config_root = _directory(path, folder, task.environment.config_root,
                             "environment.config_root")
    found: tuple[Sample, ...] = ()
    if task.dataset is not None:
        found, data = _dataset(path, folder, task.dataset)
        raw += b"\0dataset\0" + data  # --resume: a changed dataset is a changed task
        _check_templates(path, found, task.input, task.harness.kind == DRIVER)
    tree = _tree(path, raw, fixture, config_root)
    return task.found_at(manifest, fixture, config_root, found, tree)


def _dataset(path: Path, folder: str, spec) -> tuple[tuple[Sample, ...], bytes]:
    try:
        return samples.load(Path(folder), spec.file, spec.rows, spec.id)
    except samples.DatasetError as exc:
        raise ManifestError(path, exc.where, exc.reason) from None


def _check_templates(path: Path, found: tuple[Sample, ...], inp, driver: bool) -> None:
    """Every sample's prompt and parameters render, or the task is not collected."""
    parts = (("input.params", inp.params),) if driver else (
        ("input.prompt", inp.prompt), ("input.agent_params", inp.agent_params))
    for where, value in parts:
        for sample in found:
            try:
                samples.render(value, sample)
            except samples.TemplateError as exc:
                raise ManifestError(path, where, str(exc)) from None


# Collection reads each task.yaml twice, the fence (never entering its fixture or config
# root) just before the collector: the fence's document is handed on, by the exact bytes
# it was parsed from and once, so each manifest is parsed once. Bounded: a few entries.
_parsed: dict[bytes, Any] = {}
_PARSED_KEPT = 16


def parse_for_collection(raw: bytes) -> Any:
    """The YAML document of a manifest's bytes (raising what the parser raises), kept for
    the `load_task` that reads the same bytes next."""
    doc = load_yaml(raw.decode("utf-8"))
    if doc is not None:
        while len(_parsed) >= _PARSED_KEPT:
            del _parsed[next(iter(_parsed))]
        _parsed[raw] = doc
    return doc


def _resolved_in(folder: str, value: str) -> tuple[str, os.stat_result | None]:
    """os.path.realpath(join(folder, value)) for a `folder` already resolved, and the
    result's lstat where it was taken: a plain name that is no link is itself, found
    with one lstat, where realpath would walk every folder from the root again."""
    joined = os.path.join(folder, value)
    if value in ("", ".", "..") or os.sep in value or (os.altsep and os.altsep in value):
        return os.path.realpath(joined), None
    try:
        found = os.lstat(joined)
    except FileNotFoundError:
        return joined, None  # what realpath gives for a missing last part
    if stat.S_ISLNK(found.st_mode):
        return os.path.realpath(joined), None
    return joined, found


def _directory(path: Path, folder: str, value: str, where: str) -> Path:
    """The folder `value` names, relative to the task's resolved `folder`, resolved."""
    try:  # os.path on strings: pathlib's resolve() costs twice as much, once per task
        found_at, found = _resolved_in(folder, value)
        resolved = Path(found_at)
        mode = (found or os.stat(found_at)).st_mode
    except FileNotFoundError:
        mode = None
    except (OSError, RuntimeError, ValueError) as exc:  # a name too long, a symlink loop
        raise ManifestError(path, where, f"{shown(value)} cannot be resolved: "
                                         f"{getattr(exc, 'strerror', None) or exc}") from None
    if mode is None or not stat.S_ISDIR(mode):
        what = "is not a directory" if mode is not None else "does not exist"
        raise ManifestError(path, where, f"{value!r} resolves to {resolved}, which {what}")
    return resolved


def _tree(path: Path, raw: bytes, fixture: Path, config_root: Path) -> TaskTree:
    try:
        listing = list_tree(fixture)
    except TreeError as exc:
        raise ManifestError(path, "environment.fixture", str(exc)) from None
    return TaskTree(raw, fixture, listing, config_root)


def content_hash(manifest: Path, fixture: Path, config_root: Path) -> str:
    """sha256 over the manifest, fixture and config root: what --resume checks (R3)."""
    return TaskTree.of(Path(manifest).read_bytes(), fixture, config_root).digest()


# -- the model's verdict on a document --------------------------------------------------------------------
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


# -- the JSON Schema, for editors ---------------------------------------------------------
def json_schema() -> dict:
    """The JSON Schema of task.yaml, for editors and the `schema` command."""
    schema = Task.model_json_schema()
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
    dataset = schema["$defs"]["Dataset"]
    dataset["oneOf"] = [{"required": ["file"]}, {"required": ["rows"]}]
    schema["properties"]["dataset"] = {  # `dataset: rows.jsonl` is short for {file: rows.jsonl}
        "description": schema["properties"]["dataset"].get("description", ""),
        "anyOf": [{"type": "string", "pattern": r"\S"}, {"$ref": "#/$defs/Dataset"}]}
    judge = schema["$defs"]["JudgeGrader"]["properties"]
    judge["gate_on"] = _or(judge["gate_on"], {"type": "string", "pattern": r"\S"})
    for model in (Task, Input, Harness, Budget, JudgeGrader):  # null means absent there
        node = schema if model is Task else schema["$defs"][model.__name__]
        for name in model.NULL_IS_ABSENT:
            node["properties"][name] = _or(node["properties"][name], {"type": "null"})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _or(prop: dict, other: dict) -> dict:
    """A property's schema that also takes `other`; its description and default kept."""
    kept = {k: prop[k] for k in ("title", "description", "default") if k in prop}
    rest = {k: v for k, v in prop.items() if k not in kept}
    return {**kept, "anyOf": [*rest.pop("anyOf", [rest] if rest else []), other]}


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
    print(json.dumps(json_schema(), indent=2))
    return 0
