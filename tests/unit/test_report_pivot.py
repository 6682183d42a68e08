"""The pivot's numbers (P1-P3) on hand-made stores, read back from disk like any store."""
from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from pytest_jaato_eval.results.stores import read_store
from pytest_jaato_eval.results.pivot import DASH, default_k
from pytest_jaato_eval.results.pivot import Pivot, build_cells
from pytest_jaato_eval.results.pivot import render_pivot
from pytest_jaato_eval.testing.records import arm_record, write_store


def arm(task, ps, repeat, state, *, cost=None, tokens=None, h=None, reason=None):
    return arm_record(task, ps, repeat, state, cost=cost, tokens=tokens, payload_hash=h,
                      reason=reason if state == "BLOCKED" else None)


def store(tmp_path, records, name="store.jsonl"):
    """Write the records as a store, and read them back as every reader does."""
    path = write_store(tmp_path / name, records)
    streamed = Pivot.of_store(path)
    in_memory = Pivot.of_records(read_store(path).records)
    assert shape(streamed) == shape(in_memory)
    return read_store(path).records


def shape(pivot):
    """Everything a pivot says, to compare two ways of building one."""
    return ([(c.task_id, c.profile_set, c.passed, c.failed, c.blocked, c.cost, c.tokens,
              c.cost_unknown, c.tokens_unknown, dict(c.payloads), c.unanswered,
              list(c.reasons.items()), [a.arm_id for a in c.arms]) for c in pivot.cells],
            render_pivot(pivot.cells))


def columns(lines, row=1):
    """A rendered pivot row as {header: value} (columns are 2+ spaces apart)."""
    split = lambda line: re.split(r"\s{2,}", line.strip())  # noqa: E731
    return dict(zip(split(lines[0]), split(lines[row]), strict=True))


def test_pass_fail_blocked_429(tmp_path):
    records = store(tmp_path, [
        arm("t", "echo", 0, "PASS", cost=0.5, tokens=100, h="x"),
        arm("t", "echo", 1, "FAIL", cost=0.25, tokens=50, h="y"),
        arm("t", "echo", 2, "BLOCKED", reason="ProviderError: 429 Too Many Requests"),
    ])
    (cell,) = build_cells(records)
    assert (cell.exercised, cell.passed, cell.failed, cell.blocked) == (2, 1, 1, 1)
    assert cell.pass_rate == 0.5
    lo, hi = cell.interval
    assert round(lo, 3) == 0.095 and round(hi, 3) == 0.905   # 95% Wilson, 1 of 2
    assert cell.floor == 1 / 3                                # BLOCKED counted as FAIL
    lines = render_pivot([cell])
    text = "\n".join(lines)
    row = columns(lines)
    assert row["pass rate"] == "50%" and row["95% CI"] == "9–91%" and row["floor"] == "33%"
    assert (row["n"], row["pass"], row["fail"], row["blocked"]) == ("2", "1", "1", "1")
    assert row["cost"] == "$0.7500+"   # the BLOCKED arm reported no cost: a partial sum, marked
    assert row["tokens"] == "150+" and row["det"] == "0%"  # two answers, no two alike
    assert "(1×) ProviderError: 429 Too Many Requests" in text
    assert "(1×) 429" in text.replace("ProviderError: ", "")
    assert lines[-1].strip() == "t @ echo: (1×) ProviderError: 429 Too Many Requests"


def test_all_blocked_is_a_dash_never_zero(tmp_path):
    records = store(tmp_path, [arm("t", "echo", r, "BLOCKED", reason="daemon gone")
                               for r in range(3)])
    (cell,) = build_cells(records)
    assert cell.pass_rate is None and cell.interval is None and cell.det is None
    assert cell.floor == 0.0  # every arm blocked: the pessimist's floor really is 0
    row = columns(render_pivot([cell]))
    assert row["pass rate"] == DASH and row["95% CI"] == DASH and row["det"] == DASH
    assert (row["n"], row["blocked"], row["floor"]) == ("0", "3", "0%")
    assert "(3×) daemon gone" in "\n".join(render_pivot([cell]))


