"""task.yaml, declared: pydantic models that are both the checker and the JSON Schema.

The value kinds and their complaints are in task_values.py, the sections built from
them in task_sections.py; this module is what the loader and the `schema` command
call. A problem travels out of pydantic as a `manifest` error carrying its reason
and the path below the field; the loader turns the first one into the one-line
ManifestError. pydantic's own multi-line text never reaches a user.

Imported on the first task.yaml only: a pytest run without tasks never pays for pydantic.
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .manifest import DRIVER, GRADER_KINDS
from .task_sections import Manifest
from .task_values import ERROR


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
    dataset = schema["$defs"]["Dataset"]
    dataset["oneOf"] = [{"required": ["file"]}, {"required": ["rows"]}]
    schema["properties"]["dataset"] = {  # `dataset: rows.jsonl` is short for {file: rows.jsonl}
        "description": schema["properties"]["dataset"].get("description", ""),
        "anyOf": [{"type": "string", "pattern": r"\S"}, {"$ref": "#/$defs/Dataset"}]}
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
