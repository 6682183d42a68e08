"""The sandbox's command line (engine/sandbox.py), as bubblewrap reads it: in order."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.engine.sandbox import (Confinement, Sandbox, hideable, probe,
                                              seal_interpreter)
from pytest_jaato_eval.graders.context import GraderContext
from pytest_jaato_eval.graders.script import grade_script
from pytest_jaato_eval.task.model import ScriptGrader


def ops(argv: list[str]) -> list[tuple[str, ...]]:
    """bwrap's mount options as (option, path...) tuples, in order, up to `--`."""
    out, i = [], 1
    two = {"--ro-bind", "--bind"}
    while argv[i] != "--":
        if argv[i] in two:
            out.append((argv[i], argv[i + 1], argv[i + 2]))
            i += 3
        elif argv[i] in {"--tmpfs", "--remount-ro", "--dev", "--proc", "--cap-drop"}:
            out.append((argv[i], argv[i + 1]))
            i += 2
        else:
            out.append((argv[i],))
            i += 1
    return out


def test_hidden_folders_are_emptied_then_what_must_stay_is_mounted_back_then_made_read_only():
    home, checkout = Path("/home/dev"), Path("/home/dev/project")
    argv = Sandbox("bwrap").command(
        ["python", "-m", "jaato_server"], writable=[Path("/tmp/run/ws"), Path("/tmp/run/d")],
        hidden=[checkout, home, Path("/tmp/run")], tmp=Path("/tmp/run/tmp"),
        readable=[home / ".jaato"])
    assert argv[-3:] == ["python", "-m", "jaato_server"]
    o = ops(argv)
    assert o[:3] == [("--ro-bind", "/", "/"), ("--dev", "/dev"), ("--proc", "/proc")]
    # /home/dev/project is inside /home/dev; /tmp/run is inside the private /tmp: one tmpfs
    assert [x for x in o if x[0] == "--tmpfs"] == [("--tmpfs", "/home/dev")]
    binds = [x for x in o if x[0] in ("--ro-bind", "--bind")][1:]
    assert ("--ro-bind", "/home/dev/.jaato", "/home/dev/.jaato") in binds
    assert ("--ro-bind", str(Path(sys.prefix).resolve()), str(Path(sys.prefix).resolve())) in binds
    assert binds.index(("--bind", "/tmp/run/tmp", "/tmp")) < binds.index(
        ("--bind", "/tmp/run/ws", "/tmp/run/ws"))  # the private /tmp first, then inside it
    assert o.index(("--tmpfs", "/home/dev")) < o.index(
        ("--ro-bind", "/home/dev/.jaato", "/home/dev/.jaato")) < o.index(
        ("--remount-ro", "/home/dev"))
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session"):
        assert (flag,) in o
    assert ("--cap-drop", "ALL") in o


def test_the_root_and_system_folders_are_never_hidden(tmp_path):
    assert hideable([Path("/"), Path("/usr"), Path("/etc"), tmp_path, tmp_path / "nope"]) == [
        tmp_path.resolve()]


def test_special_files_are_found_behind_links_and_every_link_out_is_a_trap(tmp_path):
    import os

    from pytest_jaato_eval.workspace import special_files
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "plain.txt").write_text("a file of the host's")
    os.mkfifo(ws / "sub" / "fifo")
    (ws / "fine.txt").write_text("x")
    (ws / "to-a-file").symlink_to(ws / "fine.txt")  # inside: read as what it names
    (ws / "sub" / "up").symlink_to("../fine.txt")
    (ws / "to-the-fifo").symlink_to("sub/fifo")  # inside, to a FIFO: a trap
    (ws / "answer.txt").symlink_to("/proc/kmsg")  # would block a reader
    (ws / "dir-link").symlink_to(outside)  # a folder of the host's: not walked, a trap
    (ws / "host.txt").symlink_to(outside / "plain.txt")  # a file of the host's
    (ws / "nowhere").symlink_to(outside / "not-yet")  # a place a writer would create
    (ws / "venv-python").symlink_to(os.path.realpath(sys.executable))  # the interpreter
    (ws / "usr").symlink_to("/usr/bin")  # the read-only system: lent to every process
    lent = [Path(os.path.realpath(sys.executable)).parent]
    assert sorted(special_files(ws, lent)) == [
        "answer.txt", "dir-link", "host.txt", "nowhere", "sub/fifo", "to-the-fifo"]