def test_unknown_cost_and_tokens_are_dashes(tmp_path):
    records = store(tmp_path, [arm("t", "s", 0, "PASS", h="x")])
    row = columns(render_pivot(build_cells(records)))
    assert row["cost"] == DASH and row["tokens"] == DASH  # unknown, not free


def test_det_with_blocked_arms_never_exceeds_100(tmp_path):
    # The reference counted a BLOCKED arm's hash in the numerator only: 3 / 1 = 300%.
    records = store(tmp_path, [arm("t", "s", 0, "PASS", h="x"), arm("t", "s", 3, "FAIL", h="x"),
                               arm("t", "s", 1, "BLOCKED", h="x", reason="r"),
                               arm("t", "s", 2, "BLOCKED", h="x", reason="r")])
    (cell,) = build_cells(records)
    assert cell.det == 1.0
    assert columns(render_pivot([cell]))["det"] == "100%"


@given(st.lists(st.tuples(st.sampled_from(["PASS", "FAIL", "BLOCKED"]),
                          st.sampled_from(["a", "b", None])), min_size=1, max_size=12))
def test_det_is_the_modal_share_of_the_exercised_arms(arms_):
    records = [arm("t", "s", i, state, h=h, reason="r") for i, (state, h) in enumerate(arms_)]
    (cell,) = build_cells(records)
    exercised = [h for state, h in arms_ if state != "BLOCKED"]
    answered = [h for h in exercised if h is not None]
    if len(answered) < 2:  # a missing payload agrees with nothing
        assert cell.det is None and cell.det_text.startswith(DASH)
    else:
        modal = max(answered.count(v) for v in set(answered))
        assert cell.det == (modal / len(exercised) if modal > 1 else 0.0)
        if len(answered) < len(exercised):
            assert cell.det_text.endswith(f" ({len(answered)} of {len(exercised)} answered)")


def test_det_of_cells_where_no_arm_answered_is_a_dash(tmp_path):
    records = store(tmp_path, [arm("t", "s", r, "PASS", h=None) for r in range(4)])
    (cell,) = build_cells(records)
    assert cell.det is None  # never 100% made of nothing
    assert cell.det_text == DASH  # and no "(0 of 4 answered)": a count of nothing says nothing


def test_det_with_some_arms_unanswered_shows_the_count(tmp_path):
    records = store(tmp_path, [arm("t", "s", 0, "PASS", h="x"), arm("t", "s", 1, "FAIL", h="x"),
                               arm("t", "s", 2, "PASS", h=None), arm("t", "s", 3, "FAIL", h=None),
                               arm("t", "s", 4, "PASS", h=None),
                               arm("t", "s", 5, "BLOCKED", reason="r")])
    row = columns(render_pivot(build_cells(records)))
    assert row["det"] == "40% (2 of 5 answered)"  # jaato-eval's number, and how many answered
    one = store(tmp_path, [arm("u", "s", 0, "PASS", h="x"), arm("u", "s", 1, "PASS", h=None)],
                name="one.jsonl")
    assert build_cells(one)[0].det_text == "— (1 of 2 answered)"  # one answer agrees only with itself


# -- the streaming pivot equals the in-memory one ----------------------------------------------
def test_streaming_pivot_last_record_wins_at_its_own_place(tmp_path):
    path = write_store(tmp_path / "s.jsonl", [
        arm("t", "s", 0, "BLOCKED", reason="429"), arm("t", "s", 1, "PASS", h="x"),
        arm("u", "s", 0, "FAIL", h="y"), arm("t", "s", 0, "PASS", h="x"),
        arm("t", "s", 1, "FAIL", h="z")])
    streamed, in_memory = Pivot.of_store(path), Pivot.of_records(read_store(path).records)
    assert shape(streamed) == shape(in_memory)
    (t, u) = streamed.cells
    assert (t.passed, t.failed, t.blocked, u.failed) == (1, 1, 0, 1)
    assert streamed.lines_read == 5 and streamed.arm_count == 3
    # The whole records come back from the store by offset: the later ones.
    assert [r.state for r in streamed.arms(t)] == ["PASS", "FAIL"]
    assert list(streamed.arms(t)) == list(in_memory.arms(t))
    assert [r.arm_id for r in streamed.arms(t, states={"FAIL"})] == ["t@s#1"]


