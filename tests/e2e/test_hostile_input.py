"""Hostile and malformed input.

1. The manifest loader, fed random YAML documents and random mutations of valid
   manifests, returns a Task the rest of the plugin can use or raises ManifestError
   whose text is one printable line starting with the file's path (M2) — never
   anything else.
2. Grader ids, details, evidence and blocked reasons holding HTML, ANSI escape
   sequences, NUL and control characters or 100k-character lines are shown, never
   obeyed: in the terminal (verdict table, BLOCKED summary lines, pivot digest), in
   JUnit XML and in the HTML report.

Hypothesis runs derandomized with no example database, so CI sees the same examples
on every run; the example counts keep the whole file to a few seconds.
"""
from __future__ import annotations

import copy
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, currently_in_test_context, event, example, given, settings
from hypothesis import strategies as st

from _pytest.junitxml import bin_xml_escape

from pytest_jaato_eval.task.arms import arms_of
from pytest_jaato_eval.contract import build_contract_env
from pytest_jaato_eval.engine import files
from pytest_jaato_eval.task.load import ManifestError, load_task
from pytest_jaato_eval.task.model import Task
from pytest_jaato_eval.pytest_layer.outcome import junit_properties, verdict_table
from pytest_jaato_eval.results.pivot import reason_key
from pytest_jaato_eval.results.pivot import build_cells
from pytest_jaato_eval.results.pivot import render_pivot
from pytest_jaato_eval.results.record import RECORD_KEYS, ArmRecord
from pytest_jaato_eval.render import safe_text

FUZZ = settings(max_examples=200, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much,
                                       HealthCheck.large_base_example])

# -- the manifest loader ----------------------------------------------------------------

SESSION = {
    "id": "t",
    "description": "a task",
    "environment": {"fixture": "fixture", "config_root": ".jaato"},
    "input": {"prompt": "do it", "agent": "coder", "agent_params": {"port": 8080, "flags": [1]}},
    "harness": {"kind": "session", "profile": "writer", "profile_set": "echo"},
    "graders": [
        {"kind": "script", "run": "true", "expect_exit": 0, "timeout_seconds": 5, "weight": 1},
        {"kind": "processor", "script": "check.py"},
        {"kind": "judge", "profile": "rubric", "threshold": 0.5, "gate_on": ["script:true"]},
        {"kind": "script", "file": "checks/grade.py"},
    ],
    "budget": {"usd": 0.5, "turns": 10, "degrade": [{"at": 0.8, "profile": "cheap"}]},
    "repeats": 2,
    "marks": ["smoke", {"xfail": {"reason": "known", "strict": True}}, {"skipif": "False"}],
}
DRIVER = {
    "id": 7,
    "environment": {"fixture": "fixture", "config_root": ".jaato"},
    "input": {"params": {"ticker": "NVDA", "depth": {"a": [None, True, 1.5]}}},
    "harness": {"kind": "driver", "run": '"$JAATO_EVAL_PYTHON" driver.py'},
    "graders": [{"kind": "script", "run": "test -s out.txt"}],
}


class _Dumper(yaml.SafeDumper):
    """Safe YAML, plus ints of any size: PyYAML reads `0x…` without the digit limit that
    stops repr() at 4300 digits, so a manifest can hold one."""


def _represent_int(dumper, value):
    if abs(value) > 2**64:
        return dumper.represent_scalar("tag:yaml.org,2002:int",
                                       ("-" if value < 0 else "") + hex(abs(value)))
    return dumper.represent_int(value)


_Dumper.add_representer(int, _represent_int)


def to_yaml(doc) -> str:
    # Shared and self-referencing nodes come out as anchors and aliases.
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


ODD = [
    "", " ", "\t", "~", "null", "yes", "on", "0x1F", "1:30", "<<", "*a", "&a", "!!binary",
    "\x00", "nul\x00in", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\x7f\x9b31m",
    "\u202eevil", "\ufeffbom", "\u200b", "\ud800", "a\nb", "a\r\nb", "\u2028", "💥" * 3,
    "ß", "..", ".", "fixture", ".jaato", "script", "driver", "session",
]
# No '/' in generated text: a fixture of '/' is a valid (if unwise) manifest whose
# content hash would read the whole disk. '..' stays: the task sits in its own folder.
# Long text is 10k here (pure-Python PyYAML scans 100k in ~0.1 s, too slow for 200
# examples); the 100k-character line is the renderers' tests' and a regression case's.
TEXT = st.one_of(st.text(st.characters(blacklist_characters="/"), max_size=12),
                 st.sampled_from(ODD), st.integers(9_000, 10_000).map(lambda n: "K" * n))
