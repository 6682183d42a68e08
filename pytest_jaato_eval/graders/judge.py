"""The judge grader (G5): a second session, on the arm's own daemon, scores the arm.

Its guards come first and open no session: a judge is the expensive grader, and
scoring an arm on half the input its siblings were scored on is worse than a gap.

The judge reads nothing the agent could have written as configuration: its
session gets an env file the harness writes (the arm's profile set, nothing
else) and a view of the workspace - a copy without `.env`, `.jaato/`, links or
special files - in a folder of the harness's own. The agent's `.env` (a
`VLLM_HOST` pointing at its own server) and its `.jaato/` (prompts, skills) are
never loaded by the judge's session.

The answer contract (docs/tasks.md) is jaato-eval's, and ours only where the task asks
for it: the `errors` field not empty -> BLOCKED; with `needs_human_below`, a `confidence`
under it (on the task's confidence scale) -> BLOCKED "needs human review (…)"; with
`defects_field`, defects named -> FAIL; else the score, read as jaato-eval reads it
(Python's float(): a number on any scale, numeric text, a boolean as 1 or 0), against
`threshold`, and against the `score_scale` when the task declares one.
"""
from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from .. import faults
from ..engine.session import Ceiling, SessionArmSpec, run_session_arm
from ..task.model import JudgeGrader
from ..results.review import NEEDS_HUMAN
from ..task.model import gate_aliases, span
from ..verdict import PASS, Verdict
from ..engine.files import Entry
from ..workspace import WorkspaceError, copy_config, copy_tree, remove_tree
from .context import GraderContext

LISTING_LIMIT = 200
VIEW_FILES = 20_000
VIEW_BYTES = 256 * 1024 * 1024
CONFIDENCE, REASONING = "confidence", "reasoning"
ITEM_CHARS = 500
ITEMS = 20
# What the view leaves out: configuration a jaato session would load from its workspace.
HIDDEN = {".env", ".jaato"}


def _listing(workspace: Path) -> tuple[list[str], bool]:
    """The first LISTING_LIMIT file names of the workspace, and whether it holds more."""
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = sorted(d for d in dirnames if d not in HIDDEN)
        # Each name as a JSON string: a newline or a control character in a name the agent
        # chose cannot start a line of the prompt, and an undecodable byte stays an escape.
        files += [json.dumps(str(Path(dirpath, f).relative_to(workspace)))
                  for f in sorted(filenames) if f not in HIDDEN]
        if len(files) > LISTING_LIMIT:
            break
    return files[:LISTING_LIMIT], len(files) > LISTING_LIMIT


class ViewTooLarge(Exception):
    pass


def make_view(workspace: Path | int, dest: Path) -> None:
    """Copy the workspace's regular files and folders to `dest` (workspace.copy_tree: any
    depth, a file with several names counted and copied once); links, FIFOs, devices and
    the configuration names in HIDDEN stay behind. Raises ViewTooLarge past VIEW_FILES
    entries or VIEW_BYTES of files (a sparse file counts at its size: the judge reads it)."""
    count = [0, 0]  # entries, bytes
    seen: set[tuple[int, int]] = set()

    def keep(entry: Entry) -> bool:
        st = entry.st
        if entry.name in HIDDEN or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            return False
        count[0] += 1  # a folder counts as an entry: a tree of empty folders is bounded too
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            count[1] += st.st_size
        if count[0] > VIEW_FILES or count[1] > VIEW_BYTES:
            raise ViewTooLarge(f"the workspace is larger than the judge's view takes "
                               f"({VIEW_FILES} files and folders, {VIEW_BYTES // 2**20} MiB)")
        return True

    copy_tree(workspace, dest, keep)


