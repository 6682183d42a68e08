"""Which profile set is better, end to end: a sweep of two profile sets on scripted models,
one built to be better, over a dataset task with repeats and a plain task, against the
real daemon. Each set's headline and the pair's paired difference reach the terminal, the
Markdown, the JSON and the HTML report from the one store, and `compare` reads the same
analysis (docs/statistics.md, docs/reports.md)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from jaato_project import SCHEMA

from pytest_jaato_eval.testing import profiles
from pytest_jaato_eval.testing.model_server import Turn

# Over 20 s (14 arms on the scripted model); tests/unit/test_inference.py shows the same
# rules from records in a second.
pytestmark = [pytest.mark.daemon, pytest.mark.slow]

# A hard sample needs READY in answer.txt; an easy one passes whatever the agent wrote.
GRADER = {"kind": "script",
          "run": 'test "$JAATO_EVAL_PARAM_LEVEL" = easy || grep -qx READY answer.txt'}
ROWS = [{"id": "easy", "level": "easy"}, {"id": "hard1", "level": "hard"},
        {"id": "hard2", "level": "hard"}]


def answering(word: str, prompt_tokens: int) -> list[Turn]:
    """One turn, repeated for every request: write the answer and sign off at once."""
    return [Turn.tools(("writeNewFile", {"path": "answer.txt", "content": f"{word}\n"}),
                       ("signal_completion", {"answer": word}))
            .with_usage(prompt_tokens, 20)]


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_jaato_eval", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_two_profile_sets_one_better_headline_pair_and_compare(project, scripted_model, tmp_path):
    models = {"cheap": scripted_model(answering("WRONG", 1000), model="cheap-model"),
              "strong": scripted_model(answering("READY", 4000), model="strong-model")}
    for task_id, extra in (("words", {"input": {"prompt": "Answer {{ level }}.",
                                                "agent_params": {"level": "{{ level }}"}},
                                      "dataset": {"rows": ROWS}}),
                           ("plain", {"input": {"prompt": "Answer.",
                                                "agent_params": {"level": "hard"}}})):
        path = project.task(task_id, graders=[GRADER], extra=extra,
                            repeats=2 if task_id == "words" else 1)
        path.write_text(path.read_text().replace("profile: writer", "profile: agent"))
        for name, model in models.items():
            model.write_profile(path.parent / ".jaato", "agent", profile_set=name,
                                completion_payload_schema=SCHEMA)
        # The workspace's pricing table, from the fixture: what gives a vllm turn a cost.
        profiles.write_pricing(path.parent / "fixture", {
            **models["cheap"].pricing(input_per_token=1e-6, output_per_token=1e-5),
            **models["strong"].pricing(input_per_token=3e-6, output_per_token=1.5e-5)})
    result = project.run("tasks", "--profile-set=cheap,strong")
    records = project.records()
    assert len(records) == 2 * (3 * 2 + 1)
    by = {(r["profile_set"], r.get("sample_id"), r["task_id"]): r["state"] for r in records}
    assert by[("strong", "hard1", "words")] == "PASS" and by[("cheap", "hard1", "words")] == "FAIL"
    assert by[("cheap", "easy", "words")] == "PASS"
    assert None not in {r["usage"]["cost_usd"] for r in records}, "an arm has no price"

    text = result.stdout.str()
    lines = result.stdout.lines
    head = lines.index("Profile sets over the sweep (every task weighs the same):")
    # cheap: words 1/3 (its samples averaged), plain 0 -> 17%; strong: 100%. Over 2 tasks.
    cheap = lines[head + 2].split()
    strong = lines[head + 3].split()
    assert cheap[:2] == ["cheap", "17%"] and cheap[3:5] == ["2", "tasks"], cheap
    assert strong[:2] == ["strong", "100%"] and strong[3:5] == ["2", "tasks"], strong
    assert "strong − cheap" in lines
    at = lines.index("strong − cheap")
    assert lines[at + 1].startswith("  +83 pts (95% CI ") and "over 2 tasks" in lines[at + 1]
    assert lines[at + 2].startswith("  by ")   # the method behind the interval, named
    assert lines[at + 3] == "  items: 3 better, 0 worse, 1 same"
    assert lines[at + 4].startswith("  cost per arm: $") and "(+$" in lines[at + 4]
    # Two tasks cannot settle it: the line says what would find the declared 10 points.
    assert lines[at + 5].startswith("  to detect 10 pts at 80% power: ")
    assert all(len(line) <= 80 for line in lines[head - 1:at + 9]), text

    md = cli("report", project.store, "--format", "markdown", "--exit-zero")
    assert "| cheap | 17% |" in md.stdout and "**strong − cheap**: +83 pts" in md.stdout
    data = json.loads(cli("report", project.store, "--format", "json", "--exit-zero").stdout)
    sets = {h["profile_set"]: h for h in data["profile_sets"]}
    assert sets["cheap"]["pass_rate"] == pytest.approx(1 / 6)
    assert sets["cheap"]["items"] == 4 and sets["cheap"]["unit"] == "task"
    # What a PASS cost: the strong set's dearer arms, over more PASS arms.
    assert sets["cheap"]["cost_per_pass_usd"] == pytest.approx(
        sets["cheap"]["cost_usd"] / sets["cheap"]["pass"])
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"], pair["difference"]) == ("cheap", "strong", pytest.approx(5 / 6))
    assert pair["items_better"] == 3 and pair["runs_needed"]["units"] > 2
    assert pair["cost_per_arm_usd"]["b"] > pair["cost_per_arm_usd"]["a"]
    html = tmp_path / "r.html"
    assert cli("report", project.store, "--html", html, "--exit-zero").returncode == 0
    doc = html.read_text()
    assert "<h2>Profile sets over the sweep</h2>" in doc and "<b>strong − cheap</b>" in doc

    # compare: the store against itself, by the same analysis: no difference, nothing regressed.
    same = cli("compare", project.store, project.store)
    assert same.returncode == 0, same.stdout + same.stderr
    # Two sets, one family (Holm): both at p = 1 share the first step's 97.5%.
    assert "cheap: new − base\n  +0 pts (97.5% CI " in same.stdout
    assert "no profile set regressed (2 sets)" in same.stdout
