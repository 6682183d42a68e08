"""What each grader sees: the workspace as the agent left it (workspace.as_left), and its own
view of the config root (task/grader_files.py); and a fixture's links, checked when it is
read (task/tree.py)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import yaml

from pytest_jaato_eval import workspace
from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.graders import run_graders
from pytest_jaato_eval.graders.context import GraderContext
from pytest_jaato_eval.task import grader_files, spelled
from pytest_jaato_eval.task.load import ManifestError, load_task


def test_each_grader_gets_the_workspace_as_the_agent_left_it_at_its_own_path(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "result.txt").write_text("wrong\n")
    (ws / "link").symlink_to("result.txt")
    os.utime(ws / "result.txt", (1_000_000, 1_000_000))
    with workspace.as_left(ws) as view:
        assert view == ws
        assert (ws / ".git" / "HEAD").read_text().startswith("ref:")  # nothing left out
        assert os.readlink(ws / "link") == "result.txt"  # a link stays a link
        assert (ws / "result.txt").stat().st_mtime == 1_000_000  # make's clock is kept
        (ws / "result.txt").write_text("right\n")  # what a self-test of the agent's does
        (ws / "build.o").write_text("artefact")
        (ws / "link").unlink()
    assert (ws / "result.txt").read_text() == "wrong\n"
    assert not (ws / "build.o").exists() and (ws / "link").is_symlink()
    assert [p.name for p in tmp_path.iterdir()] == ["ws"]  # the grader's copy is gone


def graders_task(tmp_path: Path, graders: list[dict]):
    (tmp_path / "fixture").mkdir()
    root = tmp_path / ".jaato"
    for rel in ("checks/first.sh", "checks/answer.sh", "keys/expected.txt", "lib/common.sh",
                "profiles/echo/critic.yaml", "profiles/echo/w.yaml", "check.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{rel}\n")
    (tmp_path / "task.yaml").write_text(yaml.safe_dump({
        "id": "t", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": "w"}, "graders": graders}))
    return load_task(tmp_path / "task.yaml")


def test_a_grader_sees_the_config_root_without_what_the_other_graders_name(tmp_path):
    task = graders_task(tmp_path, [
        {"kind": "script", "run": "sh ./selftest.sh"},
        {"kind": "script", "file": "checks/answer.sh"},
        {"kind": "script", "run": 'grep -qxf "$JAATO_EVAL_CONFIG_ROOT/keys/expected.txt" out'},
        {"kind": "processor", "script": "check.py"},
        {"kind": "judge", "profile": "critic"},
    ])
    assert spelled.named_in('x "${JAATO_EVAL_CONFIG_ROOT}/a/b.sh" $JAATO_EVAL_CONFIG_ROOT/../x'
                            ) == {"a/b.sh"}
    judge = {"profiles/critic.yaml", "profiles/critic.yml", "profiles/echo/critic.yaml",
             "profiles/echo/critic.yml"}
    everything = {"checks/answer.sh", "keys/expected.txt", "check.py"} | judge
    assert grader_files.hidden_from(task, 0) == everything  # the agent's own self-test
    assert grader_files.hidden_from(task, 1) == everything - {"checks/answer.sh"}
    assert grader_files.hidden_from(task, 4) == everything - judge
    # every grader's own, the run-named key too (what the graders' side of a record hashes)
    assert grader_files.graders_own(task) == everything


def test_a_grader_that_runs_the_agents_code_cannot_read_the_next_graders_key_or_change_its_input(
        tmp_path):
    """Unconfined here (the sandbox's own test is end to end): the rule is the harness's,
    whatever confines the process."""
    task = graders_task(tmp_path, [
        {"kind": "script", "run": "sh ./selftest.sh"},
        {"kind": "script", "file": "checks/answer.sh"}])
    root = tmp_path / ".jaato"
    (root / "checks" / "answer.sh").write_text("grep -qx right result.txt\n")
    (root / "checks" / "answer.sh").chmod(0o755)
    owned = tmp_path / "owned"
    views = tuple(workspace.copy_config(root, owned / str(i), grader_files.hidden_from(task, i))
                  for i in range(2))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "result.txt").write_text("wrong\n")
    (ws / "selftest.sh").write_text(  # the agent's self-test, run by the first grader
        'cat "$JAATO_EVAL_CONFIG_ROOT/checks/answer.sh" > leaked.txt 2>&1\n'
        "echo right > result.txt\n")
    ctx = GraderContext(workspace=ws, config_root=root, params={},
                        run=AgentRun(finish_reason="stop"), config_roots=views)
    first, second = run_graders(task.graders, ctx)
    assert first.state == "PASS", first
    assert second.state == "FAIL", second  # it read the agent's result.txt, not the self-test's
    assert not (ws / "leaked.txt").exists() and (ws / "result.txt").read_text() == "wrong\n"
    assert not (views[0] / "checks" / "answer.sh").exists()
    assert (views[1] / "checks" / "answer.sh").exists()


def fixture_task(tmp_path: Path) -> Path:
    (tmp_path / "fixture" / "data").mkdir(parents=True)
    (tmp_path / "fixture" / "data" / "real.txt").write_text("x\n")
    (tmp_path / ".jaato").mkdir()
    (tmp_path / "task.yaml").write_text(yaml.safe_dump({
        "id": "t", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": "w"},
        "graders": [{"kind": "script", "run": "true"}]}))
    return tmp_path / "task.yaml"


@pytest.mark.parametrize("target, says", [
    ("../outside.txt", "'escape' is a link to '../outside.txt', which leaves the fixture; "
                       "expected a relative link that stays inside it"),
    ("/etc/hostname", "'escape' is a link to the absolute path '/etc/hostname': in each arm's "
                      "workspace it would still lead there; expected a relative link"),
    ("data/../../x", "'escape' is a link to 'data/../../x', which leaves the fixture"),
])
def test_a_fixture_link_that_leaves_the_fixture_is_a_manifest_error(tmp_path, target, says):
    manifest = fixture_task(tmp_path)
    (tmp_path / "fixture" / "escape").symlink_to(target)
    with pytest.raises(ManifestError) as info:
        load_task(manifest)
    assert str(info.value).startswith(f"{manifest}: environment.fixture: ")
    assert says in str(info.value) and "\n" not in str(info.value)


def test_a_fixture_link_inside_the_fixture_is_copied_and_no_trap(tmp_path):
    manifest = fixture_task(tmp_path)
    (tmp_path / "fixture" / "link.txt").symlink_to("data/real.txt")
    (tmp_path / "fixture" / "data" / "here").symlink_to(".")
    task = load_task(manifest)
    ws = workspace.materialise(tmp_path / "wss", "t@echo#0", task.fixture, "echo")
    assert (ws / "link.txt").read_text() == "x\n"
    assert workspace.special_files(ws, [Path(sys.prefix)]) == []


def test_a_python_arm_body_stopped_while_reading_the_agents_file_is_the_agents_fail(tmp_path):
    """The body's alarm (the rest of the arm ceiling) says whose the overrun is: a body
    holding a file of the workspace open was held by what the agent made."""
    from pytest_jaato_eval.pytest_layer.body_alarm import BodyOverran, _Overran
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.bin").write_bytes(b"\0" * 10)
    alarm = _Overran(ws, signal.SIG_DFL)
    with pytest.raises(BodyOverran):
        alarm(14, None)
    with open(ws / "big.bin", "rb"), pytest.raises(AssertionError) as info:
        alarm(14, None)
    assert "while reading big.bin, which the agent left in its workspace" in str(info.value)


def test_the_bodys_alarm_is_disarmed_and_the_handler_it_stood_in_for_given_back(tmp_path):
    """A `run()` arms the rest of the arm ceiling; the end of the test disarms it and gives
    back the handler that was there, even after a second `run()` in the same body. An alarm
    left armed would go off in a later test, or end the process that runs pytest."""
    from pytest_jaato_eval.pytest_layer.body_alarm import end_guard, guard_body

    def theirs(signum, frame):
        pass

    previous = signal.signal(signal.SIGALRM, theirs)
    try:
        guard_body(300, tmp_path)
        guard_body(200, tmp_path)
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 100
        end_guard()
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        assert signal.getsignal(signal.SIGALRM) is theirs
        end_guard()  # nothing armed: nothing changes
        assert signal.getsignal(signal.SIGALRM) is theirs
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _deep(ws: Path, levels: int = 20, name: str = "d" * 250) -> Path:
    """A tree deeper than PATH_MAX below `ws`, with a short alias `s` at each level; returns
    its deepest folder's path as the kernel could never take it whole."""
    here = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=here)
            os.symlink(name, "s", dir_fd=here)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
            os.close(here)
            here = inner
        os.symlink("/", "L", dir_fd=here)
        os.mkfifo("f", dir_fd=here)
    finally:
        os.close(here)
    return ws


