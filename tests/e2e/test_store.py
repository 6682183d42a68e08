"""The result store: one writer per path (a lock naming its holder), a collision-free keep
of the previous store, writability found before the first arm, outputs that would
overwrite the store refused, and the record type every reader shares."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from pytest_jaato_eval.results.record import RECORD_KEYS, ArmRecord, RecordError
from pytest_jaato_eval.results.store import (Store, StoreError, is_evidence, lock_path,
                                            previous_path)
from pytest_jaato_eval.results.stores import read_records, scan
from pytest_jaato_eval.testing.records import arm_record, write_store


# -- the record ---------------------------------------------------------------------------------
def test_a_record_round_trips_and_keeps_keys_it_does_not_know():
    record = arm_record("t", "echo", 1, "FAIL", evidence=["exit 1"])
    data = record.to_dict()
    assert tuple(data)[:len(RECORD_KEYS)] == RECORD_KEYS  # the reference's keys, its order
    data["contaminated"] = {"calls": ["cat ../.jaato/x"]}  # a newer writer's field
    again = ArmRecord.from_dict(json.loads(json.dumps(data)))
    assert again.to_dict() == data and again.extra == {"contaminated": {"calls": ["cat ../.jaato/x"]}}
    assert again == ArmRecord.from_dict(again.to_dict())


def test_from_dict_decides_every_wrong_value_once():
    problems: list[str] = []
    data = arm_record().to_dict() | {
        "run_id": ["a"], "repeat": True, "usage": {"cost_usd": float("inf"), "x": 10 ** 400},
        "verdicts": [{"grader_id": 3, "state": "PASS", "evidence": "one line"}, "junk"],
        "budget_ceiling": {"usd": float("nan")}}
    r = ArmRecord.from_dict(data, problems)
    assert r.run_id is None and r.repeat is None and r.usage == {"cost_usd": None, "x": None}
    assert r.verdicts == [{"grader_id": "3", "state": "PASS", "evidence": ["one line"],
                           "claim": "", "detail": ""}]
    assert r.budget_ceiling == {"usd": None}
    assert problems == [
        "repeat: expected an integer or null, got bool",
        "verdicts: expected a list, got a list holding other values",
        "usage.cost_usd: expected a finite number, got a non-finite number",
        "usage.x: expected a finite number, got a number out of range",
        "budget_ceiling.usd: expected a finite number, got a non-finite number",
        "run_id: expected a string or null, got list"]
    for bad in ([1], {"arm_id": 5}, {"state": "PASS"}):
        with pytest.raises(RecordError):
            ArmRecord.from_dict(bad)


def test_scan_reads_invalid_utf8_as_replaced_text(tmp_path):
    path = tmp_path / "s.jsonl"
    line = json.dumps(arm_record(error="x").to_dict()).replace('"error": "x"', '"error": "\xff"')
    path.write_bytes(line.encode("latin-1") + b"\n")
    (only,) = list(scan(path))
    assert only.record.error == "\ufffd"


# -- one writer per path ---------------------------------------------------------------------------
def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    path = tmp_path / "r.jsonl"
    first = Store(path)
    first.claim()
    second = Store(path)
    with pytest.raises(StoreError) as refused:
        second.claim()
    message = str(refused.value)
    assert "\n" not in message and f"pid {os.getpid()} on {socket.gethostname()}" in message
    assert "started 20" in message and "choose another --jaato-out" in message
    first.close()
    assert not lock_path(path).exists()  # released and removed: nothing left beside the store
    second.claim()  # free again
    second.close()


def test_a_dead_holder_never_blocks(tmp_path):
    """The kernel drops a lock when its process dies (kill -9 included): no stale lock."""
    path = tmp_path / "r.jsonl"
    code = ("import sys, os; sys.path.insert(0, %r); from pytest_jaato_eval.results.store import Store; "
            "s = Store(%r); s.claim(); os._exit(0)") % (os.getcwd(), str(path))
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert lock_path(path).exists()  # left behind by the dead run
    store = Store(path)
    store.claim()
    store.close()


def test_two_processes_opening_one_store_at_once_lose_nothing(tmp_path):
    """Both start together on a store holding a previous run: one writes, the other is
    refused before writing anything, and the previous run's records are kept whole."""
    path = write_store(tmp_path / "r.jsonl", [arm_record("old", repeat=r) for r in range(3)])
    before = path.read_bytes()
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from pytest_jaato_eval.results.store import Store, StoreError\n"
            "from pytest_jaato_eval.testing.records import arm_record\n"
            "time.sleep(max(0, float(sys.argv[1]) - time.time()))\n"
            "s = Store(%r)\n"
            "try:\n    s.claim()\nexcept StoreError as e:\n    print('refused', e); sys.exit(3)\n"
            "for r in range(5):\n    s.append(arm_record(sys.argv[2], repeat=r)); time.sleep(0.05)\n"
            "s.close()\n") % (os.getcwd(), str(path))
    start = str(time.time() + 1.5)
    procs = [subprocess.Popen([sys.executable, "-c", code, start, name], stdout=subprocess.PIPE,
                              text=True) for name in ("a", "b")]
    results = [(p.wait(timeout=60), p.stdout.read()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 3], results
    winner = "a" if results[0][0] == 0 else "b"
    assert [r.task_id for r in read_records(path)] == [winner] * 5
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("r.") and p != path
            and not p.name.startswith(".")]
    assert len(kept) == 1 and kept[0].read_bytes() == before


