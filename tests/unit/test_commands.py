"""`python -m pytest_jaato_eval report|compare|validate` on real store files.

Exit codes: 0 ok, 1 problems / a regressed profile set, 2 unusable input (one line, no
traceback), 3 (compare) a regressed group while no profile set regressed.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from document_checks import code_blocks
from pytest_jaato_eval.cli import main
from pytest_jaato_eval.results.record import RECORD_KEYS
from store_lines import arm, cli_in_process, run_cli, write

DATA = Path(__file__).parents[1] / "data"
REFERENCE_STORE = DATA / "jaato-eval-0.3.4.jsonl"  # the record shape jaato-eval 0.3.4 writes


BASE = [arm("write-file", "echo", 0, "PASS"), arm("write-file", "echo", 1, "PASS"),
        arm("config", "echo", 0, "FAIL"), arm("config", "echo", 1, "BLOCKED")]


# -- report -------------------------------------------------------------------------------
def test_report_reads_a_jaato_eval_034_store(tmp_path):
    # The fixture has exactly the R2 keys, no run_id / task_hash / harness: the reference's shape.
    first = json.loads(REFERENCE_STORE.read_text().splitlines()[0])
    assert tuple(first) == RECORD_KEYS and "harness" not in first["provenance"]
    html = tmp_path / "out" / "report.html"
    result = run_cli("report", REFERENCE_STORE, "--html", html)
    assert result.returncode == 1, result.stderr  # a FAIL in it: the verdict vocabulary
    out = result.stdout
    assert "5 arms" in out
    assert "(1×) ProviderError: 429 Too Many Requests" in out
    write_file = next(line for line in out.splitlines() if line.startswith("write-file"))
    assert "50%" in write_file and "9–91%" in write_file and "33%" in write_file
    text = html.read_text()
    assert "write-file@default#1" in text and "sess-77c1" in text
    assert "$2.0300 / pool $6.0000 (66% consumed on arrival)" in text  # P4 budget column
    assert "$0.0123 / own $0.2500" in text


def test_report_of_our_own_store(tmp_path, capsys):
    store = write(tmp_path / "s.jsonl", BASE)
    assert main(["report", str(store), "--k", "2"]) == 1  # BASE holds a FAIL
    out = capsys.readouterr().out
    assert "pass@2" in out and "config" in out and "write-file" in out


def test_report_pdf_without_weasyprint_names_the_install_line(tmp_path):
    # weasyprint made unimportable in a fresh interpreter: what a machine without it sees.
    store = write(tmp_path / "s.jsonl", BASE)
    argv = ["report", str(store), "--pdf", str(tmp_path / "r.pdf")]
    code = ("import sys; sys.modules['weasyprint'] = None; "
            "from pytest_jaato_eval.cli import main; "
            f"raise SystemExit(main({argv!r}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert "pip install 'pytest-jaato-eval[pdf]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "r.pdf").exists()


# -- compare ------------------------------------------------------------------------------
def test_compare_identical_stores_exit_0(tmp_path):
    a = write(tmp_path / "a.jsonl", BASE)
    b = write(tmp_path / "b.jsonl", BASE)
    result = run_cli("compare", a, b)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no group regressed (2 groups in both stores compared)" in result.stdout
    assert "warning" not in result.stdout


def test_compare_one_flipped_arm_is_listed_but_is_no_regression(tmp_path):
    # A single flip is what noise does: listed by name, never the gate.
    a = write(tmp_path / "a.jsonl", BASE)
    new = [dict(r) for r in BASE]
    new[1] = arm("write-file", "echo", 1, "FAIL")
    b = write(tmp_path / "b.jsonl", new)
    result = run_cli("compare", a, b)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "changed write-file @ echo: PASS 2 of 2 → 1 of 2" in result.stdout
    assert "regressed" not in result.stdout.replace("no group regressed", "").replace(
        "no profile set regressed", "")
    row = next(line for line in result.stdout.splitlines() if line.startswith("write-file @ echo"))
    assert "100% (34–100%) n=2" in row and "50% (9–91%) n=2" in row and "-50 pts" in row
    assert "REGRESSED" not in row
    # The profile set, paired over both tasks: -25 points, an interval across 0.
    assert "echo: new − base" in result.stdout
    assert "  -25 pts (95% CI -100 to +100 pts), p=0.50, over 2 tasks" in result.stdout


def test_compare_between_independent_runs_counts_per_item_not_repeat_by_index(tmp_path, capsys):
    # Two runs of one item: repeat 0 of one has nothing to do with repeat 0 of the other, so
    # "t@s#0 PASS→FAIL" would be noise. One PASS of two each time: nothing changed.
    base = [arm("t", "s", 0, "PASS"), arm("t", "s", 1, "FAIL")]
    new = [arm("t", "s", 0, "FAIL"), arm("t", "s", 1, "PASS")]
    assert main(["compare", str(write(tmp_path / "a", base)), str(write(tmp_path / "b", new))]) == 0
    out = capsys.readouterr().out
    assert "PASS→FAIL" not in out and "FAIL→PASS" not in out and "changed t @ s" not in out
    assert "grader by grader" not in out


def test_compare_a_fix_is_not_a_regression(tmp_path, capsys):
    base = [arm("t", "s", 0, "FAIL")]
    new = [arm("t", "s", 0, "PASS")]
    assert main(["compare", str(write(tmp_path / "a", base)), str(write(tmp_path / "b", new))]) == 0
    assert "changed t @ s: PASS 0 of 1 → 1 of 1" in capsys.readouterr().out


def test_compare_blocked_changes_are_shown_not_counted(tmp_path, capsys):
    base = [arm("t", "s", 0, "PASS"), arm("t", "s", 1, "PASS")]
    new = [arm("t", "s", 0, "PASS"), arm("t", "s", 1, "BLOCKED", reason="pool exhausted")]
    assert main(["compare", str(write(tmp_path / "a", base)), str(write(tmp_path / "b", new))]) == 0
    assert "blocked change t@s#1: PASS → BLOCKED (pool exhausted)" in capsys.readouterr().out


def test_compare_a_drop_the_intervals_cannot_explain_regresses(tmp_path, capsys):
    # No arm in common (other repeats), so no flips: the paired interval decides. One task of
    # one item: its repeats are the units, Newcombe's interval over 10 arms a side.
    base = [arm("t", "s", r, "PASS") for r in range(10)]
    new = [arm("t", "s", r, "FAIL") for r in range(10, 20)]
    assert main(["compare", str(write(tmp_path / "a", base)), str(write(tmp_path / "b", new))]) == 1
    out = capsys.readouterr().out
    assert ("regressed: profile set s: -100 pts, its 95% CI (-100 to -61 pts) lies below 0"
            in out)
    assert "regressed: 1 group: t @ s (its interval, Holm over 1 group, lies below 0)" in out


def _stores(tmp_path, dropped: str, tasks: str = "abcdef", repeats: int = 10):
    """Two stores of the same tasks, every arm passing, but `dropped`'s arms fail in NEW."""
    base = [arm(t, "echo", r, "PASS") for t in tasks for r in range(repeats)]
    new = [arm(t, "echo", r, "FAIL" if t in dropped else "PASS")
           for t in tasks for r in range(repeats)]
    return str(write(tmp_path / "a", base)), str(write(tmp_path / "b", new))


