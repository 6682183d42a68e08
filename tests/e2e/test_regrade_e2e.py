"""What an adversarial agent leaves, snapshotted and regraded against the real daemon
(docs/regrading.md, "What is kept"; docs/security.md): a FIFO leaves the snapshot out, a
link out of the workspace is kept as a link and never recreated, a workspace over its cap
is left out with a note; the arm's verdict is never the snapshot's doing, and a regrade of
an arm whose agent left no snapshot keeps what the live run knew, saying why."""
from __future__ import annotations

import json
import tarfile

import pytest
from jaato_project import shell_agent

from pytest_jaato_eval.results import snapshots

pytestmark = pytest.mark.daemon

READY = [{"kind": "script", "run": "grep -qx READY answer.txt"}]


def test_what_the_agent_leaves_is_kept_as_it_is_or_left_out_saying_why(project, tmp_path):
    secret = tmp_path / "outside.txt"
    secret.write_text("the developer's file\n")
    project.task("fifo", profile=shell_agent("fifo", "mkfifo trap; echo READY > answer.txt"),
                 graders=READY)
    project.task("linkout", profile=shell_agent(
        "linkout", f"ln -s {secret} out.txt; ln -s ../../.. up; echo READY > answer.txt"),
        graders=READY)
    project.task("big", profile=shell_agent(
        "big", "head -c 2000000 /dev/urandom > big.bin; echo READY > answer.txt"),
        graders=READY, extra={"snapshot": {"max_mb": 1}})
    project.task("plain", graders=READY)
    result = project.run("tasks")
    live = {r["task_id"]: r for r in project.records()}
    # a FIFO and links out of the workspace are traps: the agent's FAIL
    assert {t: live[t]["state"] for t in ("fifo", "linkout")} == dict.fromkeys(
        ("fifo", "linkout"), "FAIL"), result.stdout.str()
    assert {t: live[t]["state"] for t in ("big", "plain")} == dict.fromkeys(
        ("big", "plain"), "PASS"), result.stdout.str()
    assert live["fifo"]["snapshot"] is None
    assert "the workspace holds a FIFO, 'trap'" in live["fifo"]["snapshot_note"]
    assert live["big"]["snapshot"] is None and "over the snapshot cap" in live["big"][
        "snapshot_note"]
    assert any("snapshot left out" in n for n in live["big"]["notes"])  # said beside it
    kept = snapshots.folder_of(project.store) / live["linkout"]["snapshot"]
    with tarfile.open(kept) as tar:
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
        texts = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isreg())
    assert links == {"workspace/out.txt": str(secret), "workspace/up": "../../.."}
    assert b"the developer's file" not in texts, "a link is kept as a link, never followed"

    regraded = project.root / "regraded.jsonl"
    result = project.run("tasks", f"--jaato-regrade={project.store}",
                         f"--jaato-out={regraded}", "-v")
    again = {r["task_id"]: r for r in map(json.loads, regraded.read_text().splitlines())}
    # no snapshot of a workspace holding a FIFO; the trap that FAILED the live arm stands
    assert [(v["grader_id"], v["state"]) for v in again["fifo"]["verdicts"]] == [
        ("workspace", "FAIL")], result.stdout.str()
    assert any(n.startswith("regraded without a snapshot (snapshot left out: the workspace "
                            "holds a FIFO, 'trap'") for n in again["fifo"]["notes"])
    # the agent's own tree past the cap: the live run's verdicts stand, said so
    assert [(v["grader_id"], v["state"]) for v in again["big"]["verdicts"]] == [
        ("script:grep -qx READY answer.txt", "PASS")], again["big"]
    assert any(n.startswith("regraded without a snapshot (snapshot left out: the workspace and "
                            "the run's facts hold more than") and "stand" in n
               for n in again["big"]["notes"]), again["big"]["notes"]
    assert again["plain"]["state"] == "PASS"
    # the agent's act stands on a regrade: its traps, as its snapshot recorded them
    (act,) = again["linkout"]["verdicts"]
    assert (act["grader_id"], act["state"]) == ("workspace", "FAIL"), again["linkout"]
    assert sum("points out of the workspace: not recreated" in n
               for n in again["linkout"]["notes"]) == 2
    assert not (project.root / "out.txt").exists()



def test_a_run_that_grades_nothing_is_graded_later_by_a_regrade(project):
    project.task("plain", graders=READY, repeats=2)
    result = project.run("tasks", "--jaato-no-grade")
    assert result.ret == 2, result.stdout.str()
    ungraded = project.records()
    assert [r["state"] for r in ungraded] == ["BLOCKED", "BLOCKED"]
    assert all(r["blocked_reason"].startswith("not graded (--jaato-no-grade)") and
               r["verdicts"] == [] and r["snapshot"] for r in ungraded)
    graded = project.root / "graded.jsonl"
    result = project.run("tasks", f"--jaato-regrade={project.store}", f"--jaato-out={graded}")
    assert result.ret == 0, result.stdout.str()
    records = [json.loads(line) for line in graded.read_text().splitlines()]
    assert [(r["state"], [v["state"] for v in r["verdicts"]]) for r in records] == [
        ("PASS", ["PASS"]), ("PASS", ["PASS"])]
    assert [r["usage"] for r in records] == [r["usage"] for r in ungraded]
