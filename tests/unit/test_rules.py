"""Unit tests of the pure rules: contract (C), verdicts (G6), accounting (S6, S9-S11),
truncation (G1), workspaces (W), store (R1, R3, X5), pivot (P1-P3) and exit codes (X4)."""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from pytest_jaato_eval import workspace
from pytest_jaato_eval.contract import ParamCollision, build_contract_env, param_variable
from pytest_jaato_eval.engine.accounting import (
    TurnAccumulator, count_nudges, merge_tracker, payload_hash)
from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.graders.context import truncation_reason
from pytest_jaato_eval.pytest_layer.outcome import fold_exit_status
from pytest_jaato_eval.results.pivot import build_cells, render_pivot
from pytest_jaato_eval.results.record import ArmRecord
from pytest_jaato_eval.results.store import Store
from pytest_jaato_eval.results.stores import latest_by_arm, read_records
from pytest_jaato_eval.verdict import BLOCKED, FAIL, PASS, Verdict, roll_up


# -- C: the contract ------------------------------------------------------------
def test_contract_encodes_values_and_leaves_absent_ones_unset():
    env = build_contract_env(workspace="/w", config_root="/c",
                             params={"issue-id": "716", "n": 3, "flag": True, "none": None,
                                     "map": {"a": 1}},
                             python="/py", base={"PATH": "/bin", "JAATO_EVAL_SOCKET": "/old",
                                                 "JAATO_EVAL_PARAM_STALE": "x"})
    assert env["JAATO_EVAL"] == "1" and env["JAATO_EVAL_CONTRACT"] == "1"
    assert env["JAATO_EVAL_PARAM_ISSUE_ID"] == "716"  # strings verbatim
    assert env["JAATO_EVAL_PARAM_N"] == "3" and env["JAATO_EVAL_PARAM_FLAG"] == "true"
    assert env["JAATO_EVAL_PARAM_NONE"] == "null" and env["JAATO_EVAL_PARAM_MAP"] == '{"a": 1}'
    assert json.loads(env["JAATO_EVAL_PARAMS"])["issue-id"] == "716"  # author's spelling
    # C3: inherited JAATO_EVAL* removed; unknown values unset, not empty
    assert "JAATO_EVAL_SOCKET" not in env and "JAATO_EVAL_PARAM_STALE" not in env
    assert "JAATO_EVAL_CASCADE_ID" not in env
    assert env["JAATO_EVAL_PYTHON"] == "/py" and env["PATH"] == "/bin"


def test_contract_refuses_colliding_parameters():
    assert param_variable("a.b-c") == "JAATO_EVAL_PARAM_A_B_C"
    with pytest.raises(ParamCollision, match="'a-b' and 'a_b'"):
        build_contract_env(workspace="/w", config_root="/c", params={"a-b": 1, "a_b": 2}, base={})


def test_colliding_parameters_block_a_script_grader_and_not_a_processor(tmp_path):
    """C4/M9: a processor is handed the parameters as a mapping, as under jaato-eval."""
    from pytest_jaato_eval.engine.agent_run import AgentRun
    from pytest_jaato_eval.graders.context import GraderContext
    from pytest_jaato_eval.graders.processor import grade_processor
    from pytest_jaato_eval.graders.script import grade_script
    from pytest_jaato_eval.task.model import ProcessorGrader, ScriptGrader

    (tmp_path / "ws").mkdir()
    (tmp_path / "check.py").write_text(
        "import os\n"
        "def validate(payload, context):\n"
        "    seen = (context.agent_params, 'JAATO_EVAL_PARAM_A_B' in os.environ)\n"
        "    return [] if seen == ({'a-b': 1, 'a_b': 2}, False) else [repr(seen)]\n")
    ctx = GraderContext(workspace=tmp_path / "ws", config_root=tmp_path,
                        params={"a-b": 1, "a_b": 2},
                        run=AgentRun(payload={"answer": "x"}, finish_reason="stop"))
    processor = grade_processor(ProcessorGrader(kind="processor", script="check.py"), ctx)
    assert processor.state == PASS, processor
    script = grade_script(ScriptGrader(kind="script", run="true"), ctx)
    assert script.state == BLOCKED and script.detail.endswith("$JAATO_EVAL_PARAM_A_B; rename one")


# -- G6: roll-up ---------------------------------------------------------------------
def v(state):
    return Verdict("script:x", "c", state, "d")


