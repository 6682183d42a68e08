"""What the agent's copy of the config root holds (task/session_files.py, W5): what jaato
reads for a session, and nothing a grader reads, whether or not its command spells it."""
from __future__ import annotations

from pathlib import Path

import yaml

from pytest_jaato_eval import workspace
from pytest_jaato_eval.task import grader_files, session_files, sides
from pytest_jaato_eval.task.arms import arms_of
from pytest_jaato_eval.task.load import load_task

FILES = {
    "profiles/_base.yaml": {"name": "_base", "provider": "echo"},
    "profiles/echo/w.yaml": {"name": "w", "inherits": ["_base"],
                             "instructions_file": "notes/worker.md",
                             "plugin_configs": {"references": {"config": "refs.json"}}},
    "profiles/echo/critic.yaml": {"name": "critic"},
    "profiles/other/w.yaml": {"name": "w"},
    "profiles/README.txt": "not a profile",
    "skills/hint.md": "a hint",
    "prompts/p.md": "a prompt",
    "gc.json": "{}",
    "notes/worker.md": "how to work",
    "notes/secret.md": "not named by a profile",
    "refs.json": "{}",
    "expected.txt": "PLATYPUS",
    "checks/answer.sh": "cmp -s expected.txt answer.txt",
    "check.py": "def validate(payload, context): return []",
}


def make(tmp_path: Path, graders: list[dict], profile: str = "w") -> object:
    (tmp_path / "fixture").mkdir()
    root = tmp_path / ".jaato"
    for rel, content in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    (tmp_path / "task.yaml").write_text(yaml.safe_dump({
        "id": "t", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": profile, "profile_set": "echo"},
        "graders": graders}))
    return load_task(tmp_path / "task.yaml")


def copied(task, tmp_path: Path) -> set[str]:
    dest = workspace.copy_config(task.config_root, tmp_path / "copy",
                                 session_files.left_out(task))
    return {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}


SESSION = {"profiles/_base.yaml", "profiles/echo/w.yaml", "profiles/other/w.yaml",
           "skills/hint.md", "prompts/p.md", "gc.json", "notes/worker.md", "refs.json"}


def test_the_agents_copy_holds_what_a_session_reads_and_no_key_however_a_grader_spells_it(
        tmp_path):
    task = make(tmp_path, [
        {"kind": "script", "run": 'cmp -s "$JAATO_EVAL_CONFIG_ROOT"/expected.txt answer.txt'},
        {"kind": "script", "run": 'cd "$JAATO_EVAL_CONFIG_ROOT" && sh checks/answer.sh'},
        {"kind": "processor", "script": "check.py"},
        {"kind": "judge", "profile": "critic"}])
    # the profiles, the base they inherit, the files a profile names, jaato's folders and
    # knobs; never a script, the key, a file no profile names, the judge's profile
    assert copied(task, tmp_path) == SESSION


def test_a_grader_naming_the_profiles_leaves_them_to_the_session_and_preflight_says_so(
        tmp_path):
    task = make(tmp_path, [
        {"kind": "script", "run": "test -d $JAATO_EVAL_CONFIG_ROOT/profiles"},
        {"kind": "script", "run": "cat $JAATO_EVAL_CONFIG_ROOT/expected.txt"}])
    assert copied(task, tmp_path) == SESSION | {"profiles/echo/critic.yaml"}
    assert grader_files.shared_with_session(task) == [
        "graders[0] (script:test -d $JAATO_EVAL_CONFIG_ROOT/profiles) names what the agent's "
        "session reads too: profiles; the agent's copy of the config root keeps it, so keep "
        "no answer there"]
    assert grader_files.hidden_from(task, 1) == {"profiles"}  # still the grader's own view


def test_a_judge_on_the_sessions_own_profile_stays_in_the_agents_copy(tmp_path):
    task = make(tmp_path, [{"kind": "judge", "profile": "w"}])
    assert "profiles/echo/w.yaml" in copied(task, tmp_path)
    assert grader_files.shared_with_session(task) == []


def test_the_agent_side_changes_with_a_session_file_and_not_with_a_key(tmp_path):
    task = make(tmp_path, [{"kind": "script", "run": 'cmp -s "$JAATO_EVAL_CONFIG_ROOT"/'
                                                     'expected.txt answer.txt'}])
    arm = arms_of(task, None, None)[0]
    before = (sides.agent_side(arm, task.config_root), sides.grader_side(arm, task.config_root))
    (task.config_root / "expected.txt").write_text("WOMBAT")
    sides._tree.cache_clear()
    after_key = (sides.agent_side(arm, task.config_root), sides.grader_side(arm, task.config_root))
    assert after_key[0] == before[0]  # the agent never saw the key
    assert after_key[1]["files"] != before[1]["files"]  # what grades it changed
    (task.config_root / "skills" / "hint.md").write_text("another hint")
    sides._tree.cache_clear()
    assert sides.agent_side(arm, task.config_root)["config"] != before[0]["config"]


def test_a_processor_owns_its_script(tmp_path):
    task = make(tmp_path, [{"kind": "processor", "script": "check.py"}])
    assert grader_files.own_files(task, task.graders[0]) == {"check.py"}


def test_a_drivers_spelled_files_stay_in_the_copy_it_is_handed(tmp_path):
    (tmp_path / "fixture").mkdir()
    root = tmp_path / ".jaato"
    for rel in ("drive/main.py", "expected.txt", "profiles/echo/w.yaml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    (tmp_path / "task.yaml").write_text(yaml.safe_dump({
        "id": "d", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "harness": {"kind": "driver",
                    "run": '"$JAATO_EVAL_PYTHON" $JAATO_EVAL_CONFIG_ROOT/drive/main.py'},
        "graders": [{"kind": "script", "run": "cmp -s $JAATO_EVAL_CONFIG_ROOT/expected.txt a"}]}))
    task = load_task(tmp_path / "task.yaml")
    assert copied(task, tmp_path) == {"drive/main.py", "profiles/echo/w.yaml"}