# Past repr()'s 4300 digits (made lazily: hypothesis reprs its strategies).
HUGE_INT = st.sampled_from([2**64 + 1, -(2**70), 10**400]) | st.integers(4300, 5000).map(
    lambda n: 16**n)
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(), HUGE_INT,
    st.floats(allow_nan=True, allow_infinity=True), TEXT,
    st.binary(max_size=12), st.dates(), st.datetimes(),
    st.sets(st.integers(0, 9) | st.text(max_size=3), max_size=3),
)
KEY = st.one_of(
    TEXT, st.sampled_from(["profle", "repeat", "grader", "env", "apparmor", "runtime_limits",
                           "kind", "run", "params", "agent_params", "degrade", "weight"]),
    st.integers(), st.none(), st.booleans(), st.floats(allow_nan=True),
)
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(KEY, inner, max_size=4), max_leaves=8)


def nodes(doc):
    """(parent, key) of every node below the top, each container visited once."""
    out, seen, todo = [], set(), [doc]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for key, child in list(items):
            out.append((node, key))
            todo.append(child)
    return out


def mutate(doc: dict, data) -> None:
    """One random edit: odd text where text goes, drop, null, wrong type, unknown or
    non-string key, rename, alias, self-reference, deep nesting."""
    where = nodes(doc)
    if not where:
        return
    parent, key = data.draw(st.sampled_from(where))
    op = data.draw(st.sampled_from(["text", "text", "drop", "null", "replace", "replace", "add",
                                    "rename", "alias", "recurse", "nest"]))
    if op == "text":  # often still a Task: ANSI in a prompt, NUL in a run, 10k chars of id
        parent[key] = data.draw(TEXT) if isinstance(parent[key], str) else parent[key]
    elif op == "drop":
        del parent[key]
    elif op == "null":
        parent[key] = None
    elif op == "replace":
        parent[key] = data.draw(VALUE)
    elif op == "add":
        target = parent if isinstance(parent, dict) else doc
        target[data.draw(KEY)] = data.draw(VALUE)
    elif op == "rename" and isinstance(parent, dict):
        parent[data.draw(KEY)] = parent.pop(key)
    elif op == "alias":  # a shared node: an anchor and an alias in the YAML
        other, other_key = data.draw(st.sampled_from(where))
        parent[key] = other[other_key]
    elif op == "recurse":  # an alias to its own anchor
        parent[key] = parent if data.draw(st.booleans()) else [parent]
    elif op == "nest":
        value = parent[key]
        for _ in range(data.draw(st.integers(1, 60))):
            value = [value] if data.draw(st.booleans()) else {"a": value}
        parent[key] = value


YAML_BITS = [
    "id: t", "id: &x t", "description: *x", "description: *nowhere", "id: [&r [*r]]",
    "environment: {fixture: fixture, config_root: .jaato}", "environment: {<<: {fixture: ..}}",
    "input: {prompt: go}", "harness: {profile: p}", "harness: {kind: driver, run: 'true'}",
    "graders: [{kind: script, run: 'true'}]", "graders: [&g {kind: script, run: x}, *g]",
    "graders: !!set {a, b}", "graders: !!omap [a: 1]", "graders: !!pairs [a: 1]",
    "id: !!binary aGk=", "id: !!timestamp 2024-01-01", "id: 2024-13-45", "id: !!float nan",
    "id: 0x" + "f" * 4000, "id: !foo bar", "id: !!python/object/apply:os.system ['true']",
    "? [a, b]\n: c", "? {a: b}\n: c", "%YAML 1.1\n---", "%TAG ! tag:x,2024:\n---", "---",
    "...", "\ufeff", 'id: "\\e[31m\\0\\a"', 'id: "\\ud800"', "repeats: 99999999999999999999",
    "repeats: .inf", "repeats: 0b101", "repeats: 1:30", "repeats: 2", "1: int key", "~: v",
    "input: {prompt: go, agent_params: &p {a: *p}}",
    "input: {prompt: go, agent_params: {d: 2024-01-01}}",
    "budget: {usd: 1, degrade: [!!binary aGk=]}", "budget: {usd: .nan}", "\t- tab",
    "key: |\n  block\n   more", "key: >-\n folded", "'quoted': v", "- a list", "&a a: *a",
    "laughs: &l0 [x, x, x, x, x, x, x, x, x, x]\nl1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0]",
]
YAML_TEXT = st.one_of(
    st.text(st.sampled_from(list(":-[]{}!&*?|>'\"%@`#,.~<\n \t\\0x") + ["\x00", "\x1b", "é"]),
            max_size=80),
    st.lists(st.sampled_from(YAML_BITS), min_size=1, max_size=8).map("\n".join),
    # Deep nesting, past the recursion limit (PyYAML's composer recurses per level).
    st.integers(1, 700).map(lambda n: "id: " + "[" * n + "]" * n),
    st.integers(1, 700).map(lambda n: "id: " + "{a: " * n + "1" + "}" * n),
    VALUE.map(to_yaml),
)


