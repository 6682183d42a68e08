"""The agent under test is the adversary: attacks on the graders and the judge, on a real daemon.

Each test plays an agent (an echo or scripted profile whose tool call is the attack)
and asserts what must hold whatever it does: the verdict is not forged, no secret
value reaches the store, the HTML report, the JUnit file or the terminal, every
arm ends with one record, the run ends within its bounds and leaves no process.
docs/security.md keeps the table of these attacks and what was observed.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from jaato_project import REPO, WRITER, processes_mentioning, signer

from pytest_jaato_eval.testing.model_server import ScriptedModel, Turn

OPENAI_KEY = "sk-proj-attackme0123456789abcdef"
GH_TOKEN = "ghp_0123456789abcdefATTACKME"
PEM_BODY = ["MIIEowIBAAKCAQEAzq8Nq1rPq9vX2JpY1bKkq0Zp0M8p7h5yJpQ3w2f3f1tZQ1k9",
            "xw0aUo4n3f3Jc6w2Fq8r0b7Yq9L1mN2pQ5uV7wX8zY9aB0cD1eF2gH3iJ4kL5mNo",
            "pQ6rS7tU8vW9xY0zA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1vW2xY3zA4bC5dE6"]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"


def agent(name: str, tool: str, **args) -> dict:
    """An echo agent whose one tool call is `tool(**args)`."""
    return dict(WRITER, name=name, plugin_configs={
        "echo": {"tool_call": {"name": tool, "args": args}, "response": "done"},
        "permission": {"policy": {"defaultPolicy": "allow"}}})


def outputs(project, result, junit: Path, html: Path) -> dict[str, str]:
    return {"store": project.store.read_text(), "junit": junit.read_text(),
            "html": html.read_text(), "terminal": result.stdout.str() + result.stderr.str()}


# -- graders never run agent code with the developer's environment ---------------------------

FORGED_JSON = """\
import builtins, io, os, pathlib
pathlib.Path({marker!r}).write_text("imported")
print("LEAK", os.environ.get("OPENAI_API_KEY"), os.environ.get("GITHUB_TOKEN"))
_open = builtins.open
def _forged_open(name, *args, **kwargs):
    if name == "settings.json":
        return io.StringIO('{{"port": 8080}}')
    return _open(name, *args, **kwargs)
builtins.open = _forged_open
def load(fh):
    return {{"port": 8080}}
