"""A task folder holding only its task is collected without a folder node of its own
(docs/running.md, "Collecting large task trees"). The node ids, the hooks a task.yaml goes
through and conftest scoping must be exactly what pytest's own folder node gives."""
from __future__ import annotations

import textwrap

import yaml

COMMON = ("-p", "no:cacheprovider", "--co", "--profile-set=s0,s1", "--jaato-repeats=2")


def task(root, name: str, environment: dict | None = None, roots=("fixture", ".jaato")) -> None:
    d = root / "tasks" / name
    for r in roots:
        (d / r).mkdir(parents=True)
    (d / roots[1] / "profiles" / "s0").mkdir(parents=True, exist_ok=True)
    (d / roots[1] / "profiles" / "s1").mkdir(parents=True, exist_ok=True)
    (d / "task.yaml").write_text(yaml.safe_dump({
        "id": name, "environment": environment or {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": "w"},
        "graders": [{"kind": "script", "run": "true"}]}))


def ids(name: str) -> list[str]:
    return [f"tasks/{name}/task.yaml::{name}[{s}-r{r}]" for s in ("s0", "s1") for r in (0, 1)]


def test_a_plain_task_folder_has_no_folder_node_and_the_same_node_ids(pytester):
    task(pytester.path, "alpha")
    task(pytester.path, "bravo", environment={"fixture": "env/repo", "config_root": "env/cfg"},
         roots=("env/repo", "env/cfg"))  # a declared root's top folder is fenced too
    tree = pytester.runpytest(*COMMON, "tasks")
    assert tree.ret == 0, tree.stdout.str()
    tree.stdout.fnmatch_lines(["*<Dir tasks>", "*<TaskFile alpha/task.yaml>",
                               "*<ArmItem alpha[[]s0-r0]>", "*<TaskFile bravo/task.yaml>"])
    tree.stdout.no_fnmatch_line("*<Dir alpha>*")
    tree.stdout.no_fnmatch_line("*<Dir bravo>*")
    listed = pytester.runpytest(*COMMON, "-q", "tasks")
    assert [line for line in listed.outlines if "::" in line] == ids("alpha") + ids("bravo")
    marked = pytester.runpytest(*COMMON, "-q", "-m", "jaato", "-k", "alpha and s1", "tasks")
    marked.stdout.fnmatch_lines(["tasks/alpha/task.yaml::alpha[[]s1-r0]",
                                 "tasks/alpha/task.yaml::alpha[[]s1-r1]",
                                 "2/8 tests collected (6 deselected)*"])


def test_anything_else_in_a_task_folder_keeps_pytests_folder_node(pytester):
    for name in ("plain", "with_conftest", "with_readme", "with_test", "package"):
        task(pytester.path, name)
    tasks = pytester.path / "tasks"
    (tasks / "with_conftest" / "conftest.py").write_text(textwrap.dedent("""
        def pytest_itemcollected(item):
            item.add_marker("from_folder_conftest")
    """))
    (tasks / "with_readme" / "README.md").write_text("# a task\n")
    (tasks / "with_test" / "test_extra.py").write_text("def test_extra():\n    pass\n")
    (tasks / "package" / "__init__.py").write_text("")
    tree = pytester.runpytest(*COMMON, "-W", "ignore::pytest.PytestUnknownMarkWarning", "tasks")
    assert tree.ret == 0, tree.stdout.str()
    tree.stdout.fnmatch_lines(["*<TaskFile plain/task.yaml>"])
    for name in ("with_conftest", "with_readme", "with_test"):
        tree.stdout.fnmatch_lines([f"*<Dir {name}>", "*<TaskFile task.yaml>"])
    tree.stdout.fnmatch_lines(["*<Package package>"])
    tree.stdout.fnmatch_lines(["*<Module test_extra.py>", "*<Function test_extra>"])
    # The folder's conftest.py was loaded for its own arms, and only for them.
    marked = pytester.runpytest(*COMMON, "-q", "-m", "from_folder_conftest",
                                "-W", "ignore::pytest.PytestUnknownMarkWarning", "tasks")
    assert [line for line in marked.outlines if "::" in line] == ids("with_conftest")


def test_a_target_inside_a_task_folder_is_still_found(pytester):
    task(pytester.path, "a")
    task(pytester.path, "b")
    for target, expected in [
            ("tasks/a", ids("a")),
            ("tasks/a/task.yaml", ids("a")),
            ("tasks/a/task.yaml::a[s1-r0]", ["tasks/a/task.yaml::a[s1-r0]"]),
    ]:
        result = pytester.runpytest(*COMMON, "-q", target)
        assert result.ret == 0, (target, result.stdout.str())
        assert [line for line in result.outlines if "::" in line] == expected, target


def test_ignore_options_and_the_parent_conftest_still_reach_a_task_yaml(pytester):
    task(pytester.path, "a")
    task(pytester.path, "b")
    for option in ("--ignore=tasks/a/task.yaml", "--ignore-glob=*/a/task.yaml", "--ignore=tasks/a"):
        result = pytester.runpytest(*COMMON, "-q", option, "tasks")
        assert [line for line in result.outlines if "::" in line] == ids("b"), option
    # The tasks folder's conftest.py scopes over the folded task folders: its
    # collect_ignore and its hooks (looked up by the arm's folder) apply to them.
    (pytester.path / "tasks" / "conftest.py").write_text(textwrap.dedent("""
        collect_ignore = ["a/task.yaml"]

        def pytest_itemcollected(item):
            item.add_marker("from_tasks_conftest")
    """))
    result = pytester.runpytest(*COMMON, "-q", "-m", "from_tasks_conftest",
                                "-W", "ignore::pytest.PytestUnknownMarkWarning", "tasks")
    assert [line for line in result.outlines if "::" in line] == ids("b")
    result.stdout.fnmatch_lines(["4 tests collected*"])


def test_a_folded_folder_has_exactly_its_parents_conftest_scope(pytester):
    """A folded task folder shares its parent's conftest list: a group's conftest.py
    reaches the group's tasks and no other group's, whatever order they are collected in."""
    task(pytester.path, "g1/a")
    task(pytester.path, "g2/b")
    task(pytester.path, "g2/c")
    (pytester.path / "tasks" / "g2" / "conftest.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.fixture(autouse=True)
        def from_g2():
            pass

        def pytest_itemcollected(item):
            item.add_marker("from_g2_conftest")
    """))
    result = pytester.runpytest(*COMMON, "-q", "-m", "from_g2_conftest",
                                "-W", "ignore::pytest.PytestUnknownMarkWarning", "tasks")
    assert [line for line in result.outlines if "::" in line] == ids("g2/b") + ids("g2/c")
    used = pytester.runpytest("-p", "no:cacheprovider", "--fixtures-per-test",
                              "-W", "ignore::pytest.PytestUnknownMarkWarning",
                              "--profile-set=s0", "tasks").stdout.str()
    per_arm = used.split("fixtures used by ")[1:]
    assert [chunk.split()[0] for chunk in per_arm if "from_g2" in chunk] == [
        "g2/b[s0-r0]", "g2/c[s0-r0]"], used


def test_a_conftest_that_appears_during_collection_is_loaded_once(pytester):
    """pytest adds a conftest.py found late to the scope list of every folder below it;
    a folded folder's list is its own copy of its parent's, so nothing is added twice."""
    task(pytester.path, "a")
    (pytester.path / "tasks" / "z").mkdir()
    (pytester.path / "tasks" / "z" / "test_z.py").write_text("def test_z():\n    pass\n")
    pytester.makepyfile(latecf=textwrap.dedent("""
        def pytest_collect_directory(path, parent):
            if path.name == "z":
                (path.parent / "conftest.py").write_text("LATE = 1\\n")
    """))
    pytester.syspathinsert()
    result = pytester.runpytest(*COMMON, "-p", "latecf", "-q", "tasks")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["5 tests collected*"])


def test_a_conftest_makes_its_own_folder_nodes_first(pytester):
    task(pytester.path, "a")
    task(pytester.path, "b")
    (pytester.path / "tasks" / "conftest.py").write_text(textwrap.dedent("""
        import pytest

        class MyDir(pytest.Dir.__mro__[1]):  # a Directory of the project's own
            def collect(self):
                return [self.ihook.pytest_collect_file(file_path=self.path / "task.yaml",
                                                       parent=self)[0]]

        def pytest_collect_directory(path, parent):
            if path.name == "a":
                return MyDir.from_parent(parent, path=path)
    """))
    tree = pytester.runpytest(*COMMON, "tasks")
    assert tree.ret == 0, tree.stdout.str()
    tree.stdout.fnmatch_lines(["*<MyDir a>", "*<TaskFile task.yaml>", "*<TaskFile b/task.yaml>"])


def test_a_conftest_that_wants_a_fixture_collected_gets_it(pytester):
    task(pytester.path, "a")
    (pytester.path / "tasks" / "a" / "fixture" / "test_f.py").write_text(
        "def test_in_fixture():\n    pass\n")
    pytester.makeconftest(textwrap.dedent("""
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_ignore_collect(collection_path):
            if collection_path.name == "fixture":
                return False  # collect it, fence or no fence
    """))
    result = pytester.runpytest(*COMMON, "-q", "tasks")
    assert [line for line in result.outlines if "::" in line] == [
        "tasks/a/fixture/test_f.py::test_in_fixture", *ids("a")]


def test_each_path_is_asked_once_when_the_manifest_is_ignored(pytester):
    task(pytester.path, "a")
    task(pytester.path, "b")
    pytester.makeconftest(textwrap.dedent("""
        from pathlib import Path

        def pytest_ignore_collect(collection_path):
            with open(Path(__file__).parent / "asked.log", "a") as log:
                log.write(f"{collection_path.relative_to(Path(__file__).parent)}\\n")
    """))
    result = pytester.runpytest(*COMMON, "-q", "--ignore=tasks/a/task.yaml", "tasks")
    assert [line for line in result.outlines if "::" in line] == ids("b")
    asked = (pytester.path / "asked.log").read_text().splitlines()
    assert len(asked) == len(set(asked)), asked
    assert {"tasks/a", "tasks/a/task.yaml", "tasks/a/fixture", "tasks/b/task.yaml"} <= set(asked)


def test_a_pytest_without_the_conftest_call_gets_pytests_own_folders():
    """pytest 8.0 has no `consider_namespace_packages` ini key (getini raises ValueError).
    That pytest cannot be installed beside this suite's, so its config is imitated here."""
    from pathlib import Path

    from pytest_jaato_eval.pytest_layer.task_folder import _scope_conftests

    class Pytest80Config:
        rootpath = Path("/")
        pluginmanager = type("PM", (), {"_loadconftestmodules": lambda *a, **k: None})()

        def getoption(self, name):
            return "prepend"

        def getini(self, name):
            raise ValueError(f"unknown configuration value: {name!r}")

    assert _scope_conftests(Path("/tmp"), Pytest80Config()) is False