@pytest.fixture(scope="module")
def task_file(tmp_path_factory) -> Path:
    """task.yaml in a folder of its own, beside an existing fixture and config root."""
    task = tmp_path_factory.mktemp("hostile") / "task"
    (task / "fixture").mkdir(parents=True)
    (task / ".jaato").mkdir()
    return task / "task.yaml"


def note(what: str) -> None:
    """--hypothesis-show-statistics: what share of examples load, and where the rest fail."""
    if currently_in_test_context():
        event(what)


def load_or_refuse(path: Path) -> Task | None:
    """The property: a usable Task, or a ManifestError that is one printable line
    starting with the path. Any other exception fails the test."""
    try:
        task = load_task(path)
    except ManifestError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: "), message
        rest = message[len(f"{path}: "):]
        assert rest.isprintable(), f"not one printable line: {rest!r}"  # no \n, no ESC
        assert len(rest) <= 810, len(rest)
        note(f"ManifestError at {exc.where.split('.')[0].split('[')[0] or 'file'}")
        return None
    assert isinstance(task, Task)
    note("a Task")
    assert task.id and task.id.isprintable()
    assert isinstance(task.repeats, int) and task.repeats >= 1
    # What the arm will do with it must work too: node ids, the contract (C1, C2), the
    # budget handed to the daemon as JSON.
    assert all(arm.id.isprintable() for arm in arms_of(task, None, 1))
    build_contract_env(workspace=path.parent, config_root=task.config_root,
                       params=arms_of(task, None, 1)[0].grader_params)
    json.dumps(task.budget.as_dict() if task.budget else None, allow_nan=False)
    for grader in task.graders:
        assert isinstance(grader.id, str) and grader.id.startswith(f"{grader.kind}:")
        assert math.isfinite(grader.timeout)
        for rel in (getattr(grader, "file", None), getattr(grader, "script", None)):
            if rel:  # a grader file never names a path outside the config root
                assert not Path(rel).is_absolute() and ".." not in Path(rel).parts[:1]
    for name, args in task.marks:  # what the pytest layer turns into marks
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
        assert args is None or isinstance(args, (str, list, dict))
        json.dumps(args, allow_nan=False)
    return task


def write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", "surrogatepass"))


def test_the_valid_manifests_load(task_file):
    """The seeds of the mutation test are themselves valid, so mutations start from a Task."""
    for doc in (SESSION, DRIVER):
        write(task_file, to_yaml(doc))
        assert load_or_refuse(task_file) is not None


@FUZZ
@given(text=YAML_TEXT)
def test_random_yaml_is_a_task_or_a_one_line_manifest_error(task_file, text):
    write(task_file, text)
    load_or_refuse(task_file)


@FUZZ
@given(seed=st.sampled_from([SESSION, DRIVER]), data=st.data())
def test_mutated_manifest_is_a_task_or_a_one_line_manifest_error(task_file, seed, data):
    doc = copy.deepcopy(seed)
    for _ in range(data.draw(st.integers(1, 3))):
        mutate(doc, data)
    write(task_file, to_yaml(doc))
    load_or_refuse(task_file)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(blob=st.binary(max_size=200))
@example(blob=b"\xff\xfe\x00i\x00d\x00")       # UTF-16
@example(blob=b"id: t\n\x00\x01\x02")
def test_binary_file_is_a_manifest_error(task_file, blob):
    task_file.write_bytes(blob)
    load_or_refuse(task_file)


BASE = to_yaml(SESSION)


