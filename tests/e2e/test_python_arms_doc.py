"""The examples of docs/python-arms.md pass as printed, against a real daemon.

Every fenced block in the page headed by a bold file path (**`arms/…`**) is written to that
path in a throwaway project, with the empty folders the page's layouts show, and run with the
plugin: the echo arms, the parametrised arm, and the arm on a scripted model.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from document_checks import printed_as_documented

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-arms.md"
FILE_BLOCK = re.compile(r"^\*\*`(?P<path>[^`]+)`\*\*\n\n```\w*\n(?P<body>.*?)^```$", re.M | re.S)
# What the page's layouts show as folders to make ("fixture/ # may be empty").
EMPTY_FOLDERS = ("arms/fixture", "scripted-arms/fixture", "scripted-arms/.jaato")

pytestmark = pytest.mark.daemon


def doc_files() -> dict[str, str]:
    return {m["path"]: m["body"] for m in FILE_BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def write_the_page(project) -> None:
    for path, text in doc_files().items():
        written = project.write(path, text)
        assert written.read_text() == text, f"{path}: the example must not rely on dedenting"
    for folder in EMPTY_FOLDERS:
        (project.root / folder).mkdir(parents=True, exist_ok=True)


def test_the_page_shows_every_kind_of_example():
    files = doc_files()
    assert {"arms/test_write.py", "arms/test_samples.py", "scripted-arms/conftest.py",
            "scripted-arms/test_answers.py"} <= set(files), sorted(files)


def test_the_echo_examples_pass_as_printed(project):
    write_the_page(project)
    result = project.run("arms", "-v")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "arms/test_samples.py::test_writes_ready_however_asked[[]plainly-echo-r0[]] PASSED*",
        "arms/test_samples.py::test_writes_ready_however_asked[[]politely-echo-r0[]] PASSED*",
        "arms/test_write.py::test_writes_ready[[]echo-r0[]] PASSED*",
        "arms/test_write.py::test_writes_ready[[]echo-r1[]] PASSED*"])
    # The page's output is what the program prints (numbers aside: seconds, costs, %).
    for command in ("pytest arms/ -v", "pytest arms/test_samples.py -v"):
        printed_as_documented(DOC, command, result.stdout.str())
    ids = sorted(r["arm_id"] for r in project.records())
    assert ids == ["arms/test_samples.py::test_writes_ready_however_asked[plainly]@echo#0",
                   "arms/test_samples.py::test_writes_ready_however_asked[politely]@echo#0",
                   "arms/test_write.py::test_writes_ready@echo#0",
                   "arms/test_write.py::test_writes_ready@echo#1"]


def test_the_scripted_model_example_passes_from_any_directory(project):
    write_the_page(project)
    # Run from inside the folder: the profile path is the conftest's, not the cwd's.
    (project.root / "elsewhere").mkdir()
    project.monkeypatch.chdir(project.root / "elsewhere")
    result = project.run(str(project.root / "scripted-arms"), "-v")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*test_answers.py::test_answers_42[[]scripted-r0[]] PASSED*"])
    printed_as_documented(DOC, "pytest scripted-arms/ -v",
                          result.stdout.str().replace("../scripted-arms/", "scripted-arms/"))
    (record,) = project.records()
    assert record["state"] == "PASS" and record["payload_hash"]
