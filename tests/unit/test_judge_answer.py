"""G5: the judge's answer, read as jaato-eval 0.3.4 reads it, and our additions only where a
task asks for them.

The reference's own judge adapter reads each answer here too (its session stubbed: the
reading is what is compared), so every row that claims parity is checked against it, not
against a copy of its rule. tests/e2e/test_reference_parity.py runs both engines for real.
"""
from __future__ import annotations

import math

import pytest

from pytest_jaato_eval.graders.judge import read_answer, reading
from pytest_jaato_eval.task.model import JudgeGrader
from pytest_jaato_eval.verdict import BLOCKED, FAIL, PASS

jaato_eval_judge = pytest.importorskip("jaato_eval.graders.judge")


def reference_state(config: dict, answer, monkeypatch, tmp_path) -> str:
    """The verdict jaato-eval 0.3.4's judge gives `answer` under `config`."""
    from jaato_eval.graders.base import GraderContext
    from jaato_eval.manifest import GraderSpec

    class Session:
        async def complete(self, prompt):
            return answer

    class Opened:
        async def __aenter__(self):
            return Session()

        async def __aexit__(self, *exc):
            return False

    class Client:
        @staticmethod
        def session(**kwargs):
            return Opened()

    monkeypatch.setattr("jaato_sdk.client.ipc.IPCClient", Client)
    context = GraderContext(workspace_path=tmp_path, config_root=tmp_path, payload={"ok": True})
    spec = GraderSpec(kind="judge", config={"profile": "rubric", **config})
    return jaato_eval_judge.JudgeGrader(spec).grade(context).state


def ours(config: dict, answer):
    return read_answer(JudgeGrader(kind="judge", profile="rubric", **config), "claim", answer, [])


# (grader keys jaato-eval reads too, the judge's answer, the verdict in both engines)
SAME = [
    # jaato-eval's own cases: the threshold is inclusive, and a miss is a FAIL
    ({"threshold": 0.7}, {"score": 0.7}, PASS),
    ({"threshold": 0.7}, {"score": 0.69}, FAIL),
    ({"score_field": "rating", "threshold": 3}, {"rating": 4}, PASS),
    ({}, {"verdict": "good"}, BLOCKED),
    ({}, {"score": "excellent"}, BLOCKED),
    ({}, None, BLOCKED),
    # any scale: 0-10, above 1, negative
    ({"threshold": 7}, {"score": 8}, PASS),
    ({"threshold": 7}, {"score": 6.5}, FAIL),
    ({"threshold": 1.2}, {"score": 1.5}, PASS),
    ({"threshold": 0.7}, {"score": -1}, FAIL),
    ({"threshold": -2}, {"score": -1}, PASS),
    ({"threshold": 0}, {"score": 0}, PASS),
    # numbers written as text, as float() reads them; booleans as 1 and 0
    ({"threshold": 0.7}, {"score": "0.9"}, PASS),
    ({"threshold": 7}, {"score": " 8 "}, PASS),
    ({"threshold": 0.7}, {"score": "1e-1"}, FAIL),
    ({"threshold": 0.7}, {"score": True}, PASS),
    ({"threshold": 0.7}, {"score": False}, FAIL),
    ({"threshold": 1}, {"passed": True}, BLOCKED),  # not the score field
    ({"score_field": "passed", "threshold": 1}, {"passed": True}, PASS),
    ({}, {"score": None}, BLOCKED),
    ({}, {"score": [0.9]}, BLOCKED),
    ({}, {"score": {"value": 0.9}}, BLOCKED),
    ({}, {"score": ""}, BLOCKED),
    # `errors`: the judge could not grade, whatever its score; an empty one is no error
    ({"threshold": 0.9}, {"score": 0.0, "errors": ["file-read returned path-not-found"]}, BLOCKED),
    ({"threshold": 0.9}, {"score": 1.0, "errors": ["partial read"]}, BLOCKED),
    ({}, {"score": 1.0, "errors": "it could not read answer.txt"}, BLOCKED),
    ({}, {"score": 1.0, "errors": []}, PASS),
    ({}, {"score": 1.0, "errors": None}, PASS),
    ({}, {"score": 1.0, "errors": 0}, PASS),
    ({}, {"score": 1.0, "errors": {}}, PASS),
    ({}, {"score": 0.1, "errors": []}, FAIL),
    ({"errors_field": "problems"}, {"score": 1.0, "errors": ["x"]}, PASS),
    ({"errors_field": "problems"}, {"score": 1.0, "problems": ["x"]}, BLOCKED),
    # fields no key of the task names are the rubric's own notes
    ({}, {"score": 1.0, "warnings": ["a trailing newline"]}, PASS),
    ({}, {"score": 0.9, "errors": [], "defects": ["a trailing newline"]}, PASS),
    ({}, {"score": 0.2, "cannot_grade": "the file is binary"}, FAIL),
    ({}, {"score": 0.9, "confidence": 3}, PASS),  # a Malloy-style 1-10 confidence
    ({}, {"score": 0.9, "confidence": "high"}, PASS),
    ({"threshold": 7}, {"score": 8, "confidence": 4, "reasoning": "clear"}, PASS),
]