def test_compare_exit_1_when_a_profile_set_regressed_naming_the_rule(tmp_path, capsys):
    assert main(["compare", *_stores(tmp_path, dropped="abcde")]) == 1
    out = capsys.readouterr().out
    assert "echo: new − base\n  -83 pts (95% CI -100 to -40 pts), p=0.004, over 6 tasks" in out
    assert ("regressed: profile set echo: -83 pts, its 95% CI (-100 to -40 pts) lies below 0"
            in out)


def test_compare_exit_3_when_only_a_task_regressed(tmp_path, capsys):
    # One task of six goes 10/10 -> 0/10: the set's interval still crosses 0, the task's
    # (over its repeats, Holm over the six groups) lies below it.
    assert main(["compare", *_stores(tmp_path, dropped="a")]) == 3
    out = capsys.readouterr().out
    assert "  -17 pts (95% CI -60 to +26 pts), p=0.36, over 6 tasks" in out
    assert "CI of a group: two-sided, at its step of Holm over 6 groups (99.17% to 95%)" in out
    row = next(line for line in out.splitlines() if line.startswith("a @ echo"))
    assert "-100 pts (-100 to -42)" in row and row.endswith("REGRESSED")
    assert "regressed: 1 group: a @ echo (its interval, Holm over 6 groups, lies below 0)" in out
    assert "regressed: profile set" not in out
    # The spread is all between tasks here, as far as these data can tell: "may not".
    assert "to detect 10 pts at 80% power: 133 tasks (now 6); more repeats alone may not" in out
    # After Holm's first step the levels widen: the five unchanged groups (equal p-values,
    # so one step, the strictest of theirs) are at 99%, not Bonferroni's 99.17%.
    row = next(line for line in out.splitlines() if line.startswith("b @ echo"))
    assert "+0 pts (-40 to +40)" in row