@pytest.mark.parametrize("text, where, says", [
    # What the fuzzing found: each was a traceback, or a Task that broke later.
    (BASE.replace("id: t", "id: 0x" + "f" * 5000), "id", "<20000-bit integer>"),
    (BASE.replace("description: a task", "description: 0x" + "f" * 5000), "description",
     "expected a string, got int <20000-bit integer>"),
    (BASE.replace("repeats: 2", "repeats: 0x" + "f" * 5000), "repeats", "expected an integer >= 1"),
    (BASE.replace("timeout_seconds: 5", "timeout_seconds: .inf"), "graders[0].timeout_seconds",
     "expected a number > 0, got float inf"),
    (BASE.replace("threshold: 0.5", "threshold: .nan"), "graders[2].threshold",
     "expected a number, got float nan"),
    (BASE + '"a\\nb\\e[31m": 1\n', "a\\nb\\x1b[31m", "unknown key"),
    (BASE + "? " + "x" * 100_000 + "\n: 1\n", "x" * 199 + "…", "unknown key"),
    (BASE.replace("fixture: fixture", "fixture: " + "f" * 300), "environment.fixture",
     "cannot be resolved: File name too long"),
    # a date is a parameter's only non-JSON value (handed on as its text, C2), nowhere else
    (BASE.replace("at: 0.8", "at: 2024-01-01"), "budget.degrade[0].at",
     "expected a JSON value (string, number, boolean, null, list or mapping), got date"),
    (BASE.replace("port: 8080", "port: !!binary aGk="), "input.agent_params.port", "got bytes"),
    (BASE.replace("port: 8080", "port: !!set {a}"), "input.agent_params.port", "got set"),
    (BASE.replace("port: 8080", "port: {1: a}"), "input.agent_params.port",
     "key 1 is of type int; keys must be strings"),
    (BASE.replace("agent_params:", "agent_params: &p").replace("port: 8080", "port: *p"),
     "input.agent_params.port", "contains itself"),
    (BASE.replace("port: 8080", "port: .inf"), "input.agent_params.port",
     "expected a finite number, got inf"),
    (BASE.replace("degrade:", "degrade: &d").replace("at: 0.8", "at: *d"),
     "budget.degrade[0].at", "contains itself"),
    (BASE.replace("run: 'true'", 'run: "tr\\0ue"'), "graders[0].run", "holds a NUL character"),
    (BASE.replace("run: 'true'", 'run: "\\ud800"'), "graders[0].run", "unpaired surrogate"),
    (BASE.replace("id: t", 'id: "t\\e[2J"'), "id", "holds '\\x1b'; it names arms and test ids"),
    (BASE.replace("profile_set: echo", 'profile_set: "echo\\n"'), "harness.profile_set",
     "must be printable text"),
])
@pytest.mark.parametrize("loader", ["libyaml", "pure"])
def test_what_the_fuzzing_found_is_a_one_line_error(task_file, text, where, says, loader,
                                                    monkeypatch):
    """Under libyaml's loader (the default when PyYAML has it) and the pure-Python one (which
    reads again what libyaml refuses, a surrogate escape among it: yaml.safe_load takes it)."""
    if loader == "pure":
        monkeypatch.setattr(files, "yaml_loader", lambda: yaml.SafeLoader)
    elif not yaml.__with_libyaml__:
        pytest.skip("PyYAML was built without libyaml")
    write(task_file, text)
    with pytest.raises(ManifestError) as info:
        load_task(task_file)
    load_or_refuse(task_file)  # the same message passes the property
    assert info.value.where == where
    assert says in info.value.reason


def test_an_alias_bomb_in_parameters_is_refused_not_expanded(task_file):
    """A billion laughs: each level multiplies by ten; the loader stops counting at 10k."""
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    text = BASE.replace("port: 8080", "port: {" + ", ".join(levels) + "}")
    write(task_file, text)
    with pytest.raises(ManifestError, match=r"input\.agent_params: holds more than 10000 values"):
        load_task(task_file)


# -- safe_text ----------------------------------------------------------------------------