@pytest.mark.parametrize("config, answer, state", SAME)
def test_the_judges_verdict_is_the_references(config, answer, state, monkeypatch, tmp_path):
    assert reference_state(config, answer, monkeypatch, tmp_path) == state
    assert ours(config, answer).state == state


@pytest.mark.parametrize("answer, reference", [
    ({"score": "nan"}, FAIL), ({"score": float("nan")}, FAIL),
    ({"score": "inf"}, PASS), ({"score": float("inf")}, PASS), ({"score": "-inf"}, FAIL),
])
def test_a_score_that_is_no_finite_number_is_blocked(answer, reference, monkeypatch, tmp_path):
    """docs/coming-from-jaato-eval.md: jaato-eval compares NaN and infinity with the
    threshold (NaN fails, infinity passes); no rubric grades on them, so here the judge
    did not grade."""
    assert reference_state({}, answer, monkeypatch, tmp_path) == reference
    verdict = ours({}, answer)
    assert verdict.state == BLOCKED and verdict.detail.endswith(", not a finite number")


def test_reading_is_floats():
    assert [reading(x) for x in (8, "0.9", " 8\n", "1_0", True, False, -3)] == [
        8, 0.9, 8, 10, 1, 0, -3]
    assert all(reading(x) is None for x in (None, "", "x", [1], {}, "nan", "inf",
                                            float("-inf"), 10 ** 400))
    assert not math.isnan(reading("1e-300"))


# Ours, each read only when the task's grader names it.
OPT_IN = [
    ({"score_scale": [0, 10], "threshold": 7}, {"score": 8}, PASS, "score 8"),
    ({"score_scale": [0, 10], "threshold": 7}, {"score": 11}, BLOCKED,
     "the judge cannot grade: score is 11, off the score_scale 0 to 10"),
    ({"score_scale": [-5, 5], "threshold": 0}, {"score": -5}, FAIL, "score -5 < 0"),
    ({"defects_field": "defects"}, {"score": 0.9, "defects": ["no title", "typo"]}, FAIL,
     "the judge found 2 defect(s): no title"),
    ({"defects_field": "defects"}, {"score": 0.9, "defects": [{"line": 3}]}, FAIL,
     'the judge found 1 defect(s): {"line": 3}'),
    ({"defects_field": "defects"}, {"score": 0.9, "defects": []}, PASS, "score 0.9"),
    ({"defects_field": "defects"}, {"score": 0.0, "errors": ["no access"], "defects": ["x"]},
     BLOCKED, "the judge cannot grade: no access"),
    ({"errors_field": "cannot_grade"}, {"score": 0, "cannot_grade": "the file is binary"},
     BLOCKED, "the judge cannot grade: the file is binary"),
    ({"needs_human_below": 0.6}, {"score": 0.9, "confidence": 0.59}, BLOCKED,
     "needs human review (confidence 0.59 < 0.60)"),
    ({"needs_human_below": 0.6}, {"score": 0.9, "confidence": 0.6}, PASS, "score 0.9"),
    ({"needs_human_below": 0.6}, {"score": 0.9}, PASS, "score 0.9"),
    ({"needs_human_below": 0.6}, {"score": 0.9, "confidence": "high"}, BLOCKED,
     "the judge cannot grade: confidence is 'high', not a number from 0 to 1"),
    ({"needs_human_below": 0.6}, {"score": 0.9, "confidence": 8}, BLOCKED,
     "the judge cannot grade: confidence is 8, not a number from 0 to 1"),
    # the Malloy shape: confidence 1-10, 5 or lower goes to a human
    ({"needs_human_below": 6, "confidence_scale": [1, 10]}, {"score": 0.9, "confidence": 5},
     BLOCKED, "needs human review (confidence 5.00 < 6.00)"),
    ({"needs_human_below": 6, "confidence_scale": [1, 10]}, {"score": 0.9, "confidence": "8"},
     PASS, "score 0.9"),
    ({"needs_human_below": 6, "confidence_scale": [1, 10]}, {"score": 0.9, "confidence": 0},
     BLOCKED, "the judge cannot grade: confidence is 0, not a number from 1 to 10"),
]


