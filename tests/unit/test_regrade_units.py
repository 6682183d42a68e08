"""A regrade's pieces without a daemon (docs/regrading.md): what the agent saw hashed apart
from what grades it, `compare`'s grader-by-grader flips, the pivot's mark, and the store
commands carrying snapshots. The whole regrade, against real daemons, is
tests/e2e/test_regrading_doc.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_jaato_eval.cli import flip_lines, main
from pytest_jaato_eval.results import snapshots
from pytest_jaato_eval.results.account import account
from pytest_jaato_eval.results.compare import compare_groups, grader_flips
from pytest_jaato_eval.report.html import pivot_view
from pytest_jaato_eval.results.formats import document
from pytest_jaato_eval.results.pivot import Pivot, render_pivot
from pytest_jaato_eval import parts
from pytest_jaato_eval.task import sides
from pytest_jaato_eval.task.arms import arms_of
from pytest_jaato_eval.task.load import load_task
from store_lines import arm, write

MANIFEST = {
    "id": "t", "environment": {"fixture": "fixture", "config_root": ".jaato"},
    "input": {"prompt": "Write {{ word }}.", "agent_params": {"port": 8080}},
    "harness": {"profile": "writer", "profile_set": "echo"},
    "graders": [{"kind": "script", "file": "checks/check.py"},
                {"kind": "judge", "profile": "critic"}],
    "dataset": {"rows": [{"id": "a", "word": "READY", "expected": "READY"}]},
}


def task_dir(tmp_path: Path, manifest: dict | None = None) -> Path:
    d = tmp_path / "task"
    for rel, text in {"fixture/seed.txt": "seed\n", ".jaato/profiles/echo/writer.yaml": "w: 1\n",
                      ".jaato/profiles/echo/critic.yaml": "c: 1\n",
                      ".jaato/checks/check.py": "print('ok')\n",
                      ".jaato/skills/hint.md": "a hint\n"}.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    (d / "task.yaml").write_text(yaml.safe_dump(manifest or MANIFEST))
    return d


def sides_of(d: Path) -> tuple[dict, dict]:
    task = load_task(d / "task.yaml")
    arm = arms_of(task, None, None)[0]
    return (sides.agent_side(arm, task.config_root),
            sides.grader_side(arm, task.config_root))


def edit(d: Path, **changes) -> None:
    doc = yaml.safe_load((d / "task.yaml").read_text())
    for dotted, value in changes.items():
        node = doc
        *path, last = dotted.split("__")
        for key in path:
            node = node[key]
        node[last] = value
    (d / "task.yaml").write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize("change, agent_parts, grader_parts", [
    (lambda d: edit(d, input__prompt="Write {{ word }} now."), ["prompt"], []),
    (lambda d: edit(d, input__agent_params={"port": 9090}), ["agent_params"], []),
    (lambda d: (d / "fixture" / "seed.txt").write_text("other\n"), ["fixture"], []),
    (lambda d: (d / ".jaato/profiles/echo/writer.yaml").write_text("w: 2\n"), ["profile"], []),
    (lambda d: (d / ".jaato/skills/hint.md").write_text("another\n"), ["config"], []),
    # What grades the arm: its graders, their files, the judge's profile, the row's answer key.
    (lambda d: (d / ".jaato/checks/check.py").write_text("print('fixed')\n"), [], ["files"]),
    (lambda d: (d / ".jaato/profiles/echo/critic.yaml").write_text("c: 2\n"), [], ["files"]),
    (lambda d: edit(d, graders=[{"kind": "script", "file": "checks/check.py",
                                 "expect_exit": 1}, {"kind": "judge", "profile": "critic"}]),
     [], ["graders"]),
    (lambda d: edit(d, dataset={"rows": [{"id": "a", "word": "READY", "expected": "DONE"}]}),
     [], ["sample"]),
])
def test_each_change_lands_on_its_own_side(tmp_path, change, agent_parts, grader_parts):
    d = task_dir(tmp_path)
    agent_before, grader_before = sides_of(d)
    sides._tree.cache_clear()
    sides._files.cache_clear()
    change(d)
    agent_after, grader_after = sides_of(d)
    assert sides.changed(agent_before, agent_after) == agent_parts
    assert sides.changed(grader_before, grader_after) == grader_parts


def test_what_changed_is_said_in_words():
    assert parts.said(["prompt"]) == "the prompt"
    assert parts.said(["fixture", "prompt"]) == "the fixture and the prompt"
    assert sides.changed(None, {"prompt": "x"}) == ["prompt"]  # a record that kept none


def regraded(line: dict, state: str, verdicts: list[dict], run: str = "run1") -> dict:
    return dict(line, state=state, verdicts=verdicts, run_id="run2",
                regraded={"agent_run_id": run, "run_id": run, "arm_id": line["arm_id"]})


def verdict(gid: str, state: str, detail: str) -> dict:
    return {"grader_id": gid, "claim": "c", "state": state, "detail": detail, "evidence": [],
            "blocked_reason": None if state != "BLOCKED" else detail}


def test_compare_lists_each_flip_grader_by_grader(tmp_path, capsys):
    script, judge = "script:check.py", "judge:critic"
    old = [dict(arm("t", "echo", 0, "FAIL"), verdicts=[
        verdict(script, "FAIL", "exit 1, expected 0"), verdict(judge, "PASS", "score 0.9")]),
        dict(arm("t", "echo", 1, "PASS"), verdicts=[
            verdict(script, "PASS", "exit 0"), verdict(judge, "PASS", "score 0.9")])]
    new = [regraded(old[0], "PASS", [verdict(script, "PASS", "exit 0"),
                                     verdict(judge, "PASS", "score 0.9")]),
           regraded(old[1], "PASS", [verdict(script, "PASS", "exit 0"),
                                     verdict(judge, "PASS", "score 0.9")])]
    base, after = Pivot.of_records(old), Pivot.of_records(new)
    flips = grader_flips(base, after, compare_groups(base.cells, after.cells))
    assert [f.arm_id for f in flips] == ["t@echo#0"]  # the unchanged arm is not listed
    assert flip_lines(flips[0]) == [
        "t@echo#0: FAIL → PASS",
        "  script:check.py: FAIL → PASS", "    was: exit 1, expected 0", "    now: exit 0",
        "  judge:critic: PASS, unchanged (score 0.9)"]
    a, b = write(tmp_path / "old.jsonl", old), write(tmp_path / "new.jsonl", new)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "grader by grader" in out and "  script:check.py: FAIL → PASS" in out
    lines = render_pivot(after.cells)
    assert "regraded: 2 of 2 arms graded again from the snapshots of run run1" in "\n".join(
        lines).replace("\n  ", " ")
    assert all(len(line) <= 80 for line in lines if line.startswith(("regraded", "  ")))
    # the same sentence under the HTML report's pivot and the Markdown one
    assert any(n.startswith("regraded: 2 of 2 arms") for n in pivot_view(account(after)).notes)
    assert "regraded: 2 of 2 arms" in document(account(after), "markdown")


def test_a_changed_grader_under_the_same_state_is_listed_on_a_regraded_store():
    script, extra = "script:check.py", "script:other"
    old = [dict(arm("t", "echo", 0, "FAIL"), verdicts=[verdict(script, "FAIL", "exit 1")])]
    new = [regraded(old[0], "FAIL", [verdict(script, "PASS", "exit 0"),
                                     verdict(extra, "FAIL", "exit 2")])]
    base, after = Pivot.of_records(old), Pivot.of_records(new)
    (flip,) = grader_flips(base, after, compare_groups(base.cells, after.cells))
    assert flip_lines(flip)[:2] == ["t@echo#0: FAIL (graders changed)",
                                    "  script:check.py: FAIL → PASS"]
    assert "  script:other: absent → FAIL" in flip_lines(flip)


def test_merge_and_validate_carry_snapshots(tmp_path, capsys):
    name = snapshots.file_name("t@echo#0", "run1")
    line = dict(arm("t", "echo", 0, "PASS"), snapshot=name)
    store = write(tmp_path / "a.jsonl", [line, dict(arm("t", "echo", 1, "PASS"),
                                                    snapshot=snapshots.file_name("t@echo#1",
                                                                                 "run1"))])
    folder = snapshots.folder_of(store)
    folder.mkdir()
    (folder / name).write_bytes(b"kept")
    assert main(["validate", str(store)]) == 0
    said = capsys.readouterr().out
    assert "is not in" in said and "t@echo#1" in said and "a regrade blocks this arm" in said
    out = tmp_path / "merged.jsonl"
    assert main(["merge", str(out), str(store)]) == 0
    assert (snapshots.folder_of(out) / name).read_bytes() == b"kept"
    assert "1 record(s) name a snapshot their input's folder does not hold" in (
        capsys.readouterr().err)
    assert [json.loads(x)["snapshot"] for x in out.read_text().splitlines()][0] == name
