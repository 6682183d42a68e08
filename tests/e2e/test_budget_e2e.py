"""Budgets against a real daemon: one task pool per run drained arm by arm (B1, B2), an
arm refused on an exhausted pool is BLOCKED naming it; profile ceilings (B3, B4)."""
from __future__ import annotations

import pytest
import yaml

from pytest_jaato_eval.engine.budget import ceiling_warning, profile_ceiling


def test_one_pool_drains_arm_by_arm_under_xdist(project):
    # echo reports 10 + 5 tokens per provider call, two calls per arm: 30 tokens an arm.
    project.task("pooled", repeats=4, extra={"budget": {"tokens": 65}})
    result = project.run("tasks", "-n", "4", shared_daemon=False)
    records = sorted(project.records(), key=lambda r: r["repeat"])
    assert len(records) == 4, result.stdout.str()
    pools = {r["pool_on_arrival"]["cascade_driver_id"] for r in records if r["pool_on_arrival"]}
    assert len(pools) == 1, "one pool for every arm of the task"
    remaining = [r["pool_on_arrival"]["remaining"]["tokens"] for r in records]
    assert remaining[:3] == [65.0, 35.0, 5.0], remaining
    assert [r["state"] for r in records] == ["PASS", "PASS", "PASS", "BLOCKED"]
    (cid,) = pools
    assert records[3]["blocked_reason"].startswith(f"pool {cid} of task 'pooled' exhausted")
    assert "no headroom left on tokens" in records[3]["blocked_reason"]
    assert all(r["pool_limits"] == {"tokens": 65} for r in records)
    assert result.ret == 2


LOG_KEEPER = """\
import shutil

import pytest_jaato_eval.engine.daemon as daemon

_stop = daemon.PrivateDaemon.stop


def stop(self, *args, **kwargs):  # the run removes its folder: keep the daemon's log first
    done = _stop(self, *args, **kwargs)
    if self.out_file.exists():
        shutil.copy(self.out_file, {dest!r})
    return done


daemon.PrivateDaemon.stop = stop
"""


@pytest.mark.slow  # a private daemon's log read for its slots
def test_arms_after_a_pool_still_get_their_runner_from_the_daemons_pool(project):
    """The runner slots a pool's arms ran on stay reserved to it for minutes; the private
    daemon leaves room for a small pool's (three arms here), so the arms after it are served
    by pool slots, not by runners started cold (engine/daemon.py: pool_ceiling)."""
    project.task("a-pooled", repeats=3, extra={"budget": {"tokens": 100_000}})
    for i in range(3):
        project.task(f"b-plain-{i}")
    log = project.root / "daemon.out"
    project.write("conftest.py", LOG_KEEPER.format(dest=str(log)))
    result = project.run("tasks", shared_daemon=False)
    assert result.ret == 0, result.stdout.str()
    text = log.read_text(errors="replace")
    served = text.count("served by pool slot")
    cold = text.count("falling back to cold-spawn")
    # At least one session per arm (a session.new the daemon dropped is sent again).
    assert served >= 6 and cold == 0, [line for line in text.splitlines()
                                       if "spawn_session_runner" in line]


def test_profile_ceiling_follows_inherits_min_wins_and_the_set_first(tmp_path):
    profiles = tmp_path / "profiles"
    (profiles / "fast").mkdir(parents=True)
    (profiles / "base.yaml").write_text(yaml.safe_dump(
        {"name": "base", "budget_control": {"limits": {"usd": 1.0, "tokens": 500}}}))
    (profiles / "mid.yml").write_text(yaml.safe_dump(
        {"name": "mid", "inherits": ["base", "loop"], "budget_control": {"limits": {"usd": 2.0}}}))
    (profiles / "loop.yaml").write_text(yaml.safe_dump({"name": "loop", "inherits": "mid"}))
    (profiles / "fast" / "mid.json").write_text(
        '{"name": "mid", "inherits": "base", "budget_control": {"limits": {"turns": 3}}}')
    assert profile_ceiling(tmp_path, None, "mid") == {"usd": 1.0, "tokens": 500}
    assert profile_ceiling(tmp_path, "fast", "mid") == {"turns": 3, "usd": 1.0, "tokens": 500}
    assert profile_ceiling(tmp_path, None, "nowhere") is None
    assert profile_ceiling(tmp_path, None, "loop") == {"usd": 1.0, "tokens": 500}


def test_budget_seconds_above_the_arm_ceiling_is_warned():
    assert "exceeds the per-arm ceiling" in ceiling_warning("t", {"seconds": 1000}, 900)
    assert ceiling_warning("t", {"seconds": 100}, 900) is None
    assert ceiling_warning("t", {"seconds": 900}, 900) is None  # equal: nothing out of reach
    assert ceiling_warning("t", {"seconds": 1000}, 0) is None  # no ceiling, nothing to exceed
    # where the ceiling came from, as jaato-eval tells the default from the flag
    assert "900 s, the default; raise it with --arm-timeout" in ceiling_warning(
        "t", {"seconds": 1800}, 900, "the default")
    assert "600 s, from --arm-timeout" in ceiling_warning("t", {"seconds": 1800}, 600)


def test_the_warning_reaches_the_user(project):
    project.task("slowpool", extra={"budget": {"seconds": 5000}})
    result = project.run("tasks", "--co")
    result.stdout.fnmatch_lines(["*budget.seconds (5000) exceeds the per-arm ceiling (900 s*"])


def test_the_report_reads_the_daemons_pool_reading():
    from pytest_jaato_eval.report.arms import budget_text
    from pytest_jaato_eval.results.record import ArmRecord
    record = ArmRecord.from_dict({
        "arm_id": "a", "usage": {"cost_usd": None, "spend_total_tokens": 30},
        "budget_ceiling": None, "pool_limits": {"tokens": 65},
        "pool_on_arrival": {"cascade_driver_id": "c", "declared": True,
                            "limits": {"tokens": 65}, "remaining": {"tokens": 35.0}}})
    assert budget_text(record) == "30 tokens / pool 65 tokens (46% consumed on arrival)"
