"""`merge OUT STORE...`, and report / compare / validate reading several stores as one.

Real store files through the real entry point (`python -m pytest_jaato_eval`) or `main`.
"""
from __future__ import annotations

import json
import os

import pytest

from pytest_jaato_eval.cli import main
from store_lines import arm, run_cli, write


def at(record: dict, finished_at: float | None) -> dict:
    return dict(record, finished_at=finished_at)


def shards(tmp_path):
    """Two shards of one sweep: `write-file` in one, `config` in the other, and one arm
    (config@echo#1) run in both — BLOCKED first, PASS when run again later."""
    one = write(tmp_path / "shard-1.jsonl", [
        at(arm("write-file", "echo", 0, "PASS", run="r1"), 100.0),
        at(arm("write-file", "echo", 1, "FAIL", run="r1"), 101.0),
        at(arm("config", "echo", 1, "BLOCKED", run="r1"), 102.0)])
    two = write(tmp_path / "shard-2.jsonl", [
        at(arm("config", "echo", 0, "PASS", run="r2", sdk="0.29.5"), 50.0),
        at(arm("config", "echo", 1, "PASS", run="r2", sdk="0.29.5"), 200.0)])
    return one, two


class Ran:
    def __init__(self, code, captured):
        self.returncode, self.stdout, self.stderr = code, captured.out, captured.err


@pytest.fixture
def cli(capsys):
    """`main` in this process (the entry point itself is run once, below)."""
    capsys.readouterr()
    return lambda *args: Ran(main([str(a) for a in args]), capsys.readouterr())


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_merge_writes_one_store_the_later_record_wins_and_says_so(tmp_path):
    one, two = shards(tmp_path)
    out = tmp_path / "merged" / "all.jsonl"
    result = run_cli("merge", out, one, two)
    assert result.returncode == 0, result.stderr
    merged = {r["arm_id"]: r for r in records(out)}
    assert len(records(out)) == len(merged) == 4  # one record per arm
    assert merged["config@echo#1"]["state"] == "PASS"
    assert (f"config@echo#1: in {one} and {two}; the record in {two} counts "
            f"(finished later, 1970-01-01T00:03:20Z)") in result.stderr
    # Pins kept: every record is copied as it was, run id and SDK included ...
    assert {r["run_id"] for r in merged.values()} == {"r1", "r2"}
    assert "jaato_sdk_version differs between the stores: 0.29.4 " in result.stderr
    assert f"{out}: 4 arms from 2 stores (5 records read, 1 arms in more than one store)" \
        in result.stdout
    # ... so compare against a one-SDK run still warns.
    base = write(tmp_path / "base.jsonl", [arm("config", "echo", 0, "PASS")])
    cmp_ = run_cli("compare", base, out)
    assert "warning: pins differ: jaato_sdk_version differs: 0.29.4 (base) vs 0.29.4, 0.29.5 " \
           "(new)" in cmp_.stdout
    assert run_cli("validate", out).returncode == 0


def test_without_a_later_finished_at_the_store_named_later_wins(tmp_path, cli):
    a = write(tmp_path / "a.jsonl", [arm("t", "echo", 0, "FAIL", run="a")])
    b = write(tmp_path / "b.jsonl", [arm("t", "echo", 0, "PASS", run="b")])
    out = tmp_path / "out.jsonl"
    result = cli("merge", out, a, b)
    assert [r["run_id"] for r in records(out)] == ["b"]
    assert "neither has a finished_at: the store named later counts" in result.stderr
    # A record with a finished_at beats one without, wherever it is named.
    c = write(tmp_path / "c.jsonl", [at(arm("t", "echo", 0, "FAIL", run="c"), 5.0)])
    result = cli("merge", tmp_path / "out2.jsonl", c, b)
    assert [r["run_id"] for r in records(tmp_path / "out2.jsonl")] == ["c"]
    assert f"the record in {c} counts (the other record has no finished_at)" in result.stderr


def test_merge_refuses_a_task_that_changed_between_the_stores(tmp_path, cli):
    a = write(tmp_path / "a.jsonl", [arm("config", "echo", 0, "PASS", task_hash="a" * 64)])
    b = write(tmp_path / "b.jsonl", [arm("write-file", "echo", 0, "PASS"),
                                     arm("config", "echo", 1, "PASS", task_hash="b" * 64)])
    out = tmp_path / "out.jsonl"
    result = cli("merge", out, a, b)
    assert result.returncode == 2
    line, = result.stderr.splitlines()
    assert line.startswith(f"error: task 'config' has different task hashes: "
                           f"{'a' * 12} in {a}:1, {'b' * 12} in {b}:2: a task changed")
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl*"))  # nothing written
    # report and compare read several stores by the same rule.
    assert cli("report", a, b).returncode == 2
    assert cli("compare", a, str(tmp_path / "*.jsonl")).returncode == 2
    val = cli("validate", a, b)
    assert val.returncode == 1 and "problem: task 'config' has different task hashes" in val.stdout


