"""An arm's workspace: a fresh copy of the task's fixture (W1-W4), and each grader's fresh
copy of it as the agent left it."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import logging
import os
import queue
import shutil
import stat
import subprocess
import threading
import uuid
from pathlib import Path
from typing import AbstractSet, Callable, Iterator, Sequence
from urllib.parse import quote

from .engine import files
from .task.tree import skipped_in_fixture

_MAX_NAME = 120
log = logging.getLogger(__name__)


class WorkspaceError(Exception):
    """The workspace could not be made: the arm is BLOCKED with `fixture: ...`."""


def directory_name(arm_id: str) -> str:
    """W1: an injective, single-component directory name for an arm id.

    Percent-encoding keeps `a/b` and `a_b` apart and turns `/` into `%2F`, so no
    id can name a path outside the root. Long ids keep a readable head plus a hash.
    """
    name = quote(arm_id, safe="-_.@#+=,")
    if name.startswith("."):
        name = "%2E" + name[1:]  # never hidden, never `.` or `..`
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(arm_id.encode()).hexdigest()[:16]
        name = f"{name[:_MAX_NAME - 17]}~{digest}"
    return name


class _Filter:
    """copytree's ignore: the usual skips and `leave_out` (paths relative to the copied
    root), plus special files noted (never opened)."""

    def __init__(self, fixture: Path, leave_out: AbstractSet[str] = frozenset(),
                 usual_skips: bool = True):
        self.fixture = fixture
        self.leave_out = leave_out
        self.usual_skips = usual_skips
        self.special: list[str] = []

    def __call__(self, directory: str, names: list[str]) -> set[str]:
        skip = {n for n in names if skipped_in_fixture(n)} if self.usual_skips else set()
        if self.leave_out:
            here = os.path.relpath(directory, self.fixture)
            skip |= {n for n in names if os.path.normpath(os.path.join(here, n)) in self.leave_out}
        for name in set(names) - skip:
            try:
                mode = os.lstat(os.path.join(directory, name)).st_mode
            except OSError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                skip.add(name)
                self.special.append(os.path.relpath(os.path.join(directory, name), self.fixture))
        return skip


# The agents' folder inside a run's (or a worker's) workspaces folder: the only one their
# sandbox mounts writable. A kept workspace is moved up out of it, into the folder that holds
# it, the moment its arm ends (`keep`), out of the next agents' sight. An arm's folder name
# never begins with a dot (directory_name), so none is ever this one.
AGENTS = ".arms"


def keep(ws: Path) -> Path:
    """Move a kept workspace out of the agents' folder, one level up (a rename: the same
    file system); where it now is. Raises OSError when it cannot be moved."""
    ws = Path(ws)
    dest = ws.parent.parent / ws.name
    os.rename(ws, dest)  # never over another: a kept name is never reused (W2)
    return dest


def materialise(root: Path, arm_id: str, fixture: Path, profile_set: str | None) -> Path:
    """Copy the fixture to a new directory under `root` and write its `.env` (W1-W3)."""
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    dest = root / directory_name(arm_id)
    if dest.resolve().parent != root:  # belt and braces: never escape the root
        raise WorkspaceError(f"fixture: arm id {arm_id!r} would leave the workspace root")
    if dest.exists() or dest.is_symlink():  # W2: never reuse
        raise WorkspaceError(f"fixture: workspace {dest} already exists; refusing to reuse it "
                             f"(remove it, or pick another --jaato-workspaces)")
    try:
        # symlinks=True copies links as links: a link to /etc stays a link, nothing is read
        # through it and nothing outside the fixture is copied in.
        special = _Filter(fixture)
        shutil.copytree(fixture, dest, symlinks=True, ignore=special)
        if special.special:
            shutil.rmtree(dest, ignore_errors=True)
            raise WorkspaceError(
                f"fixture: {fixture}/{special.special[0]} is a special file (FIFO, socket or "
                f"device); a fixture holds regular files, folders and links only")
        env = dest / ".env"
        if os.path.lexists(env):  # the fixture's own: ours replaces it, never written through
            env.unlink()
        # W3: the profile set and nothing else; credentials never go here.
        fd = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"JAATO_PROFILE_SET={profile_set}\n" if profile_set else "")
    except WorkspaceError:
        raise
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(dest, ignore_errors=True)  # a half copy is nobody's workspace
        raise WorkspaceError(f"fixture: could not copy {fixture} to {dest}: {exc}") from None
    return dest


def hold(ws: Path) -> int:
    """A descriptor on the workspace folder as made, kept open for its arm: its identity
    (st_dev, st_ino) stays the folder's, never reused by another while it is held."""
    return os.open(ws, _TREE)