def test_streaming_pivot_skips_a_partial_last_line_and_garbage(tmp_path):
    good = [arm("t", "s", 0, "PASS", h="x"), arm("t", "s", 1, "FAIL", h="y")]
    path = write_store(tmp_path / "s.jsonl", good)
    with open(path, "a") as fh:
        fh.write("not json\n[1, 2]\n\n{\"arm_id\": 5}\n")
        fh.write(json.dumps(arm("t", "s", 2, "PASS", h="x").to_dict())[:60])  # cut mid-write
    streamed = Pivot.of_store(path)
    assert shape(streamed) == shape(Pivot.of_records(good))
    assert streamed.partial_last == 7
    assert [n for n, _ in streamed.skipped] == [3, 4, 6]
    notes = streamed.skipped_notes()
    assert notes[-1].endswith(":7: skipped: partial last line (a run stopped mid-write)")


def test_streaming_pivot_keeps_the_blocked_digest_order(tmp_path):
    records = [arm("t", "s", 0, "BLOCKED", reason="pool exhausted"),
               arm("t", "s", 1, "BLOCKED", reason="429"),
               arm("t", "s", 2, "BLOCKED", reason="429"),
               arm("a", "s", 0, "BLOCKED", reason="daemon gone"),
               arm("a", "s", 1, "BLOCKED", reason="pool exhausted"),
               arm("t", "s", 0, "BLOCKED", reason="429")]  # superseded: its old reason goes
    path = write_store(tmp_path / "s.jsonl", records)
    streamed = Pivot.of_store(path)
    assert shape(streamed) == shape(Pivot.of_records(records))
    lines = render_pivot(streamed.cells)
    start = lines.index("blocked reasons (most frequent first):") + 1
    digest = lines[start:lines.index("", start)]  # the sweep's blocks follow
    assert digest == ["  t @ s: (3×) 429", "  a @ s: (1×) daemon gone",
                      "  a @ s: (1×) pool exhausted"]


def test_streaming_pivot_of_the_reference_store_equals_the_in_memory_one():
    from pathlib import Path
    path = Path(__file__).parents[1] / "data" / "jaato-eval-0.3.4.jsonl"
    assert shape(Pivot.of_store(path)) == shape(Pivot.of_records(read_store(path).records))


def test_pass_at_k_columns_appear_with_repeats(tmp_path):
    records = store(tmp_path, [arm("t", "s", r, "PASS" if r < 3 else "FAIL", h="x")
                               for r in range(5)]
                    + [arm("u", "s", 0, "PASS", h="x")])
    cells = build_cells(records)
    assert default_k(cells) == 5  # the only cell with repeats has 5 exercised arms
    lines = render_pivot(cells, k=2)
    t_row, u_row = columns(lines, 1), columns(lines, 2)
    assert (t_row["pass@2"], t_row["pass^2"]) == ("90%", "30%")  # 1-C(2,2)/C(5,2), C(3,2)/C(5,2)
    assert (u_row["pass@2"], u_row["pass^2"]) == (DASH, DASH)    # one attempt cannot answer
    assert "pass@5" in render_pivot(cells)[0]                    # the default k


def test_no_repeats_no_pass_at_k_columns(tmp_path):
    lines = render_pivot(build_cells(store(tmp_path, [arm("t", "s", 0, "PASS", h="x")])))
    assert "pass@" not in lines[0]


def test_a_repeated_arm_id_counts_once(tmp_path):
    records = store(tmp_path, [arm("t", "s", 0, "BLOCKED", reason="429"),
                               arm("t", "s", 0, "PASS", h="x")])
    (cell,) = build_cells(records)
    assert (cell.passed, cell.blocked) == (1, 0)  # R3: the last record wins


