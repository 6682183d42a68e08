"""An arm's snapshot (results/snapshots.py): taken from a workspace the agent shaped, and
restored without ever writing outside its target (docs/regrading.md, "What is kept")."""
from __future__ import annotations

import io
import json
import os
import socket
import stat
import tarfile
from pathlib import Path

import pytest

from pytest_jaato_eval.results import snapshots
from pytest_jaato_eval.results.snapshots import LeftOut, Unreadable

FACTS = {"format": snapshots.FORMAT, "run": {"payload": {"answer": "42"}}, "cascade_id": None}


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "empty").mkdir()
    (ws / "answer.txt").write_text("READY\n")
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    tool = ws / "run.sh"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    os.symlink("src/pkg/mod.py", ws / "inside")          # a link kept as a link
    os.symlink("../ws/answer.txt", ws / "src" / "up")    # up and back in: still inside
    return ws


def take(ws: Path, tmp_path: Path, cap: int = 10 * snapshots.MB) -> Path:
    dest = tmp_path / "store.snapshots" / snapshots.file_name("t@echo#0", "run1")
    snapshots.take(ws, FACTS, dest, cap)
    return dest


def test_a_workspace_comes_back_as_the_agent_left_it(tmp_path):
    ws = workspace(tmp_path)
    path = take(ws, tmp_path)
    assert snapshots.read_facts(path) == FACTS
    out = tmp_path / "out"
    out.mkdir()
    restored = snapshots.restore(path, out)
    assert restored.facts == FACTS and restored.notes == []
    assert (out / "answer.txt").read_text() == "READY\n"
    assert (out / "src" / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert (out / "empty").is_dir() and not any((out / "empty").iterdir())
    assert os.readlink(out / "inside") == "src/pkg/mod.py"  # a link, not a copy
    assert (out / "run.sh").stat().st_mode & stat.S_IXUSR  # the agent's script stays runnable
    assert sorted(p.name for p in out.rglob("*")) == sorted(p.name for p in ws.rglob("*"))


def test_a_link_out_is_kept_as_a_link_never_followed_and_not_recreated(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the developer's file\n" * 1000)
    ws = workspace(tmp_path)
    os.symlink(secret, ws / "abs-out")
    os.symlink("../../secret.txt", ws / "src" / "rel-out")
    os.symlink("/dev/zero", ws / "zero")  # followed, it would never end
    path = take(ws, tmp_path, cap=4000)  # the link's target is never read: under the cap
    with tarfile.open(path) as tar:
        names = {m.name: m for m in tar.getmembers()}
        assert names["workspace/abs-out"].issym() and names["workspace/abs-out"].size == 0
        assert b"developer" not in b"".join(
            tar.extractfile(m).read() for m in tar.getmembers() if m.isreg())
    out = tmp_path / "out"
    out.mkdir()
    restored = snapshots.restore(path, out)
    assert not os.path.lexists(out / "abs-out") and not os.path.lexists(out / "src" / "rel-out")
    assert not os.path.lexists(out / "zero")
    assert len(restored.notes) == 3 and all("points out of the workspace" in n
                                            for n in restored.notes)


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_special_file_leaves_the_snapshot_out_and_is_never_opened(tmp_path, kind):
    ws = workspace(tmp_path)
    if kind == "fifo":
        os.mkfifo(ws / "src" / "trap")  # opened to read, it would block the run for good
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(ws / "src" / "trap"))
    with pytest.raises(LeftOut, match=r"the workspace holds a (FIFO|socket), 'src/trap'"):
        take(ws, tmp_path)
    assert not list((tmp_path / "store.snapshots").glob("*")), "nothing is left half-written"


def test_over_the_cap_the_snapshot_is_left_out_with_a_line_naming_the_keys(tmp_path):
    ws = workspace(tmp_path)
    (ws / "big.bin").write_bytes(os.urandom(50_000))
    with pytest.raises(LeftOut) as caught:
        take(ws, tmp_path, cap=20_000)
    assert "over the snapshot cap" in str(caught.value)
    assert "snapshot: {max_mb: N}" in str(caught.value) and "jaato_snapshot_max_mb" in str(
        caught.value)
    assert snapshots.max_bytes(None, None) == snapshots.DEFAULT_MAX_MB * snapshots.MB
    assert snapshots.max_bytes(200, 5) == 200 * snapshots.MB  # the task's own cap wins
    assert snapshots.max_bytes(None, 0) == 0


def test_a_file_that_grows_or_goes_while_read_is_kept_as_read(tmp_path, monkeypatch):
    ws = workspace(tmp_path)
    log = ws / "daemon.log"
    log.write_text("one line\n")
    (ws / "session.json.tmp").write_text("{}")
    walk = snapshots._walk

    def grows(*args):  # the daemon appends to its log, and renames its record into place,
        listed = walk(*args)  # after the walk saw them
        log.write_text("one line\n" * 50)
        (ws / "session.json.tmp").rename(ws / "session.json")
        return listed
    monkeypatch.setattr(snapshots, "_walk", grows)
    path = take(ws, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    snapshots.restore(path, out)
    assert (out / "daemon.log").read_text() == "one line\n" * 50
    assert not (out / "session.json.tmp").exists()  # gone when read: not kept


def hostile(tmp_path: Path, *members: tuple[tarfile.TarInfo, bytes | None],
            name: str = "evil.tar.gz") -> Path:
    path = tmp_path / name
    with tarfile.open(path, "w:gz") as tar:
        facts = json.dumps(FACTS).encode()
        info = tarfile.TarInfo(snapshots.FACTS)
        info.size = len(facts)
        tar.addfile(info, io.BytesIO(facts))
        root = tarfile.TarInfo(snapshots.ROOT)
        root.type = tarfile.DIRTYPE
        tar.addfile(root)
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


ATTACKS = {
    "a name with ..": [(member("workspace/../../escaped"), b"x")],
    "an absolute name": [(member("/tmp/escaped-abs"), b"x")],
    "a name outside workspace/": [(member("elsewhere/x"), b"x")],
    "a file below a link": [(member("workspace/d", tarfile.SYMTYPE, ".."), None),
                            (member("workspace/d/escaped"), b"x")],
    "a file below a link out": [(member("workspace/d", tarfile.SYMTYPE, "/tmp"), None),
                                (member("workspace/d/escaped"), b"x")],
    "a name twice (a link, then a file through it)": [
        (member("workspace/f", tarfile.SYMTYPE, "../escaped"), None),
        (member("workspace/f"), b"x")],
    "a hard link": [(member("workspace/h", tarfile.LNKTYPE, "/etc/passwd"), None)],
    "a device": [(member("workspace/dev", tarfile.CHRTYPE), None)],
    "a FIFO": [(member("workspace/fifo", tarfile.FIFOTYPE), None)],
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_hostile_snapshot_writes_nothing_outside_its_target(tmp_path, attack):
    root = tmp_path / "deep" / "er"
    root.mkdir(parents=True)
    path = hostile(root, *ATTACKS[attack])
    out = root / "out"
    out.mkdir()
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(Unreadable):
        snapshots.restore(path, out)
    assert not any(out.iterdir()), "refused before anything was written"
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert not Path("/tmp/escaped-abs").exists()


def test_what_is_no_snapshot_is_one_line_never_a_traceback(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    garbage = tmp_path / "g.tar.gz"
    garbage.write_bytes(b"not a tar at all")
    with pytest.raises(Unreadable, match="not a snapshot"):
        snapshots.restore(garbage, out)
    wrong = tmp_path / "w.tar.gz"
    with tarfile.open(wrong, "w:gz") as tar:
        tar.addfile(member("README"), io.BytesIO(b""))
    with pytest.raises(Unreadable, match="no snapshot.json first"):
        snapshots.read_facts(wrong)
    os.mkfifo(tmp_path / "fifo.tar.gz")
    with pytest.raises(Unreadable, match="not a regular file"):
        snapshots.read_facts(tmp_path / "fifo.tar.gz")
    with pytest.raises(Unreadable, match="no snapshot kept"):
        snapshots.path_of(tmp_path / "s.jsonl", None)
    with pytest.raises(Unreadable, match="not a file name"):
        snapshots.path_of(tmp_path / "s.jsonl", "../../etc/passwd")


def test_the_store_folder_moves_links_and_copies_whole(tmp_path):
    ws = workspace(tmp_path)
    staged = tmp_path / "staging" / "a.tar.gz"
    snapshots.take(ws, FACTS, staged, snapshots.MB)
    store = tmp_path / "results.jsonl"
    name = snapshots.file_name("t@echo#0", "run1")
    assert snapshots.folder_of(store) == tmp_path / "results.snapshots"
    assert snapshots.valid_name(name) and not snapshots.valid_name("../x.tar.gz")
    kept = snapshots.put(store, name, staged, move=True)
    assert kept.is_file() and not staged.exists()
    other = tmp_path / "other.jsonl"
    assert snapshots.copy(store, other, name) and snapshots.read_facts(
        snapshots.folder_of(other) / name) == FACTS
    assert not snapshots.copy(store, other, "missing.tar.gz")
    moved = tmp_path / "results.previous.jsonl"
    snapshots.follow(store, moved)
    assert (snapshots.folder_of(moved) / name).is_file() and not snapshots.folder_of(
        store).exists()
    planted = tmp_path / "plant.jsonl"
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", snapshots.folder_of(planted))
    with pytest.raises(ValueError, match="is a link"):
        snapshots.put(planted, name, snapshots.folder_of(moved) / name, move=False)
    assert not any((tmp_path / "elsewhere").iterdir())


def test_chained_links_that_lead_out_once_all_are_in_place_are_not_recreated(tmp_path):
    """Each link looks inside when it is extracted; together they lead out: `k` names a
    folder three levels down through `m1/m2/m3`, `l` climbs six levels from `k`, and only
    then do `m1`..`m3` become `.`, so `k` is `x/y/z` and `l` three levels above the
    workspace. Resolved again once all are in place, `l` is removed; the rest stay."""
    path = hostile(
        tmp_path,
        *[(member(f"workspace/{d}", tarfile.DIRTYPE), None)
          for d in ("x", "x/y", "x/y/z")],
        (member("workspace/k", tarfile.SYMTYPE, "m1/m2/m3/x/y/z"), None),
        (member("workspace/l", tarfile.SYMTYPE, "k/../../../../../.."), None),
        *[(member(f"workspace/m{i}", tarfile.SYMTYPE, "."), None) for i in (1, 2, 3)])
    out = tmp_path / "a" / "b" / "c" / "out"
    out.mkdir(parents=True)
    restored = snapshots.restore(path, out)
    assert not os.path.lexists(out / "l")
    assert os.readlink(out / "k") == "m1/m2/m3/x/y/z" and (out / "k").resolve() == out / "x/y/z"
    assert any(n.startswith("the link 'l' -> 'k/../../../../../..' points out of the workspace "
                            "once every link is in place") for n in restored.notes), restored.notes


def test_a_workspace_replaced_at_its_path_after_its_check_is_read_through_its_descriptor(
        tmp_path, monkeypatch):
    """The folder held since it was made is the one snapshotted: a process of the agent's
    that renames it and leaves a link to a host folder at its path, after the identity
    check, changes nothing of what is read."""
    ws = workspace(tmp_path)
    host = tmp_path / "host"
    host.mkdir()
    (host / "answer.txt").write_text("THE KEY\n")
    held = os.open(ws, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    walk = snapshots._walk

    def swapped(*args):  # the swap lands between the walk and the read of each file
        listed = walk(*args)
        os.rename(ws, tmp_path / "ws.gone")
        os.symlink(host, ws)
        return listed
    monkeypatch.setattr(snapshots, "_walk", swapped)
    dest = tmp_path / "store.snapshots" / snapshots.file_name("t@echo#0", "run1")
    try:
        snapshots.take(ws, FACTS, dest, 10 * snapshots.MB, at=held)
    finally:
        os.close(held)
    out = tmp_path / "out"
    out.mkdir()
    snapshots.restore(dest, out)
    assert (out / "answer.txt").read_text() == "READY\n"  # before: THE KEY, through the link
    assert (out / "src" / "pkg" / "mod.py").read_text() == "x = 1\n"


def test_a_folder_that_cannot_be_listed_leaves_the_snapshot_out_naming_it(tmp_path,
                                                                           monkeypatch):
    """Never a snapshot short of a folder it could not read, which a regrade would grade as
    if the agent had left it empty. (As root no mode closes a folder: the refusal a
    non-root harness meets on a folder it cannot open up is made here.)"""
    from pytest_jaato_eval.engine import files

    ws = workspace(tmp_path)
    names = files._names

    def refusing(fd: int) -> list[str]:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/src/pkg"):
            raise PermissionError(13, "Permission denied")
        return names(fd)
    monkeypatch.setattr(files, "_names", refusing)
    with pytest.raises(LeftOut, match=r"the workspace's folder 'src/pkg' cannot be listed: "
                                      r"Permission denied"):
        take(ws, tmp_path)
    assert not list((tmp_path / "store.snapshots").glob("*")), "nothing is left half-written"


def test_a_path_too_long_to_restore_leaves_the_snapshot_out_naming_the_bound(tmp_path):
    """Walked by descriptor, a tree deeper than PATH_MAX is read whole; a regrade could not
    make it again (before: kept, then BLOCKED on the regrade as "snapshot unreadable")."""
    ws = workspace(tmp_path)
    fd = os.open(ws, os.O_RDONLY)
    try:
        for _ in range(snapshots.MAX_PATH // 200 + 2):
            os.mkdir("d" * 199, dir_fd=fd)
            inner = os.open("d" * 199, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    with pytest.raises(LeftOut, match=r"a path longer than [\d,]+ bytes, which a restore could "
                                      r"not make \(snapshots.MAX_PATH\)"):
        take(ws, tmp_path)