def test_compare_margin_tolerates_a_drop_and_says_so(tmp_path, capsys):
    stores = _stores(tmp_path, dropped="abcde")
    assert main(["compare", *stores, "--margin", "30"]) == 1   # the interval ends at -40
    assert "lies below -30 pts (the margin)" in capsys.readouterr().out
    assert main(["compare", *stores, "--margin", "45"]) == 0
    assert ("no profile set regressed (1 set): no interval lies below -45 pts (the margin)"
            in capsys.readouterr().out)


@pytest.mark.parametrize("option", [["--margin", "-1"], ["--margin", "x"], ["--detect", "0"],
                                    ["--detect", "101"]])
def test_compare_margin_and_detect_take_percentage_points(tmp_path, option):
    result = run_cli("compare", *_stores(tmp_path, dropped=""), *option)
    assert result.returncode == 2 and "percentage points" in result.stderr
    assert "Traceback" not in result.stderr


def test_detect_sets_the_difference_the_runs_are_planned_for(tmp_path, capsys):
    records = [arm(t, ps, r, "PASS" if (ps == "b" or r % 2) else "FAIL")
               for t in ("t1", "t2", "t3") for ps in ("a", "b") for r in range(2)]
    records[0] = arm("t1", "a", 0, "PASS")   # the tasks differ: a spread to plan from
    store = str(write(tmp_path / "s.jsonl", records))
    assert main(["report", store, "--detect", "5"]) == 1
    out = capsys.readouterr().out
    assert "  to detect 5 pts at 80% power: 264 tasks (now 3) or 1,279 repeats (now 2)" in out


def test_compare_warns_when_pins_differ(tmp_path, capsys):
    base = [arm("t", "s", 0, "PASS")]
    new = [arm("t", "s", 0, "PASS", sdk="0.29.9", task_hash="h2", run="run2")]
    assert main(["compare", str(write(tmp_path / "a", base)), str(write(tmp_path / "b", new))]) == 0
    out = capsys.readouterr().out
    assert "warning: pins differ: jaato_sdk_version differs: 0.29.4 (base) vs 0.29.9 (new)" in out
    assert "warning: pins differ: task t changed between the runs" in out