@pytest.mark.parametrize("how", ["same path", "relative path", "symlink", "hard link", "glob"])
def test_merge_never_writes_over_an_input(tmp_path, cli, monkeypatch, how):
    one, two = shards(tmp_path)
    before = one.read_bytes()
    monkeypatch.chdir(tmp_path)
    inputs = [str(one), str(two)]
    out = {"same path": str(one), "relative path": "sub/../shard-1.jsonl",
           "symlink": str(tmp_path / "link.jsonl"), "hard link": str(tmp_path / "hard.jsonl"),
           "glob": str(tmp_path / "merged.jsonl")}[how]
    (tmp_path / "sub").mkdir()
    if how == "symlink":
        os.symlink(one, out)
    elif how == "hard link":
        os.link(one, out)
    elif how == "glob":  # a merged store left by an earlier merge matches the input pattern
        write(tmp_path / "merged.jsonl", records(one))
        inputs = [str(tmp_path / "*.jsonl")]
    result = cli("merge", out, *inputs)
    assert result.returncode == 2
    line, = result.stderr.splitlines()
    assert line.startswith(f"error: {out}: is also an input (") and "never writes over" in line
    assert one.read_bytes() == before and os.path.lexists(out)


def test_an_existing_out_is_kept_under_a_new_name(tmp_path, cli):
    one, two = shards(tmp_path)
    out = write(tmp_path / "all.jsonl", [arm("old", "echo", 0, "PASS")])
    result = cli("merge", out, one, two)
    assert result.returncode == 0
    kept = [p for p in tmp_path.glob("all.*.jsonl")]
    assert len(kept) == 1 and records(kept[0])[0]["task_id"] == "old"
    assert f"the previous all.jsonl was kept as {kept[0]}" in result.stdout
    assert len(records(out)) == 4


def test_merge_validates_every_input(tmp_path, cli):
    one, _ = shards(tmp_path)
    bad = arm("t", "echo", 0, "PASS")
    del bad["verdicts"]
    broken = write(tmp_path / "broken.jsonl", [bad])
    out = tmp_path / "out.jsonl"
    result = cli("merge", out, one, broken)
    assert result.returncode == 2 and not out.exists()
    assert f"problem: {broken}:1: t@echo#0: missing keys: verdicts" in result.stderr
    assert "2 problem(s) in the inputs" in result.stderr.splitlines()[-1]
    missing = cli("merge", out, one, tmp_path / "nope.jsonl")
    assert missing.returncode == 2 and missing.stderr == f"error: {tmp_path / 'nope.jsonl'}: " \
                                                         f"no such file\n"
    # A run killed mid-write left a partial last line: skipped, said, the rest merged.
    cut = tmp_path / "cut.jsonl"
    cut.write_text(json.dumps(arm("u", "echo", 0, "PASS")) + "\n{\"arm_id\": \"u@e")
    result = cli("merge", out, one, cut)
    assert result.returncode == 0 and f"{cut}:2: skipped: partial last line" in result.stderr
    assert len(records(out)) == 4


def test_report_and_validate_read_several_stores_and_quoted_globs(tmp_path, cli):
    one, two = shards(tmp_path)
    out = tmp_path / "merged.jsonl"
    assert cli("merge", out, one, two).returncode == 0
    merged = cli("report", out)
    assert merged.returncode == 1  # write-file@echo#1 FAILED
    for args in ([one, two], [str(tmp_path / "shard-*.jsonl")]):
        result = cli("report", *args)
        assert result.returncode == merged.returncode, result.stderr
        assert result.stdout.splitlines()[0] == f"{one} + {two}: 4 arms"
        assert result.stdout.splitlines()[1:] == merged.stdout.splitlines()[1:]  # the same pivot
        assert "config@echo#1: in" in result.stderr
    val = cli("validate", str(tmp_path / "shard-?.jsonl"))
    assert val.returncode == 0, val.stdout
    assert "warning: config@echo#1: in" in val.stdout
    assert val.stdout.splitlines()[-1].startswith("2 stores read as one: 0 problems")
    nothing = cli("report", str(tmp_path / "nope-*.jsonl"))
    assert nothing.returncode == 2
    assert nothing.stderr == f"error: {tmp_path / 'nope-*.jsonl'}: no file matches this pattern\n"


def test_compare_reads_a_glob_on_each_side_and_explains_an_unquoted_one(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    write(tmp_path / "old" / "1.jsonl", [arm("a", "echo", 0, "PASS"), arm("a", "echo", 1, "PASS")])
    write(tmp_path / "old" / "2.jsonl", [arm("b", "echo", 0, "PASS")])
    write(tmp_path / "new" / "1.jsonl", [arm("a", "echo", 0, "PASS"), arm("a", "echo", 1, "FAIL")])
    write(tmp_path / "new" / "2.jsonl", [arm("b", "echo", 0, "PASS")])
    assert main(["compare", str(tmp_path / "old" / "*.jsonl"),
                 str(tmp_path / "new" / "*.jsonl")]) == 0  # one flip: listed, no regression
    out = capsys.readouterr().out
    assert "changed a @ echo: PASS 2 of 2 → 1 of 2" in out and "no group regressed (2 groups" in out
    assert "b @ echo" in out and "note: b @ echo" not in out  # both sides have b
    spilled = [str(p) for p in sorted(tmp_path.glob("*/*.jsonl"))]  # what the shell would pass
    assert main(["compare", *spilled]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compare takes two sides" in err[0] and "quote" in err[0]
