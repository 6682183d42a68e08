"""M1-M12: every bad task.yaml is one line naming the file, the key and what was expected."""
from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from pytest_jaato_eval.task.load import ManifestError, content_hash, load_task

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
    assert (task.id, task.harness.kind, task.harness.profile, task.repeats) == ("t", "session", "writer", 1)
    assert task.graders[0].id == "script:true"
    assert task.fixture == (tmp_path / "fixture").resolve()
    assert len(task.content_hash) == 64


def test_the_task_is_the_validated_file_frozen_and_found_once(tmp_path):
    """One model: the sections as the file gives them, the budget the section itself;
    nothing of it can be changed after loading."""
    path = write(tmp_path, VALID + "budget: {usd: 2, degrade: [cheap]}\nmarks: [smoke]\n")
    task = load_task(path)
    assert task.harness.profile == "writer" and task.input.prompt == "do it"
    assert task.environment.fixture == "fixture" and task.manifest == path.resolve()
    assert task.budget is not None and task.budget.usd == 2
    assert task.budget.limits() == {"usd": 2}
    assert task.budget.as_dict() == {"usd": 2, "degrade": ["cheap"]}
    assert isinstance(task.graders, tuple) and task.marks == (("smoke", None),)
    with pytest.raises(ValueError, match="frozen"):
        task.id = "other"
    with pytest.raises(RuntimeError, match="already found"):
        task.found_at(tmp_path, tmp_path, tmp_path)


def test_id_is_stringified(tmp_path):
    assert load_task(write(tmp_path, VALID.replace("id: t", "id: 42"))).id == "42"


