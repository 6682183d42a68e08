"""The contamination rule: an arm whose agent reached the answer key is not graded.

After the run, every tool call in the arm's ledger is read for the paths it names:
a file argument (a `path`, `file`, `directory`, … key) outside the workspace, or
anything - a file argument, a word of a shell command, or any string argument -
that reaches the task's config root, its directory (the manifest, the fixture's
original), or a file a grader names. Such an arm is `contaminated: true` and FAILS,
with a `contamination` verdict that names the offending calls: its graders' verdict
says nothing about the agent's skill, and the agent chose to go there.

The ledger says what the calls asked for, not everything they did (a command can
build a path at run time), so this is a tripwire, not a sandbox. Where there is
no faithful ledger the arm is `contaminated: "unknown"`, with a caveat. A task
with `contamination: caveat` keeps its verdict and gets a caveat instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .task.spelled import words
from .verdict import BLOCKED, FAIL, Verdict

PATH_KEYS = {"path", "paths", "file", "files", "file_path", "filepath", "filename", "directory",
             "dir", "cwd", "working_dir", "workdir", "target", "source", "src", "dest",
             "destination", "old_path", "new_path", "root", "folder"}
COMMAND_KEYS = {"command", "cmd", "commands", "script", "shell", "code", "argv"}
EXEMPT_TOOLS = {"signal_completion"}  # its arguments are the answer, not an access
EVIDENCE_CALLS = 20
ARG_CHARS = 200


@dataclass
class Finding:
    contaminated: Any = False  # True, False or "unknown"
    evidence: list[str] = field(default_factory=list)
    why: str | None = None     # "unknown": why the ledger could not be read


@dataclass(frozen=True)
class Protected:
    """What the agent must not reach, as real paths."""

    workspace: str
    roots: tuple[tuple[str, str], ...]  # (real path, what it is)


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def protected_for(task: Any, workspace: Path) -> Protected:
    roots = [(_real(task.config_root), "the config root"),
             (_real(task.manifest), "the manifest"),
             (_real(task.directory), "the task's directory")]
    for spec in task.graders:
        for path in spec.guarded(Path(task.config_root)):
            outside = not _inside(_real(path), roots[0][0])
            roots.append((_real(path), f"a grader's file ({path})" if outside else "a grader's file"))
    roots.sort(key=lambda r: len(r[0]), reverse=True)  # the most specific name wins
    return Protected(workspace=_real(workspace), roots=tuple(roots))


def _strings(value: Any, key: str = "") -> Iterable[tuple[str, str]]:
    """(key, string) for every string in an argument tree, with the nearest key."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, key)


def _reached(p: Protected, word: str, *, outside_counts: bool) -> str | None:
    """What `word`, read as a path from the workspace, reaches; None when nothing."""
    word = word.strip()
    if not word or "\0" in word:
        return None
    joined = os.path.join(p.workspace, os.path.expanduser(word))
    for candidate in {os.path.normpath(joined), _real(joined)}:
        if _inside(candidate, p.workspace):
            continue
        for root, what in p.roots:
            if _inside(candidate, root):
                return what
        if outside_counts:
            return "outside the workspace"
    return None


def _offence(p: Protected, key: str, text: str) -> str | None:
    k = key.lower()
    if k in PATH_KEYS or k.endswith(("_path", "_file", "_dir")):
        return _reached(p, text, outside_counts=True)
    if k in COMMAND_KEYS:
        for word in words(text):
            for part in word.replace("=", " ").replace(":", " ").split():
                if "/" in part or part.startswith((".", "~")):
                    what = _reached(p, part, outside_counts=False)
                    if what:
                        return what
    for root, what in p.roots:  # any argument that spells out a protected path
        at = text.find(root)
        while at >= 0:
            if not (_inside(p.workspace, root) and text.startswith(p.workspace, at)):
                return what
            at = text.find(root, at + 1)
    return None


def assess(task: Any, workspace: Path, ledger: Any, state: str, blocked_reason: str | None,
           caveats: list[str], verdicts: list) -> tuple[Finding, str, str | None]:
    """The rule, whole, for one arm after its graders: its ledger (graders/ledger.py) checked
    against what the task protects, and the finding applied; (finding, state, reason)."""
    finding = check(ledger.entries, ledger.faithful, ledger.reason, protected_for(task, workspace))
    return (finding, *apply(finding, task.contamination, state, blocked_reason, caveats, verdicts))


def check(entries: list | None, faithful: bool, reason: str | None,
          protected: Protected) -> Finding:
    if not faithful or entries is None:
        return Finding("unknown", why=reason or "no tool-call ledger")
    try:
        return _check(entries, protected)
    except Exception as exc:  # noqa: BLE001 - an unreadable ledger is an unknown, not a crash
        return Finding("unknown", why=f"the ledger could not be read: {type(exc).__name__}")


def _check(entries: list, protected: Protected) -> Finding:
    evidence = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("name") in EXEMPT_TOOLS:
            continue
        for key, text in _strings(entry.get("args")):
            what = _offence(protected, key, text)
            if what:
                evidence.append(f"{entry.get('name')} {key}={text[:ARG_CHARS]!r} reaches {what}")
                break
    if not evidence:
        return Finding(False)
    shown = evidence[:EVIDENCE_CALLS]
    if len(evidence) > EVIDENCE_CALLS:
        shown.append(f"[… {len(evidence) - EVIDENCE_CALLS} more calls; evidence keeps the "
                     f"first {EVIDENCE_CALLS}]")
    return Finding(True, shown)


def apply(finding: Finding, mode: str, state: str, blocked_reason: str | None,
          caveats: list[str], verdicts: list) -> tuple[str, str | None]:
    """The arm's (state, blocked_reason) once the finding is applied; caveats and verdicts
    grow in place.

    A contaminated arm FAILS, whatever its graders said and whatever else went wrong: the
    agent reached what it must not, by its own calls, so its verdict is not trusted, and a
    BLOCKED would let it leave the pass rate at will. The `contamination` verdict names the
    calls."""
    if finding.contaminated == "unknown":
        caveats.append(f"contamination unknown: {finding.why}")
        return state, blocked_reason
    if finding.contaminated is not True:
        return state, blocked_reason
    n = len([e for e in finding.evidence if not e.startswith("[")])
    summary = f"{n} tool call(s) reached what the agent must not: {finding.evidence[0]}"
    if mode == "caveat":
        caveats.append(f"contaminated (kept as a caveat by `contamination: caveat`): {summary}")
        return state, blocked_reason
    if state == BLOCKED and blocked_reason:
        caveats.append(f"also blocked: {blocked_reason}")
    verdicts.append(Verdict.failed("contamination", "the agent stays off the answer key",
                                   f"contaminated: {summary}", finding.evidence))
    return FAIL, None
