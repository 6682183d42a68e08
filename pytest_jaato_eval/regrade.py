"""A regrade (R5, docs/regrading.md): an arm graded again from the snapshot a store kept of
it, by the live arm's own grading path (arm.py), with no agent run.

No pytest here: the pytest layer hands it the store's records (`RegradeSource`) and turns
the record it returns into an outcome.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import faults, parts, workspace
from .arm import (LEFT_OUT, ArmRun, ArmSettings, ArmState, Daemon, Snapshot, agent_act,
                  arm_record, grade, traps)
from .engine.daemon import DaemonError
from .engine.session import AgentRun
from .graders.ledger import Ledger
from .results import snapshots
from .results.record import ArmRecord
from .task import sides
from .task.arms import Arm
from .task.model import Task
from .verdict import STATES, Verdict


@dataclass(frozen=True)
class RegradeSource:
    """The store a regrade grades again: its path and its latest record per arm."""

    store: Path
    records: Mapping[str, ArmRecord]  # read-only: a MappingProxyType

    def record_of(self, arm: Arm) -> ArmRecord | None:
        return next((self.records[i] for i in arm.ids if i in self.records), None)


def needs_daemon(task: Task) -> bool:
    """A regrade starts a daemon only for a judge: every other grader runs without one."""
    return any(g.NEEDS_DAEMON for g in task.graders)


def regrade_arm(arm: Arm, daemon: Daemon | None, settings: ArmSettings, arm_state: ArmState,
                ws: Path) -> ArmRecord:
    """R5: grade an arm again from its snapshot in the store being regraded (--jaato-regrade),
    with the task's current graders, by the live arm's own grading path (`arm.grade`), in
    `ws`: no agent runs. BLOCKED, never graded, when the arm kept no snapshot or its
    agent's side changed since (naming what changed). Never raises for an arm-level fault."""
    regrade = settings.regrade
    assert regrade is not None
    workspace.release(arm_state.held.pop(ws, None))  # a folder of the harness's: no agent runs
    source = regrade.record_of(arm)
    one = ArmRun(arm, settings, arm_state, ws=ws)
    run, notes = one.run, []
    verdicts: list = []
    if source is None:
        run.blocked_reason = f"regrade: {regrade.store} holds no record of this arm"
        one.ceiling = None
        return arm_record(one, [], [], discard=False)
    one.ceiling = source.budget_ceiling
    try:
        one.take_copies()
    except workspace.WorkspaceError as exc:
        run.blocked_reason = str(exc)
        one.ceiling = None
        return arm_record(one, [], [], discard=False, source=source,
                          snapshot=Snapshot(note=source.snapshot_note))
    changed = sides.changed(source.agent_side, sides.agent_side(arm, one.config))
    kept = Snapshot(note=source.snapshot_note)
    if source.snapshot is not None:  # the new store keeps what its record names
        try:
            path = snapshots.path_of(regrade.store, source.snapshot)
            if path.is_file() and not path.is_symlink():
                kept = Snapshot(name=source.snapshot)
                arm_state.pending_snapshots[arm.id] = (source.snapshot, path, False)
        except snapshots.Unreadable:
            pass
    live = _live_verdicts(source) if source.snapshot is None and (
        source.snapshot_note or "").startswith(LEFT_OUT) else None
    if source.snapshot is None and (act := _act_of(source)) is not None:
        verdicts = [act]  # the agent's own act FAILED it, before any grader: no grader changes it
        notes.append(f"regraded without a snapshot ({source.snapshot_note or 'none kept'}): "
                     f"the agent's act that failed it in run {source.run_id} stands")
    elif live:  # the agent's own tree left no snapshot: what the live run knew stands
        verdicts = live
        notes.append(f"regraded without a snapshot ({source.snapshot_note}): the agent's own "
                     f"tree left it out, so the verdicts of run {source.run_id} stand; the "
                     f"task's graders were not run again")
    elif source.snapshot is None:
        run.blocked_reason = "no snapshot kept" + (
            f" ({source.snapshot_note})" if source.snapshot_note else
            " (the record is from a run that kept none)")
    elif changed:
        run.blocked_reason = (
            f"regrade refused: {parts.said(changed)} changed since run {source.run_id}; "
            f"what its agent left answers another task: run the arm again")
    else:
        try:
            workspace.remove_tree(ws)
            ws.mkdir()
            restored = snapshots.restore(snapshots.path_of(regrade.store, source.snapshot), ws)
        except (snapshots.Unreadable, OSError) as exc:
            run.blocked_reason = f"snapshot unreadable: {exc}"
        else:
            run = one.run = _restored_run(restored.facts, one)
            notes += restored.notes
            facts = restored.facts
            planted = list(facts.get("planted") or ()) or traps(run, ws, settings)
            if needs_daemon(arm.task) and daemon is not None:
                try:
                    one.socket = daemon.ensure()
                except DaemonError as exc:
                    run.blocked_reason = str(exc)
            if not run.blocked_reason:
                verdicts = grade(one, agent_act(run, ws, settings, facts.get("tampered"), planted))
    return arm_record(one, verdicts, notes, discard=False, source=source, snapshot=kept)


def _act_of(source: ArmRecord) -> Verdict | None:
    """The agent's act that FAILED the live arm (its one verdict before any grader), if so."""
    acts = [v for v in source.verdicts if v.get("grader_id") in faults.AGENT_ACTS]
    if len(acts) != 1 or acts[0].get("state") != "FAIL" or source.verdicts[0] is not acts[0]:
        return None
    return _verdict_of(acts[0])


def _live_verdicts(source: ArmRecord) -> list[Verdict] | None:
    """The live arm's verdicts as its record keeps them; None when it has none, or one
    this version cannot read."""
    read = [_verdict_of(v) for v in source.verdicts]
    verdicts = [v for v in read if v is not None]
    return verdicts if verdicts and len(verdicts) == len(read) else None


def _verdict_of(v: dict) -> Verdict | None:
    state, grader = v.get("state"), v.get("grader_id")
    if state not in STATES or not isinstance(grader, str):
        return None
    return Verdict(grader, str(v.get("claim") or ""), state, str(v.get("detail") or ""),
                   [str(e) for e in v.get("evidence") or []],
                   str(v["blocked_reason"]) if v.get("blocked_reason") else None)


_RUN_FIELDS = {f.name for f in dataclasses.fields(AgentRun)}


def _restored_run(facts: dict, one: ArmRun) -> AgentRun:
    """The agent's run as a snapshot kept it (its engine notes are the record's already);
    its ledger and cascade id go to `one`."""
    kept = r if isinstance(r := facts.get("run"), dict) else {}
    run = AgentRun(**{k: v for k, v in kept.items() if k in _RUN_FIELDS})
    run.caveats = []
    told = t if isinstance(t := facts.get("ledger"), dict) else {}
    one.ledger = Ledger(entries=list(told.get("entries") or []),
                        faithful=told.get("faithful") is True, reason=told.get("reason"))
    one.cascade_id = facts.get("cascade_id")
    return run