def replaced(ws: Path, held: int) -> str | None:
    """What stands at the workspace's path when it is no longer the folder held (`hold`):
    the agent renamed, removed or replaced it, and whatever is there now is not read.
    None while the path names that folder."""
    made = os.fstat(held)
    try:
        now = os.lstat(ws)
    except FileNotFoundError:
        return f"nothing: {ws.name} was removed or renamed"
    except OSError as exc:
        return f"{ws.name} could not be looked at ({exc.strerror})"
    if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
        return None
    if stat.S_ISLNK(now.st_mode):
        try:
            target = os.readlink(ws)
        except OSError:
            target = "?"
        return f"a link to {_shown(target)} in place of the folder made for it"
    kind = "another folder" if stat.S_ISDIR(now.st_mode) else "a file"
    return f"{kind} in place of the folder made for it"


def moved_to(ws: Path, held: int) -> Path | None:
    """Where the folder made for the workspace now is, when the agent renamed it within the
    same folder (so the harness can remove it); None when it is not found there."""
    made = os.fstat(held)
    try:
        with os.scandir(ws.parent) as entries:
            for entry in entries:
                if entry.inode() == made.st_ino and not entry.is_symlink() and (
                        entry.stat(follow_symlinks=False).st_dev == made.st_dev):
                    return Path(entry.path)
    except OSError:
        pass
    return None


def release(held: int | None) -> None:
    if held is not None:
        with contextlib.suppress(OSError):
            os.close(held)


class WalkBound(Exception):
    """A walk of the agent's tree stopped at its bound before the tree's end: what it did
    not look at may hold what it looks for, so the arm cannot be said clean."""


# Entries the trap walk looks at. An agent that leaves more FAILS (`resources`): the walk
# never says "no trap" of a tree it did not finish.
SPECIAL_WALK = 200_000
SPECIAL_SHOWN = 20


# The read-only system a sandbox lends every process: a link the agent leaves into it (a
# venv's `bin/python` names the interpreter) is no trap, when it names a file or a folder.
SYSTEM_LENT = tuple(Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                                      "/libx32"))


def special_files(ws: Path, lent: Sequence[Path] = (), at: int | None = None) -> list[str]:
    """The traps in a workspace for what reads it (relative paths; a link is looked through,
    never walked into): FIFOs and device files, which would block a reader until its
    timeout, turning a FAIL into a BLOCKED; and every link that leads out of the workspace
    (to /proc, /sys, a device, a file of the host's, another workspace, or nowhere yet),
    which the harness and a Python arm's test, running as the developer outside the
    sandbox, would read or write through. A link to a regular file or folder of the
    read-only system (`SYSTEM_LENT`, and `lent`: the interpreter's folders) is none.

    The tree is walked and each link resolved one name at a time from descriptors
    (files.walk_tree, files.resolve), so no depth or path length hides an entry or a
    link's way out; a link the lookup cannot follow to its end (more links than the kernel
    follows) is a trap too.

    `at`: the descriptor held on the workspace as made (`hold`): the tree walked is that
    folder's, whatever the agent has put at its path since.

    Raises WalkBound when the tree holds more than SPECIAL_WALK entries and no trap was
    found among those looked at."""
    found: list[str] = []
    lent = (*SYSTEM_LENT, *lent)
    try:
        for seen, entry in enumerate(files.walk_tree(ws if at is None else at, open_up=True)):
            if seen >= SPECIAL_WALK:
                if found:
                    break
                raise WalkBound(f"the agent left more than {SPECIAL_WALK} entries in its "
                                f"workspace, the trap check's bound (workspace.SPECIAL_WALK)")
            mode = entry.st.st_mode
            if stat.S_ISLNK(mode):
                try:
                    mode = _through(ws, entry.rel, lent, at)
                except OSError:
                    continue
            if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                found.append(_shown(entry.rel))
                if len(found) >= SPECIAL_SHOWN:
                    break
    except OSError:  # the workspace gone, or a folder gone from under the walk
        pass
    return found


