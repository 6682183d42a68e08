"""Secrets: a credential's value never reaches the store, the terminal,
JUnit or the HTML report, even when a grader prints its whole environment; its variable
name is kept, so a reader sees which credential was there (`***(MY_API_KEY)`)."""
from __future__ import annotations

import json

import pytest
import yaml
from jaato_project import WRITER, signer

from pytest_jaato_eval.arm import ArmSettings
from pytest_jaato_eval.engine.session import Ceiling
from pytest_jaato_eval.redact import MIN_SECRET_CHARS, Redactor, is_secret_name

SECRET = "sk-test-1234567890"


@pytest.mark.parametrize("name", [
    "MY_API_KEY", "OPENAI_API_KEY", "openrouter_api_key", "GOOGLE_APIKEY", "GITHUB_TOKEN",
    "HF_TOKEN", "AWS_SESSION_TOKEN", "AWS_SECRET_ACCESS_KEY", "CLIENT_SECRET", "DB_PASSWORD",
    "PGPASSWORD", "SMTP_PASSWD", "DJANGO_SECRET_KEY", "SSH_PRIVATE_KEY", "AWS_ACCESS_KEY"])
def test_credential_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "SORT_KEY", "SSH_PUBLIC_KEY", "KEYBOARD", "MAX_TOKENS", "TOKENIZERS_PARALLELISM",
    "SECRETS_DIR", "PATH", "HOME", "JAATO_EVAL_PARAMS", "PASSWORD_FILE"])
def test_names_that_are_no_credential(name):
    assert not is_secret_name(name)


def test_from_environ_keeps_credentials_long_enough_to_be_real():
    redact = Redactor.from_environ({
        "MY_API_KEY": SECRET, "EMPTY_TOKEN": "", "SHORT_TOKEN": "x" * (MIN_SECRET_CHARS - 1),
        "BLANK_SECRET": "         ", "HOME": "/root/somewhere-long"})
    assert redact.names == ["MY_API_KEY"]
    # Too short to be a credential, too common to mask everywhere: left alone.
    assert redact("x" * (MIN_SECRET_CHARS - 1)) == "x" * (MIN_SECRET_CHARS - 1)
    assert redact("/root/somewhere-long") == "/root/somewhere-long"


def test_values_are_masked_everywhere_in_a_record_with_the_name_kept():
    redact = Redactor({"MY_API_KEY": SECRET, "OTHER_TOKEN": "tok-abcdefgh"})
    record = {
        "blocked_reason": f"AuthError: invalid key {SECRET}",
        "verdicts": [{"grader_id": f"script:curl -H 'Bearer {SECRET}'",
                      "evidence": [f"MY_API_KEY={SECRET}", "OTHER_TOKEN=tok-abcdefgh", "plain"],
                      "state": "FAIL"}],
        "usage": {"cost_usd": 0.5, "turns": 3}, "session_ids": (SECRET,), "error": None,
        SECRET: "a key that is the secret",
    }
    masked = redact(record)
    assert SECRET not in json.dumps(masked) and "tok-abcdefgh" not in json.dumps(masked)
    assert masked["blocked_reason"] == "AuthError: invalid key ***(MY_API_KEY)"
    assert masked["verdicts"][0]["evidence"] == [
        "MY_API_KEY=***(MY_API_KEY)", "OTHER_TOKEN=***(OTHER_TOKEN)", "plain"]
    assert masked["verdicts"][0]["grader_id"] == "script:curl -H 'Bearer ***(MY_API_KEY)'"
    assert masked["session_ids"] == ("***(MY_API_KEY)",)
    assert "***(MY_API_KEY)" in masked
    # Numbers, None and the shape stay as they were; the input is not modified.
    assert masked["usage"] == {"cost_usd": 0.5, "turns": 3} and masked["error"] is None
    assert record["blocked_reason"].endswith(SECRET)


def test_a_secret_that_contains_another_is_masked_whole():
    redact = Redactor({"LONG_TOKEN": "abcdef-123456-xyz", "SHORT_TOKEN": "abcdef-123456"})
    assert redact("abcdef-123456-xyz and abcdef-123456") == \
        "***(LONG_TOKEN) and ***(SHORT_TOKEN)"


def test_one_value_under_two_names_is_masked_under_the_first_and_outer_spaces_do_not_hide_it():
    redact = Redactor({"B_TOKEN": f"  {SECRET}\n", "A_API_KEY": SECRET})
    assert redact(f"echo {SECRET}") == "echo ***(A_API_KEY)"


def test_no_credential_in_the_environment_leaves_records_untouched():
    record = {"evidence": ["anything"], "n": 1}
    assert Redactor({})(record) == record


def test_arm_settings_read_the_credentials_at_run_start(monkeypatch, tmp_path):
    monkeypatch.setenv("MY_API_KEY", SECRET)
    settings = ArmSettings(workspace_root=tmp_path, keep_workspaces="never",
                           ceiling=Ceiling(seconds=0), run_id="r")
    assert "MY_API_KEY" in settings.redact.names
    assert settings.redact(f"k={SECRET}") == "k=***(MY_API_KEY)"


# -- end to end: graders that print the environment, against the real daemon -----------------

LEAKY_PROCESSOR = """\
import os


def validate(payload, context):
    raise RuntimeError("upstream rejected key " + os.environ["MY_API_KEY"])
"""