@pytest.mark.parametrize("states, blocked_before, expect", [
    ([PASS, PASS], None, PASS),
    ([PASS, FAIL, BLOCKED], None, FAIL),
    ([PASS, BLOCKED], None, BLOCKED),
    ([], None, BLOCKED),
    ([PASS], "daemon: gone", BLOCKED),
])
def test_roll_up(states, blocked_before, expect):
    state, reason = roll_up([v(s) for s in states], blocked_before)
    assert state == expect
    assert (reason is not None) == (state == BLOCKED)


def test_blocked_verdict_always_carries_a_reason():
    assert Verdict("g", "c", BLOCKED).blocked_reason
    with pytest.raises(ValueError):
        Verdict("g", "c", "MAYBE")


# -- S6, S9-S11: accounting ------------------------------------------------------------
def turn(finish=None, gap=None, **usage):
    base = {k: None for k in ("spend_prompt_tokens", "spend_output_tokens", "spend_total_tokens",
                              "spend_cache_read_tokens", "spend_cache_creation_tokens",
                              "reasoning_tokens", "thinking_tokens", "cost_usd")}
    base.update(usage)
    return SimpleNamespace(finish_reason=finish, completion_gap=gap,
                           usage=SimpleNamespace(prompt_tokens=999, total_tokens=999, **base))


def test_turns_sum_spend_never_level_and_cost_stays_unknown_until_reported():
    acc = TurnAccumulator()
    acc.add(turn("tool_use", spend_total_tokens=100))
    acc.add(turn("", gap="nudge", spend_total_tokens=50, cost_usd=0.01))
    acc.add(turn("stop", gap="later", spend_total_tokens=25, cost_usd=0.02))
    assert acc.turns == 3 and acc.finish_reason == "stop" and acc.completion_gap == "nudge"
    assert acc.usage["spend_total_tokens"] == 175
    assert acc.usage["cost_usd"] == pytest.approx(0.03)
    assert "prompt_tokens" not in acc.usage and "total_tokens" not in acc.usage
    fresh = TurnAccumulator()
    fresh.add(turn("stop", spend_total_tokens=1))
    assert fresh.usage["cost_usd"] is None


def test_tracker_merge_takes_the_larger_and_never_turns_unknown_cost_into_zero():
    usage = {"cost_usd": None, "spend_total_tokens": 10}
    merged, turns = merge_tracker(usage, 1, {"budget_usage": {"usd": 0.0, "tokens": 40, "turns": 3}})
    assert merged["cost_usd"] is None and merged["spend_total_tokens"] == 40 and turns == 3
    merged, _ = merge_tracker({"cost_usd": 0.5, "spend_total_tokens": None}, 0,
                              {"budget_usage": {"usd": 0.2}})
    assert merged["cost_usd"] == 0.5
    assert merge_tracker(usage, 2, None) == (usage, 2)


def test_nudges_are_unknown_without_debug_logs(tmp_path):
    assert count_nudges(tmp_path, "s1", "gap") == 2
    assert count_nudges(tmp_path, "s1", None) is None  # no logs
    logs = tmp_path / ".jaato" / "logs"
    logs.mkdir(parents=True)
    (logs / "session_s1_client_1.log").write_text("x [INFO] y\n")
    assert count_nudges(tmp_path, "s1", None) is None  # INFO only: unknown, not 0
    (logs / "session_s1_client_1.log").write_text("a [DEBUG] b\nCOMPLETION_NUDGE: 1\n"
                                                  "COMPLETION_NUDGE: 2\n")
    assert count_nudges(tmp_path, "s1", None) == 2


def test_payload_hash_is_canonical():
    assert payload_hash(None) is None
    assert payload_hash({"b": 1, "a": [1, 2]}) == payload_hash({"a": [1, 2], "b": 1})
    assert payload_hash({"a": 1}) != payload_hash({"a": 2})


# -- G1: truncation --------------------------------------------------------------------
@pytest.mark.parametrize("term, payload, finish, expect", [
    ("budget_exhausted", {"a": 1}, "stop", "stopped at its budget ceiling"),
    ("error", None, "stop", "ended in a session error"),
    ("natural", {"a": 1}, "tool_use", None),   # a schema arm ends inside tool_use
    ("natural", None, "stop", None),
    ("natural", None, "tool_use", "ended mid-tool-loop"),
    (None, None, "max_tokens", "finish_reason='max_tokens'"),
])
def test_truncation_reason(term, payload, finish, expect):
    assert truncation_reason(term, payload, finish) == expect


