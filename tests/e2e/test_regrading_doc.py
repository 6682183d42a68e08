"""docs/regrading.md's worked example, run as printed against real daemons: a grader's bug
fixed without paying for an agent again.

Every file block of the page (**`regrading/…`**) is written to a throwaway project, the
"fixed" block over its first version after the first run, and the page's commands are run as
written (each pytest command pointed at a daemon of the test's own, whose sessions are
counted from the index jaato keeps of every session it opened and the workspace it ran in).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from jaato_project import HANG, short_tmpdir, unused_plugins

from pytest_jaato_eval.engine.daemon import PrivateDaemon

DOC = Path(__file__).resolve().parents[2] / "docs" / "regrading.md"
FILE_BLOCK = re.compile(r"^\*\*`(?P<path>[^`]+)`\*\*(?P<fixed>, fixed)?\n\n```\w*\n"
                        r"(?P<body>.*?)^```$", re.M | re.S)
COMMANDS = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.M | re.S)
FENCED = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.M | re.S)

pytestmark = pytest.mark.daemon


def page() -> str:
    return DOC.read_text(encoding="utf-8")


def doc_files() -> tuple[dict[str, str], dict[str, str]]:
    """(every file as first printed, the files printed again as fixed)."""
    first: dict[str, str] = {}
    fixed: dict[str, str] = {}
    for m in FILE_BLOCK.finditer(page()):
        (fixed if m["fixed"] else first)[m["path"]] = m["body"]
    return first, fixed


def doc_commands() -> list[list[str]]:
    block = COMMANDS.search(page())["body"]
    return [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.strip()]


def printed(first_words: str) -> list[str]:
    """The lines of the page's output block that starts with `first_words`."""
    for m in FENCED.finditer(page()):
        if not m["lang"] and m["body"].startswith(first_words):
            return m["body"].splitlines()
    raise AssertionError(f"the page prints no block starting {first_words!r}")


@pytest.fixture
def own_daemon():
    """A daemon of this test's own, with a HOME of its own: jaato keeps there the index of
    every session the daemon opened, with the workspace it ran in."""
    base = short_tmpdir("jtr-")
    (base / "tmp").mkdir()
    (base / "home").mkdir()
    daemon = PrivateDaemon(base / "d", env={**os.environ, "TMPDIR": str(base / "tmp"),
                                            "HOME": str(base / "home")})
    daemon.ensure()
    yield daemon, base / "home" / ".jaato" / "session_workspace_index.json"
    daemon.stop()
    shutil.rmtree(base, ignore_errors=True)


def sessions_opened(index: Path) -> dict[str, str]:
    """Session id -> the workspace it ran in, for every session the daemon opened."""
    if not index.exists():
        return {}
    return dict(json.loads(index.read_text()).get("map") or {})


def sessions_created(daemon: PrivateDaemon) -> int:
    """Sessions the daemon opened, by its own log's line for each."""
    return daemon.out_file.read_text(errors="replace").count("Session created: ")