def test_a_link_out_through_a_tree_deeper_than_path_max_is_a_trap(tmp_path):
    """os.path.realpath gives up past PATH_MAX and takes `L` for a folder, so `..` lands it
    back inside; the kernel follows `L -> /` out to the key. The walk and the lookup go one
    name at a time from descriptors: the link is a trap, and so are the deep `L` and FIFO
    that a walk by path never lists."""
    key = tmp_path / "owned" / "key.txt"
    key.parent.mkdir()
    key.write_text("PLATYPUS\n")
    (tmp_path / "ws").mkdir()
    ws = _deep(tmp_path / "ws")
    link = "s/" * 20 + "L" + "/.." * 21 + str(key)
    os.symlink(link, ws / "answer.txt")
    assert (ws / "answer.txt").read_text() == "PLATYPUS\n"  # what a reader outside would get
    assert os.path.realpath(ws / "answer.txt").startswith(str(ws))  # what fooled the check
    traps = workspace.special_files(ws)
    assert traps[0] == "answer.txt" and len(traps) == 3, traps
    assert traps[1].endswith("/L") and traps[2].endswith("/f") and "…" in traps[1]


@pytest.mark.parametrize("target, trap", [
    ("seed.txt", False), ("{ws}/seed.txt", False), ("sub/../seed.txt", False),
    ("nowhere", False),              # a link to nothing inside: nothing to read through
    ("/usr/bin/env", False),         # a program of the read-only system
    ("/usr/no-such-file", True),     # into the system, to nothing: a place to create
    ("..", True), ("../other/x", True), ("/proc/self/root/etc/passwd", True),
    ("/proc/self/cwd", True), ("/dev/null", True), ("loop", True),  # ELOOP past 40 links
])
def test_where_a_link_leads_is_decided_one_name_at_a_time(tmp_path, target, trap):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "seed.txt").write_text("seed\n")
    for i in range(45):
        os.symlink(f"loop{i + 1}", ws / f"loop{i}")
    os.symlink("seed.txt", ws / "loop45")
    os.symlink("loop0", ws / "loop")
    os.symlink(target.format(ws=ws), ws / "x")
    assert ("x" in workspace.special_files(ws)) is trap


