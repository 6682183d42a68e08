"""Samples (a task.yaml's dataset, a Python arm's parametrize) and Python arms a pytest
user cannot misuse, against a real daemon on the echo provider (docs/tasks.md,
"Datasets"; docs/python-arms.md)."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.daemon

# Each row's word must reach the grader as the rendered parameter and as the sample.
SAMPLE_GRADER = {"kind": "script",
                 "run": 'test "$JAATO_EVAL_PARAM_WORD" = "$JAATO_EVAL_SAMPLE_ID" && '
                        'test -n "$JAATO_EVAL_SAMPLE"'}


def dataset_task(project, rows, task_id="words", limit=None, **extra):
    return project.task(task_id, graders=[SAMPLE_GRADER], extra={
        "input": {"prompt": "Write {{ word }} to answer.txt.",
                  "agent_params": {"word": "{{ word }}"}},
        "dataset": {"rows": rows, **({"limit": limit} if limit else {})}, **extra})


def validate(project) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_jaato_eval", "validate",
                           str(project.store)], capture_output=True, text=True, timeout=120)


def test_a_dataset_task_runs_one_arm_per_sample_set_and_repeat(project):
    dataset_task(project, [{"id": "cat", "word": "cat"}, {"id": "dog", "word": "cat"},
                           {"id": "owl", "word": "owl"}], repeats=2)
    result = project.run("tasks", "-v")
    result.stdout.fnmatch_lines(["*words[[]cat-echo-r0[]] PASSED*", "*words[[]cat-echo-r1[]] PASSED*",
                                 "*words[[]dog-echo-r0[]] FAILED*", "*words[[]owl-echo-r1[]] PASSED*"])
    assert result.ret == 1
    by = {r["arm_id"]: r for r in project.records()}
    assert len(by) == 6 and len(project.records()) == 6
    assert by["words[cat]@echo#0"]["sample_id"] == "cat"
    assert by["words[dog]@echo#1"]["state"] == "FAIL"
    assert {r["task_id"] for r in by.values()} == {"words"}
    # The pivot rolls the samples up into the task's one row: 4 of 6 passed.
    pivot = [line for line in result.stdout.lines if line.startswith("words")]
    assert len(pivot) == 1 and pivot[0].split()[4:8] == ["6", "4", "2", "0"], pivot
    checked = validate(project)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_k_and_jaato_samples_select_samples(project):
    dataset_task(project, [{"id": f"w{i}", "word": f"w{i}"} for i in range(5)],
                 limit=4)
    result = project.run("tasks", "--co", "-q")
    assert sum("words[" in line for line in result.stdout.lines) == 4  # the dataset's limit
    result = project.run("tasks", "--co", "-q", "--jaato-samples", "2")
    assert [line for line in result.stdout.lines if "words[" in line] == [
        "tasks/words/task.yaml::words[w0-echo-r0]", "tasks/words/task.yaml::words[w1-echo-r0]"]
    result = project.run("tasks", "-k", "w3")
    result.assert_outcomes(passed=1)
    assert [r["arm_id"] for r in project.records()] == ["words[w3]@echo#0"]


def test_a_dataset_file_and_a_misnamed_field_are_checked_at_collection(project):
    task = project.task("csv", graders=[SAMPLE_GRADER], extra={
        "input": {"prompt": "Write {{ wrod }}.", "agent_params": {"word": "{{ word }}"}},
        "dataset": "rows.csv"})
    (task.parent / "rows.csv").write_text("id,word\na,a\nb,b\n")
    result = project.run("tasks", "--co")
    result.stdout.fnmatch_lines([f"{task}: input.prompt: sample 'a': UndefinedError: 'wrod' is "
                                 f"undefined"])
    assert "Traceback" not in result.stdout.str()
    text = task.read_text().replace("wrod", "word")
    task.write_text(text)
    (task.parent / "rows.jsonl").write_text('{"id": "a", "word": "a"}\n{"id": "a", "word": "b"}\n')
    task.write_text(text.replace("rows.csv", "rows.jsonl"))
    result = project.run("tasks", "--co")
    result.stdout.fnmatch_lines([f"{task}: dataset.file row 2: id 'a' is also the id of row 1*"])
    (task.parent / "rows.jsonl").write_text('{"id": "a", "word": "a"}\n{"id": "b", "word": "b"}\n')
    result = project.run("tasks")
    result.assert_outcomes(passed=2)


PARAMETRISED = '''
import pytest

ARM = dict(config_root="../tasks/write-file/.jaato", fixture="../tasks/write-file/fixture",
           profile="writer", profile_set="echo")


@pytest.mark.parametrize("word", ["cat", "dog", "owl"])
@pytest.mark.jaato(**ARM, repeats=2)
def test_writes(jaato_arm, word):
    jaato_arm.run(f"Write {word}.")
    assert (jaato_arm.workspace / "answer.txt").read_text() == "READY\\n"
'''


def test_a_parametrised_python_arm_is_one_sample_per_parameter_set(project):
    project.task("write-file")
    project.write("arms/test_words.py", PARAMETRISED)
    result = project.run("arms", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_writes[[]cat-echo-r0[]] PASSED*",
                                 "*test_writes[[]owl-echo-r1[]] PASSED*"])
    records = project.records()
    ids = [r["arm_id"] for r in records]
    assert len(set(ids)) == 6 == len(ids), ids
    assert "arms/test_words.py::test_writes[dog]@echo#1" in ids
    assert {r["state"] for r in records} == {"PASS"}
    assert {r["sample_id"] for r in records} == {"cat", "dog", "owl"}
    checked = validate(project)
    assert checked.returncode == 0 and "more than once" not in checked.stdout, checked.stdout
    mark = project.spy_on_daemon_starts()
    resumed = project.run("arms", "--resume", shared_daemon=False)
    # Every arm is in the store: all deselected, none run again; it exits as `report` on the
    # store would (every arm PASSED), not pytest's 5.
    assert resumed.ret == 0
    resumed.assert_outcomes(deselected=6)
    assert not mark.exists(), "no daemon is started for samples --resume deselects"
    shards = [{line.split("[")[1].split("-")[0] for line in project.run(
        "arms", "--co", "-q", f"--jaato-shard={i}/2").stdout.lines if "::test_writes[" in line}
        for i in (1, 2)]
    assert not shards[0] & shards[1] and shards[0] | shards[1] == {"cat", "dog", "owl"}
    quick = project.run("arms", "--co", "-q", "--jaato-samples=2")
    assert [line.split("[")[1] for line in quick.stdout.lines if "::test_writes[" in line] == [
        "cat-echo-r0]", "cat-echo-r1]", "dog-echo-r0]", "dog-echo-r1]"]


def test_marker_mistakes_are_collection_errors_all_reported_together(project):
    project.task("write-file")
    project.write("arms/test_one.py", '''
        import pytest

        @pytest.mark.jaato(config_root="../tasks/write-file/.jaato",
                           fixture="../tasks/write-file/fixture", profile="writer")
        def test_forgot_the_fixture():
            pass

        @pytest.mark.jaato(config_root="nowhere", fixture="nowhere", profile="writer")
        def test_bad_folder(jaato_arm):
            pass

        def test_plain():
            pass
    ''')
    project.write("arms/test_two.py", '''
        import pytest

        @pytest.mark.jaato(config_root="../tasks/write-file/.jaato", fixtur="x", profile="p")
        def test_typo(jaato_arm):
            pass

        @pytest.mark.jaato(config_root="../tasks/write-file/.jaato",
                           fixture="../tasks/write-file/fixture", profile="writer")
        @pytest.mark.jaato(config_root="../tasks/write-file/.jaato",
                           fixture="../tasks/write-file/fixture", profile="other")
        def test_marked_twice(jaato_arm):
            pass
    ''')
    result = project.run("arms", "--co", "-q")
    out = result.stdout.str()
    assert "arms/test_one.py::test_forgot_the_fixture: @pytest.mark.jaato: marks an arm written " \
           "in Python, but the test does not take the jaato_arm fixture" in out, out
    assert "arms/test_one.py::test_bad_folder: @pytest.mark.jaato: config_root: 'nowhere'" in out
    assert "arms/test_two.py::test_typo: @pytest.mark.jaato: unknown argument 'fixtur' " \
           "(did you mean 'fixture'?)" in out
    assert "arms/test_two.py::test_marked_twice: @pytest.mark.jaato: found 2 marks (on the " \
           "test, its class or its module); an arm takes exactly one" in out
    assert "4 errors" in out and "Traceback" not in out
    assert result.ret == 2


def test_a_python_arms_profile_typo_is_preflight_blocked_before_any_session(project):
    project.task("write-file")
    project.write("arms/test_typo.py", '''
        import pytest

        @pytest.mark.jaato(config_root="../tasks/write-file/.jaato",
                           fixture="../tasks/write-file/fixture", profile="writr",
                           profile_set="echo")
        def test_writes(jaato_arm):
            jaato_arm.run("Write READY.")
    ''')
    result = project.run("arms")
    assert result.ret == 2
    (r,) = project.records()
    assert r["state"] == "BLOCKED" and r["session_id"] is None
    assert r["blocked_reason"].startswith("profile 'writr' of profile set 'echo' not found "
                                          "(did you mean 'writer'?)"), r["blocked_reason"]
    assert "profiles/echo/" in r["blocked_reason"]


def test_an_error_in_the_test_body_is_blocked_with_its_traceback_never_fail(project):
    project.task("write-file")
    project.write("arms/test_bugs.py", '''
        import pytest

        ARM = dict(config_root="../tasks/write-file/.jaato",
                   fixture="../tasks/write-file/fixture", profile="writer", profile_set="echo")

        @pytest.mark.jaato(**ARM)
        def test_typo_in_the_test(jaato_arm):
            run = jaato_arm.run("Write READY.")
            assert run.payloadd

        @pytest.mark.jaato(**ARM)
        def test_runs_twice(jaato_arm):
            jaato_arm.run("Write READY.")
            jaato_arm.run("Write it again.")

        @pytest.mark.jaato(**ARM)
        def test_fails_with_pytest_fail(jaato_arm):
            jaato_arm.run("Write READY.")
            pytest.fail("not good enough")
    ''')
    result = project.run("arms")
    assert result.ret == 1  # the one FAIL is pytest.fail's
    by = {r["arm_id"].split("::")[1]: r for r in project.records()}
    typo = by["test_typo_in_the_test@echo#0"]
    assert typo["state"] == "BLOCKED", typo
    assert "AttributeError" in typo["blocked_reason"] and "not a verdict on the agent" in \
        typo["blocked_reason"]
    assert typo["session_id"]  # the agent ran; the record keeps what it did
    assert any("run.payloadd" in line for line in typo["verdicts"][0]["evidence"])
    twice = by["test_runs_twice@echo#0"]
    assert twice["state"] == "BLOCKED" and "an arm runs its agent once" in twice["blocked_reason"]
    failed = by["test_fails_with_pytest_fail@echo#0"]
    assert failed["state"] == "FAIL" and "not good enough" in failed["verdicts"][0]["detail"]
    assert result.parseoutcomes().get("blocked") == 2


def two_set_dataset_task(project, n_rows: int, repeats: int):
    path = dataset_task(project, [{"id": f"s{i:02d}", "word": f"s{i:02d}"} for i in range(n_rows)],
                        repeats=repeats)
    other = path.parent / ".jaato" / "profiles" / "other"
    other.mkdir()
    (other / "writer.yaml").write_text((path.parent / ".jaato/profiles/echo/writer.yaml").read_text())
    return path


def test_a_shard_keeps_every_arm_of_a_sample_together(project):
    two_set_dataset_task(project, 6, 2)
    shards = []
    for i in (1, 2):
        result = project.run("tasks", "--co", "-q", "--profile-set=echo,other",
                             f"--jaato-shard={i}/2")
        shards.append([line for line in result.stdout.lines if "::words[" in line])
    assert len(shards[0]) + len(shards[1]) == 24 and not set(shards[0]) & set(shards[1])
    samples = [{line.split("[")[1].split("-")[0] for line in shard} for shard in shards]
    assert not samples[0] & samples[1] and len(samples[0] | samples[1]) == 6
    assert all(len(shard) == 4 * len(s) for shard, s in zip(shards, samples))  # 2 sets x 2 repeats


# The sweeps below are the smallest that still take every path of the 50 x 2 x 2 one: sample
# ids of two digits, and each shard several whole samples of both sets. The 50 x 2 x 2 figures
# are bench/samples_at_scale.py's (bench/JOURNAL.md).
SWEEP_SAMPLES = 12
SWEEP_ARMS = SWEEP_SAMPLES * 2 * 2


@pytest.mark.slow
def test_a_dataset_sweep_by_two_sets_by_two_repeats_shards_resumes_and_validates(project):
    """The dataset sweep end to end, at 12 samples x 2 sets x 2 repeats: shard 1 of 2 runs,
    --resume runs exactly the rest, the store holds each of the 48 arms once, and the pivot
    and `report` count per task. The 50 x 2 x 2 sweep itself, and its figures, are
    bench/samples_at_scale.py's."""
    two_set_dataset_task(project, SWEEP_SAMPLES, 2)
    first = project.run("tasks", "--profile-set=echo,other", "--jaato-shard=1/2")
    assert first.ret == 0, first.stdout.str()
    half = project.records()
    by_sample: dict[str, int] = {}
    for r in half:
        by_sample[r["sample_id"]] = by_sample.get(r["sample_id"], 0) + 1
    # whole samples only, and about half of them
    assert set(by_sample.values()) == {4} and 2 < len(by_sample) < SWEEP_SAMPLES - 2
    rest = project.run("tasks", "--profile-set=echo,other", "--resume")
    assert rest.ret == 0
    rest.assert_outcomes(passed=SWEEP_ARMS - len(half), deselected=len(half))
    records = project.records()
    assert len(records) == SWEEP_ARMS == len({r["arm_id"] for r in records})
    assert {r["sample_id"] for r in records} == {f"s{i:02d}" for i in range(SWEEP_SAMPLES)}
    checked = validate(project)
    assert checked.returncode == 0, checked.stdout
    shown = subprocess.run([sys.executable, "-m", "pytest_jaato_eval", "report",
                            str(project.store)], capture_output=True, text=True, timeout=120)
    rows = [line.split() for line in shown.stdout.splitlines() if line.startswith("words")]
    per_set = str(SWEEP_ARMS // 2)
    assert [(r[1], r[4], r[5]) for r in rows] == [("echo", per_set, per_set),
                                                  ("other", per_set, per_set)], shown.stdout


@pytest.mark.slow
def test_a_parameter_sweep_by_two_sets_by_two_repeats_shards_resumes_and_validates(project):
    """The same sweep as a Python arm, 12 parameter sets x 2 sets x 2 repeats: each parameter
    set a sample. The 50 x 2 x 2 sweep, and its figures, are bench/samples_at_scale.py's."""
    two_set_dataset_task(project, 1, 1)  # its config root holds `writer` in echo and other
    project.write("arms/test_many.py", f'''
        import pytest

        @pytest.mark.parametrize("n", range({SWEEP_SAMPLES}))
        @pytest.mark.jaato(config_root="../tasks/words/.jaato", fixture="../tasks/words/fixture",
                           profile="writer", repeats=2)
        def test_many(jaato_arm, n):
            jaato_arm.run(f"Write READY, then the number {{n}}.")
            assert (jaato_arm.workspace / "answer.txt").read_text() == "READY\\n"
    ''')
    first = project.run("arms", "--profile-set=echo,other", "--jaato-shard=1/2")
    assert first.ret == 0, first.stdout.str()
    half = project.records()
    per_sample: dict[str, int] = {}
    for r in half:
        per_sample[r["sample_id"]] = per_sample.get(r["sample_id"], 0) + 1
    assert set(per_sample.values()) == {4} and 2 < len(per_sample) < SWEEP_SAMPLES - 2
    rest = project.run("arms", "--profile-set=echo,other", "--resume")
    assert rest.ret == 0
    rest.assert_outcomes(passed=SWEEP_ARMS - len(half), deselected=len(half))
    records = project.records()
    assert len(records) == SWEEP_ARMS == len({r["arm_id"] for r in records})
    assert {r["sample_id"] for r in records} == {str(n) for n in range(SWEEP_SAMPLES)}
    assert {r["task_id"] for r in records} == {"arms/test_many.py::test_many"}
    checked = validate(project)
    assert checked.returncode == 0, checked.stdout