def test_compare_names_what_changed_and_a_profile_change_is_no_other_task(tmp_path, capsys):
    """A task changed between the runs: the arms' sides say which part. A profile changed
    alone (a model swapped in one set) is the comparison itself, said in a note; a prompt's
    change is a different task, said in a warning naming the part."""
    agent = dict.fromkeys(("fixture", "prompt", "profile", "config"), "0" * 16)
    graders = dict.fromkeys(("graders", "files", "sample"), "1" * 16)

    def line(task, ps, hashed, **changed):
        record = arm(task, ps, 0, "PASS", task_hash=hashed)
        record.update(agent_side={**agent, **changed}, grader_side=graders)
        return record
    base = [line("t1", "fast", "h1"), line("t1", "slow", "h1"), line("t2", "fast", "h1")]
    new = [line("t1", "fast", "h2", profile="2" * 16), line("t1", "slow", "h2"),
           line("t2", "fast", "h2", prompt="3" * 16)]
    assert main(["compare", str(write(tmp_path / "a", base)), str(write(tmp_path / "b", new))]) == 0
    out = capsys.readouterr().out
    assert "task t1" not in "".join(x for x in out.splitlines() if x.startswith("warning")), out
    assert ("note: task t1 changed between the runs only in the profile (profile set fast): "
            "the same task, run on another profile") in out
    assert "warning: pins differ: task t2 changed between the runs (the prompt changed; " in out
    assert "its arms measure different tasks" in out


def test_compare_our_store_against_the_reference_warns_about_unrecorded_pins(tmp_path, capsys):
    ours = [arm("write-file", "default", r, s) for r, s in enumerate(["PASS", "FAIL", "BLOCKED"])]
    assert main(["compare", str(REFERENCE_STORE), str(write(tmp_path / "b", ours))]) == 0
    out = capsys.readouterr().out
    assert "harness recorded in only one store" in out
    assert "summarise @ openrouter_gemini25flash is only in the base store" in out


# -- validate -----------------------------------------------------------------------------
def test_validate_a_clean_store(tmp_path):
    result = run_cli("validate", write(tmp_path / "s.jsonl", BASE))
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip().endswith("4 records, 0 problems, 0 warnings: ok")
    assert run_cli("validate", REFERENCE_STORE).returncode == 0


def test_validate_finds_every_problem(tmp_path):
    missing = arm("t", "s", 0, "PASS")
    del missing["session_id"], missing["provenance"]
    bad_state = arm("t", "s", 1, "PASS")
    bad_state["state"] = "SKIPPED"
    no_reason = arm("t", "s", 2, "BLOCKED")
    no_reason["blocked_reason"], no_reason["verdicts"] = None, []
    old_version = arm("t", "s", 3, "PASS")
    old_version["results_version"] = "0"
    twice = arm("t", "s", 4, "PASS")
    lying = arm("t", "s", 5, "PASS")
    lying["verdicts"][0]["state"] = "FAIL"
    store = write(tmp_path / "s.jsonl",
                  [missing, bad_state, no_reason, old_version, twice, twice, lying],
                  tail='{"results_version": "1", "arm_id": "t@s#9", "sta')  # cut mid-write
    result = run_cli("validate", store)
    assert result.returncode == 1
    out = result.stdout
    assert f"{store}:1: t@s#0: missing keys: session_id, provenance" in out
    assert f"{store}:2: t@s#1: state 'SKIPPED': expected one of PASS, FAIL, BLOCKED" in out
    assert f"{store}:3: t@s#2: BLOCKED without a reason: no blocked_reason and no BLOCKED verdict" in out
    assert f"{store}:4: t@s#3: results_version '0': this reader knows '1'" in out
    assert f"{store}: t@s#4: written more than once by one run (lines 5, 6)" in out
    assert f"{store}:7: t@s#5: PASS, but not every grader verdict is PASS" in out
    assert f"{store}:8: partial last line" in out
    assert "Traceback" not in out + result.stderr


def test_validate_duplicates_across_runs_are_a_warning(tmp_path, capsys):
    store = write(tmp_path / "s.jsonl", [arm("t", "s", 0, "BLOCKED", run="r1"),
                                         arm("t", "s", 0, "PASS", run="r2")])
    assert main(["validate", str(store)]) == 0
    assert "appears 2 times (lines 1, 2); the last counts" in capsys.readouterr().out