def test_a_graders_copy_walks_any_depth_and_takes_no_more_disk_than_the_tree(tmp_path):
    """600 nested folders (deeper than shutil.copytree's recursion), a file of 2 MB with 100
    names and a 256 MB sparse file: the copy holds every name, one inode for the 100 names
    and no block for the hole; modes and times as the agent left them."""
    ws = tmp_path / "ws"
    ws.mkdir()
    deep = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(600):
        os.mkdir("n", dir_fd=deep)
        inner = os.open("n", os.O_RDONLY | os.O_DIRECTORY, dir_fd=deep)
        os.close(deep)
        deep = inner
    os.close(os.open("deepest.txt", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=deep))
    os.close(deep)
    (ws / "big.bin").write_bytes(os.urandom(2 << 20))
    for i in range(100):
        os.link(ws / "big.bin", ws / f"h{i}")
    with open(ws / "sparse.bin", "wb") as f:
        f.truncate(256 << 20)
    (ws / "closed").mkdir()
    (ws / "closed" / "inside.txt").write_text("x\n")
    os.chmod(ws / "closed", 0o500)
    os.utime(ws / "closed", (1_000_000, 1_000_000))
    before = {p: os.lstat(p) for p in (ws / "big.bin", ws / "sparse.bin", ws / "closed")}
    with workspace.as_left(ws):
        copy = {p: os.lstat(p) for p in before}
        assert copy[ws / "big.bin"].st_ino != before[ws / "big.bin"].st_ino  # a copy
        assert os.lstat(ws / "h99").st_ino == copy[ws / "big.bin"].st_ino
        assert copy[ws / "big.bin"].st_nlink == 101
        assert copy[ws / "sparse.bin"].st_size == 256 << 20
        assert copy[ws / "sparse.bin"].st_blocks < 1024
        assert (ws / "big.bin").read_bytes() == (ws / "h0").read_bytes()
        assert (ws / "closed" / "inside.txt").read_text() == "x\n"
        for p, st in before.items():
            assert (copy[p].st_mode, copy[p].st_mtime_ns) == (st.st_mode, st.st_mtime_ns), p
        assert len(list(workspace.files.walk_tree(ws))) == len(before) + 600 + 1 + 100 + 1
    assert os.lstat(ws / "big.bin").st_ino == before[ws / "big.bin"].st_ino  # the agent's back