HOSTILE = {
    "csi": "\x1b[31mred\x1b[0m",
    "osc": "\x1b]0;title\x07",
    "c1 csi": "\x9b31m",
    "nul": "a\x00b",
    "del": "a\x7fb",
    "bidi": "abc\u202edef",
    "surrogate": "x\ud800y",
    "zero width": "a\u200bb",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("collapse", [True, False])
def test_safe_text_shows_control_characters_never_emits_them(text, collapse):
    shown = safe_text(text, 300, collapse=collapse)
    assert shown.isprintable()
    shown.encode("utf-8")  # a lone surrogate would crash the terminal's encoder
    bad = next(c for c in text if not c.isprintable())
    assert repr(bad)[1:-1] in shown  # `\x1b`, `\x00`, `\u202e`: shown, so a reader sees it


def test_safe_text_bounds_the_line_and_marks_the_cut():
    assert safe_text("A" * 100_000, 400) == "A" * 399 + "…"
    assert len(safe_text("\x1b" * 1000, 50)) == 50
    assert safe_text("short", 400) == "short"
    assert len(safe_text("B" * 5000, None)) == 5000


def test_safe_text_collapses_or_keeps_spacing():
    assert safe_text("a \n\t b\r\nc") == "a b c"
    assert safe_text("a  b\tc\nd", collapse=False) == "a  b    c\\nd"  # tab stops of 4


def test_safe_text_leaves_markup_to_the_html_renderer():
    """`<`, `&`, `"` are harmless on a terminal; html.escape is the report's job."""
    assert safe_text('<script>alert("x")</script> && b') == '<script>alert("x")</script> && b'


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(text=st.text(st.characters(codec=None, categories=None)) | st.sampled_from(ODD),
       width=st.integers(1, 500), collapse=st.booleans())
def test_safe_text_is_always_one_printable_bounded_line(text, width, collapse):
    shown = safe_text(text, width, collapse=collapse)
    assert shown.isprintable() and len(shown) <= width


# -- the renderers ------------------------------------------------------------------------

EVIL_ID = 'script:printf "\x1b[31m<script>alert(1)</script>" && echo "\x00\x1b]0;pwned\x07"'
EVIL_LINES = [f"line {i}" for i in range(100)] + [
    "\x1b[2J\x1b[H<b>cleared</b> & \"quoted\"", "nul\x00here\tand\ttabs", "Z" * 100_000,
    "\x9b31m c1 \u202e bidi"]


def hostile_record(state="FAIL", task="hostile\x1b[31m", reason=None) -> dict:
    record = dict.fromkeys(RECORD_KEYS)
    record.update(
        results_version="1", caveats=[], arm_id=f"{task}@echo#0", task_id=task,
        profile_set="echo", repeat=0, state=state, model="echo\x1b[5m", provider="echo",
        session_id="sess\x00", session_ids=["sess"], turns=1, usage={"cost_usd": 0.001},
        error="NudgeExhausted: \x1b[31m" + "E" * 5000, blocked_reason=reason,
        verdicts=[{"grader_id": EVIL_ID, "claim": "<i>claim</i>", "state": state,
                   "detail": "exit 1\n\x1b[31mexpected 0\x1b[0m", "evidence": list(EVIL_LINES),
                   "blocked_reason": reason}])
    return record


def assert_terminal_safe(lines, longest=500):
    for line in lines:
        assert line.isprintable(), repr(line[:200])
        assert len(line) <= longest, len(line)


def test_verdict_table_shows_hostile_text_without_obeying_it():
    table = verdict_table(ArmRecord.from_dict(hostile_record()))
    lines = table.splitlines()
    assert_terminal_safe(lines)
    assert "\\x1b[31m<script>alert(1)</script>" in table  # the grader id, visibly
    assert "exit 1 \\x1b[31mexpected 0\\x1b[0m" in table   # the detail, collapsed
    assert "  nul\\x00here    and tabs" in lines           # tabs expanded, not raw
    assert "  " + "Z" * 399 + "…" in lines
    assert "  … 64 earlier lines not shown" in lines        # 104 lines, the last 40 shown
    assert lines[-1] == "  \\x9b31m c1 \\u202e bidi"


def test_junit_property_names_hold_no_raw_control_character():
    """pytest escapes property values, not names: a NUL there made the file unreadable."""
    props = junit_properties(ArmRecord.from_dict(
        hostile_record(state="BLOCKED", reason="\x1b[31mdaemon\x00 gone")))
    for name, _value in props:
        assert name.isprintable(), name
    names = dict(props)
    assert names["jaato_blocked_reason"] == "\\x1b[31mdaemon\\x00 gone"
    element = ET.Element("properties")
    for name, value in props:  # as pytest's junitxml writes them: it escapes the value only
        ET.SubElement(element, "property", name=name, value=bin_xml_escape(value))
    ET.fromstring(ET.tostring(element))  # well-formed XML


def test_pivot_and_its_digest_show_hostile_ids_and_reasons_safely():
    records = [hostile_record("BLOCKED", reason=f"{EVIL_ID}: exit 127\n" + "R" * 10_000),
               hostile_record("BLOCKED", task="t" * 5000, reason="\x1b]0;x\x07 gone")]
    records[1]["arm_id"] = "long@echo#0"
    lines = render_pivot(build_cells(records))
    assert_terminal_safe(lines, longest=400)
    assert any("hostile\\x1b[31m @ echo: (1×) script:printf" in line for line in lines)
    assert any("(1×) \\x1b]0;x\\x07 gone" in line for line in lines)
    assert reason_key("a\x00b\nc") == "a\\x00b c"


def test_html_report_escapes_markup():
    html = pytest.importorskip("pytest_jaato_eval.report.html")
    document = html.render([hostile_record(), hostile_record("BLOCKED", reason=EVIL_ID)])
    assert "<script>alert" not in document
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in document
    assert "<b>cleared</b>" not in document and "&lt;b&gt;cleared&lt;/b&gt;" in document
    assert "<i>claim</i>" not in document


CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e]")


