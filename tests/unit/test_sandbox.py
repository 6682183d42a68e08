"""The sandbox's description (engine/sandbox.py), as bubblewrap reads it: in order."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.engine.sandbox import (TMP_SIZE, Confinement, Sandbox, confined_path,
                                              hideable, probe, seal_interpreter)
from pytest_jaato_eval.graders.context import GraderContext
from pytest_jaato_eval.graders import script
from pytest_jaato_eval.graders.script import grade_script
from pytest_jaato_eval.task.model import ScriptGrader


def ops(args: list[str]) -> list[tuple[str, ...]]:
    """bwrap's mount options as (option, path...) tuples, in order."""
    out, i = [], 0
    two = {"--ro-bind", "--bind", "--symlink", "--setenv"}
    while i < len(args) and args[i] != "--":
        if args[i] in two:
            out.append((args[i], args[i + 1], args[i + 2]))
            i += 3
        elif args[i] in {"--tmpfs", "--remount-ro", "--dev", "--proc", "--cap-drop", "--size",
                         "--dir"}:
            out.append((args[i], args[i + 1]))
            i += 2
        else:
            out.append((args[i],))
            i += 1
    return out


def test_the_sandbox_shows_only_what_is_named_each_at_its_own_path(tmp_path):
    home, checkout = Path("/home/dev"), Path("/home/dev/project")
    ws, daemon = tmp_path / "run" / "ws", tmp_path / "run" / "d"
    o = ops(Sandbox("bwrap").mounts(
        writable=[ws, daemon], hidden=[checkout, home, tmp_path / "run"],
        readable=[home / ".jaato"]))
    assert ("--ro-bind", "/", "/") not in o  # no host root: an allow-list
    binds = {x[2]: x[0] for x in o if x[0] in ("--ro-bind", "--bind")}
    assert binds["/usr"] == "--ro-bind"
    for name in ("/bin", "/lib"):  # as the host has them: a link into /usr, or a folder
        kind = "--symlink" if os.path.islink(name) else "--ro-bind"
        assert any(x[0] == kind and x[-1] == name for x in o), name
    assert binds[str(ws)] == binds[str(daemon)] == "--bind"
    assert binds["/home/dev/.jaato"] == "--ro-bind"
    prefix = str(Path(sys.prefix).absolute())
    assert binds[prefix] == "--ro-bind"
    assert binds.get("/etc/passwd") == "--ro-bind" and "/etc/shadow" not in binds
    assert not any(p.startswith("/etc/ssl/private") for p in binds)
    # only /etc files by name, never the folder; nothing of HOME, the checkout or /tmp's host
    assert "/etc" not in binds and "/home/dev" not in binds and "/tmp" not in binds
    assert not any(p == str(checkout) or p.startswith(str(checkout) + "/") for p in binds)
    # a private /tmp of a bounded size; the root and /dev read-only once all is mounted
    assert o[o.index(("--tmpfs", "/tmp")) - 1] == ("--size", str(TMP_SIZE))
    assert o[-2:] == [("--remount-ro", "/dev"), ("--remount-ro", "/")]
    # a hidden folder no mount holds needs no mask: nothing shows it
    assert not any(x[0] == "--tmpfs" and x[1].startswith("/home") for x in o)


def test_a_hidden_folder_inside_a_mount_is_masked_and_what_is_inside_it_mounted_back(tmp_path):
    """Were the interpreter's folder to hold the checkout (a venv's parent given as one), the
    checkout is an empty, read-only folder there, with what must be seen mounted back."""
    ws = tmp_path / "shown"
    o = ops(Sandbox("bwrap").mounts(writable=[ws / "hidden" / "ws"], hidden=[ws / "hidden"],
                                    readable=[ws]))
    at = {x: i for i, x in enumerate(o)}
    assert at[("--ro-bind", str(ws), str(ws))] < at[("--tmpfs", str(ws / "hidden"))] < at[
        ("--bind", str(ws / "hidden" / "ws"), str(ws / "hidden" / "ws"))] < at[
        ("--remount-ro", str(ws / "hidden"))]


