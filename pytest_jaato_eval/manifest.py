"""task.yaml -> a frozen Task (rules M1-M12 of the behaviour catalogue).

The format itself is declared in task_schema.py; this module reads the file, hands the
document to the schema, resolves the task's folders and builds the Task the rest of
the plugin uses. Every problem is a ManifestError whose text is one line:
``<path>: <where>: <reason>`` (M2). Nothing here talks to jaato or pytest.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .engine.files import yaml_loader
from .render import safe_text
from .samples import Sample
from .task_tree import TaskTree, TreeError, list_tree, skipped_in_fixture

SESSION, DRIVER = "session", "driver"
GRADER_KINDS = ("script", "processor", "judge")
BUDGET_LIMITS = ("usd", "tokens", "turns", "seconds", "tool_calls")

__all__ = ["ManifestError", "GraderSpec", "Task", "load_task", "content_hash",
           "skipped_in_fixture", "SESSION", "DRIVER", "GRADER_KINDS", "BUDGET_LIMITS"]


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
    # (name, args): `smoke` -> ("smoke", None); {xfail: reason} -> ("xfail", "reason").
    marks: tuple[tuple[str, Any], ...] = ()
    tree: TaskTree | None = field(default=None, repr=False, compare=False)
    env_passthrough: tuple[str, ...] = ()  # the driver's (harness.env_passthrough)
    contamination: str = "block"           # or "caveat" (contamination.py)
    # The dataset's rows (samples.py): every arm runs on one; none, the task is one sample.
    samples: tuple[Sample, ...] = ()
    sample_limit: int | None = None        # dataset.limit: only the first N samples

    @property
    def content_hash(self) -> str:
        """What --resume compares (R3): hashed on first read, once per task."""
        if self.tree is None:
            object.__setattr__(self, "tree", TaskTree.of(
                self.manifest.read_bytes(), self.fixture, self.config_root))
        return self.tree.digest()

    @property
    def directory(self) -> Path:
        return self.manifest.parent

    @property
    def grader_params(self) -> Mapping[str, Any]:
        """C4: a script grader sees the arm's agent_params (session) or params (driver)."""
        return (self.params if self.kind == DRIVER else self.agent_params) or {}


def load_task(path: Path | str) -> Task:
    """Parse and check one task.yaml. Raises ManifestError, and nothing else."""
    import yaml  # on the first task only: a run without tasks pays for neither

    from . import task_schema

    path = Path(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(path, "", f"cannot read: {exc}") from None
    try:
        doc = _parsed.pop(raw, None)
        if doc is None:
            doc = yaml.load(text, Loader=yaml_loader())
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
        m = task_schema.validate(doc)
    except task_schema.Invalid as exc:
        raise ManifestError(path, exc.where or "top level", exc.reason) from None

    try:  # the task's folder, resolved once for its manifest, fixture and config root
        folder = os.path.realpath(os.path.dirname(path) or os.curdir)
        manifest = Path(_resolved_in(folder, path.name)[0])
    except (OSError, RuntimeError, ValueError) as exc:
        raise ManifestError(path, "", f"cannot resolve its folder: {exc}") from None
    fixture = _directory(path, folder, m.environment.fixture, "environment.fixture")
    config_root = _directory(path, folder, m.environment.config_root,
                             "environment.config_root")
    harness, inp = m.harness, m.input
    driver = harness.kind == DRIVER
    found: tuple[Sample, ...] = ()
    if m.dataset is not None:
        found, data = _dataset(path, folder, m.dataset)
        raw += b"\0dataset\0" + data  # --resume: a changed dataset is a changed task
        _check_templates(path, found, inp, driver)
    tree = _tree(path, raw, fixture, config_root)
    return Task(
        id=m.id, manifest=manifest, description=m.description, fixture=fixture,
        config_root=config_root, kind=harness.kind, profile=harness.profile,
        profile_set=harness.profile_set, run=harness.run,
        prompt=None if driver else inp.prompt, agent=None if driver else inp.agent,
        agent_params=None if driver else inp.agent_params,
        params=inp.params if driver else None,
        graders=tuple(_grader_spec(g) for g in m.graders),
        budget=_budget(m.budget), repeats=m.repeats, marks=tuple(m.marks), tree=tree,
        env_passthrough=tuple(harness.env_passthrough), contamination=m.contamination,
        samples=found, sample_limit=m.dataset.limit if m.dataset is not None else None)


def _dataset(path: Path, folder: str, spec) -> tuple[tuple[Sample, ...], bytes]:
    from . import samples
    try:
        return samples.load(Path(folder), spec.file, spec.rows, spec.id)
    except samples.DatasetError as exc:
        raise ManifestError(path, exc.where, exc.reason) from None


def _check_templates(path: Path, found: tuple[Sample, ...], inp, driver: bool) -> None:
    """Every sample's prompt and parameters render, or the task is not collected."""
    from . import samples
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
    import yaml
    doc = yaml.load(raw.decode("utf-8"), Loader=yaml_loader())
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
        raise ManifestError(path, where, f"{_shown(value)} cannot be resolved: "
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


def _shown(value: Any) -> str:
    from .task_values import shown
    return shown(value)


def _grader_spec(g) -> GraderSpec:
    opts: dict[str, Any] = {}
    if g.kind == "script":
        opts.update(run=g.run, file=g.file, expect_exit=g.expect_exit,
                    env_passthrough=tuple(g.env_passthrough))
        label = g.run if g.run is not None else g.file
    elif g.kind == "processor":
        opts["script"] = label = g.script
        opts["env_passthrough"] = tuple(g.env_passthrough)
    else:
        opts.update(profile=g.profile, agent=g.agent, threshold=g.threshold,
                    score_field=g.score_field, errors_field=g.errors_field,
                    gate_on=tuple(g.gate_on), needs_human_below=g.needs_human_below)
        label = g.profile
    default_timeout = 600 if g.kind != "judge" else 300
    opts["timeout_seconds"] = default_timeout if g.timeout_seconds is None else g.timeout_seconds
    opts["weight"] = g.weight
    return GraderSpec(kind=g.kind, label=label, options=opts)


def _budget(b) -> dict | None:
    if b is None:
        return None
    out = {k: getattr(b, k) for k in BUDGET_LIMITS if getattr(b, k) is not None}
    if b.degrade is not None:
        out["degrade"] = b.degrade
    return out


def content_hash(manifest: Path, fixture: Path, config_root: Path) -> str:
    """sha256 over the manifest, fixture and config root: what --resume checks (R3)."""
    return TaskTree.of(Path(manifest).read_bytes(), fixture, config_root).digest()