def _shown(rel: str, keep: int = 120) -> str:
    """A path as a record says it: a name nested past any reader's patience cut in its
    middle."""
    return rel if len(rel) <= 2 * keep else f"{rel[:keep]}…{rel[-keep:]}"


def _through(ws: Path, rel: str, lent: Sequence[Path], at: int | None = None) -> int:
    """What a reader of the link `rel` meets, as a mode: a FIFO's for a link out of the
    workspace (as much a trap), else the target's own (a FIFO or device inside is one too;
    a link to nothing inside is none)."""
    where, mode = files.resolve(ws, rel, lent, at)
    if where == files.IN:
        return stat.S_IFREG if mode is None else mode
    if where == files.LENT and mode is not None and (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return mode
    return stat.S_IFIFO  # out, or into the system to nothing (a place to create)


def squatter(root: Path, arm_id: str, since: float, made: list[Path]) -> Path | None:
    """What stands where `arm_id`'s workspace goes, when it is none of ours and appeared
    after `since` (an agent's doing): a folder, file or link. None otherwise."""
    dest = Path(root).resolve() / directory_name(arm_id)
    try:
        st = os.lstat(dest)
    except OSError:
        return None
    if dest in made or st.st_ctime < since:
        return None
    return dest


def copy_config(config_root: Path, dest: Path, leave_out: AbstractSet[str] = frozenset()) -> Path:
    """A copy of a config root at `dest` (which must not exist): what a session is handed, so
    that nothing the agent or jaato writes there (jaato keeps its file backups under
    `<config root>/sessions/`) reaches the checkout or what the graders read. `leave_out`:
    paths relative to the root not copied."""
    try:
        special = _Filter(Path(config_root), leave_out)
        shutil.copytree(config_root, dest, symlinks=True, ignore=special)
    except (OSError, shutil.Error) as exc:
        remove_tree(dest)
        raise WorkspaceError(f"config root: could not copy {config_root} to {dest}: {exc}") from None
    return dest


def agent_config(config_root: Path, ws: Path, leave_out: AbstractSet[str] = frozenset()) -> Path:
    """The arm's own copy of its config root, beside its workspace (and removed with it),
    without the graders' own files (`leave_out`)."""
    dest = ws.parent / f".{ws.name}-config-state"
    remove_tree(dest)  # a copy left by an earlier start of the same arm, never reused
    return copy_config(config_root, dest, leave_out)


@contextlib.contextmanager
def as_left(ws: Path, at: int | None = None) -> Iterator[Path]:
    """The workspace as the agent left it, for one grader: a fresh copy of it stands at the
    workspace's own path while the grader runs (so paths, a venv's `#!` lines and `make`'s
    timestamps mean what they meant to the agent), and the agent's own tree is put back
    after, whatever the grader did to the copy. No grader reads what an earlier one (or a
    program of the agent's it ran) built, deleted or rewrote, and what the harness reads
    after the graders (the session's own files, a kept workspace) is the agent's.

    The copy is made beside the workspace (one file system), swapped in and out in one
    atomic step (renameat2's RENAME_EXCHANGE; two renames where that is missing), and
    removed after. `at`: the descriptor held on the workspace as made (`hold`), which the
    copy is read through: a tree the agent put at the path since is never the one copied.
    Raises WorkspaceError when it cannot be made."""
    ws = Path(ws)
    spare = ws.parent / f".{ws.name}-grader-{uuid.uuid4().hex[:8]}-state"
    try:
        _copy_as_is(ws if at is None else at, spare)
    except (OSError, shutil.Error) as exc:
        remove_tree(spare)
        raise WorkspaceError(f"the workspace could not be copied for the grader: "
                             f"{_first_error(exc)}") from None
    try:
        _swap(ws, spare)
    except OSError as exc:
        remove_tree(spare)
        raise WorkspaceError(f"the workspace's copy could not be put in its place: {exc}") from None
    try:
        yield ws
    finally:
        try:
            _swap(ws, spare)  # the agent's tree back at its path; the grader's copy aside
        except OSError as exc:  # the agent's tree stays at `spare`, removed with the workspace
            log.debug("workspace: %s could not be put back: %s", ws, exc)
        remove_tree(spare)


def _copy_as_is(ws: Path | int, dest: Path) -> None:
    """Everything the agent left, links as links, times and modes kept; special files (a
    trap the arm has failed on already) never opened (`copy_tree`)."""
    copy_tree(ws, dest)


def copy_tree(src: Path | int, dest: Path, keep: Callable[[files.Entry], bool] | None = None,
              ) -> None:
    """`src`'s folders, regular files and links copied to `dest` (made here), modes and times
    kept; special files never opened. `keep`: whether an entry is copied (a folder left out
    leaves out all it holds). In this process (no program to start: most workspaces are a
    few files). The tree is walked from descriptors (files.walk_tree): any depth, any path
    length, without recursion; a folder the agent closed to its owner (chmod 000) is opened
    again. The copy takes no more disk than the tree: a file with several names is copied
    once and named again by hard links, and a sparse file keeps its holes (only its data is
    copied, each range by copy_file_range). `src` a descriptor: the folder it holds, read
    through it (never by a path)."""
    os.mkdir(dest, 0o700)
    out = os.open(dest, _TREE)
    made: list[tuple[str, os.stat_result]] = []  # the folders entered in the copy
    last: tuple[str, os.stat_result] | None = None  # the folder made last, not yet entered
    linked: dict[tuple[int, int], tuple[str, ...]] = {}
    pruned: int | None = None  # the depth of a folder left out, while in what it holds
    try:
        for entry in files.walk_tree(src, open_up=True):
            depth = len(entry.parts) - 1
            if pruned is not None:
                if depth > pruned:
                    continue
                pruned = None
            if keep is not None and not keep(entry):
                if stat.S_ISDIR(entry.st.st_mode):
                    pruned = depth
                continue
            if depth == len(made) + 1 and last is not None:  # into the folder just made
                out = _step(out, last[0])
                made.append(last)
            while len(made) > depth:
                out = _leave(out, made.pop())
            last = None
            st, name, folder = entry.st, entry.name, entry.folder
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(name, 0o700, dir_fd=out)
                last = (name, st)
            elif stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(name, dir_fd=folder)
                except FileNotFoundError:
                    continue  # gone since it was listed: not in the tree it copies
                os.symlink(target, name, dir_fd=out)
                os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=out,
                         follow_symlinks=False)
            elif stat.S_ISREG(st.st_mode):
                first = linked.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
                if first is not None:
                    _link(dest, first, out, name)
                    continue
                if _copy_file(folder, name, out, st) and st.st_nlink > 1:
                    linked[(st.st_dev, st.st_ino)] = entry.parts
        while made:
            out = _leave(out, made.pop())
    finally:
        os.close(out)
    _stamp(os.fspath(dest), os.fstat(src) if isinstance(src, int) else os.lstat(src))