def records(path: Path) -> dict[str, dict]:
    return {r["arm_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def verdicts(record: dict) -> dict[str, tuple[str, str]]:
    return {v["grader_id"]: (v["state"], v["detail"]) for v in record["verdicts"]}


def test_the_page_pairs_each_grader_kind_with_a_fix():
    first, fixed = doc_files()
    manifests = [p for p in first if p.endswith("/task.yaml")]
    graders = "".join(first[p] for p in manifests)
    assert all(f"kind: {k}" in graders for k in ("script", "processor", "judge"))
    assert set(fixed) <= set(first) and fixed, "the fix replaces a file the page printed"
    assert [c[:2] for c in doc_commands()] == [
        ["pytest", "regrading/"], ["pytest", "regrading/"], ["python", "-m"]]


@pytest.mark.slow  # a daemon of its own and four runs; test_regrade_e2e.py shows the rule
def test_a_fixed_grader_is_regraded_without_an_agent_as_the_page_says(project, own_daemon):
    daemon, index = own_daemon
    first, fixed = doc_files()
    for path, text in first.items():
        assert project.write(path, text).read_text() == text, f"{path}: no dedenting"
    live, regrade, compare = doc_commands()
    project.monkeypatch.setenv("TMPDIR", str(project.tmp))

    def pytest_run(argv: list[str], *extra: str):
        return project.pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", *unused_plugins(argv + list(extra)), *argv[1:], *extra,
            timeout=HANG)

    socket = f"--jaato-socket={daemon.socket_path}"
    ran = pytest_run(live, socket)
    assert ran.ret == 1, ran.stdout.str()
    store = project.root / "results.jsonl"
    before = records(store)
    assert {a: r["state"] for a, r in before.items()} == {
        "greeting@echo#0": "FAIL", "answer@echo#0": "PASS", "answer@echo#1": "PASS"}
    script, judge = "script:checks/greeting.py", "judge:critic"
    assert verdicts(before["greeting@echo#0"])[script] == ("FAIL", "exit 1, expected 0")
    assert verdicts(before["greeting@echo#0"])[judge] == ("PASS", "score 0.9")
    # Three agents and one judge. Counted in the daemon's log: jaato's index keeps one entry
    # per session id, and two sessions started in the same second may share one.
    assert sessions_created(daemon) == 4
    opened = sessions_opened(index)
    assert sum("-judge" in ws for ws in opened.values()) == 1, opened
    assert all(r["snapshot"] for r in before.values()), [r["snapshot_note"] for r in before.values()]
    assert len(list((project.root / "results.snapshots").iterdir())) == 3

    for path, text in fixed.items():
        project.write(path, text)
    ran = pytest_run(regrade, socket)
    assert ran.ret == 0, ran.stdout.str()
    run_id = before["greeting@echo#0"]["run_id"]
    for line in printed("regraded:"):
        ran.stdout.fnmatch_lines([re.sub(r"run \w+", f"run {run_id}", line)])
    # No agent session: the only session the regrade opened is the judge's, in its view.
    assert sessions_created(daemon) == 5
    new = {sid: ws for sid, ws in sessions_opened(index).items() if sid not in opened}
    assert len(new) == 1 and "-judge" in next(iter(new.values())), new
    after = records(project.root / "results.regraded.jsonl")
    assert set(after) == set(before)
    for arm, r in after.items():
        was = before[arm]
        assert r["regraded"]["run_id"] == run_id and r["regraded"]["arm_id"] == arm
        assert r["run_id"] != run_id and r["agent_side"] == was["agent_side"]
        # the agent's cost carried over, not spent again
        for key in ("usage", "session_id", "turns", "payload_hash", "duration_seconds"):
            assert r[key] == was[key], (arm, key)
        changed = {g for g in verdicts(r) if verdicts(r)[g] != verdicts(was)[g]}
        assert changed == ({script} if arm == "greeting@echo#0" else set()), (arm, changed)
    greeting = after["greeting@echo#0"]
    assert greeting["state"] == "PASS" and verdicts(greeting)[script] == ("PASS", "exit 0")
    # the judge's new spend, recorded apart from the agent's
    assert greeting["judge_usage"]["cost_usd"] == pytest.approx(0.0009)
    assert greeting["usage"]["cost_usd"] == before["greeting@echo#0"]["usage"]["cost_usd"]
    assert greeting["regraded"]["judge_usage"] == before["greeting@echo#0"]["judge_usage"]
    assert all(r["judge_usage"] is None for a, r in after.items() if a != "greeting@echo#0")
    assert greeting["grader_side"]["files"] != before["greeting@echo#0"]["grader_side"]["files"]

    shown = project.pytester.run(sys.executable, *compare[1:])
    assert shown.ret == 0, shown.stdout.str()
    shown.stdout.fnmatch_lines(printed("grader by grader"), consecutive=True)
    assert "a regrade of the base's runs" in shown.stdout.str()

    # The agent's side changed: refused by name. A run with no judge starts no daemon, and
    # -k and -n select and spread the regraded arms as they do any arm.
    manifest = project.root / "regrading" / "answer" / "task.yaml"
    manifest.write_text(manifest.read_text().replace("six times seven", "seven times six"))
    started = project.spy_on_daemon_starts()
    ran = pytest_run(regrade, "-k", "answer", "-n", "2", "--jaato-out", "refused.jsonl")
    assert ran.ret == 2, ran.stdout.str()
    assert Path(f"{started}.loaded").exists(), "the spy on daemon starts was not loaded"
    assert not started.exists(), "a regrade without a judge started a daemon"
    refused = records(project.root / "refused.jsonl")
    assert sorted(refused) == ["answer@echo#0", "answer@echo#1"]
    for r in refused.values():
        assert r["state"] == "BLOCKED" and r["blocked_reason"].startswith(
            f"regrade refused: the prompt changed since run {run_id};"), r["blocked_reason"]
        assert r["usage"] == before[r["arm_id"]]["usage"]
    ran.stdout.fnmatch_lines(["*BLOCKED*answer*regrade refused: the prompt changed since run*"])
    said = " ".join(ran.stdout.str().replace("\n  ", " ").split())
    assert "regraded: 0 of 2 arms graded again from the snapshots of run " in said, said
    assert "(--jaato-regrade); 2 BLOCKED, given no verdict again:" in said, said
    # A judge's task refused: no judge can grade it, so no daemon is started for it.
    manifest = project.root / "regrading" / "greeting" / "task.yaml"
    manifest.write_text(manifest.read_text().replace("Write the greeting", "Write the words"))
    ran = pytest_run(regrade, "-k", "greeting", "--jaato-out", "refused-judged.jsonl")
    assert ran.ret == 2, ran.stdout.str()
    assert not started.exists(), "a refused regrade of a judge's task started a daemon"
    ran.stdout.fnmatch_lines(["*BLOCKED*greeting*regrade refused: the prompt changed since run*"])