def test_digest_groups_reasons_that_differ_only_by_ids(tmp_path):
    records = store(tmp_path, [
        arm("t", "s", 0, "BLOCKED", reason="session 3f1c2b9e-4d5a-4b6c-8d7e-0f1a2b3c4d5e: 429"),
        arm("t", "s", 1, "BLOCKED", reason="session 9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d: 429"),
        arm("t", "s", 2, "BLOCKED", reason="pool exhausted"),
    ])
    lines = render_pivot(build_cells(records))
    digest = lines[lines.index("blocked reasons (most frequent first):") + 1:]
    assert digest == ["  t @ s: (2×) session …: 429", "  t @ s: (1×) pool exhausted"]


ODD_LINES = [  # lines where a partial JSON reader could part from json.loads
    b'{"arm_id": "t@s#9", "task_id": "t", "profile_set": "s", "state": "PASS", '
    b'"usage": {"cost_usd": NaN}}',
    b'{"arm_id": "t@s#8", "task_id": "t", "profile_set": "s", "state": "PASS", '
    b'"usage": {"cost_usd": 1e400}}',
    b'{"arm_id": "t@s#7", "task_id": "t", "profile_set": "s", "state": "FAIL", '
    b'"verdicts": [{"evidence": ["\\ud800 lone"]}]}',
    b'{"arm_id": "t@s#6", "task_id": "t", "profile_set": "s", "state": "FAIL", '
    b'"verdicts": [{"evidence": ["bad \xff byte"]}]}',
    b'{"arm_id": "t@s#5\xff", "task_id": "t", "profile_set": "s", "state": "PASS"}',
    b'{"arm_id": "t@s#4", "task_id": "t", "profile_set": "s", "state": "PASS", '
    b'"state": "FAIL", "repeat": 123456789012345678901234567890}',
    b'["arm_id", "t@s#3"]',
    b'"just a string"',
    b'{"arm_id": "t@s#2", "task_id": "t"} trailing',
    b'{"arm_id": 5, "task_id": "t"}',
    b'{"ARM_ID": "t@s#1"}',
    # an integer json.loads alone refuses (4,301 digits) in a key the pivot does not read
    b'{"arm_id": "t@s#0", "task_id": "t", "profile_set": "s", "state": "PASS", '
    b'"turns": ' + b"9" * 4301 + b'}',
]


def test_the_partial_line_reader_reads_every_line_as_json_loads(tmp_path, monkeypatch):
    """The pivot reads only the keys it needs of a line (msgspec); on odd lines it must
    still give exactly the cells, skips and partial line that reading it whole gives."""
    import pytest_jaato_eval.results.pivot as pivot_module
    from pytest_jaato_eval.results.stores import _json_loads, fields_loader

    records = [arm("t", "s", r, "PASS" if r % 3 else "FAIL", h=f"h{r % 2}", cost=0.5)
               for r in range(6)]
    path = write_store(tmp_path / "s.jsonl", records)
    with open(path, "ab") as fh:
        fh.write(b"\n".join(ODD_LINES) + b'\n{"arm_id": "cut')
    fast = Pivot.of_store(path)
    monkeypatch.setattr(pivot_module, "fields_loader", lambda names=None: _json_loads)
    monkeypatch.setattr(pivot_module, "_fast_reader", lambda intern: None)
    whole = Pivot.of_store(path)
    assert shape(fast) == shape(whole)
    assert (fast.skipped, fast.partial_last, fast.lines_read) == (
        whole.skipped, whole.partial_last, whole.lines_read)
    assert [n for n, _ in fast.skipped] == [13, 14, 15, 16, 17] and fast.partial_last == 19
    load = fields_loader(("arm_id", "state", "repeat", "verdicts"))
    whole = fields_loader()
    assert _json_loads not in (load, whole), "msgspec is a dependency: test its path"

    def kept(loader, line):  # what a caller can see: the kept keys (or the error)
        try:
            data = loader(line)
        except ValueError:
            return "not JSON"
        if not isinstance(data, dict):
            return data
        return {k: data.get(k) for k in ("arm_id", "state", "repeat", "verdicts")}
    for line in ODD_LINES + [ODD_LINES[0].replace(b"NaN", b"0.25")]:
        assert repr(kept(load, line)) == repr(kept(_json_loads, line)), line  # NaN != NaN
        try:
            expected = repr(_json_loads(line))
        except ValueError:
            expected = "not JSON"
        try:
            assert repr(whole(line)) == expected, line
        except ValueError:
            assert expected == "not JSON", line


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=8) | st.sampled_from(["\ud800", "lone \udfff", "\x00", "é"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=4),
    max_leaves=12)


