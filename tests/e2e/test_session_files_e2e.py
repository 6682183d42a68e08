"""The agent's copy of the config root holds only what jaato reads for a session (W5).

An answer key a grader reads without spelling `$JAATO_EVAL_CONFIG_ROOT/<path>` (a quote
before the slash, a processor's `context.config_root / "expected.json"`) is not in the
agent's copy: an agent that searches its config root and the arms' folder for it finds
nothing and FAILS, live and in a Python arm, while an honest agent PASSES. A grader naming
`$JAATO_EVAL_CONFIG_ROOT/profiles` leaves the session its profiles: the arm runs and
PASSES, and the collection warns that the grader's files are the session's too.

One run on the suite's daemon holds every case."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jaato_project import shell_agent

from pytest_jaato_eval.testing.model_server import ScriptedModel, Turn

pytestmark = pytest.mark.daemon

KEY = "PLATYPUS\n"
# The thief: every expected.* its config root or the arms' folder (where its copy lives)
# holds, copied to the answer's name; what it found kept beside it.
STEAL = ('f=$(find .. "${JAATO_CONFIG_ROOT:-..}" -name "expected.*" 2>/dev/null | head -1); '
         'echo "found:$f" > found.txt; test -n "$f" && cp "$f" ANSWER; true')
CMP = 'cmp -s "$JAATO_EVAL_CONFIG_ROOT"/expected.txt answer.txt'
PROCESSOR = """\
import json


def validate(payload, context):
    want = json.loads((context.config_root / "expected.json").read_text())
    try:
        got = json.loads((context.workspace / "answer.json").read_text())
    except (OSError, ValueError) as exc:
        return [f"answer.json: {exc}"]
    return [] if got == want else [f"answer.json holds {got!r}"]
"""
PYTHON_ARMS = """
    from pathlib import Path

    import pytest

    KEY = Path(__file__).parent.parent / ".jaato" / "expected.txt"


    @pytest.mark.jaato(config_root="../.jaato", fixture="../fixture", profile="{profile}",
                       profile_set="echo")
    def test_{profile}(jaato_arm):
        jaato_arm.run("Write the answer.")
        answer = jaato_arm.workspace / "answer.txt"
        assert answer.is_file() and answer.read_text() == KEY.read_text()
    """


def signing(model: ScriptedModel, name: str) -> dict:
    """A scripted agent whose turns its model holds: a shell command, then its sign-off."""
    return model.profile(name, plugins=("cli(preload)", "permission"))


def test_the_agents_config_copy_holds_no_key_and_keeps_the_sessions_profiles(project):
    thief_model = ScriptedModel([
        Turn.tool("cli_based_tool", command=STEAL.replace("ANSWER", "answer.json")),
        Turn.tool("signal_completion", answer="done"), Turn.text("done")]).start()
    honest_model = ScriptedModel([
        Turn.tool("cli_based_tool", command="echo '{\"n\": 7}' > answer.json"),
        Turn.tool("signal_completion", answer="done"), Turn.text("done")]).start()
    try:
        # 1. a key in ordinary shell: the thief, and an honest agent
        for name, command in [("a-thief", STEAL.replace("ANSWER", "answer.txt")),
                              ("b-honest", "printf 'PLATYPUS\\n' > answer.txt")]:
            project.task(name, profile=shell_agent(name.split("-")[1], command),
                         graders=[{"kind": "script", "run": CMP}])
            project.write(f"tasks/{name}/.jaato/expected.txt", KEY)
        # 2. a processor's key, read through context.config_root
        for name, model in [("c-thief", thief_model), ("d-honest", honest_model)]:
            project.task(name, profile=signing(model, name.split("-")[1]),
                         graders=[{"kind": "processor", "script": "check.py"}])
            project.write(f"tasks/{name}/.jaato/check.py", PROCESSOR)
            project.write(f"tasks/{name}/.jaato/expected.json", '{"n": 7}\n')
        # 3. a grader that names the profiles: the session keeps them
        project.task("e-profiles", graders=[
            {"kind": "script", "run": "test -d $JAATO_EVAL_CONFIG_ROOT/profiles/echo"},
            {"kind": "script", "run": "grep -qx READY answer.txt"}])
        # 4. the same key in a Python arm
        project.write(".jaato/expected.txt", KEY)
        project.write("fixture/seed.txt", "seed\n")
        for name, command in [("pythief", STEAL.replace("ANSWER", "answer.txt")),
                              ("pyhonest", "printf 'PLATYPUS\\n' > answer.txt")]:
            project.write(f".jaato/profiles/echo/{name}.yaml",
                          yaml.safe_dump(shell_agent(name, command)))
            project.write(f"arms/test_{name}.py", PYTHON_ARMS.format(profile=name))
        result = project.run("tasks", "arms", "-p", "no:randomly", "--keep-workspaces")
    finally:
        thief_model.stop()
        honest_model.stop()
    records = project.records()
    by = {r["task_id"]: r for r in records if r["task_id"] in
          {"a-thief", "b-honest", "c-thief", "d-honest", "e-profiles"}}
    for thief in ("a-thief", "c-thief"):
        assert by[thief]["state"] == "FAIL", by[thief]["verdicts"]
        assert not by[thief].get("contaminated"), by[thief]
        found = Path(by[thief]["workspace"], "found.txt").read_text()
        assert found == "found:\n", found  # it found nothing to copy
    for honest in ("b-honest", "d-honest", "e-profiles"):
        assert by[honest]["state"] == "PASS", by[honest]
    assert any("names what the agent's session reads too: profiles/echo" in note
               for note in by["e-profiles"]["notes"]), by["e-profiles"]["notes"]
    python = {r["task_id"].rpartition("::")[2]: r for r in records if r["task_id"] not in by}
    assert python["test_pythief"]["state"] == "FAIL", python
    assert Path(python["test_pythief"]["workspace"], "found.txt").read_text() == "found:\n"
    assert python["test_pyhonest"]["state"] == "PASS", python
    out = result.stdout.str()
    assert ("e-profiles/task.yaml: graders[0] (script:test -d $JAATO_EVAL_CONFIG_ROOT/profiles/"
            "echo) names what the agent's session reads too: profiles/echo") in out, out
    assert json.loads(project.store.read_text().splitlines()[0])  # the store is whole
