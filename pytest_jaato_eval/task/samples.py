"""Samples: the many inputs one task is run on (docs/tasks.md, "Datasets").

A task.yaml may name a dataset — a JSONL or CSV file beside it, or rows written
inline — and an arm written in Python may be parametrised with
`@pytest.mark.parametrize`. Either way each row (each parameter set) is a
*sample*: an id and its fields. An arm is task × sample × profile set × repeat;
the sample's id is in the arm id (`task[sample]@set#repeat`) and in the node id
(`[sample-echo-r0]`), the task id stays the task's, so the pivot rolls a task's
samples up into one row.

A task.yaml's prompt and the string values of its `agent_params`/`params` are
templates over the sample's fields (`{{ word }}`, `{{ sample.word }}`,
`{{ sample_id }}`), rendered by a sandboxed Jinja2 with undefined names refused:
every sample's rendering is checked when the task is collected, so a typo in a
field name is a one-line collection error, never an arm that ran on a half prompt.
"""
from __future__ import annotations

import csv
import functools
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..number import is_int

DATASET_SUFFIXES = (".jsonl", ".csv")
MAX_DATASET_BYTES = 64 << 20
SAMPLE_ID = re.compile(r"[^\s\[\]:@#]{1,80}")


class DatasetError(Exception):
    """(where, reason) of a dataset that cannot be read; the loader names the file."""

    def __init__(self, where: str, reason: str):
        super().__init__(where, reason)
        self.where, self.reason = where, reason


@dataclass(frozen=True)
class Sample:
    """One row of a dataset, or one parameter set of a Python arm."""

    id: str
    fields: Mapping[str, Any]  # read-only whatever it is given: a sample is shared by arms

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    def values(self) -> dict[str, Any]:
        """What a template sees: the row's fields, and the row as `sample` with its id."""
        return {**self.fields, "sample": dict(self.fields), "sample_id": self.id}


def sample_id(value: Any, where: str) -> str:
    """A row's id as it goes into node and arm ids: short printable text without the
    characters those ids are built from (space, brackets, `:`, `@`, `#`)."""
    text = str(value).strip() if isinstance(value, str) or is_int(value) else None
    if text is None or not SAMPLE_ID.fullmatch(text) or not text.isprintable():
        raise DatasetError(where, f"id {value!r}: expected a string or integer of 1 to 80 "
                                  f"printable characters without spaces, [ ] : @ #")
    return text


def read_rows(path: Path) -> list[Any]:
    """The rows of a .jsonl (one JSON object a line; blank lines skipped) or .csv (a
    header line, then one row a line; every value a string) file."""
    suffix = path.suffix.lower()
    if suffix not in DATASET_SUFFIXES:
        raise DatasetError("dataset.file", f"{path.name}: expected a .jsonl or .csv file")
    try:
        if path.stat().st_size > MAX_DATASET_BYTES:
            raise DatasetError("dataset.file", f"{path.name} is larger than "
                                               f"{MAX_DATASET_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's CSV may open with a BOM
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError("dataset.file", f"cannot read {path}: {exc}") from None
    if suffix == ".csv":
        try:
            return list(csv.DictReader(io.StringIO(text, newline="")))
        except csv.Error as exc:
            raise DatasetError("dataset.file", f"{path.name}: not valid CSV: {exc}") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise DatasetError("dataset.file", f"{path.name} line {number}: not valid JSON: "
                                               f"{exc}") from None
    return rows


def samples_of(rows: list[Any], id_field: str, where: str) -> tuple[Sample, ...]:
    """Rows as samples: each a mapping; its id the `id_field` value, else `row-<n>`
    (counting from 1); ids unique."""
    out: list[Sample] = []
    seen: dict[str, int] = {}
    for n, row in enumerate(rows, 1):
        at = f"{where} row {n}"
        if not isinstance(row, dict) or any(not isinstance(k, str) for k in row):
            raise DatasetError(at, f"expected a mapping of field names to values, got "
                                   f"{type(row).__name__}")
        sid = sample_id(row[id_field], at) if id_field in row else f"row-{n}"
        if sid in seen:
            raise DatasetError(at, f"id {sid!r} is also the id of row {seen[sid]}; sample ids "
                                   f"must be unique")
        seen[sid] = n
        out.append(Sample(sid, dict(row)))
    if not out:
        raise DatasetError(where, "holds no rows; expected at least one sample")
    return tuple(out)


def load(folder: Path, file: str | None, rows: Any, id_field: str) -> tuple[tuple[Sample, ...],
                                                                           bytes]:
    """The dataset's samples, and the bytes that identify it (what --resume compares)."""
    if file is not None:
        path = folder / file
        found = read_rows(path)
        try:
            raw = path.read_bytes()
        except OSError:
            raw = b""
        return samples_of(found, id_field, "dataset.file"), raw
    return samples_of(list(rows), id_field, "dataset.rows"), json.dumps(
        rows, sort_keys=True, default=str).encode()


def first(samples: tuple[Sample, ...], limit: int | None) -> tuple[Sample, ...]:
    """`--jaato-samples N`, else the dataset's `limit`: the first N samples."""
    return samples if limit is None else samples[:limit]


# -- templates -------------------------------------------------------------------------
@functools.cache
def _jinja():
    """Jinja2's sandboxed environment, and the error its templates raise."""
    import jinja2.sandbox  # Jinja2, heavy (~40 ms) and needed by few runs: only on the first task with samples
    environment = jinja2.sandbox.SandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    return environment, jinja2.TemplateError


@functools.lru_cache(maxsize=256)
def _template(text: str):
    return _jinja()[0].from_string(text)


class TemplateError(Exception):
    """A template that does not render for a sample: one line."""


def render(value: Any, sample: Sample | None) -> Any:
    """`value` with every string in it rendered for `sample` (unchanged without one)."""
    if sample is None:
        return value
    if isinstance(value, str):
        environment_error = _jinja()[1]
        try:
            return _template(value).render(sample.values())
        except environment_error as exc:
            raise TemplateError(f"sample {sample.id!r}: {type(exc).__name__}: {exc}") from None
    if isinstance(value, Mapping):
        return {k: render(v, sample) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, sample) for v in value]
    return value