def test_a_file_gone_between_the_listing_and_its_copy_is_not_in_the_copy(tmp_path, monkeypatch):
    """jaato writes a session's file beside its final name and renames it into place, late:
    a name the walk listed may be gone when the copy opens it. The grader's copy is then
    the tree without it, never an error that turns the arm BLOCKED."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "answer.txt").write_text("READY\n")
    (ws / "20261205_084022.json.tmp").write_text("{}")
    os.link(ws / "20261205_084022.json.tmp", ws / "second-name.json")  # a name still there
    os.symlink("answer.txt", ws / "link.tmp")
    walk = workspace.files.walk_tree

    def walk_then_rename(*args, **kwargs):
        for entry in walk(*args, **kwargs):
            if entry.name.endswith(".tmp"):  # listed, then renamed away before it is read
                os.rename(ws / entry.name, ws / entry.name.removesuffix(".tmp"))
            yield entry
    monkeypatch.setattr(workspace.files, "walk_tree", walk_then_rename)
    workspace.copy_tree(ws, tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["answer.txt",
                                                                     "second-name.json"]
    assert (tmp_path / "copy" / "answer.txt").read_text() == "READY\n"


def test_the_trap_walk_past_its_bound_never_says_no_trap(tmp_path, monkeypatch):
    """More entries than the walk looks at, in a folder that sorts first, then a link out:
    the walk says it stopped (WalkBound) rather than "no trap"; a trap found before the
    bound is said as one; a tree within the bound is walked whole."""
    monkeypatch.setattr(workspace, "SPECIAL_WALK", 30)
    ws = tmp_path / "ws"
    (ws / "aaa").mkdir(parents=True)
    for i in range(40):
        (ws / "aaa" / f"{i:02}").touch()
    os.symlink("/etc/passwd", ws / "answer.txt")
    with pytest.raises(workspace.WalkBound, match="more than 30 entries.*SPECIAL_WALK"):
        workspace.special_files(ws)
    os.symlink("/etc/passwd", ws / "0-first")
    assert workspace.special_files(ws) == ["0-first"]
    os.unlink(ws / "0-first")
    for i in range(20):
        (ws / "aaa" / f"{i:02}").unlink()
    assert workspace.special_files(ws) == ["answer.txt"]


@pytest.mark.parametrize("act, found", [
    (None, None),
    ("rename", "nothing: ws was removed or renamed"),
    ("link", "a link to {host} in place of the folder made for it"),
    ("folder", "another folder in place of the folder made for it"),
    ("file", "a file in place of the folder made for it"),
])
def test_a_workspace_is_known_by_the_folder_made_not_by_its_path(tmp_path, act, found):
    ws, host = tmp_path / "ws", tmp_path / "host"
    ws.mkdir()
    host.mkdir()
    held = workspace.hold(ws)
    try:
        if act is not None:
            os.rename(ws, tmp_path / "ws.gone")
        if act == "link":
            os.symlink(host, ws)
        elif act == "folder":
            ws.mkdir()
        elif act == "file":
            ws.write_text("x")
        assert workspace.replaced(ws, held) == (found and found.format(host=host))
        assert workspace.moved_to(ws, held) == (ws if act is None else tmp_path / "ws.gone")
    finally:
        workspace.release(held)


def test_a_processor_timeout_asks_the_fault_table(tmp_path):
    """faults.timed_out decides a processor's timeout as it does a script grader's: the
    author's Python hanging is BLOCKED; a program of the workspace it runs hanging is FAILED."""
    task = graders_task(tmp_path, [
        {"kind": "processor", "script": "own.py", "timeout_seconds": 1},
        {"kind": "processor", "script": "runs.py", "timeout_seconds": 1}])
    root = tmp_path / ".jaato"
    (root / "own.py").write_text("def validate(payload, context):\n    while True:\n"
                                 "        pass\n")
    (root / "runs.py").write_text(
        "import subprocess\n\ndef validate(payload, context):\n"
        "    subprocess.run(['sh', str(context.workspace) + '/selftest.sh'])\n    return []\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "selftest.sh").write_text("sleep 30\n")
    ctx = GraderContext(workspace=ws, config_root=root, params={},
                        run=AgentRun(finish_reason="stop", payload={}))
    own, runs = run_graders(task.graders, ctx)
    assert own.state == "BLOCKED" and "at import or in validate()" in own.detail, own
    assert runs.state == "FAIL" and "a file of the workspace" in runs.detail, runs