def test_an_interpreter_under_tmp_is_mounted_after_the_private_tmp(monkeypatch):
    import pytest_jaato_eval.engine.sandbox as sandbox
    monkeypatch.setattr(sandbox, "python_folders", lambda: [Path("/tmp/clone/.venv")])
    o = ops(Sandbox("bwrap").command(["python"], writable=[], hidden=[], tmp=Path("/tmp/t")))
    assert o.index(("--bind", "/tmp/t", "/tmp")) < o.index(
        ("--ro-bind", "/tmp/clone/.venv", "/tmp/clone/.venv"))


def test_the_sealed_interpreter_is_an_execute_only_copy_bound_over_the_program(tmp_path):
    copy, program = seal_interpreter(tmp_path / "sealed", sys.executable)
    assert program == Path(sys.executable).resolve() and copy.parent == tmp_path / "sealed"
    assert copy.stat().st_mode & 0o777 == 0o111  # nobody may read it: its processes are not dumpable
    assert copy.stat().st_size == program.stat().st_size
    assert seal_interpreter(tmp_path / "sealed", sys.executable) == (copy, program)  # made once
    o = ops(Sandbox("bwrap").command(["python"], writable=[], hidden=[], tmp=Path("/tmp/t"),
                                     sealed=(copy, program)))
    # over the interpreter's folder, which is mounted before it
    assert o.index(("--ro-bind", str(copy), str(program))) > max(
        i for i, x in enumerate(o)
        if x[0] == "--ro-bind" and x[1] != str(copy) and program.is_relative_to(x[2]))


@pytest.mark.skipif(probe()[0] is None, reason="needs a working bubblewrap")
def test_a_sandbox_that_cannot_be_set_up_is_the_graders_blocked_never_the_agents_fail(
        tmp_path, monkeypatch):
    """bubblewrap exits 1 when it cannot build the sandbox, like a failing check would: the
    grader tells the two apart by bubblewrap's own status, so its failure is BLOCKED."""
    ws = tmp_path / "ws"
    ws.mkdir()
    confinement = Confinement(probe()[0], hidden=(), readable=(), scratch=tmp_path / "scratch",
                              sealed=seal_interpreter(tmp_path / "sealed", sys.executable))
    # a config root that is gone by the time the grader runs: nothing to mount, no sandbox
    ctx = GraderContext(workspace=ws, config_root=tmp_path / "gone", params={},
                        run=AgentRun(finish_reason="stop"), confinement=confinement)
    spec = ScriptGrader(kind="script", run="exit 0")
    blocked = grade_script(spec, ctx)
    assert blocked.state == "BLOCKED" and "sandbox could not be set up" in blocked.detail, blocked
    (tmp_path / "gone").mkdir()
    assert grade_script(spec, ctx).state == "PASS"
    assert grade_script(ScriptGrader(kind="script", run="exit 1"), ctx).state == "FAIL"
    # bubblewrap reports a death by a signal as 128 + N; the reporter inside tells them apart
    killed = grade_script(ScriptGrader(kind="script", run="kill -9 $$"), ctx)
    assert killed.state == "BLOCKED" and "killed by SIGKILL" in killed.detail, killed
    assert grade_script(ScriptGrader(kind="script", run="exit 137"), ctx).state == "FAIL"
    # a TMPDIR of the host's (hidden, or missing, in the sandbox) is its private /tmp there
    monkeypatch.setenv("TMPDIR", str(tmp_path / "hidden-tmp"))
    made = grade_script(ScriptGrader(kind="script", run='test "$TMPDIR" = /tmp && mktemp'), ctx)
    assert made.state == "PASS", made
    assert sorted(p.name for p in (tmp_path / "scratch").iterdir()) == []  # its /tmp removed
