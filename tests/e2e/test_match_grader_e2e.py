"""The match grader (G7) in real arms: the agent (echo) writes answer.txt, the harness reads
it; no grader process, no daemon of its own."""
from __future__ import annotations


def match(**keys) -> dict:
    return {"kind": "match", "path": "answer.txt", **keys}


def test_match_grades_the_file_the_agent_left(project):
    project.task("m-pass", graders=[match(contains="READY"),
                                    match(pattern=r"^READY$"),
                                    match(pattern="SECRET", expect="absent")])
    project.task("m-fail", graders=[match(contains="STEADY")])
    project.task("m-absent", graders=[match(pattern="^RE", expect="absent")])
    project.task("m-missing", graders=[{"kind": "match", "path": "nowhere.txt",
                                        "contains": "READY"}])
    project.run("tasks")
    by = {r["task_id"]: r for r in project.records()}
    assert by["m-pass"]["state"] == "PASS", by["m-pass"]["verdicts"]
    assert [v["grader_id"] for v in by["m-pass"]["verdicts"]] == ["match:answer.txt"] * 3
    fail = by["m-fail"]["verdicts"][0]
    assert (fail["state"], fail["detail"]) == ("FAIL", "not found")
    absent = by["m-absent"]["verdicts"][0]
    assert (absent["state"], absent["evidence"]) == ("FAIL", ["READY"])
    missing = by["m-missing"]["verdicts"][0]
    assert (missing["state"], missing["detail"]) == ("FAIL", "nowhere.txt is missing")
