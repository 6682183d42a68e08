"""Every cap on what the harness reads of the agent's files, lowered: the arm never says less
than is so (docs/security.md, "Bounds that decide a verdict")."""
from __future__ import annotations

import json
from pathlib import Path

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