def judge_prompt(ctx: GraderContext, spec: JudgeGrader) -> str:
    facts = {key: getattr(ctx.run, key) for key in ("turns", "finish_reason", "termination_reason")}
    # The rubric's schema says what each of its fields means; the prompt adds only what the
    # task asked for, each on the scale the task declares (no scale: the rubric's own).
    score = f"`{spec.score_field}`" + (f" (a number from {span(spec.score_scale)})"
                                       if spec.score_scale else "")
    asks = [f"Grade the work against your rubric. You MUST finish by calling signal_completion "
            f"with your rubric's fields; the grade is read from {score}."]
    if spec.defects_field:
        asks.append(f"Put each defect you found in `{spec.defects_field}` (a list; empty when "
                    f"there are none).")
    if spec.needs_human_below is not None:
        asks.append(f"Say how sure you are of this grade in `{CONFIDENCE}` (a number from "
                    f"{span(spec.confidence_range)}).")
    listed, more = _listing(ctx.workspace)
    return "\n".join([
        "You are grading the work an agent left in this workspace.",
        "Files in the workspace:",
        *[f"  {f}" for f in listed],
        # A list that stops must not read as the whole workspace: the judge's view has it all.
        *([f"  (and more: this list stops at {LISTING_LIMIT} files; the workspace holds "
           f"them all)"] if more else []),
        "The agent's completion payload:",
        json.dumps(ctx.run.payload, indent=2, sort_keys=True, default=str),
        f"Run facts: {json.dumps(facts, sort_keys=True)}",
        *([f"The sample this arm ran on ({ctx.sample.id}):",
           json.dumps(dict(ctx.sample.fields), indent=2, sort_keys=True, default=str)]
          if ctx.sample is not None else []),
        " ".join(asks),
    ])


def _gate(spec: JudgeGrader, ctx: GraderContext) -> str | None:
    states = {v.grader_id: v.state for v in ctx.verdicts}
    states.update({alias: states[gid] for alias, gid in gate_aliases(list(states)).items()})
    for gate in spec.gate_on:
        state = states.get(gate)
        if state is None:
            return f"gate {gate} not run"
        if state != PASS:
            return f"gate {gate}={state}"
    return None


def _items(value: Any) -> list[str]:
    """What a judge named in a list field, as strings (bounded); nothing when the value is
    empty or false, as jaato-eval reads `errors`."""
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    shown = [_short(x if isinstance(x, str) else json.dumps(x, default=str)) for x in items[:ITEMS]]
    if len(items) > ITEMS:
        shown.append(f"[… {len(items) - ITEMS} more; evidence keeps the first {ITEMS}]")
    return shown


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= ITEM_CHARS else text[:ITEM_CHARS] + " …"


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def reading(value: Any) -> float | None:
    """A judge's number as jaato-eval reads it, with Python's float(): a number on any
    scale, numeric text (`"0.9"`, `" 8 "`), a boolean as 1 or 0. None when float() reads
    none, or reads one that is not finite (`"nan"`, `1e999`): no grade at all."""
    number = _float(value)
    return number if number is not None and math.isfinite(number) else None


def _not_read(value: Any) -> str:
    """Why reading() gave None: `'high', not a number`."""
    shown = _short(repr(value))[:80]
    return f"{shown}, not a finite number" if _float(value) is not None else f"{shown}, not a number"


def grade_judge(spec: JudgeGrader, ctx: GraderContext) -> Verdict:
    claim = f"judge {spec.profile} scores >= {spec.threshold:g}"
    if ctx.run.unsigned:
        return faults.RUN_INCOMPLETE.graded(
            spec.id, claim, f"the agent never signed off ({ctx.run.error}); the judge would "
            f"score it without its payload")
    truncated = ctx.truncation_reason
    if truncated:
        return faults.RUN_INCOMPLETE.graded(spec.id, claim,
                                            f"the arm's run was truncated: {truncated}")
    gated = _gate(spec, ctx)
    if gated:
        return faults.GATE_NOT_PASSED.graded(spec.id, claim, gated)
    if not ctx.socket_path:
        return faults.HARNESS_COPY.graded(spec.id, claim, "no daemon socket: the arm ran on none")
    # Beside the arm's workspace, named as the daemon's state folders are: the daemon may
    # write into the judge's view after its session, so whatever removes the workspace's
    # state folders (the arm's discard, the run's end) removes this one too.
    own = Path(tempfile.mkdtemp(prefix=f".{ctx.workspace.name}-judge", suffix="-state",
                                dir=ctx.workspace.parent))
    try:
        env_file = own / "judge.env"
        env_file.write_text(f"JAATO_PROFILE_SET={ctx.profile_set}\n" if ctx.profile_set else "",
                            encoding="utf-8")
        view = own / "workspace"
        try:
            make_view(ctx.workspace if ctx.workspace_fd is None else ctx.workspace_fd, view)
        except ViewTooLarge as exc:  # what the agent left: its doing, not the environment's
            return faults.VIEW_BOUND.graded(
                spec.id, claim, f"{exc}: the agent left more than its judge can read (a task "
                f"whose answer is that large needs a script or processor grader)")
        except OSError as exc:
            return faults.view_fault(exc).graded(
                spec.id, claim, f"the judge's view of the workspace could not be made: {exc}")
        # Its own copy of the harness's config root, made after the agent's run ended: the
        # judge's profile is the task's, whatever the agent did to the copy it was given.
        try:
            config = copy_config(ctx.config_root, own / "config")
        except WorkspaceError as exc:
            return faults.HARNESS_COPY.graded(spec.id, claim, str(exc))
        run = run_session_arm(SessionArmSpec(  # G5: the SAME daemon as the arm
            socket_path=ctx.socket_path, workspace=view, config_root=config,
            profile=spec.profile, prompt=judge_prompt(ctx, spec), agent=spec.agent,
            env_file=str(env_file),
            ceiling=Ceiling(spec.timeout, f"{spec.id} timeout_seconds",
                            what="judge session", remedy="raise the judge's timeout_seconds")))
        ctx.grader_runs.append((spec.id, run))  # its bill and its transcript, whatever it says
    finally:
        remove_tree(own)  # a copy of what the agent left: any depth
    evidence = [f"judge session {run.session_id or '—'} ({run.model or '—'})"]
    if run.blocked_reason:
        return faults.JUDGE_CANNOT.graded(
            spec.id, claim, f"judge session: {run.blocked_reason}",
                                          evidence)
    return read_answer(spec, claim, run.payload, evidence)