def test_validate_garbage_in_the_middle_is_a_problem(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(arm("t", "s", 0, "PASS")) + "\nnot json at all\n[1, 2]\n"
                    + json.dumps(arm("t", "s", 1, "PASS")) + "\n")
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:2: not JSON" in out and f"{path}:3: not a result record" in out


# -- unusable input: exit 2, one line naming the file --------------------------------------
@pytest.mark.parametrize("command", ["report", "validate", "compare"])
@pytest.mark.parametrize("case", ["missing", "directory", "empty", "binary", "not records"])
def test_unusable_input_is_one_line_exit_2(tmp_path, capsys, command, case):
    path = tmp_path / "store.jsonl"
    if case == "directory":
        path.mkdir()
    elif case == "empty":
        path.write_text("")
    elif case == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif case == "not records":
        path.write_text("id: my-task\nenvironment: {}\n")
    args = [str(path), str(path)] if command == "compare" else [str(path)]
    assert main([command, *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), captured.err
    assert captured.out == ""


def test_a_missing_store_through_the_entry_point_is_one_line(tmp_path):
    result = run_cli("compare", REFERENCE_STORE, tmp_path / "nope.jsonl")
    assert result.returncode == 2
    assert result.stderr == f"error: {tmp_path / 'nope.jsonl'}: no such file\n"


def test_usage_errors_exit_2():
    result = run_cli("frobnicate")
    assert result.returncode == 2 and "invalid choice" in result.stderr
    assert run_cli("report", REFERENCE_STORE, "--k", "0").returncode == 2


def test_an_unwritable_html_target_is_one_line(tmp_path):
    target = tmp_path / "file"
    target.write_text("")
    result = run_cli("report", REFERENCE_STORE, "--html", target / "sub" / "r.html")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["report", "compare", "validate"])
def test_a_hostile_store_sends_no_control_character_to_the_terminal(tmp_path, command):
    """Arm ids and reasons come from whoever wrote the store: an ESC in them must reach
    the terminal as the text `\\x1b`, never as an escape sequence."""
    evil = "write-file\x1b]0;pwned\x07\x1b[2J"
    base = [arm(evil, "echo", 0, "PASS"), arm(evil, "echo", 1, "PASS")]
    new = [arm(evil, "echo", 0, "FAIL"),
           arm(evil, "echo", 1, "BLOCKED", reason="429\x1b[31m red")]
    a, b = write(tmp_path / "a.jsonl", base), write(tmp_path / "b.jsonl", new)
    twice = write(tmp_path / "twice.jsonl", new + new[:1])  # validate names a repeated arm
    args = {"report": (b,), "compare": (a, b), "validate": (twice,)}[command]
    result = run_cli(command, *args)
    out = result.stdout + result.stderr
    assert "\x1b" not in out and "\x07" not in out
    assert "write-file\\x1b]0;pwned\\x07" in out  # shown, not swallowed


@pytest.mark.parametrize("command", ["report", "report-html", "compare", "validate"])
def test_a_store_nested_to_overflow_the_stack_is_read_without_a_traceback(tmp_path, command):
    """Lines built to exhaust a parser's recursion (200,000 levels: no parser takes it) or
    the reader's own (950 levels under a known key and an unknown one): the first is not
    JSON, the second a record whose too-deep part is cut; never a traceback."""
    good = json.dumps(arm("t", "s", 0, "PASS"))
    huge = ('{"arm_id": "t@s#1", "task_id": "t", "state": "PASS", "x": '
            + "[" * 200_000 + "]" * 200_000 + "}")
    deep = ('{"arm_id": "t@s#2", "task_id": "t", "profile_set": "s", "state": "FAIL", "x": '
            + "[" * 950 + "]" * 950 + ', "usage": ' + '{"a": ' * 950 + "1" + "}" * 950 + "}")
    store = tmp_path / "deep.jsonl"
    store.write_text("\n".join([good, huge, deep]) + "\n")
    args = {"report": ("report", store), "report-html": ("report", store, "--html",
                                                         tmp_path / "r.html"),
            "compare": ("compare", store, store), "validate": ("validate", store)}[command]
    result = run_cli(*args)
    assert "Traceback" not in result.stderr and result.returncode in (0, 1, 2), result.stderr
    if command == "validate":
        assert f"{store}:2: not JSON" in result.stdout + result.stderr
        assert "nested deeper than 64 levels; cut" in result.stdout + result.stderr
    if command == "report-html":
        assert (tmp_path / "r.html").exists()