@given(st.dictionaries(st.sampled_from(["arm_id", "state", "x", "usage"]), _json_values),
       st.booleans())
def test_the_fast_loaders_read_any_json_line_as_json_loads(obj, ascii_only):
    from pytest_jaato_eval.results.stores import _json_loads, fields_loader

    # Raw UTF-8, lone surrogates written as bytes (invalid UTF-8) included.
    line = json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    expected = _json_loads(line)
    assert repr(fields_loader()(line)) == repr(expected)
    head = fields_loader(("arm_id", "usage"))(line)
    assert repr({k: head.get(k) for k in ("arm_id", "usage")}) == \
        repr({k: expected.get(k) for k in ("arm_id", "usage")})


def test_the_report_writers_example_in_the_docs_runs_as_written(tmp_path):
    """docs/reports.md's reading of a store, executed on a store of two tasks: each task's
    cells together, and the FAIL and BLOCKED records read back whole."""
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "reports.md").read_text()
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```", doc, re.S | re.M)
                if "Pivot.of_store(path)" in b]
    path = write_store(tmp_path / "r.jsonl", [
        arm("a", "x", 0, "PASS"), arm("b", "x", 0, "FAIL"), arm("a", "y", 0, "BLOCKED"),
        arm("b", "y", 0, "PASS")])
    seen: list = []
    code = block.replace("            ...", "            seen.append((task_id, record.arm_id))")
    exec(compile(code, "docs/reports.md", "exec"), {"Pivot": Pivot, "path": path, "seen": seen})
    assert seen == [("a", "a@y#0"), ("b", "b@x#0")]  # written a, b, a, b: read a task at a time


_line_values = _json_values | st.sampled_from(
    ["BLOCKED", "PASS", 2 ** 53, 2 ** 53 + 1, -(2 ** 53) - 1, 1.0, True, {"cost_usd": 0.5},
     {"cost_usd": float("nan"), "spend_total_tokens": 0}, {"strict": 1},
     {"harness": "x", "harness_version": 2}, {"agent_run_id": "r"}])


@given(st.dictionaries(st.sampled_from(
    ["arm_id", "task_id", "profile_set", "repeat", "state", "blocked_reason", "payload_hash",
     "run_id", "task_hash", "usage", "judge_usage", "provenance", "xfail", "sample_id",
     "regraded", "verdicts"]), _line_values), st.text(max_size=4), st.booleans())
def test_the_summary_reader_decides_every_line_as_the_whole_reading(obj, arm_id, ascii_only):
    """The pivot's common-case reader (typed fields, provenance by its bytes) gives the
    summary the whole line's reading gives, or hands the line to it (LookupError)."""
    from pytest_jaato_eval.results.pivot import _Interned, _LineReader, _summary
    from pytest_jaato_eval.results.record import RecordError
    from pytest_jaato_eval.results.stores import _json_loads

    obj.setdefault("arm_id", arm_id)
    line = json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        expected = repr(_summary(_json_loads(line), 7, _Interned()))
    except (RecordError, ValueError):
        expected = "no record"
    reader = _LineReader(_Interned())
    for _ in range(2):  # the second time, its pins come from what it kept of the first
        try:
            got = repr(reader(line, 7))
        except LookupError:
            continue
        assert got == expected, line
