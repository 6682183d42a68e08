"""Every cap on what the harness reads of the agent's files, lowered: the arm never says less
than is so (docs/security.md, "Bounds that decide a verdict")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_jaato_eval import faults
from pytest_jaato_eval.arm import agent_act, ArmSettings
from pytest_jaato_eval.engine import driver
from pytest_jaato_eval.engine.ceiling import Ceiling


def _sessions(workspace: Path, count: int) -> None:
    folder = workspace / ".jaato" / "sessions"
    folder.mkdir(parents=True)
    for n in range(count):
        record = {"created_at": f"2026-12-07T00:00:{n:02d}",
                  "budget_usage": {"tokens": 10, "turns": 1}}
        (folder / f"2026120700000{n}.json").write_text(json.dumps(record))


def _attributed(workspace: Path) -> driver._DriverArm:
    arm = driver._DriverArm(driver.DriverArmSpec(
        socket_path="unused", workspace=workspace, config_root=workspace, run="true",
        params=None, cascade_id="cid"))
    arm._attribute()
    return arm


def test_a_driver_arm_past_its_session_bound_fails_resources_naming_it(tmp_path, monkeypatch):
    """W7: with MAX_SESSIONS lowered to 3, four session records FAIL the arm `resources`
    naming the bound (the sessions are the agent's, and it can write the folder); three are
    all counted, sessions and usage."""
    monkeypatch.setattr(driver, "MAX_SESSIONS", 3)
    within, past = tmp_path / "within", tmp_path / "past"
    _sessions(within, 3)
    _sessions(past, 4)
    whole = _attributed(within).out
    assert (len(whole.session_ids), whole.usage["spend_total_tokens"], whole.turns) == (3, 30, 3)
    assert whole.exhausted is None
    over = _attributed(past).out
    assert over.exhausted and "driver.MAX_SESSIONS" in over.exhausted and "3" in over.exhausted
    settings = ArmSettings(workspace_root=tmp_path, keep_workspaces="never",
                           ceiling=Ceiling(0), run_id="r")
    verdict = agent_act(over, past, settings, planted=[])
    assert verdict is not None and verdict.grader_id == faults.EXHAUSTED.outcome == "resources"
    assert "driver.MAX_SESSIONS" in verdict.detail


def test_nudges_past_the_log_bounds_are_unknown_never_fewer(tmp_path, monkeypatch):
    """W7: with MAX_LOGS lowered to 2, three logs of a session leave its nudge count unknown
    (None), as does a log longer than LOG_CAP (lowered to 64 bytes); within both, every
    nudge is counted."""
    from pytest_jaato_eval.engine import accounting, files
    logs = tmp_path / ".jaato" / "logs"
    logs.mkdir(parents=True)
    for name in "ab":
        (logs / f"session_S_{name}.log").write_text("[DEBUG] COMPLETION_NUDGE: x\\n")
    monkeypatch.setattr(accounting, "MAX_LOGS", 2)
    monkeypatch.setattr(files, "LOG_CAP", 64)
    assert accounting.count_nudges(tmp_path, "S", None) == 2
    (logs / "session_S_c.log").write_text("[DEBUG]\\n")
    assert accounting.count_nudges(tmp_path, "S", None) is None
    (logs / "session_S_c.log").unlink()
    (logs / "session_S_b.log").write_text("[DEBUG] COMPLETION_NUDGE: x\\n" * 4)
    assert accounting.count_nudges(tmp_path, "S", None) is None


def test_a_driver_arm_with_a_session_record_past_the_read_bound_fails_resources(
        tmp_path, monkeypatch):
    """W7: a session record longer than LOG_CAP (lowered to 200 bytes) is read in part and
    does not parse: the arm FAILS `resources` naming the bound, never counting one session
    fewer."""
    from pytest_jaato_eval.engine import files
    monkeypatch.setattr(files, "LOG_CAP", 200)
    _sessions(tmp_path, 2)
    assert _attributed(tmp_path).out.exhausted is None
    record = next((tmp_path / ".jaato" / "sessions").glob("*.json"))
    record.write_text(json.dumps({"budget_usage": {"tokens": 10}, "pad": "x" * 300}))
    over = _attributed(tmp_path).out
    assert over.exhausted and "files.LOG_CAP" in over.exhausted and record.name in over.exhausted


def test_the_judges_file_list_past_its_bound_says_it_stops(tmp_path, monkeypatch):
    """W7: with LISTING_LIMIT lowered to 3, a workspace of four files is listed as three and
    a line saying the list stops there; a workspace of three is listed whole, with no such
    line."""
    from pytest_jaato_eval.engine.agent_run import AgentRun
    from pytest_jaato_eval.graders import judge
    from pytest_jaato_eval.graders.context import GraderContext
    from pytest_jaato_eval.task.model import JudgeGrader
    monkeypatch.setattr(judge, "LISTING_LIMIT", 3)
    for name in "abc":
        (tmp_path / f"{name}.txt").write_text("x")
    ctx = GraderContext(workspace=tmp_path, config_root=tmp_path, params={}, run=AgentRun())
    spec = JudgeGrader(kind="judge", profile="r", threshold=7)
    whole = judge.judge_prompt(ctx, spec)
    assert '"c.txt"' in whole and "this list stops" not in whole
    (tmp_path / "d.txt").write_text("x")
    cut = judge.judge_prompt(ctx, spec)
    assert '"d.txt"' not in cut and "this list stops at 3 files" in cut


def test_a_snapshot_past_its_bounds_is_left_out_naming_the_bound(tmp_path, monkeypatch):
    """W7: with MAX_ENTRIES lowered to 2, a workspace of three files leaves the snapshot out,
    the note naming the bound; one past the byte cap names the cap and where it is set;
    within both, the snapshot is taken."""
    from pytest_jaato_eval.results import snapshots
    monkeypatch.setattr(snapshots, "MAX_ENTRIES", 2)
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in "ab":
        (ws / name).write_text("x" * 100)
    snapshots.take(ws, {}, tmp_path / "kept.tar", 10_000)
    assert (tmp_path / "kept.tar").is_file()
    with pytest.raises(snapshots.LeftOut, match=r"more than 2 files.*snapshots\.MAX_ENTRIES"):
        (ws / "c").write_text("x")
        snapshots.take(ws, {}, tmp_path / "entries.tar", 10_000)
    (ws / "c").unlink()
    with pytest.raises(snapshots.LeftOut, match="snapshot cap.*jaato_snapshot_max_mb"):
        snapshots.take(ws, {}, tmp_path / "bytes.tar", 150)


def test_the_sessions_a_retried_session_new_stops_are_every_record_never_the_first_64(
        tmp_path):
    """The records listed after a transient session.new failure, each of whose sessions is
    stopped: all of them (before: the first 64 the folder listed, the rest left running,
    and nothing said)."""
    from pytest_jaato_eval.engine import accounting
    folder = tmp_path / ".jaato" / "sessions"
    folder.mkdir(parents=True)
    ids = [f"20261207{n:06d}" for n in range(70)]
    for sid in ids:
        (folder / f"{sid}.json").write_text("{}")
    (folder / "notes.txt").write_text("not a record")
    assert accounting.session_ids_in(tmp_path) == ids