_TREE = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _step(fd: int, name: str) -> int:
    try:
        return os.open(name, _TREE, dir_fd=fd)
    finally:
        os.close(fd)


def _leave(fd: int, folder: tuple[str, os.stat_result]) -> int:
    """Back up from a copied folder, then its mode and times (set last: a folder closed to
    writing is written first)."""
    up = _step(fd, "..")
    os.chmod(folder[0], stat.S_IMODE(folder[1].st_mode), dir_fd=up, follow_symlinks=False)
    os.utime(folder[0], ns=(folder[1].st_atime_ns, folder[1].st_mtime_ns), dir_fd=up,
             follow_symlinks=False)
    return up


def _stamp(path: str, st: os.stat_result) -> None:
    os.chmod(path, stat.S_IMODE(st.st_mode))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _link(dest: Path, first: tuple[str, ...], out: int, name: str) -> None:
    """`name` in the folder `out` made another name of the copy at `first` (names below
    `dest`), that copy's folder reached one name at a time."""
    fd = os.open(dest, _TREE)
    try:
        for part in first[:-1]:
            fd = _step(fd, part)
        os.link(first[-1], name, src_dir_fd=fd, dst_dir_fd=out, follow_symlinks=False)
    finally:
        os.close(fd)


def _copy_file(src: int, name: str, out: int, st: os.stat_result) -> bool:
    """The regular file `name` of the folder `src` copied into the folder `out`: its data
    ranges only (holes stay holes), in the kernel where it can (copy_file_range: blocks
    shared where the file system can, as btrfs and XFS can), then its mode and times.
    False when it is no longer a regular file there (nothing copied)."""
    try:
        given = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                        dir_fd=src)
    except FileNotFoundError:
        # Gone since it was listed: jaato renames a session's files into place after the
        # session, even after the agent is ended. What is not there is not in the tree.
        return False
    try:
        if not stat.S_ISREG(os.fstat(given).st_mode):
            return False  # replaced since it was listed: a trap the arm failed on already
        made = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o600, dir_fd=out)
        try:
            for start, end in _data(given, st.st_size):
                _copy_range(given, made, start, end)
            os.ftruncate(made, st.st_size)
            os.fchmod(made, stat.S_IMODE(st.st_mode))
            os.utime(made, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(made)
    finally:
        os.close(given)
    return True


def _data(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The ranges of a file that hold data (SEEK_DATA/SEEK_HOLE); the whole file where the
    file system cannot tell."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole from `pos` on
                return
            start, end = pos, size
        yield start, min(end, size)
        pos = end


def _copy_range(given: int, made: int, start: int, end: int) -> None:
    pos = start
    while pos < end:
        try:
            done = os.copy_file_range(given, made, end - pos, pos, pos)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            done = os.pwrite(made, os.pread(given, min(end - pos, 1 << 20), pos), pos)
        if not done:
            return  # the file shrank since it was looked at
        pos += done


def _first_error(exc: BaseException) -> str:
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        first = exc.args[0][0] if exc.args[0] else None
        if first and len(first) == 3:
            return f"{first[0]}: {first[2]}"
    return str(exc)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@functools.cache
def _renameat2():
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except OSError:
        return None


def _swap(a: Path, b: Path) -> None:
    """Exchange two folders' names in one step; two renames where the kernel, the C
    library or the file system cannot."""
    exchange = _renameat2()
    if exchange is not None:
        if exchange(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(a))
    middle = a.parent / f".{a.name}-swap-{uuid.uuid4().hex[:8]}-state"
    os.rename(a, middle)
    os.rename(b, a)
    os.rename(middle, b)


RM_WAIT = 300.0  # for coreutils' rm on a tree too deep for shutil.rmtree
_SYSTEM_PATH = "/usr/bin:/bin"


def discard(path: Path) -> None:
    """W4: remove a workspace (and the daemon's state folders written beside it). Never
    raises: whatever the agent left there, links are removed, not followed."""
    path = Path(path)
    remove_tree(path)
    for stray in path.parent.glob(f".{path.name}-*-state"):
        remove_tree(stray)


def remove_tree(path: Path | str) -> None:
    """shutil.rmtree that a tree the agent shaped cannot defeat. Never raises."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        pass
    if not os.path.lexists(path):
        return
    # Python 3.12's rmtree recurses, and holds a descriptor, once per level: an agent can
    # nest folders deeper than the recursion limit or the descriptor limit allows (or
    # leave what rmtree cannot remove). coreutils' rm walks any depth with a bounded
    # number of descriptors, never following a link, and stays on the file system.
    rm = shutil.which("rm", path=_SYSTEM_PATH)
    if rm is None:
        return
    try:
        subprocess.run([rm, "-rf", "--one-file-system", "--", os.fspath(path)],
                       env={"PATH": _SYSTEM_PATH, "LC_ALL": "C"}, timeout=RM_WAIT,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        pass


class Bin:
    """Workspaces removed on a thread of their own: an arm's teardown hands its workspace
    over and goes on to the next arm instead of waiting for its tree to be deleted.
    `empty()` waits, boundedly, until everything handed over is gone."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, path: Path) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._drain, daemon=True,
                                                name="jaato-workspace-bin")
                try:
                    self._thread.start()
                except RuntimeError:  # no thread to be had (the process is at its limit)
                    self._thread = None
            if self._thread is not None:
                self._queue.put(path)
                return
        discard(path)  # removed here and now: slower, never lost

    def _drain(self) -> None:
        while (path := self._queue.get()) is not None:
            try:
                discard(path)
            except Exception:  # noqa: BLE001 - one workspace must not stop the others'
                pass  # the run's end tries it again

    def empty(self, timeout: float) -> bool:
        """True when every workspace handed over has been removed within `timeout`."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return True
            self._queue.put(None)
        thread.join(timeout)
        return not thread.is_alive()
