"""One account of a run, read by every view: the width rule, the list of arms that did not
pass and why, the exit status `report` shares with the run, JUnit's BLOCKED-as-error, and
the pieces of the live line that need no daemon."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pytest_jaato_eval.activity import Doing
from pytest_jaato_eval.engine.load import overload_note
from pytest_jaato_eval.engine.session import session_error
from pytest_jaato_eval.pytest_layer import liveness
from pytest_jaato_eval.pytest_layer.outcome import blocked_as_errors, fold_exit_status
from pytest_jaato_eval.results.account import account, exit_status, noted_lines
from pytest_jaato_eval.results.pivot import Pivot, reason_key, render_pivot
from pytest_jaato_eval.results.store import Store, StoreError
from pytest_jaato_eval.results.table import Column, fit
from pytest_jaato_eval.testing.records import arm_record, write_store
from pytest_jaato_eval.verdict import failed_grader

DOCS = Path(__file__).parents[2] / "docs"


def wide_records():
    """A sweep whose every column is in use: repeats, a judge, a partial cost, BLOCKED."""
    judge = {"cost_usd": 0.0009, "spend_total_tokens": 90}
    return [arm_record("write-file", "openrouter", r, state,
                       cost=0.0123 if state != "BLOCKED" else None, tokens=1540,
                       payload_hash="a" * 64 if state != "BLOCKED" else None,
                       judge_usage=judge if state != "BLOCKED" else None)
            for r, state in enumerate(("PASS", "FAIL", "PASS", "BLOCKED"))] + [
            arm_record("config-file", "echo", r, "PASS", cost=0.0016, tokens=480,
                       payload_hash=None) for r in range(2)]


# -- the width rule --------------------------------------------------------------------------
def test_a_table_fits_80_and_120_columns_by_its_stated_rule():
    columns = [Column("id", text=True), Column("a", right=True, rank=1),
               Column("b", right=True, rank=3), Column("c", right=True, rank=2),
               Column("d", right=True, rank=3)]
    rows = [{"id": "x" * 34, "a": "1" * 20, "b": "2" * 20, "c": "3" * 20, "d": "4" * 20}]
    whole = fit(columns, rows, None)
    assert len(whole.lines[1]) == 34 + 4 * 22 and not whole.dropped
    at_120 = fit(columns, rows, 120)  # the rightmost of the least read (rank 3) goes first
    assert [c.header for c in at_120.dropped] == ["d"] and len(at_120.lines[1]) <= 120
    at_80 = fit(columns, rows, 80)    # then the other rank 3, then rank 2: rank 1 stays
    assert [c.header for c in at_80.dropped] == ["d", "b"] and len(at_80.lines[1]) <= 80
    assert [c.header for c in at_80.shown] == ["id", "a", "c"]
    assert not at_80.stacked


def test_stacked_ids_when_even_the_kept_columns_do_not_fit():
    columns = [Column("task", text=True), Column("set", text=True),
               Column("rate", right=True), Column("cost", right=True, rank=1)]
    rows = [{"task": "t" * 70, "set": "echo", "rate": "50%", "cost": "$0.0100"}]
    fitted = fit(columns, rows, 60)
    assert fitted.stacked and not fitted.dropped  # under its ids, the figures fit again
    assert fitted.lines[0] == "task @ set" and fitted.lines[2].startswith("t" * 58)
    assert fitted.lines[3].split() == ["50%", "$0.0100"]
    assert all(len(line) <= 60 for line in fitted.lines)


def test_the_pivot_fits_80_and_120_columns_and_says_what_it_left_out():
    cells = Pivot.of_records(wide_records()).cells
    every = render_pivot(cells)
    assert len(every[0]) > 120  # what used to wrap in every terminal
    for width in (80, 120):
        lines = render_pivot(cells, width=width)
        assert all(len(line) <= width for line in lines), [x for x in lines if len(x) > width]
        header = re.split(r"\s{2,}", lines[0].strip())
        for kept in ("task", "profile set", "pass rate", "95% CI", "n", "blocked"):
            assert kept in header  # the columns that always stay
        left_out = next(line for line in lines if line.startswith("not shown in"))
        assert f"not shown in {width} columns:" in left_out
        text = " ".join(lines)
        assert "-v or --jaato-pivot=all shows every column" in text
        # The legend explains the columns shown, and only those.
        assert ("det: largest group" in text) == ("det" in header)
    at_120 = re.split(r"\s{2,}", render_pivot(cells, width=120)[0].strip())
    at_80 = re.split(r"\s{2,}", render_pivot(cells, width=80)[0].strip())
    assert set(at_80) < set(at_120) < set(re.split(r"\s{2,}", every[0].strip()))
    assert "total cost" in at_80  # beside a judge's, what the arm cost in all is read first
    assert render_pivot(cells, width=80, every_column=True)[0] == every[0]  # -v
    # Ids too long for even the columns that always stay: stacked above their figures.
    long = [arm_record("a-task-whose-id-says-everything-about-it", "openrouter_gemini25flash",
                       0, "PASS")]
    stacked = render_pivot(Pivot.of_records(long).cells, width=80)
    assert stacked[0] == "task @ profile set" and all(len(line) <= 80 for line in stacked)
    assert stacked[2] == "a-task-whose-id-says-everything-about-it @ openrouter_gemini25flash"


def test_the_pivot_example_in_the_docs_is_what_the_program_prints():
    records = [
        arm_record("write-file", "echo", 0, "PASS", cost=0.0123, tokens=1540, payload_hash="a" * 64),
        arm_record("write-file", "echo", 1, "FAIL", cost=0.0123, tokens=1540, payload_hash="a" * 64),
        arm_record("write-file", "echo", 2, "BLOCKED", cost=None, tokens=None,
                   reason="provider error: RateLimitError: Error code: 429"),
        arm_record("config-file", "echo", 0, "PASS", cost=0.0016, tokens=480, payload_hash=None),
        arm_record("config-file", "echo", 1, "PASS", cost=0.0016, tokens=480, payload_hash=None)]
    cells = Pivot.of_records(records).cells
    text = (DOCS / "reports.md").read_text()
    section = text[text.index("## The pivot (P1–P3)"):text.index("| column | meaning |")]
    at_80, every = re.findall(r"^```\n(.*?)^```$", section, re.M | re.S)
    assert at_80.splitlines() == render_pivot(cells, width=80)
    assert every.splitlines() == render_pivot(cells)[:3]
    listed = text[text.index("arms that did not pass (2):"):].split("```")[0]
    assert listed.splitlines() == noted_lines(account(Pivot.of_records(records)))


def test_det_says_nothing_when_no_arm_answered():
    (config,) = [c for c in Pivot.of_records(wide_records()).cells if c.task_id == "config-file"]
    assert config.det_text == "—"  # not "— (0 of 2 answered)" on every echo row


def test_zero_tokens_beside_an_unknown_cost_are_unknown(tmp_path):
    records = [arm_record("t", "echo", 0, "BLOCKED", cost=None, tokens=0),
               arm_record("u", "echo", 0, "PASS", cost=0.0, tokens=0)]
    store = write_store(tmp_path / "s.jsonl", records)
    for pivot in (Pivot.of_store(store), Pivot.of_records(records)):
        t, u = pivot.cells
        assert (t.cost, t.tokens) == (None, None)   # "tokens 0" beside "cost —" said nothing
        assert (u.cost, u.tokens) == (0.0, 0)       # a reported zero stays a zero


def test_the_digest_elides_jaatos_session_ids():
    one = reason_key("session error: RunnerBootstrapFailed: session 20261204_210739 did not "
                     "start within 35 s")
    assert one == reason_key("session error: RunnerBootstrapFailed: session 20261205_081501 "
                             "did not start within 35 s")
    assert "20261204" not in one


# -- the account: which arms did not pass, and why -------------------------------------------
def test_a_fail_names_its_first_failing_grader_and_detail():
    verdicts = [{"grader_id": "script:a", "state": "PASS", "detail": "exit 0"},
                {"grader_id": "script:b", "state": "FAIL", "detail": "exit 1, expected 0"},
                {"grader_id": "judge:c", "state": "FAIL", "detail": "score 2 < 4"}]
    assert failed_grader(verdicts) == "script:b: exit 1, expected 0 (and 1 more failing grader)"
    assert failed_grader(verdicts[:2]) == "script:b: exit 1, expected 0"
    assert failed_grader(verdicts[:1]) is None


def test_the_account_names_each_arm_that_did_not_pass_and_why(tmp_path):
    records = [
        arm_record("t", "echo", 0, "PASS"),
        arm_record("t", "echo", 1, "FAIL"),
        arm_record("t", "echo", 2, "BLOCKED", reason="profile set 'echo' not found"),
        arm_record("x", "echo", 0, "FAIL", xfail={"reason": "known bug", "strict": False}),
        arm_record("s", "echo", 0, "PASS", xfail={"reason": "", "strict": True})]
    store = write_store(tmp_path / "s.jsonl", records)
    for pivot in (Pivot.of_store(store), Pivot.of_records(records)):  # streamed or in memory
        acc = account(pivot)
        assert [(n.arm_id, n.outcome) for n in acc.noted] == [
            ("s@echo#0", "XPASS(strict)"), ("t@echo#1", "FAIL"), ("t@echo#2", "BLOCKED"),
            ("x@echo#0", "XFAIL")]
        why = {n.arm_id: n.why for n in acc.noted}
        assert why["t@echo#1"] == "script:grep -qx READY answer.txt: exit 1, expected 0"
        assert why["t@echo#2"] == "profile set 'echo' not found"
        assert why["x@echo#0"].endswith("(expected: known bug)")
        assert acc.exit_status == 1 and acc.unlisted == 0
    many = [arm_record("t", "echo", r, "BLOCKED", reason="429") for r in range(30)]
    acc = account(Pivot.of_records(many), listed=5)  # bounded, the rest counted
    assert len(acc.noted) == 5 and acc.unlisted == 25
    assert noted_lines(acc)[0] == "arms that did not pass (30):"
    assert noted_lines(acc)[-1].startswith("  … and 25 more")


@pytest.mark.parametrize("states, code", [
    ([("PASS", None)], 0),
    ([("FAIL", "xfail")], 0),                     # an xfail-only store: the run exited 0
    ([("PASS", None), ("FAIL", "xfail")], 0),
    ([("PASS", "xfail")], 0),                     # XPASS, not strict: pytest says passed
    ([("PASS", "strict")], 1),                    # XPASS(strict) failed the run
    ([("PASS", None), ("FAIL", None)], 1),
    ([("FAIL", None), ("BLOCKED", None)], 1),
    ([("BLOCKED", None)], 2),
    ([("FAIL", "xfail"), ("BLOCKED", None)], 2),
    ([("PASS", None), ("BLOCKED", None)], 2),
])
def test_report_exits_as_the_run_for_every_combination(states, code):
    records = [arm_record(f"t{i}", "echo", 0, state, **(
        {"xfail": {"reason": "r", "strict": mark == "strict"}} if mark else {}))
        for i, (state, mark) in enumerate(states)]
    assert exit_status(Pivot.of_records(records).cells) == code
    # the run's rule: pytest's status (1 when an arm failed it), BLOCKED folded in as 2
    pytest_status = 1 if code == 1 else 0
    blocked = sum(state == "BLOCKED" for state, _ in states)
    assert fold_exit_status(pytest_status, blocked, failed=pytest_status) == code


def test_collection_errors_alone_exit_2_never_1():
    # --continue-on-collection-errors: pytest says 1 for a broken manifest beside BLOCKED arms
    assert fold_exit_status(1, blocked=2, failed=0, collection_errors=1) == 2
    assert fold_exit_status(1, blocked=0, failed=0, collection_errors=1) == 2
    assert fold_exit_status(1, blocked=2, failed=1, collection_errors=1) == 1  # an arm failed
    assert fold_exit_status(2, blocked=0, failed=0, collection_errors=1) == 2  # stopped by them


# -- what a BLOCKED arm says -----------------------------------------------------------------
def test_a_session_error_carries_jaatos_own_text():
    events = [("RunnerBootstrapFailed", "runner for session 20261204_210739 did not bootstrap "
                                        "within 35 s"),
              ("DaemonLoopTimeout", "the daemon loop did not answer within 30 s")]
    said = session_error("AgentError", None, events, "error")
    assert said == ("AgentError | RunnerBootstrapFailed: runner for session 20261204_210739 did "
                    "not bootstrap within 35 s | DaemonLoopTimeout: the daemon loop did not "
                    "answer within 30 s | error")
    # each text once: a summary that already quotes an event is not repeated
    assert session_error("RunnerCallError", "boom: x", [("RunnerCallError", "boom: x")]) == \
        "RunnerCallError: boom: x"


def test_a_bound_that_fires_under_load_says_the_machine_was_overloaded():
    reason = "session error: RunnerBootstrapFailed: no bootstrap within 35 s"
    assert overload_note(reason, (7.9, 2)) == (
        "; the machine was overloaded (load average 7.9 on 2 cores): jaato's own time bound "
        "fired, not the model; run again when it is quieter, or with fewer -n workers")
    assert overload_note(reason, (0.4, 2)) == " (load average 0.4 on 2 cores)"
    assert overload_note("provider error: RateLimitError: 429", (7.9, 2)) == ""


# -- JUnit for dashboards that should go red -------------------------------------------------
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="3" tests="4"><testcase classname="t" name="a"><skipped type="pytest.skip" message="BLOCKED: daemon gone">t/task.yaml:1: BLOCKED: daemon gone</skipped></testcase><testcase classname="t" name="b"><skipped type="pytest.xfail" message="known bug" /></testcase><testcase classname="t" name="c"><skipped type="pytest.skip" message="not on this platform">x.py:3: not on this platform</skipped></testcase><testcase classname="t" name="d"><failure message="m">f</failure></testcase></testsuite></testsuites>"""