def test_the_sandbox_description_is_read_from_a_descriptor_never_from_its_command_line():
    """Everything inside can read the command line of the sandbox's first process: it names
    the program to run, and no path of the sandbox's."""
    with Sandbox("/usr/bin/bwrap").command(["python", "-c", "pass"], writable=[Path("/w")],
                                           readable=[Path("/r")]) as boxed:
        assert boxed.argv == ("/usr/bin/bwrap", "--args", str(boxed.pass_fds[0]), "--",
                              "python", "-c", "pass")
        given = os.pread(boxed.pass_fds[0], 1 << 20, 0).split(b"\0")
        assert b"/w" in given and b"/r" in given and b"--unshare-pid" in given
        assert given[given.index(b"PATH") + 1].decode() == confined_path(os.environ["PATH"])
    with pytest.raises(OSError):  # closed with the block
        os.fstat(boxed.pass_fds[0])


def test_python_in_the_sandbox_is_the_runs_own_and_paths_it_does_not_show_are_gone(tmp_path):
    """A pyenv shim under HOME, a relative entry: gone; the run's interpreter's folder first,
    as in an activated venv; the system's entries kept in order."""
    shim = tmp_path / ".pyenv" / "shims"
    shim.mkdir(parents=True)
    path = confined_path(os.pathsep.join([str(shim), ".", "/usr/local/bin", "/usr/bin", "/bin"]))
    assert path.split(os.pathsep) == [os.path.dirname(sys.executable), "/usr/local/bin",
                                      "/usr/bin", "/bin"]


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
    o = ops(Sandbox("bwrap").mounts(writable=[]))
    assert o.index(("--tmpfs", "/tmp")) < o.index(
        ("--ro-bind", "/tmp/clone/.venv", "/tmp/clone/.venv"))


def test_the_sealed_interpreter_is_an_execute_only_copy_bound_over_the_program(tmp_path):
    copy, program = seal_interpreter(tmp_path / "sealed", sys.executable)
    assert program == Path(sys.executable).resolve() and copy.parent == tmp_path / "sealed"
    assert copy.stat().st_mode & 0o777 == 0o111  # nobody may read it: its processes are not dumpable
    assert copy.stat().st_size == program.stat().st_size
    assert seal_interpreter(tmp_path / "sealed", sys.executable) == (copy, program)  # made once
    o = ops(Sandbox("bwrap").mounts(writable=[], sealed=(copy, program)))
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
    # bubblewrap reports a death by a signal as 128 + N; the reporter inside tells them apart.
    # Confined, a signal from inside (what the grader ran: the agent's self-test) is its FAIL;
    # one while the machine's OOM killer acted is the machine's: BLOCKED
    killed = grade_script(ScriptGrader(kind="script", run="kill -9 $$"), ctx)
    assert killed.state == "FAIL" and killed.detail.startswith(
        "killed by SIGKILL, from inside its sandbox"), killed
    assert grade_script(ScriptGrader(kind="script", run="exit 137"), ctx).detail == (
        "exit 137, expected 0")
    counts = iter(range(6, 100))  # the OOM killer ends something while the grader runs
    monkeypatch.setattr(script, "machine_oom_kills", lambda: next(counts))
    killed = grade_script(ScriptGrader(kind="script", run="kill -9 $$"), ctx)
    assert killed.state == "BLOCKED" and killed.detail.startswith(
        "killed by SIGKILL: the machine's OOM killer acted while it ran (no memory cgroup of "
        "its own could be made here"), killed
    # a TMPDIR of the host's (hidden, or missing, in the sandbox) is its private /tmp there
    monkeypatch.setenv("TMPDIR", str(tmp_path / "hidden-tmp"))
    made = grade_script(ScriptGrader(kind="script", run='test "$TMPDIR" = /tmp && mktemp'), ctx)
    assert made.state == "PASS", made
    assert sorted(p.name for p in (tmp_path / "scratch").iterdir()) == []  # its /tmp removed
