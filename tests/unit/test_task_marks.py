"""`marks:` in task.yaml: the manifest's shape checks, and each entry as the pytest mark it names."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_jaato_eval.manifest import ManifestError, load_task

VALID = """\
id: t
environment: {fixture: fixture, config_root: .jaato}
input: {prompt: do it}
harness: {profile: writer}
graders:
  - {kind: script, run: "true"}
"""


def load(tmp_path: Path, marks: str):
    (tmp_path / "fixture").mkdir(exist_ok=True)
    (tmp_path / ".jaato").mkdir(exist_ok=True)
    p = tmp_path / "task.yaml"
    p.write_text(VALID + textwrap.dedent(marks))
    return load_task(p)


def test_marks_parse_to_name_and_args(tmp_path):
    task = load(tmp_path, """\
        marks:
          - smoke
          - {xfail: known bug}
          - {skipif: {condition: "sys.platform == 'x'", reason: never}}
          - {usefixtures: [db, cache]}
    """)
    assert task.marks == (("smoke", None), ("xfail", "known bug"),
                          ("skipif", {"condition": "sys.platform == 'x'", "reason": "never"}),
                          ("usefixtures", ["db", "cache"]))


def test_no_marks_is_an_empty_tuple(tmp_path):
    assert load(tmp_path, "").marks == ()


def test_a_bad_marks_entry_is_a_one_line_error(tmp_path):
    with pytest.raises(ManifestError) as info:
        load(tmp_path, "marks: [{a: 1, b: 2}]\n")
    message = str(info.value)
    assert "\n" not in message and "marks[0]" in message, message


def test_each_entry_becomes_the_pytest_mark_it_names(tmp_path):
    from pytest_jaato_eval.pytest_layer.collect import task_mark

    assert task_mark(tmp_path, 0, "xfail", "known bug").kwargs == {"reason": "known bug"}
    assert task_mark(tmp_path, 0, "skip", "not today").kwargs == {"reason": "not today"}
    skipif = task_mark(tmp_path, 0, "skipif", "sys.platform == 'x'")
    assert skipif.args == ("sys.platform == 'x'",) and skipif.kwargs == {}
    strict = task_mark(tmp_path, 0, "xfail", {"reason": "r", "strict": True})
    assert strict.kwargs == {"reason": "r", "strict": True}
    assert task_mark(tmp_path, 0, "usefixtures", ["a", "b"]).args == ("a", "b")
    # A name no run in this process registers: pytest caches every registered name
    # process-wide, so one an in-process pytester run registered would not warn.
    with pytest.warns(pytest.PytestUnknownMarkWarning,
                      match=r"marks\[0\]: Unknown pytest.mark.never_registered_here"):
        assert task_mark(tmp_path, 0, "never_registered_here", None).name == \
            "never_registered_here"