def read_answer(spec: JudgeGrader, claim: str, payload: Any, evidence: list[str]) -> Verdict:
    """The answer contract, in its order: could not grade (`errors`), confidence (with
    needs_human_below), defects (with defects_field), score."""
    if not isinstance(payload, dict):
        return faults.JUDGE_CANNOT.graded(
            spec.id, claim, "the judge cannot grade: it returned no payload "
            "(check that its profile declares a completion_payload_schema, "
            "then that its persona does not tell it to answer in prose "
            "rather than call signal_completion)", evidence)
    if payload.get(REASONING):
        evidence.append(f"reasoning: {_short(payload[REASONING])}")
    evidence.append("answer: " + _short(json.dumps(payload, sort_keys=True, default=str)[:4000]))
    # `errors` is the judge saying it could not carry out the assessment (jaato-eval's
    # reading): the judge's failure, not the arm's.
    cannot = _items(payload.get(spec.errors_field))
    if cannot:
        return faults.JUDGE_CANNOT.graded(
            spec.id, claim, f"the judge cannot grade: {'; '.join(cannot)}", evidence)
    if spec.needs_human_below is not None and CONFIDENCE in payload:
        low, high = spec.confidence_range
        confidence = reading(payload[CONFIDENCE])
        if confidence is None or not low <= confidence <= high:
            return faults.JUDGE_CANNOT.graded(
                spec.id, claim, f"the judge cannot grade: {CONFIDENCE} is "
                f"{_short(repr(payload[CONFIDENCE]))[:80]}, not a number "
                f"from {span(spec.confidence_range)}", evidence)
        below = spec.needs_human_below
        if confidence < below:
            return faults.JUDGE_CANNOT.graded(
                spec.id, claim, f"{NEEDS_HUMAN} (confidence {confidence:.2f} "
                f"< {below:.2f})", evidence)
    defects = _items(payload.get(spec.defects_field)) if spec.defects_field else []
    if defects:
        return Verdict.failed(spec.id, claim, f"the judge found {len(defects)} defect(s): "
                              f"{defects[0]}", evidence + [f"defect: {d}" for d in defects])
    field = spec.score_field
    if field not in payload:
        fields = ", ".join(sorted(map(str, payload)))[:200] or "none"
        return faults.JUDGE_CANNOT.graded(
            spec.id, claim, f"the judge cannot grade: its answer has no "
            f"`{field}` (its fields: {fields}; score_field names the one "
            f"holding the score)", evidence)
    score = reading(payload[field])
    if score is None:
        return faults.JUDGE_CANNOT.graded(
            spec.id, claim, f"the judge cannot grade: {field} is "
            f"{_not_read(payload[field])}", evidence)
    if spec.score_scale and not spec.score_scale[0] <= score <= spec.score_scale[1]:
        return faults.JUDGE_CANNOT.graded(
            spec.id, claim, f"the judge cannot grade: {field} is {score:g}, "
            f"off the score_scale {span(spec.score_scale)}", evidence)
    if score >= spec.threshold:
        return Verdict.passed(spec.id, claim, f"score {score:g}", evidence)
    return Verdict.failed(spec.id, claim, f"score {score:g} < {spec.threshold:g}", evidence)