@pytest.mark.parametrize("config, answer, state, detail", OPT_IN)
def test_what_a_task_asks_for_is_read(config, answer, state, detail):
    verdict = ours(config, answer)
    assert (verdict.state, verdict.detail) == (state, detail)


def test_a_missing_score_names_the_fields_the_judge_gave():
    verdict = ours({}, {"verdict": "match", "why": "same rows"})
    assert verdict.state == BLOCKED
    assert verdict.detail == ("the judge cannot grade: its answer has no `score` (its fields: "
                              "verdict, why; score_field names the one holding the score)")


def test_no_payload_says_what_to_check():
    verdict = ours({}, "prose")
    assert verdict.state == BLOCKED and "completion_payload_schema" in verdict.detail
    assert "signal_completion" in verdict.detail


def test_defects_are_bounded_and_one_line():
    verdict = ours({"defects_field": "defects"}, {"score": 1, "defects": ["a\nb" * 400] * 100})
    assert "\n" not in verdict.detail and len(verdict.detail) < 600
    defects = [e for e in verdict.evidence if e.startswith("defect: ")]
    assert len(defects) == 21 and defects[-1].startswith("defect: [… 80 more")


def test_the_reasoning_is_evidence():
    verdict = ours({}, {"score": 0.9, "reasoning": "wrote the file"})
    assert "reasoning: wrote the file" in verdict.evidence


def test_the_prompt_names_only_what_the_task_asks_for(tmp_path):
    """A 0-10 rubric is never told "0 to 1": the schema says what its fields mean; the
    prompt adds the task's own keys, on the task's scales."""
    from pytest_jaato_eval.engine.agent_run import AgentRun
    from pytest_jaato_eval.graders.context import GraderContext
    from pytest_jaato_eval.graders.judge import judge_prompt

    ctx = GraderContext(workspace=tmp_path, config_root=tmp_path, params={},
                        run=AgentRun(payload={"answer": "READY"}, finish_reason="stop"))
    plain = judge_prompt(ctx, JudgeGrader(kind="judge", profile="r", threshold=7))
    assert "`score`" in plain and "signal_completion" in plain and '"answer": "READY"' in plain
    for word in ("0 to 1", "defect", "confidence", "errors"):
        assert word not in plain, word
    asked = judge_prompt(ctx, JudgeGrader(
        kind="judge", profile="r", threshold=7, score_scale=[0, 10], defects_field="flaws",
        needs_human_below=6, confidence_scale=[1, 10]))
    assert "`score` (a number from 0 to 10)" in asked and "`flaws`" in asked
    assert "`confidence` (a number from 1 to 10)" in asked


def test_the_judge_block_of_the_tasks_page_is_a_valid_grader():
    """docs/tasks.md's `### judge` block, as a user copies it into a task's graders."""
    import re
    from pathlib import Path

    import yaml
    page = (Path(__file__).parents[2] / "docs" / "tasks.md").read_text(encoding="utf-8")
    section = page[page.index("### judge\n"):]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    (grader,) = yaml.safe_load(block)
    judge = JudgeGrader(**grader)
    assert (judge.score_scale, judge.confidence_range, judge.defects_field) == (
        (0, 10), (1, 10), "defects")
    keys = {k: v for k, v in grader.items() if k not in ("kind", "profile")}
    assert ours(keys, {"score": 8, "errors": [], "defects": [], "confidence": 9}).state == PASS