"""


def test_an_agent_writing_json_py_forges_nothing_and_reads_no_credential(project, monkeypatch,
                                                                           tmp_path):
    """The shipped config-file task; the agent writes json.py instead of settings.json."""
    marker = tmp_path / "json-py-was-imported"
    task = project.root / "tasks" / "config-file"
    shutil.copytree(REPO / "tasks" / "config-file", task)
    profile = task / ".jaato" / "profiles" / "echo" / "configurer.yaml"
    forged = yaml.safe_load(profile.read_text())
    forged["plugin_configs"]["echo"]["tool_call"] = {"name": "writeNewFile", "args": {
        "path": "json.py", "content": FORGED_JSON.format(marker=str(marker))}}
    profile.write_text(yaml.safe_dump(forged))
    # A developer's shell: credentials, and variables that make Python or a shell load
    # code from the working directory when inherited.
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", GH_TOKEN)
    monkeypatch.setenv("PYTHONPATH", ".")
    monkeypatch.setenv("PATH", ".:" + os.environ["PATH"])
    junit, html = project.root / "junit.xml", project.root / "r.html"
    result = project.run("tasks", "-rA", f"--junitxml={junit}", f"--jaato-html={html}",
                         "--keep-workspaces")
    (record,) = project.records()
    assert record["state"] == "FAIL", record  # no settings.json: the real json says so
    assert [v["state"] for v in record["verdicts"]] == ["FAIL", "FAIL"]
    assert "No such file or directory: 'settings.json'" in "\n".join(
        record["verdicts"][0]["evidence"])
    assert Path(record["workspace"], "json.py").is_file()  # the attack was really there
    assert not marker.exists(), "a grader imported the agent's json.py"
    for where, text in outputs(project, result, junit, html).items():
        assert OPENAI_KEY not in text and GH_TOKEN not in text, where
        # json.py's source is in the transcript (what the agent wrote); its output is nowhere
        assert not re.search(r"LEAK (None|\*\*\*)", text), where


CUSTOMIZE = "import pathlib; pathlib.Path({marker!r}).write_text('loaded')\n"


@pytest.mark.parametrize("planted, run", [
    ("sitecustomize.py", '"$JAATO_EVAL_PYTHON" -c "import sys"'),
    ("usercustomize.py", '"$JAATO_EVAL_PYTHON" -c "import sys"'),
    ("os.py", '"$JAATO_EVAL_PYTHON" -m json.tool seed.json'),
    ("grep", "grep -q seed seed.txt"),                  # a PATH bet on '.'
    ("bashenv.sh", "bash -c true"),                     # BASH_ENV from the parent
])
def test_code_the_agent_plants_in_the_workspace_is_never_run_by_a_grader(
        project, monkeypatch, tmp_path, planted, run):
    marker = tmp_path / "planted-code-ran"
    content = CUSTOMIZE.format(marker=str(marker))
    if planted in ("grep", "bashenv.sh"):
        content = f"#!/bin/sh\necho ran > {marker}\n"
    project.task("plant", profile=agent("planter", "writeNewFile", path=planted,
                                        content=content), graders=[{"kind": "script", "run": (
        f"chmod +x {planted}; echo '{{}}' > seed.json; {run}")}])
    monkeypatch.setenv("PATH", ".:" + os.environ["PATH"])
    monkeypatch.setenv("PYTHONPATH", ".")
    monkeypatch.setenv("PYTHONSTARTUP", "sitecustomize.py")
    monkeypatch.setenv("BASH_ENV", "./bashenv.sh")
    monkeypatch.setenv("ENV", "./bashenv.sh")
    project.run("tasks")
    (record,) = project.records()
    assert not marker.exists(), f"the agent's {planted} ran inside a grader"
    assert record["state"] == "PASS", record["verdicts"]


@pytest.mark.slow
def test_a_credential_reaches_a_grader_only_when_the_task_names_it(project, monkeypatch):
    monkeypatch.setenv("SERVICE_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("SERVICE_URL", "http://127.0.0.1:9")
    show = 'echo "key=${SERVICE_API_KEY:-absent} url=${SERVICE_URL:-absent}"; exit 1'
    project.task("unnamed", graders=[{"kind": "script", "run": show}])
    project.task("named", graders=[{"kind": "script", "run": show,
                                    "env_passthrough": ["SERVICE_API_KEY", "SERVICE_*"]}])
    project.task("pattern", graders=[{"kind": "script", "run": show,
                                      "env_passthrough": ["SERVICE_*"]}])
    project.run("tasks")
    by = {r["task_id"]: r["verdicts"][0]["evidence"] for r in project.records()}
    assert by["unnamed"] == ["key=absent url=absent"]
    assert by["named"] == ["key=***(SERVICE_API_KEY) url=http://127.0.0.1:9"]
    assert by["pattern"] == ["key=absent url=http://127.0.0.1:9"]  # a pattern sweeps no key


# -- secrets ---------------------------------------------------------------------------------

def test_a_multi_line_private_key_printed_by_graders_leaves_no_line_behind(project, monkeypatch):
    monkeypatch.setenv("DEPLOY_PRIVATE_KEY", PEM)
    project.task("pem-env", graders=[{"kind": "script", "run": 'echo "$DEPLOY_PRIVATE_KEY"; '
                                      'echo "$DEPLOY_PRIVATE_KEY" | base64 -w0; exit 1',
                                      "env_passthrough": ["DEPLOY_PRIVATE_KEY"]}])
    # A key the environment never held (the agent left one in the workspace).
    project.task("pem-file", profile=agent("keyleaver", "writeNewFile", path="id_rsa",
                                           content=PEM.replace("RSA ", "OPENSSH ") + "\n"),
                 graders=[{"kind": "script", "run": "cat id_rsa; exit 1"}])
    project.task("pem-processor", profile=signer({"answer": "42"}), graders=[
        {"kind": "processor", "script": "check.py", "env_passthrough": ["DEPLOY_PRIVATE_KEY"]}])
    project.write("tasks/pem-processor/.jaato/check.py",
                  "import os\nprint(os.environ['DEPLOY_PRIVATE_KEY'])\n"
                  "def validate(payload, context):\n"
                  "    return ['bad key:\\n' + os.environ['DEPLOY_PRIVATE_KEY']]\n")
    junit, html = project.root / "junit.xml", project.root / "r.html"
    result = project.run("tasks", "-rA", f"--junitxml={junit}", f"--jaato-html={html}")
    records = {r["task_id"]: r for r in project.records()}
    assert {r["state"] for r in records.values()} == {"FAIL"}
    assert "***(DEPLOY_PRIVATE_KEY)" in json.dumps(records["pem-env"])
    assert "***(OPENSSH PRIVATE KEY)" in json.dumps(records["pem-file"])
    encoded = base64.b64encode(PEM.encode()).decode()
    for where, text in outputs(project, result, junit, html).items():
        assert encoded[:40] not in text and encoded[100:140] not in text, where
        for line in PEM_BODY:
            assert line not in text, f"a line of the key reached the {where}"
            for cut in (line[:24], line[20:44], line[-24:]):
                assert cut not in text, f"part of a line of the key reached the {where}"


# -- processors and graders always end with a verdict ---------------------------------------

PROCESSORS = {
    "exit-at-import": ("import sys\nsys.exit(3)\n", "BLOCKED", "import failed: SystemExit: 3"),
    "interrupt-in-validate": ("def validate(payload, context):\n    raise KeyboardInterrupt\n",
                              "BLOCKED", "validate() raised KeyboardInterrupt"),
    "loop-at-import": ("while True:\n    pass\n", "BLOCKED", "timed out after 3 s"),
    "loop-in-validate": ("def validate(payload, context):\n    while True:\n        pass\n",
                         "BLOCKED", "timed out after 3 s"),
    "os-exit": ("import os\ndef validate(payload, context):\n    os._exit(0)\n", "BLOCKED",
                "exited 0 without a verdict"),
    "huge-print": ("import sys\ndef validate(payload, context):\n"
                   "    for _ in range(800):\n        sys.stdout.write('x' * 65536 + '\\n')\n"
                   "    return ['e%d' % i for i in range(100000)]\n", "FAIL", "100000 error(s)"),
    "stubborn-child": ("import subprocess\ndef validate(payload, context):\n"
                       "    subprocess.Popen(['sh', '-c', 'trap \"\" TERM; sleep 300; #STUBBORN'])\n"
                       "    return []\n", "PASS", "no errors"),
}


@pytest.mark.slow
def test_processors_that_exit_interrupt_loop_or_flood_end_with_one_verdict_each(project):
    for name, (body, _, _) in PROCESSORS.items():
        project.task(name, profile=signer({"answer": "42"}), graders=[
            {"kind": "processor", "script": "check.py", "timeout_seconds": 3}])
        project.write(f"tasks/{name}/.jaato/check.py", body)
    project.task("grader-flood", graders=[
        {"kind": "script", "run": "head -c 60000000 /dev/zero | tr '\\0' y; exit 1"}])
    started = time.monotonic()
    result = project.run("tasks", "-p", "no:randomly")
    took = time.monotonic() - started
    records = project.records()
    assert sorted(r["task_id"] for r in records) == sorted([*PROCESSORS, "grader-flood"])
    by = {r["task_id"]: r for r in records}
    for name, (_, state, says) in PROCESSORS.items():
        verdict = by[name]["verdicts"][0]
        assert verdict["state"] == state, (name, verdict)
        assert says in verdict["detail"], (name, verdict["detail"])
        assert "\n" not in verdict["detail"]
    flood = by["huge-print"]["verdicts"][0]["evidence"]
    assert flood[50].startswith("[… 99950 more; evidence keeps the first 50 errors]")
    assert any("evidence is its last 20 lines" in line for line in flood)
    assert any("evidence is its last 20 lines" in line
               for line in by["grader-flood"]["verdicts"][0]["evidence"])
    assert max(len(line) for line in project.store.read_text().splitlines()) < 64_000
    assert "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" * 100 not in result.stdout.str()
    assert took < 240, took
    assert not processes_mentioning("#STUBBORN"), "a processor's child outlived its grader"


def test_a_processor_path_leaving_the_config_root_is_refused(project):
    outside = project.write("secret_checker.py", "def validate(payload, context):\n    return []\n")
    project.task("dotdot", profile=signer({"answer": "42"}),
                 graders=[{"kind": "processor", "script": "../../../secret_checker.py"}])
    link_root = project.root / "tasks" / "link" / ".jaato"
    link_root.mkdir(parents=True)
    (link_root / "check.py").symlink_to(outside)
    project.task("link", profile=signer({"answer": "42"}),
                 graders=[{"kind": "processor", "script": "check.py"}])
    project.run("tasks")
    for r in project.records():
        assert r["state"] == "BLOCKED", r
        assert "outside the config root" in r["blocked_reason"], r["blocked_reason"]


# -- contamination ---------------------------------------------------------------------------

def test_an_agent_reading_the_answer_key_fails_as_contaminated(project):
    """Reaching the answer key, or anything outside the workspace, is the agent's own act: the
    arm FAILS with a `contamination` verdict naming the calls, whatever its graders said. A
    BLOCKED would let a losing agent take itself out of the pass rate with one read."""
    root = project.root / "tasks"
    key = root / "peek" / ".jaato" / "check.py"
    project.task("peek", profile=agent("peeker", "readFile", path=str(key)),
                 graders=[{"kind": "script", "run": "true"}])
    project.write("tasks/peek/.jaato/check.py", "ANSWER = 42\n")
    project.task("peek-caveat", profile=agent("peeker", "readFile", path=str(
        root / "peek-caveat" / "task.yaml")), graders=[{"kind": "script", "run": "true"}],
                 extra={"contamination": "caveat"})
    project.task("escape", profile=agent("escaper", "readFile", path="../../../etc/hostname"),
                 graders=[{"kind": "script", "run": "true"}])
    project.task("clean", graders=[{"kind": "script", "run": "grep -qx READY answer.txt"}])
    result = project.run("tasks", "-rA")
    by = {r["task_id"]: r for r in project.records()}
    peek = by["peek"]
    assert peek["state"] == "FAIL" and peek["contaminated"] is True
    assert peek["blocked_reason"] is None
    graded, contaminated = peek["verdicts"]
    assert graded["state"] == "PASS"  # graded, but not trusted
    assert contaminated["grader_id"] == "contamination" and contaminated["state"] == "FAIL"
    assert "reaches the config root" in contaminated["detail"]
    assert peek["contamination_evidence"] == [
        f"readFile path={str(key)!r} reaches the config root"]
    caveat = by["peek-caveat"]
    assert caveat["state"] == "PASS" and caveat["contaminated"] is True
    assert any(c.startswith("contaminated (kept as a caveat") for c in caveat["notes"])
    assert by["escape"]["contaminated"] is True and by["escape"]["state"] == "FAIL"
    assert "outside the workspace" in by["escape"]["verdicts"][-1]["detail"]
    assert by["clean"]["contaminated"] is False and by["clean"]["state"] == "PASS"
    result.stdout.fnmatch_lines(["FAILED *peek*"])


# -- the judge -------------------------------------------------------------------------------

JUDGE_SCHEMA = {"type": "object", "properties": {
    k: {} for k in ("score", "defects", "errors", "cannot_grade", "confidence", "reasoning")}}


@pytest.mark.slow
@pytest.mark.parametrize("appended", ["VLLM_HOST={evil}", "JAATO_PROFILE_SET=lenient"])
def test_an_agent_editing_env_cannot_redirect_the_judge(project, monkeypatch, appended):
    """The developer exports VLLM_HOST/VLLM_API_TOKEN for a judge whose profile names no
    host; the agent appends its own VLLM_HOST to the workspace `.env`, or switches the
    profile set to one whose judge is lenient."""
    token = "judge-bearer-0123456789abcdef"
    real = ScriptedModel([Turn.tool("signal_completion", score=0.2, defects=[],
                                    reasoning="the haiku has four lines")]).start()
    evil = ScriptedModel([Turn.tool("signal_completion", score=1.0, defects=[])]).start()
    try:
        project.task("redirect", profile=agent(
            "redirector", "updateFile", path=".env", old="JAATO_PROFILE_SET=echo",
            new="JAATO_PROFILE_SET=echo\n" + appended.format(evil=evil.url)),
            graders=[{"kind": "judge", "profile": "critic", "timeout_seconds": 120}])
        profiles = project.root / "tasks/redirect/.jaato/profiles"
        critic = real.profile("critic", host=False, completion_payload_schema=JUDGE_SCHEMA)
        (profiles / "echo/critic.yaml").write_text(yaml.safe_dump(critic))
        (profiles / "lenient").mkdir()
        (profiles / "lenient/critic.yaml").write_text(yaml.safe_dump(
            evil.profile("critic", completion_payload_schema=JUDGE_SCHEMA)))
        monkeypatch.setenv("VLLM_HOST", real.url)
        monkeypatch.setenv("VLLM_API_TOKEN", token)
        junit, html = project.root / "junit.xml", project.root / "r.html"
        result = project.run("tasks", "-rA", "--keep-workspaces", f"--junitxml={junit}",
                             f"--jaato-html={html}", shared_daemon=False)
        (record,) = project.records()
        env_text = Path(record["workspace"], ".env").read_text()
        assert appended.format(evil=evil.url) in env_text  # the agent really edited it
        verdict = record["verdicts"][0]
        assert verdict["state"] == "FAIL" and verdict["detail"] == "score 0.2 < 0.7", verdict
        assert "reasoning: the haiku has four lines" in verdict["evidence"]
        assert evil.requests == [], "the agent's server heard from the judge"
        assert real.chat_requests
        assert real.chat_requests[0].headers.get("authorization") == f"Bearer {token}"
        for where, text in outputs(project, result, junit, html).items():
            assert token not in text, where
    finally:
        real.stop()
        evil.stop()


ANSWERS = {  # task: (the judge's answer, grader options, state, detail)
    "errors": ({"score": 0.3, "errors": ["answer.txt could not be read"]}, {}, "BLOCKED",
               "the judge cannot grade: answer.txt could not be read"),
    "defects": ({"score": 0.9, "defects": ["no title", "typo"]}, {"defects_field": "defects"},
                "FAIL", "the judge found 2 defect(s): no title"),
    "cannot-grade": ({"score": 0, "cannot_grade": "the file is binary"},
                     {"errors_field": "cannot_grade"}, "BLOCKED",
                     "the judge cannot grade: the file is binary"),
    "unsure": ({"score": 0.9, "confidence": 0.4, "reasoning": "two readings are possible"},
               {"needs_human_below": 0.6}, "BLOCKED",
               "needs human review (confidence 0.40 < 0.60)"),
    "sure": ({"score": 0.9, "confidence": 0.8}, {"needs_human_below": 0.6}, "PASS", "score 0.9"),
    "off-scale": ({"score": 12}, {"threshold": 7, "score_scale": [0, 10]}, "BLOCKED",
                  "the judge cannot grade: score is 12, off the score_scale 0 to 10"),
}


@pytest.mark.slow
def test_the_judges_answer_contract_and_the_review_command(project):
    models = {}
    try:
        for name, (answer, options, _, _) in ANSWERS.items():
            models[name] = model = ScriptedModel([Turn.tool("signal_completion", **answer)]).start()
            project.task(name, profile=signer({"answer": "42"}), graders=[
                {"kind": "judge", "profile": "critic", "timeout_seconds": 120, **options}])
            (project.root / f"tasks/{name}/.jaato/profiles/echo/critic.yaml").write_text(
                yaml.safe_dump(model.profile("critic", completion_payload_schema=JUDGE_SCHEMA)))
        project.run("tasks")
    finally:
        for model in models.values():
            model.stop()
    by = {r["task_id"]: r for r in project.records()}
    for name, (_, _, state, detail) in ANSWERS.items():
        verdict = by[name]["verdicts"][0]
        assert (verdict["state"], verdict["detail"]) == (state, detail), (name, verdict)
    review = subprocess.run([sys.executable, "-m", "pytest_jaato_eval", "review",
                             str(project.store)], capture_output=True, text=True, timeout=60)
    assert review.returncode == 1, review.stderr
    lines = review.stdout.splitlines()
    assert lines[0].endswith("1 arm(s) await human review")
    text = review.stdout
    assert "unsure@echo#0" in text and "needs human review (confidence 0.40 < 0.60)" in text
    assert "reasoning: two readings are possible" in text
    assert "sure@echo#0" not in text.replace("unsure@echo#0", "")