# -- the previous store --------------------------------------------------------------------------
def test_the_previous_store_of_the_same_tasks_is_kept_once(tmp_path):
    path = tmp_path / "r.jsonl"
    for run in range(3):
        store = Store(path, task_ids={"t"})
        store.append(arm_record("t", run_id=f"run{run}"))
        store.close()
        assert store.rotated_to == (previous_path(path) if run else None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl", "r.previous.jsonl"]
    assert [r.run_id for r in read_records(previous_path(path))] == ["run1"]


def test_a_store_of_another_task_set_is_kept_under_its_own_name(tmp_path):
    path = write_store(tmp_path / "r.jsonl", [arm_record("other-task")])
    stamp = time.strftime("%Y%m%d-%H%M%S")
    taken = tmp_path / f"r.{stamp}.jsonl"
    taken.write_text("someone else's copy\n")  # a name already taken is never overwritten
    store = Store(path, task_ids={"t"})
    store.append(arm_record("t"))
    store.close()
    assert store.rotated_to is not None and store.rotated_to != taken
    assert taken.read_text() == "someone else's copy\n"
    assert [r.task_id for r in read_records(store.rotated_to)] == ["other-task"]


def test_keep_previous_all_keeps_every_copy(tmp_path):
    path = tmp_path / "r.jsonl"
    for run in range(3):
        store = Store(path, keep_previous="all", task_ids={"t"})
        store.append(arm_record("t", run_id=f"run{run}"))
        store.close()
    copies = [p for p in tmp_path.iterdir() if p.name != "r.jsonl"]
    assert len(copies) == 2 and not previous_path(path).exists()


def test_appending_to_a_cut_store_starts_a_fresh_line(tmp_path):
    path = write_store(tmp_path / "r.jsonl", [arm_record("t", repeat=0)], tail='{"arm_id": "t@')
    store = Store(path, append=True)
    store.append(arm_record("t", repeat=1))
    store.close()
    assert [r.arm_id for r in read_records(path)] == ["t@echo#0", "t@echo#1"]


@pytest.mark.parametrize("append", [False, True])
def test_a_store_written_into_by_somebody_else_is_found(tmp_path, append):
    """Whatever the run did not write is found: a record appended between two of its own,
    one edited in place to the same length, a store emptied, and (appending) a record of
    an earlier run edited before this run wrote anything."""
    def store_of(path):
        store = Store(path, append=append)
        store.claim()
        store.append(arm_record("t", repeat=0))
        return store

    path = tmp_path / "a.jsonl"
    store = store_of(path)
    store.append(arm_record("t", repeat=1))
    assert store.changed_by_others() is None
    with open(path, "a") as fh:
        fh.write(json.dumps(arm_record("t", repeat=0, state="FAIL").to_dict()) + "\n")
    store.append(arm_record("t", repeat=2))
    assert "somebody else wrote into it" in store.changed_by_others()
    store.close()

    path = tmp_path / "b.jsonl"
    store = store_of(path)
    text = path.read_text()
    path.write_text(text.replace('"PASS"', '"FAIL"'))
    assert len(path.read_text()) == len(text) and store.changed_by_others()
    path.write_text("")
    assert store.changed_by_others()
    store.close()

    if append:
        path = write_store(tmp_path / "c.jsonl", [arm_record("u", repeat=0)])
        store = Store(path, append=True)
        store.claim()
        path.write_text(path.read_text().replace('"PASS"', '"FAIL"'))
        store.append(arm_record("t", repeat=0))
        assert "held before this run were changed" in store.changed_by_others()
        store.close()


def test_the_file_read_back_is_the_file_checked_whatever_is_renamed_over_its_path(tmp_path):
    """A forged store renamed over the path after the check is never what the pivot reads."""
    from pytest_jaato_eval.results.pivot import Pivot
    path = tmp_path / "r.jsonl"
    store = Store(path)
    store.claim()
    store.append(arm_record("t", repeat=0))
    forged = write_store(tmp_path / "forged.jsonl", [arm_record("t", repeat=0, state="FAIL")])
    with store.read_back() as (changed, readable):
        assert changed is None
        os.replace(forged, path)
        pivot = Pivot.of_store(readable, name=path)
        assert [a.state for c in pivot.cells for a in c.arms] == ["PASS"]
        assert [r.state for r in pivot.records()] == ["PASS"]
    assert store.changed_by_others()  # the path now names another file
    store.close()


# -- unusable paths, found before the first arm ---------------------------------------------------
def test_unusable_store_paths_are_one_line(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    (tmp_path / "dir").mkdir()
    for path, expect in ((a_file / "r.jsonl", "is not a directory"),
                         (tmp_path / "dir", "is a directory")):
        with pytest.raises(StoreError) as refused:
            Store(path).claim()
        assert expect in str(refused.value) and "\n" not in str(refused.value)


def test_resume_on_a_folder_is_a_usage_error_in_one_line(project):
    project.task("one")
    (project.root / "a-folder").mkdir()
    result = project.run("tasks", "--resume", "--co", f"--jaato-out={project.root / 'a-folder'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "INTERNALERROR" not in err + result.stdout.str()
    assert "a-folder: is a directory, expected a JSONL result store" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_store_is_refused(tmp_path):
    path = write_store(tmp_path / "r.jsonl", [arm_record()])
    path.chmod(0o444)
    with pytest.raises(StoreError, match="not writable"):
        Store(path).claim()


# -- the run: refused at collection, before any arm -------------------------------------------------
def test_a_run_on_a_store_in_use_is_refused_before_any_arm(project):
    project.task("alpha")
    holder = Store(project.store)
    holder.claim()
    try:
        result = project.run("tasks")
    finally:
        holder.close()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "in use by another run (pid" in err and "Traceback" not in err + result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() and not project.store.exists()


@pytest.mark.parametrize("case", ["directory", "parent is a file"])
def test_an_unusable_store_is_a_usage_error_not_a_lost_arm(project, case):
    project.task("alpha")
    if case == "directory":
        project.store.mkdir()
        target = project.store
    else:
        (project.root / "afile").write_text("")
        target = project.root / "afile" / "r.jsonl"
    result = project.run("tasks", f"--jaato-out={target}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--jaato-out" in result.stderr.str() and "INTERNALERROR" not in result.stdout.str()
    assert "passed" not in result.stdout.str()


@pytest.mark.parametrize("option", ["--jaato-html", "--junitxml", "--jaato-pdf"])
def test_an_output_naming_the_store_is_refused(project, option):
    project.task("alpha")
    write_store(project.store, [arm_record("alpha")])
    before = project.store.read_bytes()
    result = project.run("tasks", f"{option}={project.store}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is the result store" in result.stderr.str() or (
        option == "--jaato-pdf" and "--jaato-pdf" in result.stderr.str())
    assert project.store.read_bytes() == before


def test_a_collect_only_run_touches_no_store(project):
    project.task("alpha")
    write_store(project.store, [arm_record("alpha")])
    before = project.store.read_bytes()
    project.run("tasks", "--collect-only")
    assert project.store.read_bytes() == before
    assert sorted(p.name for p in project.root.iterdir() if p.name.startswith((".results", "results"))) == ["results.jsonl"]


@pytest.mark.slow
def test_iterating_on_one_task_keeps_one_previous_store(project):
    project.task("alpha")
    for _ in range(3):
        assert project.run("tasks").ret == 0
    stores = sorted(p.name for p in project.root.iterdir() if "results" in p.name)
    assert stores == ["results.jsonl", "results.previous.jsonl",  # each with its transcripts
                      "results.previous.snapshots", "results.previous.transcripts",  # and snapshots
                      "results.snapshots", "results.transcripts"]
    result = project.run("tasks", "--jaato-keep-previous")
    result.stdout.fnmatch_lines(["the previous store was kept as *results.2*"])


def test_resume_on_a_store_of_odd_but_valid_json_is_not_a_traceback(project):
    """A store anybody may have edited: a list run_id, a 400-digit cost, Infinity, a string
    repeat. --resume keeps the arm, runs the missing one, and pivots without a traceback."""
    project.task("alpha", repeats=2)
    odd = arm_record("alpha", "echo", 0, "PASS", task_hash=None).to_dict()
    odd.update(run_id=["a", "b"], usage={"cost_usd": 10 ** 400, "spend_total_tokens": float("inf")},
               duration_seconds=float("-inf"), completion_nudges="2", verdicts=[None, {"state": 1}])
    project.store.write_text(json.dumps(odd) + "\n")
    result = project.run("tasks", "--resume")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["alpha *echo *100%*", "store: * (2 records; 1 record written by this run; run *"])


def test_the_producer_stores_live_values_as_the_store_reads_them():
    """A daemon's reason is a str-valued enum and a workspace a Path: the record holds
    their JSON values, so the live record and the stored one are the same."""
    from enum import Enum
    from pathlib import Path

    from pytest_jaato_eval.engine.session import AgentRun
    from pytest_jaato_eval.results.record import build_record

    class Reason(str, Enum):
        OPERATOR = "operator_request"

    record = build_record(
        arm_id="t@s#0", task_id="t", profile_set="s", repeat=0, state="BLOCKED",
        blocked_reason="arm ceiling", verdicts=[], run=AgentRun(), notes=[],
        completion_nudges=None, extra={"termination_reason": Reason.OPERATOR,
                                       "workspace": Path("/tmp/ws"), "contaminated": False})
    assert record.termination_reason == "operator_request" and record.workspace == "/tmp/ws"
    assert record.extra == {"contaminated": False}
    assert ArmRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_forged_store_is_set_aside_and_written_again_from_what_the_run_holds(tmp_path):
    """The evidence keeps every byte as found; the store holds the bytes it had before the
    run when they are intact (else the records the run read then), then the run's own."""
    path = write_store(tmp_path / "s.jsonl", [arm_record("u", repeat=0)])
    before = path.read_bytes()
    store = Store(path, append=True)
    store.claim()
    ours = [arm_record("t", repeat=0), arm_record("t", repeat=1)]
    for record in ours:
        store.append(record)
    with open(path, "a") as fh:  # forged after the run's records
        fh.write(json.dumps(arm_record("t", repeat=0, state="FAIL").to_dict()) + "\n")
    found = path.read_bytes()
    assert store.changed_by_others()
    evidence = store.set_aside_forgery([], ours)
    assert is_evidence(evidence) and evidence.read_bytes() == found
    again = path.read_bytes()
    assert again.startswith(before) and b'"FAIL"' not in again
    assert [json.loads(line)["repeat"] for line in again.splitlines()] == [0, 0, 1]
    assert store.changed_by_others() is None  # what counts now is exactly what it holds
    store.close()

    path = write_store(tmp_path / "e.jsonl", [arm_record("u", repeat=0)])
    store = Store(path, append=True)
    store.claim()
    store.append(ours[0])
    path.write_text(path.read_text().replace('"PASS"', '"FAIL"'))  # the old record edited
    kept = [arm_record("u", repeat=0)]
    store.set_aside_forgery(kept, [ours[0]])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["task_id"], r["state"]) for r in lines] == [("u", "PASS"), ("t", "PASS")]
    store.close()
    with pytest.raises(StoreError, match="evidence"):
        Store(evidence).claim()