# -- report's exit status: the verdict vocabulary --------------------------------------------
@pytest.mark.parametrize("states, code", [(["PASS", "PASS"], 0), (["PASS", "FAIL"], 1),
                                          (["PASS", "BLOCKED"], 2), (["FAIL", "BLOCKED"], 1),
                                          (["BLOCKED"], 2), (["PASS", "SKIPPED"], 2)])
def test_report_exits_with_the_verdict_vocabulary(tmp_path, capsys, states, code):
    records = [arm("t", "s", i, "BLOCKED" if st == "SKIPPED" else st) for i, st in enumerate(states)]
    for r, st in zip(records, states):
        r["state"] = st  # an unknown state is never a pass
    store = write(tmp_path / "s.jsonl", records)
    assert main(["report", str(store)]) == code
    assert main(["report", str(store), "--exit-zero"]) == 0
    capsys.readouterr()


def test_report_exit_zero_still_refuses_unusable_input(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.jsonl"), "--exit-zero"]) == 2


def test_report_help_states_the_exit_codes():
    result = run_cli("report", "--help")
    assert "--exit-zero" in result.stdout and "1 an arm FAILED" in result.stdout


@pytest.mark.parametrize("option", ["--html", "--pdf"])
def test_report_refuses_to_write_over_its_store(tmp_path, capsys, option):
    store = write(tmp_path / "s.jsonl", BASE)
    before = store.read_bytes()
    assert main(["report", str(store), option, str(tmp_path / "." / "s.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is the store" in err
    assert store.read_bytes() == before


def test_compare_with_no_group_in_both_says_nothing_was_compared(tmp_path, capsys):
    a = write(tmp_path / "a", [arm("alpha", "s", 0, "PASS"), arm("beta", "s", 0, "PASS")])
    b = write(tmp_path / "b", [arm("gamma", "s", 0, "FAIL")])
    assert main(["compare", str(a), str(b)]) == 2
    out = capsys.readouterr().out
    assert "no group regressed" not in out
    assert "nothing compared: no group (task @ profile set) is in both stores (3 groups in only one)" in out


def test_compare_counts_only_groups_in_both(tmp_path, capsys):
    a = write(tmp_path / "a", [arm("alpha", "s", 0, "PASS"), arm("beta", "s", 0, "PASS")])
    b = write(tmp_path / "b", [arm("alpha", "s", 0, "PASS")])
    assert main(["compare", str(a), str(b)]) == 0
    assert ("no group regressed (1 group in both stores compared; 1 group in only one store)"
            in capsys.readouterr().out)


def test_compare_shows_det_with_how_many_answered(tmp_path, capsys):
    recs = [arm("t", "s", i, "PASS") for i in range(3)]
    recs[2]["payload_hash"] = None
    a = write(tmp_path / "a", recs)
    assert main(["compare", str(a), str(a)]) == 0
    assert "det 67% (2 of 3 answered)" in capsys.readouterr().out  # jaato-eval's number


def test_one_arm_one_problem_are_singular(tmp_path, capsys):
    store = write(tmp_path / "s", [arm("t", "s", 0, "PASS")])
    main(["report", str(store)])
    assert f"{store}: 1 arm\n" in capsys.readouterr().out
    bad = arm("t", "s", 0, "PASS")
    bad["state"] = "NOPE"
    main(["validate", str(write(tmp_path / "v", [bad]))])
    assert "1 record, 1 problem, 0 warnings" in capsys.readouterr().out


HOSTILE = [("run_id", ["a", "b"]), ("usage", {"cost_usd": 10 ** 400, "spend_total_tokens": 1}),
           ("usage", {"cost_usd": float("inf")}), ("repeat", "three"), ("task_id", 7),
           ("verdicts", [1, {"state": None}]), ("caveats", "x"), ("budget_ceiling", {"usd": -1e999}),
           ("completion_nudges", 10 ** 400), ("provenance", ["not", "a", "mapping"]),
           ("session_ids", {"a": 1}), ("profile_set", {"x": 1}), ("state", ["PASS"]),
           ("payload_hash", 5), ("duration_seconds", float("nan"))]


@pytest.mark.parametrize("key, value", HOSTILE, ids=[f"{k}-{i}" for i, (k, _) in enumerate(HOSTILE)])
def test_hostile_but_valid_json_is_never_a_traceback(tmp_path, key, value):
    """Valid JSON of the wrong shape anywhere: every command answers in lines, and
    validate names the key."""
    bad = arm("t", "s", 1, "FAIL")
    bad[key] = value
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(arm("t", "s", 0, "PASS")) + "\n" + json.dumps(bad) + "\n")
    for args in (["report", path, "--html", tmp_path / "r.html"], ["compare", path, path],
                 ["validate", path]):
        result = cli_in_process(*args)
        assert "Traceback" not in result.stderr + result.stdout, (args, result.stderr)
        assert result.returncode in (0, 1, 2)
    validate = cli_in_process("validate", path)
    assert validate.returncode == 1 and f"{path}:2: t@s#1: " in validate.stdout
    if key not in ("state", "verdicts"):
        assert f": {key}" in validate.stdout


# -- a store jaato-eval 0.3.4 wrote --------------------------------------------------------------
def reference_arm(task, repeat, state, *, grader_reason=None):
    """A record as jaato-eval writes it run without --profile-set: `@default`, profile_set
    null, and a grader's BLOCKED verdict with the arm's blocked_reason left unset."""
    record = arm(task, "default", repeat, state, run=None, task_hash=None)
    record["profile_set"] = None
    if grader_reason:
        record["blocked_reason"] = None
        record["verdicts"][0].update(state="BLOCKED", blocked_reason=grader_reason)
    return record


def test_a_reference_store_validates_and_reports_its_graders_blocked_reasons(tmp_path, capsys):
    store = write(tmp_path / "ref.jsonl", [
        reference_arm("t", 0, "PASS"),
        reference_arm("t", 1, "BLOCKED", grader_reason="arm produced no signal_completion payload")])
    assert main(["validate", str(store)]) == 0
    capsys.readouterr()
    assert main(["report", str(store)]) == 2
    out = capsys.readouterr().out
    assert "script:grep -qx READY answer.txt: arm produced no signal_completion payload" in out
    assert "state 'BLOCKED'" not in out


def test_an_arm_written_twice_counts_once_and_report_says_so(tmp_path, capsys):
    """R3: jaato-eval's run appends to its --out; the later record of an arm is the one
    counted, by report and validate alike, and both say what they counted."""
    store = write(tmp_path / "ref.jsonl", [reference_arm("t", 0, "FAIL"),
                                           reference_arm("t", 0, "PASS")])
    assert main(["report", str(store)]) == 0
    assert "1 arm (2 records: 1 superseded by a later record of the same arm" in (
        capsys.readouterr().out)
    assert main(["validate", str(store)]) == 0
    assert "2 records of 1 arm (the last record of an arm is the one counted)" in (
        capsys.readouterr().out)


def test_compare_pairs_the_references_default_set_with_ours(tmp_path, capsys):
    ref = write(tmp_path / "ref.jsonl", [reference_arm("t", 0, "PASS"), reference_arm("u", 0, "PASS")])
    ours = write(tmp_path / "ours.jsonl", [arm("t", "echo", 0, "FAIL"), arm("u", "echo", 0, "PASS")])
    assert main(["compare", str(ref), str(ours)]) == 0  # one flip is no regression
    out = capsys.readouterr().out
    assert "note: t @ default is paired with t @ echo" in out
    assert "changed t @ echo: PASS 1 of 1 → 0 of 1" in out
    # One repeat of one item per task: the exact sign test, named (1 down, 0 up: p = 1).
    assert ("echo: new − base\n  -50 pts (95% CI -100 to +100 pts), p=1.00, over 2 tasks\n"
            "  p by exact sign test, which decides; CI by paired t: se 50.0 pts, 1 df\n") in out


def test_compare_refuses_stores_that_pair_almost_nothing(tmp_path, capsys):
    base = write(tmp_path / "a.jsonl", [arm(t, "echo", 0, "PASS") for t in "abcde"])
    new = write(tmp_path / "b.jsonl", [arm("a", "echo", 0, "PASS")]
                + [arm(t, "other", 0, "PASS") for t in "bcde"])
    assert main(["compare", str(base), str(new)]) == 2
    assert "refused: only 1 of the 5 groups of the smaller store are in both" in (
        capsys.readouterr().out)


def test_merge_takes_the_references_default_arm_as_ours(tmp_path, capsys):
    ref = write(tmp_path / "ref.jsonl", [reference_arm("t", 0, "FAIL")])
    ours = write(tmp_path / "ours.jsonl", [arm("t", "echo", 0, "PASS")])
    out = tmp_path / "merged.jsonl"
    assert main(["merge", str(out), str(ref), str(ours)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["arm_id"] for r in lines] == ["t@echo#0"]


def test_the_compare_example_in_the_docs_is_what_compare_prints(tmp_path, capsys):
    base = ([arm("write-file", "echo", r, "PASS") for r in range(3)]
            + [arm("config", "echo", r, "PASS" if r else "FAIL") for r in range(3)]
            + [arm("lint", "echo", r, "PASS") for r in range(3)])
    new = ([arm("write-file", "echo", r, "FAIL" if r == 1 else "PASS") for r in range(3)]
           + [arm("config", "echo", r, "PASS") for r in range(3)]
           + [arm("lint", "echo", r, "PASS") for r in range(3)])
    assert main(["compare", str(write(tmp_path / "base.jsonl", base)),
                 str(write(tmp_path / "new.jsonl", new))]) == 0
    printed = capsys.readouterr().out.splitlines()[2:]   # after the base: / new: lines
    (shown,) = [text for info, text in code_blocks(Path(__file__).parents[2] / "docs" /
                                                   "reports.md")
                if not info and text.startswith("group ")]
    assert shown.splitlines() == printed


@pytest.mark.parametrize("form", ["json", "markdown"])
def test_compare_as_a_document_gives_each_decision_and_its_family(tmp_path, capsys, form):
    assert main(["compare", *_stores(tmp_path, dropped="abcde"), "--format", form]) == 1
    out = capsys.readouterr().out
    if form == "markdown":
        assert "Holm's step-down over 1 profile set, 5% two-sided for the family." in out
        assert "| echo | -83 | -100 to -40 | 95% | 16.7 | 5 | paired t | 0.0041 | True |" in out
        assert "| f @ echo | +0 | -28 to +28 | 95% | — | — | Newcombe score | 1 | False |" in out
        return
    doc = json.loads(out)
    assert doc["exit_status"] == 1
    assert doc["families"]["groups"] == "Holm's step-down over 6 groups, 5% two-sided for the family"
    (echo,) = doc["profile_sets"]
    diffs = [-1.0] * 5 + [0.0]
    assert echo["se"] == pytest.approx(np.std(diffs, ddof=1) / np.sqrt(6))
    assert (echo["df"], echo["method"], echo["level"], echo["regressed"]) == (5, "paired t", 0.95, True)
    assert echo["p_value"] == pytest.approx(scipy_stats.ttest_1samp(diffs, 0).pvalue)
    first = doc["groups"][0]
    assert first["level"] == pytest.approx(1 - 0.05 / 6)
    assert first["items_changed"] == ["a @ echo: PASS 10 of 10 → 0 of 10"]