def test_a_grader_printing_its_environment_leaks_no_secret_end_to_end(project, monkeypatch):
    monkeypatch.setenv("MY_API_KEY", SECRET)  # the run inherits it
    # FAIL: the verdict table shows the evidence of a grader that printed the key.
    project.task("leaky", graders=[{"kind": "script", "run": (
        'env | grep MY_API_KEY; echo "key=$MY_API_KEY"; echo $MY_API_KEY; exit 3'),
        "env_passthrough": ["MY_API_KEY"]}])  # named, so the grader may have it
    # BLOCKED: a processor whose error carries the key: blocked reason, short summary,
    # JUnit skip message and property, pivot digest.
    project.task("leaky-blocked", profile=signer({"answer": "42"}),
                 graders=[{"kind": "processor", "script": "check.py",
                           "env_passthrough": ["MY_API_KEY"]}])
    project.write("tasks/leaky-blocked/.jaato/check.py", LEAKY_PROCESSOR)
    junit = project.root / "junit.xml"
    html = project.root / "report.html"
    project.monkeypatch.setenv("COLUMNS", "400")  # each digest line on one line, to match
    result = project.run("tasks", "-rA", f"--junitxml={junit}", f"--jaato-html={html}")
    assert result.ret == 1
    result.assert_outcomes(failed=1)

    by_id = {r["arm_id"]: r for r in project.records()}
    leaky, blocked = by_id["leaky@echo#0"], by_id["leaky-blocked@echo#0"]
    # The graders really printed it: the masks stand where the value was.
    assert leaky["state"] == "FAIL"
    assert leaky["verdicts"][0]["evidence"] == [
        "MY_API_KEY=***(MY_API_KEY)", "key=***(MY_API_KEY)", "***(MY_API_KEY)"]
    assert blocked["state"] == "BLOCKED"
    assert blocked["blocked_reason"].endswith(
        "validate() raised RuntimeError: upstream rejected key ***(MY_API_KEY)")

    stdout = result.stdout.str() + result.stderr.str()
    outputs = {"store": project.store.read_text(), "stdout": stdout,
               "junit": junit.read_text(), "html report": html.read_text()}
    for where, text in outputs.items():
        assert SECRET not in text, f"the secret leaked into the {where}"
        assert "***(MY_API_KEY)" in text, f"the {where} lost the variable's name"
    result.stdout.fnmatch_lines([  # in the order pytest prints them
        "*leaky-blocked @ echo: (1×)*upstream rejected key ***(MY_API_KEY)",  # pivot digest
        "  MY_API_KEY=***(MY_API_KEY)",                                       # verdict table
        "BLOCKED *leaky-blocked* - *upstream rejected key ***(MY_API_KEY)",   # summary line
    ])
    assert 'name="jaato_blocked_reason"' in outputs["junit"]


def test_a_crashed_workers_synthesised_record_is_masked_too():
    """A crash record is built by the controller from xdist's crash text, not by run_arm,
    so it takes its own pass through the masker. (Unit level: a real worker crash carries
    xdist's message, which holds no secret we could plant; the crash path itself is
    reached for real in tests/e2e/faults.)"""
    from types import SimpleNamespace

    from pytest_jaato_eval.pytest_layer.outcome import RECORD_ATTR, block_crashed

    secret = "sk-crash-0123456789"
    report = SimpleNamespace(longrepr=f"worker 'gw0' crashed: key={secret}", when="call",
                             outcome="failed")
    nodeid = f"tasks/t/task.yaml::t[{secret}-r0]"
    arm = {"arm_id": f"t@{secret}#0", "task_id": "t", "profile_set": secret, "repeat": "0"}
    block_crashed(report, nodeid, arm, "run1", Redactor({"OPENAI_API_KEY": secret}))
    record = getattr(report, RECORD_ATTR)
    text = json.dumps(record) + str(report.longrepr)
    assert secret not in text
    assert "***(OPENAI_API_KEY)" in record["blocked_reason"]
    assert record["arm_id"] == "t@***(OPENAI_API_KEY)#0" and record["state"] == "BLOCKED"


def test_a_python_arms_assertion_report_names_no_secret(project, monkeypatch):
    """pytest's own text of a failed Python arm (the assertion's repr, the captured output)
    goes to the terminal and JUnit: masked as the record is."""
    monkeypatch.setenv("MY_API_KEY", SECRET)
    project.write(".jaato/profiles/echo/writer.yaml", yaml.safe_dump(WRITER))
    project.write("fixture/seed.txt", "seed\n")
    project.write("arms/test_leak.py", """
        import os

        import pytest


        @pytest.mark.jaato(config_root="../.jaato", fixture="../fixture", profile="writer",
                           profile_set="echo")
        def test_leak(jaato_arm):
            jaato_arm.run("Write READY.")
            key = os.environ["MY_API_KEY"]
            print("the key is", key)
            assert key == "not it"
        """)
    junit = project.root / "junit.xml"
    result = project.run("arms", "-rA", f"--junitxml={junit}")
    assert result.ret == 1
    text = result.stdout.str() + result.stderr.str() + junit.read_text()
    assert SECRET not in text, "the secret leaked into the terminal or JUnit"
    assert "***(MY_API_KEY)" in text