# -- W: workspaces -------------------------------------------------------------------
def test_workspace_names_are_injective_and_stay_under_the_root(tmp_path):
    ids = ["a/b@s#0", "a_b@s#0", "a%2Fb@s#0", "../../etc@s#0", "..@s#0", "x" * 400 + "@s#0",
           "x" * 400 + "@s#1"]
    names = [workspace.directory_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    for n in names:
        assert "/" not in n and n not in (".", "..") and not n.startswith(".")
        assert len(n) <= 120


def test_the_bin_removes_every_workspace_handed_over_and_its_state(tmp_path):
    """W4 off the arm's path: teardown hands the workspace to a background thread; the run's
    end waits until all of them are gone, links inside removed, never followed."""
    assert workspace.Bin().empty(5)  # nothing handed over: nothing to wait for
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the arm's")
    bin_ = workspace.Bin()
    made = []
    for i in range(20):
        ws = tmp_path / "root" / f"arm-{i}"
        (ws / "deep" / "er").mkdir(parents=True)
        (ws / "deep" / "er" / "f.txt").write_text("x" * 1000)
        (ws / "link").symlink_to(outside)
        (tmp_path / "root" / f".arm-{i}-s1-state").mkdir()
        made.append(ws)
        bin_.put(ws)
        if i == 9:
            assert bin_.empty(30)  # and a bin emptied once takes more
    assert bin_.empty(30)
    assert not any(ws.exists() for ws in made)
    assert list((tmp_path / "root").iterdir()) == []
    assert (outside / "keep.txt").read_text() == "not the arm's"


def test_a_workspace_deeper_than_pythons_recursion_is_removed(tmp_path):
    """An agent can nest folders deeper than shutil.rmtree can recurse (RecursionError,
    which ignore_errors does not catch): discard still removes it, links not followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the arm's")
    ws = tmp_path / "root" / "deep-arm"
    ws.mkdir(parents=True)
    fd = os.open(ws, os.O_RDONLY)
    for _ in range(1500):  # one level at a time: the whole path is past PATH_MAX
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.symlink(outside, "link", dir_fd=fd)
    os.close(os.open("f.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    workspace.discard(ws)
    assert not ws.exists()
    assert (outside / "keep.txt").read_text() == "not the arm's"


def test_a_deep_tree_is_removed_when_rmtree_runs_out_of_descriptors(tmp_path):
    """Before its recursion limit, rmtree can run out of file descriptors (one per level):
    it then returns with the tree still there, and rm removes it."""
    import resource

    ws = tmp_path / "deep"
    ws.mkdir()
    fd = os.open(ws, os.O_RDONLY)
    for _ in range(300):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + 50, hard))  # rmtree needs 300
    try:
        workspace.remove_tree(ws)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert not ws.exists()


def test_one_workspace_that_cannot_be_removed_does_not_stop_the_bin(tmp_path, monkeypatch):
    real = workspace.discard

    def failing(path):
        if path.name == "bad":
            raise RuntimeError("cannot")
        real(path)

    monkeypatch.setattr(workspace, "discard", failing)
    bin_ = workspace.Bin()
    made = [tmp_path / name for name in ("a", "bad", "b", "c")]
    for ws in made:
        ws.mkdir()
        bin_.put(ws)
    assert bin_.empty(30)
    assert [ws.name for ws in made if ws.exists()] == ["bad"]


def test_materialise_copies_links_as_links_skips_junk_and_never_reuses(tmp_path):
    fixture = tmp_path / "fixture"
    (fixture / ".git").mkdir(parents=True)
    (fixture / "__pycache__").mkdir()
    (fixture / "keep.txt").write_text("k")
    (fixture / "x.pyc").write_text("c")
    (fixture / ".env").write_text("SECRET=1\n")
    os.symlink("/etc/passwd", fixture / "outside")
    root = tmp_path / "root"
    ws = workspace.materialise(root, "../escape@s#0", fixture, "echo")
    assert ws.parent == root.resolve()
    assert sorted(p.name for p in ws.iterdir()) == [".env", "keep.txt", "outside"]
    assert os.readlink(ws / "outside") == "/etc/passwd"  # a link, not a copy of /etc/passwd
    assert (ws / ".env").read_text() == "JAATO_PROFILE_SET=echo\n"  # W3: nothing else
    with pytest.raises(workspace.WorkspaceError, match="fixture: .*already exists"):
        workspace.materialise(root, "../escape@s#0", fixture, "echo")
    assert workspace.materialise(root, "t@default#0", fixture, None).joinpath(".env").read_text() == ""
    workspace.discard(ws)
    assert not ws.exists()


# -- R, X5: the store ------------------------------------------------------------------
def test_store_keeps_an_old_file_and_skips_a_cut_last_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"arm_id": "old"}\n')
    store = Store(path)
    store.append(ArmRecord(arm_id="a", state="PASS"))
    store.close()
    assert store.rotated_to is not None and store.rotated_to.read_text() == '{"arm_id": "old"}\n'
    with open(path, "a") as fh:
        fh.write('{"arm_id": "b", "sta')  # a run killed mid-write
    assert [r.arm_id for r in read_records(path)] == ["a"]
    appending = Store(path, append=True)
    appending.append(ArmRecord(arm_id="c"))
    appending.close()
    assert [r.arm_id for r in read_records(path)] == ["a", "c"]


def test_a_repeated_arm_id_counts_once_last_wins():
    latest = latest_by_arm([ArmRecord(arm_id="x", state=FAIL), ArmRecord(arm_id="x", state=PASS)])
    assert [(r.arm_id, r.state) for r in latest.values()] == [("x", PASS)]


# -- P: the pivot --------------------------------------------------------------------
def rec(arm, state, cost=None, reason=None, h=None, task="t", ps="s"):
    from pytest_jaato_eval.testing.records import arm_record
    return arm_record(task, ps, 0, state, arm_id=arm, cost=cost, tokens=None, reason=reason,
                      payload_hash=h)


def test_pivot_pass_rate_ignores_blocked_and_unknown_is_a_dash():
    cells = build_cells([rec("1", PASS, 0.5, h="x"), rec("2", FAIL, None, h="y"),
                         rec("3", BLOCKED, None, "provider 429", h="x")])
    (cell,) = cells
    assert (cell.passed, cell.failed, cell.blocked) == (1, 1, 1)
    assert cell.pass_rate == 0.5 and cell.cost == 0.5 and cell.tokens is None
    # The blocked arm's "x" is in neither side, so the two answers disagree: 0 (jaato-eval's rule).
    assert cell.det == 0.0
    lines = render_pivot(cells)
    assert "50%" in lines[1] and "—" in lines[1]
    assert lines[-1].strip() == "t @ s: (1×) provider 429"
    (only_blocked,) = build_cells([rec("1", BLOCKED, reason="x")])
    assert only_blocked.pass_rate is None and only_blocked.det is None
    assert "—" in render_pivot([only_blocked])[1].split()[2]


@pytest.mark.parametrize("status, blocked, expect", [(0, 0, 0), (0, 1, 2), (1, 1, 1), (2, 0, 2),
                                                      (5, 0, 5), (4, 3, 4)])
def test_exit_status_folds_blocked(status, blocked, expect):
    assert fold_exit_status(status, blocked) == expect


# -- G3, G4: the ledger and the processor on an absent history ------------------------
# The daemon answered every history request we made (pooled arms included), so an absent
# history cannot be produced for real here: this builds the grader's context by hand.
def test_processor_reading_an_unfaithful_ledger_is_blocked(tmp_path):
    from pytest_jaato_eval.graders.context import GraderContext
    from pytest_jaato_eval.graders.ledger import ledger_of
    from pytest_jaato_eval.graders.processor import grade_processor
    from pytest_jaato_eval.task.model import ProcessorGrader

    (tmp_path / "check.py").write_text(
        "def validate(payload, context):\n    return [c['name'] for c in context.tool_calls]\n")
    spec = ProcessorGrader(kind="processor", script="check.py")
    absent = ledger_of(None)
    assert not absent.faithful and "absent, not empty" in absent.reason
    ctx = GraderContext(workspace=tmp_path, config_root=tmp_path, params={},
                        run=AgentRun(payload={"a": 1}, finish_reason="stop"), ledger=absent)
    verdict = grade_processor(spec, ctx)
    assert verdict.state == BLOCKED and "ledger is not faithful" in verdict.detail
    no_ids = ledger_of([{"role": "model", "parts": [{"type": "function_call", "name": "x"}]}])
    assert not no_ids.faithful and "carry no call id" in no_ids.reason
    empty = ledger_of([])
    assert empty.faithful and empty.entries == []  # present and empty is a real, empty ledger


def test_the_daemons_family_is_killed_by_pid_and_start_time_never_a_successor():
    """stop() notes the daemon's runners when it sends SIGTERM and kills the survivors a
    moment later: a PID that now names another process must be left alone."""
    import subprocess
    import sys

    from pytest_jaato_eval.processes import Ident, descendants, kill_all

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        noted = [p for p in descendants(os.getpid()) if p.pid == child.pid]
        assert len(noted) == 1
        kill_all([Ident(child.pid, noted[0].started + 1)], grace=0)  # same PID, another start
        assert child.poll() is None
        kill_all(noted, grace=0)
        assert child.wait(timeout=10) == -9
    finally:
        if child.poll() is None:
            child.kill()


def test_a_daemon_start_the_run_abandons_ends_at_once_and_only_that_start(tmp_path):
    """A worker xdist gives no arm, or a collection that failed, abandons the daemon it
    started early: a start still waiting for the socket ends at once, its process and the
    runner it started killed; an ensure() after that (an arm that needs the daemon after
    all) starts afresh. (A stand-in interpreter that never listens is the daemon here: a
    real one answers too fast to be caught booting.)"""
    import threading
    import time

    from pytest_jaato_eval.engine.daemon import (ABANDONED, DaemonError, PrivateDaemon,
                                                  StartAbandoned)
    from pytest_jaato_eval.processes import Ident, descendants, kill_all, wait_gone

    never_listens = tmp_path / "python"
    # It starts a child in a session of its own, as the daemon starts its runners.
    never_listens.write_text("#!/bin/sh\nsetsid sleep 4307 &\nexec sleep 4306\n")
    never_listens.chmod(0o755)
    daemon = PrivateDaemon(tmp_path / "d", python=str(never_listens), ready_timeout=120)
    raised: list[BaseException] = []

    def start() -> None:
        try:
            daemon.ensure()
        except DaemonError as exc:
            raised.append(exc)

    thread = threading.Thread(target=start)
    thread.start()
    while daemon.proc is None and thread.is_alive():
        thread.join(0.05)
    assert daemon.proc is not None, raised
    booting = Ident.of(daemon.proc.pid)
    assert booting is not None and booting.alive() and not raised
    deadline = time.monotonic() + 30
    while not (runner := descendants(daemon.proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(runner) == 1 and runner[0].alive()
    daemon.abandon_start()
    thread.join(30)
    assert not thread.is_alive() and [str(e) for e in raised] == [ABANDONED]
    assert daemon.proc.poll() is not None and not booting.alive()
    try:
        assert wait_gone(runner, 10), "the runner in its own session was ended too"
    finally:
        kill_all(runner, grace=0)
    daemon.ready_timeout = 0.5
    with pytest.raises(DaemonError, match="not ready after"):
        daemon.ensure()  # started again, not refused as abandoned
    assert daemon.starts == 2
    daemon.abandon_start()  # before a start begins: that start is refused at once
    with pytest.raises(StartAbandoned):
        daemon.ensure()
    assert daemon.starts == 2


# -- S8: an arm graded without its agent's sign-off says so on its line ----------------
def test_an_unsigned_arms_line_says_it_never_signed_off():
    from types import SimpleNamespace

    from pytest_jaato_eval.pytest_layer.progress import arm_line, why_not_passed
    from pytest_jaato_eval.testing.records import arm_record

    def line_of(record):  # as pytest's report of a passed or failed call has it
        return arm_line(record, 200, why=why_not_passed(SimpleNamespace(failed=False), record))
    error = "NudgeExhausted: Agent loop exhausted 2 completion nudges"
    line = line_of(arm_record(state="PASS", error=error))
    assert "PASS" in line and line.endswith(f"· never signed off: {error}")
    assert "never signed off" not in line_of(arm_record(state="PASS"))
    blocked = line_of(arm_record(state="BLOCKED", error=error, reason="daemon gone"))
    assert blocked.endswith("· daemon gone")  # a BLOCKED arm's line gives why it was blocked