def test_html_report_holds_no_raw_control_character():
    from pytest_jaato_eval.report import html
    document = html.render([hostile_record(), hostile_record("BLOCKED", reason=EVIL_ID)])
    assert not CONTROL.search(document), repr(CONTROL.search(document))


# -- end to end: a real arm whose grader prints hostile text -----------------------------

E2E_RUN = ("printf '\x1b[31mRED\x1b[0m <script>alert(1)</script> \"q\" && \x1b]0;pwned\x07 "
           "nul:\\000:\\n'; head -c 50000 /dev/zero | tr '\\000' A; echo; exit 1")
E2E_BLOCKED_RUN = "printf '\x1b[2J\x1b[H<b>gone</b> && \\000\\n'; definitely-not-a-binary-xyz"


def test_hostile_grader_output_renders_safely_end_to_end(project):
    project.task("hostile", graders=[{"kind": "script", "run": E2E_RUN}])
    project.task("hostile-blocked", graders=[{"kind": "script", "run": E2E_BLOCKED_RUN}])
    junit = project.root / "junit.xml"
    report = project.root / "report.html"
    result = project.run("tasks", "--color=no", "-rA", f"--junitxml={junit}",
                         f"--jaato-html={report}")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    out = "\n".join(result.outlines)

    # Terminal: the verdict table, the BLOCKED summary line and the pivot digest.
    assert_terminal_safe(result.outlines, longest=700)
    assert "Traceback" not in out
    assert "\\x1b[31mRED\\x1b[0m <script>alert(1)</script>" in out   # grader id and evidence
    assert "\\x1b]0;pwned\\x07 nul:\\x00:" in out
    assert "  " + "A" * 399 + "…" in result.outlines                  # the 50k line, cut
    blocked = [line for line in result.outlines if line.startswith("BLOCKED ")]
    assert len(blocked) == 1 and "\\x1b[2J\\x1b[H<b>gone</b>" in blocked[0]
    assert "exit 127 (command not found)" in blocked[0]
    digest = [line for line in result.outlines
              if line.startswith("  hostile-blocked @ echo: (1×)")]
    assert digest and "\\x1b[2J" in digest[0]

    # The store stays faithful: the raw text is kept (JSON-escaped), only renderers neutralise.
    by_id = {r["arm_id"]: r for r in project.records()}
    evidence = by_id["hostile@echo#0"]["verdicts"][0]["evidence"]
    assert evidence[0].startswith("\x1b[31mRED") and "\x00" in evidence[0]
    assert evidence[-2] == "A" * 400 + " …"  # bounded: cut, and the cut said
    assert evidence[-1].startswith("[output: 50065 bytes;")
    assert "\x1b" not in project.store.read_text()

    # JUnit: well-formed, every grader's property present, no raw control character.
    tree = ET.parse(junit)
    props = {p.get("name"): p.get("value") for p in tree.iter("property")}
    (name,) = [n for n in props if n.startswith("jaato_verdict[script:printf '\\x1b[31mRED")]
    assert "<script>alert(1)</script>" in name and name.isprintable()
    assert props[name] == "FAIL"
    skipped = next(tree.iter("skipped"))
    assert skipped.get("message").startswith("BLOCKED: script:printf")
    assert not CONTROL.search(junit.read_text())

    # HTML: markup is text, never markup.
    document = report.read_text()
    assert "<script>alert(1)" not in document and "&lt;script&gt;alert(1)" in document
    assert "<b>gone</b>" not in document