def test_junit_blocked_as_errors_moves_skips_and_counts(tmp_path):
    path = tmp_path / "j.xml"
    path.write_text(JUNIT)
    assert blocked_as_errors(path) == 1
    suite = ElementTree.parse(path).getroot().find("testsuite")
    assert (suite.get("errors"), suite.get("skipped"), suite.get("failures")) == ("1", "2", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    error = cases["a"].find("error")
    assert error.get("message") == "BLOCKED: daemon gone" and error.get("type") == "jaato.BLOCKED"
    assert cases["a"].find("skipped") is None
    assert cases["b"].find("skipped") is not None and cases["c"].find("skipped") is not None
    assert blocked_as_errors(path) == 0  # once only


# -- the store's own checks -------------------------------------------------------------------
@pytest.mark.parametrize("where", ["/sys/jaato-results.jsonl", "/proc/jaato-results.jsonl"])
def test_a_store_path_the_kernel_refuses_is_one_line(where):
    store = Store(Path(where))
    with pytest.raises(StoreError, match=f"^{re.escape(where)}: cannot be used as the store: "):
        store.claim()
    assert not store.claimed


def test_a_run_that_never_claimed_the_store_reads_it_back_without_alarm(tmp_path):
    # --resume with nothing left to run: the store is never claimed, nothing is written
    path = write_store(tmp_path / "s.jsonl", [arm_record("t", "echo", 0, "PASS")])
    store = Store(path, append=True)
    with store.read_back() as (changed, readable):
        assert changed is None and readable is not None
    store.claim()  # claimed, it is held to what it found
    path.write_text(path.read_text() + path.read_text())
    with store.read_back() as (changed, _):
        assert "somebody else wrote into it" in changed
    store.close()


# -- the live line's pieces -------------------------------------------------------------------
def test_the_live_state_crosses_processes_as_a_small_regular_file(tmp_path):
    publish = liveness.publish(tmp_path)
    doing = Doing("write-file@echo#0", 1000.0, "turn 3, tool writeNewFile", 1, "rate_limit: 429")
    publish(doing)
    assert liveness.read_published(tmp_path / liveness.STATE_FILE) == doing
    assert doing.said(now=1042.4) == ("write-file@echo#0: 42 s, turn 3, tool writeNewFile; "
                                      "1 retry (rate_limit: 429)")
    publish(None)
    assert not (tmp_path / liveness.STATE_FILE).exists()
    # a link or a FIFO in its place is never followed or opened for reading
    (tmp_path / "elsewhere.json").write_text(json.dumps(doing.to_dict()))
    (tmp_path / liveness.STATE_FILE).symlink_to(tmp_path / "elsewhere.json")
    assert liveness.read_published(tmp_path / liveness.STATE_FILE) is None
    os.unlink(tmp_path / liveness.STATE_FILE)
    os.mkfifo(tmp_path / liveness.STATE_FILE)
    assert liveness.read_published(tmp_path / liveness.STATE_FILE) is None


def test_an_arm_says_its_phases_and_a_judges_turns_are_grading():
    from pytest_jaato_eval.activity import Activity
    activity, heard = Activity(), []
    activity.listen(heard.append)
    activity.phase("turn 1")          # no arm runs: nothing to say
    assert heard == [] and activity.now is None
    activity.begin("t@echo#0")
    activity.phase("opening the session")
    activity.retry("rate_limit: 429 Too Many Requests")
    activity.stage("grading")
    activity.phase("turn 1")          # a judge's session, inside grading
    now = activity.now
    assert (now.stage, now.phase, now.retries) == ("grading", "turn 1", 1)
    assert now.said(now=now.started + 3) == ("t@echo#0: 3 s, grading, turn 1; 1 retry "
                                             "(rate_limit: 429 Too Many Requests)")
    activity.end()
    assert activity.now is None and heard[-1] is None and len(heard) == 6


def test_the_live_line_names_the_grader_at_work(monkeypatch):
    """While grading, the live line says which grader runs (`grading script:…`), not only
    `grading`; a grader's own phases (a judge's turns) follow its id."""
    from types import SimpleNamespace

    from pytest_jaato_eval import graders
    from pytest_jaato_eval.activity import ACTIVITY
    from pytest_jaato_eval.verdict import Verdict
    seen = []

    def grade(spec, ctx):
        ACTIVITY.phase("turn 1")
        seen.append(ACTIVITY.now.said(now=ACTIVITY.now.started))
        return Verdict.passed(spec.id, "c")

    monkeypatch.setattr(graders, "grade", grade)
    ctx = SimpleNamespace(verdicts=[], for_grader=lambda index: None)
    specs = (SimpleNamespace(id="script:check.py", kind="script"),
             SimpleNamespace(id="judge:critic", kind="judge"))
    ACTIVITY.begin("t@echo#0")
    try:
        graders.run_graders(specs, ctx)
    finally:
        ACTIVITY.end()
    assert seen == ["t@echo#0: 0 s, grading script:check.py, turn 1",
                    "t@echo#0: 0 s, grading judge:critic, turn 1"]


class _Terminal:
    """pytest's terminal writer as far as the live line reads it."""
    hasmarkup = True
    fullwidth = 80

    def __init__(self, line: str):
        self._current_line = line

    @property
    def width_of_current_line(self) -> int:
        return len(self._current_line)


def test_the_live_line_is_drawn_under_pytests_line_and_cleared_before_it_writes(tmp_path):
    live = liveness.Liveness(None, 30.0, lambda: None)
    live._tw = _Terminal("tasks/write-file/task.yaml ")
    read, write = os.pipe()
    live._fd = write
    live._draw([Doing("write-file@echo#0", 0.0, "turn 2")])
    with live.quiet():  # what pytest's own writes are wrapped in
        pass
    live._draw([])      # nothing running: nothing drawn
    os.close(write)
    live._fd = None
    out = os.read(read, 4096).decode()
    os.close(read)
    drawn, cleared = out.split("\x1b[1B")
    # a line of its own under pytest's, then the cursor back where pytest left it (column 28)
    assert drawn.startswith("\n\x1b[2K\x1b[2mjaato-eval: write-file@echo#0: ")
    assert drawn.endswith("s, turn 2\x1b[0m\x1b[1A\x1b[28G")
    assert cleared == "\r\x1b[2K\x1b[1A\x1b[28G"  # gone, and the cursor back again


def test_an_arm_whose_line_is_written_is_never_said_to_be_still_running(tmp_path):
    """The heartbeat looks at what runs, then waits for pytest's writes to end: an arm whose
    outcome line pytest wrote in between is over (its state lingers until its teardown), and
    no `still running` line follows its PASS."""
    from types import SimpleNamespace

    from pytest_jaato_eval.pytest_layer.outcome import RECORD_ATTR
    live = liveness.Liveness(SimpleNamespace(get_verbosity=lambda: 0), 1.0, lambda: None)
    live._tw = _Terminal("tasks/slow/task.yaml ")
    read, write = os.pipe()
    live._fd = write
    looked = [Doing("slow@echo#0", 0.0, "grading"), Doing("other@echo#0", 0.0, "turn 1")]
    again = Doing("slow@echo#0", time.time() + 1, "setting up")  # a rerun, begun after its line
    report = SimpleNamespace(user_properties=[],
                             **{RECORD_ATTR: arm_record("slow", "echo", 0, "PASS").to_dict()})
    hook = live.pytest_runtest_logreport(report)  # pytest writes the arm's line in here
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(None)
    live._tick(looked)
    first = os.read(read, 4096).decode()
    assert "still running: other@echo#0" in first and "slow@echo#0" not in first, first
    live._tty = True  # the live line: drawn at each look
    live._tick([again])
    os.close(write)
    live._fd = None
    out = os.read(read, 4096).decode()
    os.close(read)
    assert "jaato-eval: slow@echo#0" in out and "setting up" in out, out


def test_the_plugins_fixtures_are_the_ones_the_docs_name(pytester):
    result = pytester.runpytest_inprocess("--fixtures", "-p", "no:cacheprovider")
    ours = re.findall(r"^(\w+)(?: \[session scope\])? -- .*pytest_jaato_eval",
                      result.stdout.str(), re.M)
    text = (DOCS / "tasks.md").read_text()
    named = re.search(r"`pytest --fixtures` lists (.*?) with their", text, re.S).group(1)
    assert sorted(ours) == sorted(re.findall(r"`(\w+)`", named)), (ours, named)


def test_the_arm_line_in_the_docs_is_what_the_program_prints():
    from pytest_jaato_eval.pytest_layer.progress import arm_line
    record = arm_record("write-file", "echo", 1, "FAIL", cost=0.01, arm_seconds=12.4,
                        judge_usage={"cost_usd": 0.002})
    shown = re.search(r"in place of its dot:\n  `(.*?)`", (DOCS / "running.md").read_text())
    assert shown.group(1) == arm_line(record, 80)
    # unknown cost: said by nothing, never `—` or `$0`
    blocked = arm_record("t", "echo", 0, "BLOCKED", cost=None, arm_seconds=0.04,
                         reason="daemon gone")
    assert arm_line(blocked, 80, why=blocked.blocked_why) == \
        "  BLOCKED t@echo#0  arm 0.0 s · daemon gone"


def test_a_fail_whose_judge_was_gated_off_is_neither_blocked_nor_judged():
    """A FAIL arm (its script FAILed, its judge gated off): no `jaato_blocked_reason` in
    JUnit (the store has none), and no judge caveat (the judge never graded it)."""
    from pytest_jaato_eval.engine.agent_run import AgentRun
    from pytest_jaato_eval.pytest_layer.outcome import junit_properties
    from pytest_jaato_eval.results.record import build_record
    from pytest_jaato_eval.verdict import Verdict

    def record(judge: Verdict):
        return build_record(
            arm_id="t@echo#0", task_id="t", profile_set="echo", repeat=0, state="FAIL",
            blocked_reason=None, run=AgentRun(), notes=[], completion_nudges=None, extra={},
            verdicts=[Verdict.failed("script:check", "c", "exit 1", []), judge])
    gated = record(Verdict.blocked("judge:quality", "c", "gate script:check=FAIL"))
    assert gated.blocked_reason is None and gated.caveats == []
    names = dict(junit_properties(gated))
    assert "jaato_blocked_reason" not in names and names["jaato_state"] == "FAIL", names
    judged = record(Verdict.failed("judge:quality", "c", "score 0.2", []))
    assert judged.caveats and judged.caveats[0].startswith("Graded by a judge")
    blocked = arm_record(state="BLOCKED", reason="daemon gone")
    assert dict(junit_properties(blocked))["jaato_blocked_reason"] == "daemon gone"