@pytest.mark.parametrize("text, where, says", [
    # missing key
    (VALID.replace("id: t\n", ""), ": id: ", "missing; expected a string or number"),
    # key present but null
    (VALID.replace("harness: {profile: writer}", "harness: {profile: null}"),
     ": harness.profile: ", "is null; expected a non-blank string"),
    # wrong type, naming the type found
    (VALID + "repeats: abc\n", ": repeats: ", "expected an integer >= 1, got str 'abc'"),
    (VALID + "repeats: 0\n", ": repeats: ", "expected an integer >= 1, got int 0"),
    (VALID + "repeats: true\n", ": repeats: ", "expected an integer >= 1, got bool True"),
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


# -- marks -------------------------------------------------------------------------------
def test_marks_are_names_or_one_key_mappings(tmp_path):
    task = load_task(write(tmp_path, VALID + textwrap.dedent("""\
        marks:
          - smoke
          - {xfail: known bug}
          - {skipif: "sys.platform == 'win32'"}
          - {parametrize_me: [1, 2]}
          - {xfail: {reason: flaky, strict: true}}
          - {slow: null}
        """)))
    assert task.marks == (("smoke", None), ("xfail", "known bug"),
                          ("skipif", "sys.platform == 'win32'"), ("parametrize_me", [1, 2]),
                          ("xfail", {"reason": "flaky", "strict": True}), ("slow", None))
    assert load_task(write(tmp_path, VALID)).marks == ()


def test_each_entry_becomes_the_pytest_mark_it_names(tmp_path, request, monkeypatch):
    from pytest_jaato_eval.pytest_layer.collect import task_mark

    # pytest checks mark names against the config its global mark generator holds; an
    # in-process pytester run earlier in this worker can leave that unset, so pin it.
    monkeypatch.setattr(pytest.mark, "_config", request.config)

    assert task_mark(tmp_path, 0, "xfail", "known bug").kwargs == {"reason": "known bug"}
    assert task_mark(tmp_path, 0, "skip", "not today").kwargs == {"reason": "not today"}
    skipif = task_mark(tmp_path, 0, "skipif", "sys.platform == 'x'")
    assert skipif.args == ("sys.platform == 'x'",) and skipif.kwargs == {}
    strict = task_mark(tmp_path, 0, "xfail", {"reason": "r", "strict": True})
    assert strict.kwargs == {"reason": "r", "strict": True}
    assert task_mark(tmp_path, 0, "usefixtures", ["a", "b"]).args == ("a", "b")
    # A name no run in this process registers: pytest caches every registered name
    # process-wide, so one an in-process pytester run registered would not warn.
    with pytest.warns(pytest.PytestUnknownMarkWarning,
                      match=r"marks\[0\]: Unknown pytest.mark.never_registered_here"):
        assert task_mark(tmp_path, 0, "never_registered_here", None).name == \
            "never_registered_here"


@pytest.mark.parametrize("marks, where, says", [
    ("smoke", ": marks: ", "expected a list, got str 'smoke'"),
    ("[smoke-test]", ": marks[0]: ", "marker name 'smoke-test' is not an identifier"),
    ("[{a: 1, b: 2}]", ": marks[0]: ", "a one-key mapping {name: arguments}, got a mapping of 2"),
    ("[{xfail: 3}]", ": marks[0].xfail: ", "arguments of 'xfail' are int 3; expected a string"),
    ("[{xfail: {when: 2024-01-01}}]", ": marks[0].when: ", "expected a JSON value"),
    ("[[smoke]]", ": marks[0]: ", "expected a marker name or a one-key mapping"),
    ("[{1: x}]", ": marks[0]: ", "marker name 1 is of type int"),
])
def test_bad_marks_are_one_line(tmp_path, marks, where, says):
    message = error_of(tmp_path, VALID + f"marks: {marks}\n")
    assert where in message and says in message, message


# -- script graders given as a file; paths under the config root -----------------------
def test_a_script_grader_may_name_a_file_under_the_config_root(tmp_path):
    task = load_task(write(tmp_path, VALID.replace('run: "true"', "file: checks/answer.py")))
    (grader,) = task.graders
    assert grader.id == "script:checks/answer.py"
    assert grader.file == "checks/answer.py" and grader.run is None


@pytest.mark.parametrize("grader, where, says", [
    ('{kind: script, run: "true", file: a.py}', ": graders[0].file: ",
     "give either run (a shell command) or file (a script under the config root), not both"),
    ("{kind: script}", ": graders[0].run: ", "missing; expected run (a shell command) or file"),
    ("{kind: script, file: ../fixture/check.py}", ": graders[0].file: ",
     "'../fixture/check.py' leaves the config root"),
    ("{kind: script, file: /usr/bin/true}", ": graders[0].file: ", "leaves the config root"),
    ("{kind: processor, script: ../../x.py}", ": graders[0].script: ", "leaves the config root"),
])
def test_grader_files_stay_under_the_config_root(tmp_path, grader, where, says):
    message = error_of(tmp_path, VALID.split("graders:")[0] + f"graders: [{grader}]\n")
    assert where in message and says in message, message


# -- bounds and special files --------------------------------------------------------------
def test_repeats_is_bounded_and_says_so(tmp_path):
    message = error_of(tmp_path, VALID + "repeats: 1000000\n")
    assert ": repeats: expected an integer from 1 to 1000, got int 1000000 (each repeat" in message
    assert load_task(write(tmp_path, VALID + "repeats: 1000\n")).repeats == 1000


def _load_in_thread(path: Path):
    """load_task with a watchdog: opening a FIFO would block forever."""
    import threading
    outcome = {}

    def target():
        try:
            outcome["task"] = load_task(path)
        except ManifestError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "load_task blocked: it opened a special file"
    return outcome


def test_a_fifo_in_the_fixture_is_refused_without_being_opened(tmp_path):
    path = write(tmp_path, VALID)
    (tmp_path / "fixture" / "sub").mkdir()
    os.mkfifo(tmp_path / "fixture" / "sub" / "pipe")
    error = _load_in_thread(path)["error"]
    assert error.where == "environment.fixture"
    assert error.reason.startswith("'sub/pipe' is a FIFO: a task's folders may hold only files")
    assert "\n" not in str(error)


def test_special_files_in_the_config_root_are_hashed_without_being_opened(tmp_path):
    """Nothing copies the config root, so it is not refused; its hash never opens a FIFO
    (jaato and preflight read only regular files from it)."""
    path = write(tmp_path, VALID)
    os.mkfifo(tmp_path / ".jaato" / "pipe")
    task = _load_in_thread(path)["task"]
    import threading
    done = []
    thread = threading.Thread(target=lambda: done.append(task.content_hash), daemon=True)
    thread.start()
    thread.join(30)
    assert done and len(done[0]) == 64, "hashing opened the FIFO"
    (tmp_path / ".jaato" / "profile.yaml").write_text("x: 1\n")
    assert load_task(path).content_hash != done[0]  # the rest of the root still counts


def test_a_fixture_of_dev_is_refused_naming_a_device(tmp_path):
    error = _load_in_thread(write(tmp_path, VALID.replace("fixture: fixture", "fixture: /dev")))
    assert error["error"].where == "environment.fixture"
    assert "device" in error["error"].reason or "FIFO" in error["error"].reason \
        or "socket" in error["error"].reason


def test_symlinks_are_listed_never_followed(tmp_path):
    path = write(tmp_path, VALID)
    (tmp_path / "fixture" / "data").mkdir()
    (tmp_path / "fixture" / "other").mkdir()
    (tmp_path / "fixture" / "here").symlink_to("data")
    (tmp_path / "fixture" / "loop").symlink_to("loop")
    task = _load_in_thread(path)["task"]
    first = task.content_hash
    (tmp_path / "fixture" / "here").unlink()
    (tmp_path / "fixture" / "here").symlink_to("other")
    assert load_task(path).content_hash != first  # the link's target is content
    # one that leads out (to a device here) is refused by its name, never opened
    (tmp_path / "fixture" / "zero").symlink_to("/dev/zero")
    error = _load_in_thread(path)["error"]
    assert error.where == "environment.fixture" and "'zero' is a link to the absolute path" \
        in error.reason


def test_the_walk_is_bounded(tmp_path, monkeypatch):
    from pytest_jaato_eval.task import tree as task_tree
    path = write(tmp_path, VALID)
    for i in range(5):
        (tmp_path / "fixture" / f"f{i}").write_text("x")
    monkeypatch.setattr(task_tree, "MAX_ENTRIES", 4)
    monkeypatch.setattr(task_tree.list_tree, "__defaults__", (4,))
    error = _load_in_thread(path)["error"]
    assert error.where == "environment.fixture" and "holds more than 4 files and folders" in error.reason


# -- the content hash --------------------------------------------------------------------
def test_the_content_hash_is_computed_once_when_first_read(tmp_path, monkeypatch):
    from pytest_jaato_eval.task import tree as task_tree
    path = write(tmp_path, VALID)
    (tmp_path / "fixture" / "a.txt").write_text("one")
    reads = []
    real = task_tree._feed
    monkeypatch.setattr(task_tree, "_feed", lambda *a: (reads.append(a[1]), real(*a)))
    task = load_task(path)
    assert reads == []  # collecting reads no file's content
    digest = task.content_hash
    assert len(digest) == 64 and len(reads) == 1
    assert task.content_hash == digest and len(reads) == 1  # once
    (tmp_path / "fixture" / "a.txt").write_text("two")
    assert load_task(path).content_hash != digest
    assert load_task(path).content_hash == content_hash(path, tmp_path / "fixture",
                                                        tmp_path / ".jaato")


def test_the_content_hash_skips_what_the_workspace_copy_skips(tmp_path):
    path = write(tmp_path, VALID)
    before = load_task(path).content_hash
    (tmp_path / "fixture" / "__pycache__").mkdir()
    (tmp_path / "fixture" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (tmp_path / "fixture" / ".git").mkdir()
    assert load_task(path).content_hash == before


# -- the declared schema -----------------------------------------------------------------
def test_the_json_schema_accepts_the_shipped_tasks_and_refuses_what_the_loader_refuses():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    from pytest_jaato_eval.task.load import json_schema
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    shipped = sorted((Path(__file__).parents[2] / "tasks").glob("*/task.yaml"))
    assert shipped
    for manifest in shipped:
        assert not list(validator.iter_errors(yaml.safe_load(manifest.read_text()))), manifest
    good = yaml.safe_load(VALID)
    assert validator.is_valid(good)
    for bad in ({**good, "repeat": 3}, {**good, "repeats": 0}, {**good, "repeats": 1001},
                {**good, "graders": []}, {**good, "graders": [{"kind": "lint"}]},
                {**good, "graders": [{"kind": "script"}]},
                {**good, "harness": {"kind": "driver"}},
                {**good, "input": {}}, {**good, "marks": ["no-dash"]},
                {**good, "budget": {"usd": -1}}):
        assert not validator.is_valid(bad), bad


def test_the_schema_command_prints_the_schema(capsys):
    import json

    from pytest_jaato_eval.cli import main
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "jaato task (task.yaml)"
    assert {"id", "environment", "harness", "graders", "marks", "repeats"} <= set(schema["properties"])
    assert schema["properties"]["repeats"]["maximum"] == 1000


def test_a_task_folder_is_resolved_once_and_the_same_as_realpath(tmp_path):
    """The fixture, config root and manifest are resolved from the task folder's own
    realpath with one lstat each; whatever the names are, the result is realpath's."""
    from pytest_jaato_eval.task.load import _resolved_in

    real = tmp_path / "real"
    (real / "fx").mkdir(parents=True)
    (real / "elsewhere").mkdir()
    (real / "task.yaml").write_text("id: x\n")
    (real / "linked-fx").symlink_to(real / "elsewhere")
    (real / "loop").symlink_to(real / "loop")
    (tmp_path / "via-link").symlink_to(real)  # the task folder itself reached by a link
    (real / "linked.yaml").symlink_to(real / "task.yaml")
    for folder in (real, tmp_path / "via-link"):
        resolved = os.path.realpath(folder)
        for value in ("fx", "linked-fx", "missing", ".", "..", "fx/../elsewhere",
                      str(real / "fx"), "task.yaml", "linked.yaml", "loop"):
            expected = os.path.realpath(os.path.join(folder, value))
            assert _resolved_in(resolved, value)[0] == expected, (folder, value)


def test_a_gate_may_name_a_processor_by_its_file_name_as_jaato_eval_does(tmp_path):
    """M10: jaato-eval ids a graded processor `processor:<file name>`; such a gate_on loads
    when one processor before the judge has that name, and the judge reads its verdict."""
    from pytest_jaato_eval.graders.context import GraderContext
    from pytest_jaato_eval.graders.judge import _gate
    from pytest_jaato_eval.verdict import Verdict

    gated = VALID.replace('  - {kind: script, run: "true"}\n',
                          "  - {kind: processor, script: processors/check.py}\n"
                          "  - {kind: judge, profile: rubric, gate_on: ['processor:check.py']}\n")
    task = load_task(write(tmp_path, gated))
    judge = task.graders[1]
    ctx = GraderContext(workspace=tmp_path, config_root=tmp_path, params={})
    ctx.verdicts = [Verdict.failed("processor:processors/check.py", "c", "1 error(s)")]
    assert _gate(judge, ctx) == "gate processor:check.py=FAIL"
    ctx.verdicts = [Verdict.passed("processor:processors/check.py", "c", "no errors")]
    assert _gate(judge, ctx) is None
    twice = gated.replace("  - {kind: judge", "  - {kind: processor, script: other/check.py}\n"
                                               "  - {kind: judge")
    assert "'processor:check.py' is no grader of this task" in error_of(tmp_path, twice)


def test_an_arm_of_the_tasks_own_set_answers_to_jaato_evals_default_id(tmp_path):
    """R3: jaato-eval run without --profile-set names the arm `t@default#0`; --resume, compare
    and merge take it as ours under the task's own set, and only that one."""
    from pytest_jaato_eval.task.arms import Arm

    task = load_task(write(tmp_path, VALID.replace("harness: {profile: writer}",
                                                  "harness: {profile: writer, profile_set: echo}")))
    assert Arm(task, "echo", 1).ids == ("t@echo#1", "t@default#1")
    assert Arm(task, "other", 1).ids == ("t@other#1",)  # --profile-set=other is another arm


# -- what jaato-eval 0.3.4's loader accepts ------------------------------------------------
# Each variant is loaded by the reference's own loader too: a manifest it takes loads here,
# or its difference is one docs/coming-from-jaato-eval.md gives a reason for.
LOADS_IN_BOTH = {
    "no description": VALID + "description:\n",
    "no agent": VALID.replace("input: {prompt: do it}", "input: {prompt: do it, agent: null}"),
    "no agent_params": VALID.replace("input: {prompt: do it}",
                                     "input:\n  prompt: do it\n  agent_params:\n"),
    "no profile set": VALID.replace("harness: {profile: writer}",
                                    "harness: {profile: writer, profile_set: null}"),
    "no budget": VALID + "budget:\n",
    "an empty budget": VALID + "budget: {}\n",
    "a null ladder": VALID + "budget: {usd: 1, degrade: null}\n",
    "a gate as one id": VALID + "  - {kind: judge, profile: r, gate_on: 'script:true'}\n",
    "no gate": VALID + "  - {kind: judge, profile: r, gate_on: null, agent: null}\n",
    "a judge's socket": VALID + "  - {kind: judge, profile: r, socket_path: /tmp/d.sock}\n",
    "a 0-10 judge": VALID + "  - {kind: judge, profile: r, threshold: 7}\n",
    "a negative threshold": VALID + "  - {kind: judge, profile: r, threshold: -0.5}\n",
    "a date parameter": VALID.replace("input: {prompt: do it}",
                                      "input: {prompt: do it, agent_params: {day: 2026-08-28, "
                                      "at: 2026-08-28 10:30:00, nested: {d: [2026-01-02]}}}"),
    "a driver with a null input": VALID.replace("harness: {profile: writer}",
                                                "harness: {kind: driver, run: x}").replace(
        "input: {prompt: do it}", "input:"),
    # libyaml refuses this flow mapping; yaml.safe_load, jaato-eval's reader, takes it
    "keys with no value in a flow mapping": VALID.replace(
        "input: {prompt: do it}", "input: {prompt: do it, agent:, agent_params:}"),
    "a driver's date": VALID.replace("harness: {profile: writer}",
                                     "harness: {kind: driver, run: x}").replace(
        "input: {prompt: do it}", "input: {params: {TICKER: NVDA, TRADE_DATE: 2026-08-28}}"),
}


@pytest.mark.parametrize("name", LOADS_IN_BOTH)
def test_what_jaato_eval_loads_loads_here(tmp_path, name):
    manifest = pytest.importorskip("jaato_eval.manifest")
    path = write(tmp_path, LOADS_IN_BOTH[name])
    assert manifest.load_manifest(path).task_id == load_task(path).id == "t"


def test_null_means_absent_where_jaato_eval_reads_it_so(tmp_path):
    task = load_task(write(tmp_path, LOADS_IN_BOTH["no agent_params"]))
    assert task.input.agent_params is None and task.input.agent is None
    judge = load_task(write(tmp_path, LOADS_IN_BOTH["a gate as one id"])).graders[1]
    assert judge.gate_on == ("script:true",)
    assert load_task(write(tmp_path, LOADS_IN_BOTH["a null ladder"])).budget.degrade is None
    # a required key's null is still refused, as jaato-eval refuses it
    assert "is null" in error_of(tmp_path, VALID.replace("{profile: writer}", "{profile: null}"))


def test_a_yaml_date_parameter_is_handed_on_as_jaato_eval_hands_it_on(tmp_path):
    """C2: str() of what JSON has no form for (jaato-eval's tests pin it): the grader's
    variable is the JSON string, quotes included; the session gets the bare text."""
    import datetime

    from jaato_eval.params import param_env

    from pytest_jaato_eval.contract import build_contract_env
    task = load_task(write(tmp_path, LOADS_IN_BOTH["a date parameter"]))
    params = task.input.agent_params
    assert params["day"] == datetime.date(2026, 8, 28)
    ours = build_contract_env(workspace="/w", config_root="/c", params=params, base={})
    theirs, _ = param_env(params)
    assert {k: v for k, v in ours.items() if k.startswith("JAATO_EVAL_PARAM")} == theirs
    assert ours["JAATO_EVAL_PARAM_DAY"] == '"2026-08-28"'
    assert ours["JAATO_EVAL_PARAM_AT"] == '"2026-08-28 10:30:00"'
    assert ours["JAATO_EVAL_PARAM_NESTED"] == '{"d": ["2026-01-02"]}'


@pytest.mark.parametrize("text, says", [
    (VALID + "marks: [{skipif: [2026-08-28]}]\n", "got date"),
    (VALID.replace("input: {prompt: do it}", "input: {prompt: do it, agent_params: "
                                             "{s: !!set {a, b}}}"), "got set"),
    (VALID.replace("input: {prompt: do it}", "input: {prompt: do it, agent_params: "
                                             "{b: !!binary aGk=}}"), "got bytes"),
])
def test_only_dates_pass_what_json_cannot_encode(tmp_path, text, says):
    assert says in error_of(tmp_path, text)


def test_the_schema_takes_what_the_loader_takes_from_jaato_eval():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    from pytest_jaato_eval.task.load import json_schema
    schema = json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    for name, text in LOADS_IN_BOTH.items():
        doc = json.loads(json.dumps(yaml.safe_load(text), default=str))  # dates as editors see them
        assert not list(validator.iter_errors(doc)), name
    params = schema["$defs"]["Input"]["properties"]["agent_params"]["description"]
    assert "unquoted YAML date" in params and '"2026-08-28" (quotes included)' in params
