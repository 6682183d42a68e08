"""Driver arms (D1-D5, C1-C4) against a real daemon: the exit-code vocabulary, the ceiling,
session attribution, and one contract for a driver and its script grader."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from jaato_project import REPO, processes_mentioning


def driver_task(project, task_id, run, graders=None, params=None, repeats=1):
    d = project.root / "tasks" / task_id
    (d / "fixture").mkdir(parents=True)
    (d / "fixture" / "seed.txt").write_text("seed\n")
    (d / ".jaato").mkdir()
    manifest = {"id": task_id, "environment": {"fixture": "fixture", "config_root": ".jaato"},
                "harness": {"kind": "driver", "run": run},
                "graders": graders or [{"kind": "script", "run": "true"}], "repeats": repeats}
    if params is not None:
        manifest["input"] = {"params": params}
    (d / "task.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))


@pytest.mark.parametrize("run, state, says", [
    ("exit 0", "PASS", None),
    ("echo oops >&2; exit 3", "unsigned", "DriverStoppedShort: driver exited 3 — oops"),
    ("echo 'no daemon' >&2; exit 75", "BLOCKED", "driver exited 75 (EX_TEMPFAIL)"),
    ("no-such-command-here", "BLOCKED", "driver exited 127 (command not found)"),
    ("kill -9 $$", "BLOCKED", "driver killed by SIGKILL"),
])
def test_driver_exit_codes(project, run, state, says):
    driver_task(project, "d", run)
    project.run("tasks")
    (r,) = project.records()
    if state == "unsigned":  # S8: graded, error set, not blocked
        assert r["state"] == "PASS" and r["blocked_reason"] is None
        assert r["error"].startswith(says)
    else:
        assert r["state"] == state
        if says:
            assert says in r["blocked_reason"]
    if state == "BLOCKED":
        assert r["verdicts"] == []


def test_driver_past_the_ceiling_is_blocked_and_its_group_killed(project):
    driver_task(project, "hang", "sleep 3011 & sleep 3012; wait")
    result = project.run("tasks", "--arm-timeout=3")
    assert result.ret == 2
    (r,) = project.records()
    assert r["state"] == "BLOCKED" and "arm ceiling" in r["blocked_reason"]
    assert processes_mentioning("sleep 3011") == [] and processes_mentioning("sleep 3012") == []


def test_contract_seen_by_driver_equals_the_graders(project, monkeypatch):
    monkeypatch.setenv("JAATO_EVAL_LEAK", "from an outer run")
    dump = "env | grep ^JAATO_EVAL | sort"
    driver_task(project, "contract", f"{dump} > driver.env",
                params={"issue-id": "716", "flag": True, "none": None},
                # The same contract, but for the config root: the driver's sessions get the
                # arm's copy, the graders the harness's own (docs/security.md, The sandbox).
                graders=[{"kind": "script", "run": f"{dump} | grep -v ^JAATO_EVAL_CONFIG_ROOT= "
                                                  f"> grader.env; grep -v ^JAATO_EVAL_CONFIG_ROOT= "
                                                  f"driver.env | diff - grader.env"},
                         {"kind": "script", "run": 'test -z "${JAATO_EVAL_PARAM_ABSENT+x}" && '
                                                   'test -z "${JAATO_EVAL_LEAK+x}"'}])
    project.run("tasks", "--keep-workspaces")
    (r,) = project.records()
    assert r["state"] == "PASS", r["verdicts"]
    env = dict(line.split("=", 1) for line in
               Path(r["workspace"], "driver.env").read_text().splitlines())
    assert env["JAATO_EVAL_PARAM_ISSUE_ID"] == "716" and env["JAATO_EVAL_PARAM_FLAG"] == "true"
    assert env["JAATO_EVAL_PARAM_NONE"] == "null" and env["JAATO_EVAL_CONTRACT"] == "1"
    assert env["JAATO_EVAL_SOCKET"] == project.daemon.socket_path
    assert env["JAATO_EVAL_CASCADE_ID"].startswith("jaato-eval-")
    assert "JAATO_EVAL_LEAK" not in env
    assert env["JAATO_EVAL_CONFIG_ROOT"].endswith("-config-state")  # the arm's own copy
    shutil.rmtree(r["workspace"], ignore_errors=True)


def test_shipped_driver_task_records_its_own_sessions(project):
    shutil.copytree(REPO / "tasks" / "two-stage-driver", project.root / "tasks" / "drv")
    manifest = project.root / "tasks" / "drv" / "task.yaml"
    manifest.write_text(manifest.read_text() + "repeats: 2\n")
    result = project.run("tasks")
    result.assert_outcomes(passed=2)
    records = project.records()
    ids = [set(r["session_ids"]) for r in records]
    assert all(len(s) == 2 for s in ids), "each arm opened two sessions"
    assert not ids[0] & ids[1], "no arm records a sibling's session"
    for r in records:
        assert r["session_id"] == r["session_ids"][0]
        assert (r["model"], r["provider"]) == ("echo", "echo")
        assert r["turns"] == 2 and r["usage"]["cost_usd"] > 0
