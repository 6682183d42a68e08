"""Collecting task.yaml arms: every arm of a task shares one fixture closure, computed once,
and it must be the closure pytest would compute for that arm on its own (conftest
fixtures, autouse ones, a `usefixtures` mark from `marks:`, a conftest's `jaato_daemon`)."""
from __future__ import annotations

import json
import textwrap

import yaml

CHECK = """
import json
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def seed():
    pass


@pytest.fixture
def extra():
    pass


def pytest_collection_modifyitems(session, items):
    fm = session._fixturemanager
    out = []
    for item in items:
        fresh = fm.getfixtureinfo(item, item.obj, None)
        defs = lambda info: {name: [f"{d.func.__module__}.{d.func.__name__}" for d in v]
                             for name, v in sorted(info.name2fixturedefs.items())}
        out.append({"id": item.nodeid, "closure": item.fixturenames,
                    "fresh": fresh.names_closure, "defs": defs(item._fixtureinfo),
                    "fresh_defs": defs(fresh), "marks": [m.name for m in item.iter_markers()]})
    Path("items.json").write_text(json.dumps(out))
"""

OVERRIDE = """
import pytest


@pytest.fixture(scope="session")
def jaato_daemon():
    return "/nowhere.sock"
"""


def task(root, name: str, **extra) -> None:
    d = root / "tasks" / name
    (d / "fixture").mkdir(parents=True)
    (d / ".jaato" / "profiles" / "s0").mkdir(parents=True)
    (d / ".jaato" / "profiles" / "s1").mkdir(parents=True)
    (d / "task.yaml").write_text(yaml.safe_dump({
        "id": name, "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": "w"},
        "graders": [{"kind": "script", "run": "true"}], **extra}))


def test_every_arm_has_the_fixture_closure_pytest_computes_for_it(pytester):
    root = pytester.path
    task(root, "a", marks=[{"usefixtures": "extra"}, "smoke"])
    task(root, "b")
    (root / "tasks" / "conftest.py").write_text(textwrap.dedent(CHECK))
    (root / "tasks" / "b" / "conftest.py").write_text(textwrap.dedent(OVERRIDE))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--co", "-q", "--profile-set=s0,s1", "--jaato-repeats=3",
        "-W", "ignore::pytest.PytestUnknownMarkWarning", "tasks")
    assert result.ret == 0, result.stdout.str()
    items = json.loads((root / "items.json").read_text())
    assert [i["id"] for i in items] == [
        f"tasks/{t}/task.yaml::{t}[{s}-r{r}]" for t in "ab" for s in ("s0", "s1") for r in range(3)]
    for item in items:
        assert item["closure"] == item["fresh"] and item["defs"] == item["fresh_defs"], item
        assert {"seed", "jaato_arm", "jaato_workspace", "jaato_daemon"} <= set(item["closure"])
    a, b = items[0], items[-1]
    assert "extra" in a["closure"] and "extra" not in b["closure"]
    assert a["marks"][:1] == ["jaato"] and {"usefixtures", "smoke"} <= set(a["marks"])
    assert b["marks"] == ["jaato"]
    assert a["defs"]["jaato_daemon"] == ["pytest_jaato_eval.plugin.jaato_daemon"]
    assert b["defs"]["jaato_daemon"][-1] == "conftest.jaato_daemon"


def test_k_selects_arms_by_task_and_set(pytester):
    task(pytester.path, "a")
    task(pytester.path, "b")
    common = ["-p", "no:cacheprovider", "--co", "-q", "--profile-set=s0,s1", "--jaato-repeats=2"]
    result = pytester.runpytest_subprocess(*common, "-k", "s1 and not b")
    result.stdout.fnmatch_lines(["tasks/a/task.yaml::a[[]s1-r0]", "tasks/a/task.yaml::a[[]s1-r1]",
                                 "2/8 tests collected (6 deselected)*"])
    result = pytester.runpytest_subprocess(*common, "-k", "b and s0 and r1")
    result.stdout.fnmatch_lines(["tasks/b/task.yaml::b[[]s0-r1]", "1/8 tests collected*"])


def test_resume_refuses_exactly_the_tasks_whose_stored_hash_differs(pytester):
    """R3's check reads the store once, by task: a store of many other tasks' arms costs one
    lookup per task, and odd hand-edited values still refuse the resume in one line."""
    from pytest_jaato_eval.task.load import load_task
    for name in ("a", "b", "c"):
        task(pytester.path, name)
    current = load_task(pytester.path / "tasks" / "b" / "task.yaml").content_hash
    lines = [{"arm_id": f"other-{i}@s0#0", "task_id": f"other-{i}", "task_hash": "0" * 64,
              "state": "PASS", "run_id": "r0"} for i in range(2000)]
    lines += [{"arm_id": "a@s0#0", "task_id": "a", "task_hash": "0" * 64, "state": "PASS"},
              {"arm_id": "b@s0#0", "task_id": "b", "task_hash": current, "state": "PASS"},
              {"arm_id": "c@s0#0", "task_id": "c", "task_hash": ["not", "a", "hash"],
               "state": "PASS"}]
    store = pytester.path / "store.jsonl"
    store.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--co", "-q", "--profile-set=s0", "--resume",
        f"--jaato-out={store}", "tasks")
    out = result.stdout.str()
    assert "Traceback" not in out
    assert "tasks/a/task.yaml: resume: task 'a' changed since" in out
    assert "tasks/b/task.yaml: resume" not in out
    # c's hash is not a hash: the store reader drops it, so c counts as unknown, not changed.
    assert "tasks/c/task.yaml: resume" not in out
    assert result.ret == 2, out
    result.stdout.fnmatch_lines(["*(2 deselected), 1 error*"])  # b's and c's stored arms kept


def test_an_arms_callspec_is_its_id_alone_and_read_only(pytester):
    task(pytester.path, "a")
    (pytester.path / "tasks" / "conftest.py").write_text(textwrap.dedent("""
        import json
        from pathlib import Path

        def pytest_collection_modifyitems(items):
            out = []
            for item in items:
                spec = item.callspec
                try:
                    spec.params["x"] = 1
                    writable = True
                except TypeError:
                    writable = False
                out.append([item.nodeid, spec.id, dict(spec.params), list(spec.marks), writable])
            Path("specs.json").write_text(json.dumps(out))
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--co", "-q",
                                           "--profile-set=s0,s1", "tasks")
    assert result.ret == 0, result.stdout.str()
    specs = json.loads((pytester.path / "specs.json").read_text())
    assert specs == [[f"tasks/a/task.yaml::a[{s}-r0]", f"{s}-r0", {}, [], False]
                     for s in ("s0", "s1")]
