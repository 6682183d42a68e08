"""M1-M12: every bad task.yaml is one line naming the file, the key and what was expected."""
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


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "fixture").mkdir(exist_ok=True)
    (tmp_path / ".jaato").mkdir(exist_ok=True)
    p = tmp_path / "task.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ManifestError) as info:
        load_task(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


def test_valid_manifest_loads_with_defaults(tmp_path):
    task = load_task(write(tmp_path, VALID))
    assert (task.id, task.kind, task.profile, task.repeats) == ("t", "session", "writer", 1)
    assert task.graders[0].id == "script:true"
    assert task.fixture == (tmp_path / "fixture").resolve()
    assert len(task.content_hash) == 64


def test_id_is_stringified(tmp_path):
    assert load_task(write(tmp_path, VALID.replace("id: t", "id: 42"))).id == "42"


@pytest.mark.parametrize("text, where, says", [
    # missing key
    (VALID.replace("id: t\n", ""), ": id: ", "missing; expected a string or number"),
    # key present but null
    (VALID.replace("harness: {profile: writer}", "harness: {profile: null}"),
     ": harness.profile: ", "is null; expected a non-blank string"),
    # wrong type, naming the type found
    (VALID + "repeats: abc\n", ": repeats: ", "expected an integer >= 1 and <= 1000, got str 'abc'"),
    (VALID + "repeats: 0\n", ": repeats: ", "expected an integer >= 1 and <= 1000, got int 0"),
    (VALID + "repeats: true\n", ": repeats: ", "expected an integer >= 1 and <= 1000, got bool True"),
    (VALID.replace("input: {prompt: do it}", "input: {prompt: [a]}"), ": input.prompt: ",
     "expected a non-blank string, got list"),
    (VALID.replace('run: "true"}', 'run: "true", weight: x}'), ": graders[0].weight: ",
     "expected a number >= 0, got str 'x'"),
    # unknown key, with the known keys and a close match
    (VALID + "repeat: 3\n", ": repeat: ", "unknown key (did you mean 'repeats'?); known keys:"),
    (VALID.replace("harness: {profile: writer}", "harness: {profile: writer, profle: x}"),
     ": harness.profle: ", "known keys: kind, profile, profile_set, run"),
    # a profile setting in the manifest says where it belongs (M12)
    (VALID + "runtime_limits: {x: 1}\n", ": runtime_limits: ", "is a profile setting"),
    # unknown kinds list the allowed ones
    (VALID.replace("kind: script", "kind: lint"), ": graders[0].kind: ",
     "unknown kind 'lint'; expected one of script, processor, judge"),
    (VALID.replace("harness: {profile: writer}", "harness: {profile: writer, kind: agent}"),
     ": harness.kind: ", "unknown kind 'agent'; expected one of session, driver"),
    # a key of the other harness kind (M8)
    (VALID.replace("harness: {profile: writer}", "harness: {profile: writer, run: x}"),
     ": harness.run: ", "harness.run is not read under harness.kind: session; drop it, or change"),
    (VALID.replace("harness: {profile: writer}", "harness: {kind: driver, run: x, profile: w}")
     .replace("input: {prompt: do it}\n", ""),
     ": harness.profile: ", "not read under harness.kind: driver"),
    # parameter keys that map to one variable (M9)
    (VALID.replace("input: {prompt: do it}",
                   "input: {prompt: do it, agent_params: {issue-id: 1, issue_id: 2}}"),
     ": input.agent_params: ", "'issue-id' and 'issue_id' both map to $JAATO_EVAL_PARAM_ISSUE_ID"),
    (VALID.replace("input: {prompt: do it}", "input: {prompt: do it, agent_params: {1: x}}"),
     ": input.agent_params: ", "key 1 is of type int; keys must be strings"),
    # an empty grader list
    (VALID.split("graders:")[0] + "graders: []\n", ": graders: ", "empty; expected at least one"),
    # a missing fixture directory (M4)
    (VALID.replace("fixture: fixture", "fixture: nowhere"), ": environment.fixture: ",
     "'nowhere' resolves to"),
    # blank prompt, bad budget, bad YAML, not a mapping
    (VALID.replace("prompt: do it", "prompt: '  '"), ": input.prompt: ", "non-blank"),
    (VALID + "budget: {usd: -1}\n", ": budget.usd: ", "expected a number >= 0, got int -1"),
    (VALID + "budget: {degrade: []}\n", ": budget: ", "no limit declared"),
    ("id: [unclosed\n", ": line ", "not valid YAML"),
    ("- just\n- a list\n", ": top level: ", "expected a mapping, got list"),
    ("", ": ", "empty file"),
])
def test_bad_manifest_is_one_line_naming_file_and_key(tmp_path, text, where, says):
    message = error_of(tmp_path, text)
    assert where in message, message
    assert says in message, message


def test_session_requires_a_prompt_and_driver_requires_run(tmp_path):
    assert "input.prompt: missing" in error_of(tmp_path, VALID.replace("input: {prompt: do it}\n", ""))
    driver = VALID.replace("harness: {profile: writer}", "harness: {kind: driver}").replace(
        "input: {prompt: do it}\n", "")
    assert "harness.run: missing; expected a non-blank string" in error_of(tmp_path, driver)
