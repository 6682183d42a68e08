"""The match grader (G7): a text or a regular expression looked for in one file the agent
left in its workspace, read by the harness itself (no process, no daemon, no sandbox).

The file is looked up one name at a time (engine/files.resolve), so a link never leads the
read out of the workspace; a file the check cannot read as the agent's answer is its FAIL
(missing, a link out, not a regular file, not UTF-8), one too large to read whole is
BLOCKED: the check would grade a part.
"""
from __future__ import annotations

import os
import re
import stat

from ..engine import files
from ..task.model import MatchGrader
from ..verdict import Verdict
from .context import GraderContext
from .output import LINE_CHARS

MAX_BYTES = 16 * 1024 * 1024  # the largest file read whole


def grade_match(spec: MatchGrader, ctx: GraderContext) -> Verdict:
    sought = f"/{spec.pattern}/" if spec.pattern is not None else repr(spec.contains)
    claim = f"{spec.path} {'holds' if spec.expect == 'present' else 'lacks'} {sought}"
    truncated = ctx.truncation_reason
    if truncated and not ctx.run.unsigned:
        return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
    if not ctx.workspace.is_dir():
        return Verdict.blocked(spec.id, claim, f"workspace {ctx.workspace} is missing")
    try:
        where, mode = files.resolve(ctx.workspace, spec.path, at=ctx.workspace_fd)
    except OSError as exc:
        return Verdict.blocked(spec.id, claim, f"could not look {spec.path} up: {exc}")
    if where != files.IN:
        return Verdict.failed(spec.id, claim, f"{spec.path} leads out of the workspace")
    if mode is None:
        return Verdict.failed(spec.id, claim, f"{spec.path} is missing")
    if not stat.S_ISREG(mode):
        return Verdict.failed(spec.id, claim, f"{spec.path} is not a regular file")
    # through the descriptor held on the workspace when the path has no link on the way;
    # else by its resolved path
    raw = None if ctx.workspace_fd is None else files.read_below(
        ctx.workspace_fd, spec.path, MAX_BYTES + 1)
    if raw is None:
        raw = files.read_bounded(os.path.realpath(ctx.workspace / spec.path), MAX_BYTES + 1,
                                 root=ctx.workspace)
    if raw is None:
        return Verdict.blocked(spec.id, claim, f"{spec.path} could not be read")
    if len(raw) > MAX_BYTES:
        return Verdict.blocked(spec.id, claim, f"{spec.path} is larger than {MAX_BYTES} "
                               f"bytes; check a file that large with a script grader")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Verdict.failed(spec.id, claim, f"{spec.path} is not UTF-8 text (byte "
                              f"{exc.start})")
    line = _found(spec, text)
    evidence = [] if line is None else [(ctx.mask or str)(line)[:LINE_CHARS]]
    if (line is not None) == (spec.expect == "present"):
        return Verdict.passed(spec.id, claim, "found" if line is not None else "not found",
                              evidence)
    return Verdict.failed(spec.id, claim, "found" if line is not None else "not found",
                          evidence)


def _found(spec: MatchGrader, text: str) -> str | None:
    """The line holding the first match, or None when there is none."""
    if spec.pattern is not None:
        hit = re.search(spec.pattern, text, re.MULTILINE)
        start = None if hit is None else hit.start()
    else:
        at = text.find(spec.contains or "")
        start = None if at < 0 else at
    if start is None:
        return None
    first = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    return text[first:] if end < 0 else text[first:end]
