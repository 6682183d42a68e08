"""An arm's workspace: a fresh copy of the task's fixture (W1-W4)."""
from __future__ import annotations

import hashlib
import os
import queue
import shutil
import stat
import subprocess
import threading
from pathlib import Path
from typing import AbstractSet, Sequence
from urllib.parse import quote

from .task.tree import skipped_in_fixture

_MAX_NAME = 120


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

    def __init__(self, fixture: Path, leave_out: AbstractSet[str] = frozenset()):
        self.fixture = fixture
        self.leave_out = leave_out
        self.special: list[str] = []

    def __call__(self, directory: str, names: list[str]) -> set[str]:
        skip = {n for n in names if skipped_in_fixture(n)}
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


SPECIAL_WALK = 200_000  # entries looked at for special files: a bound on the walk, not a limit
SPECIAL_SHOWN = 20


def special_files(ws: Path, hidden: Sequence[Path] = (), readable: Sequence[Path] = (),
                  ) -> list[str]:
    """The traps in a workspace for what reads it (relative paths; a link is looked through,
    never walked into): FIFOs and device files, and links to one, which would block a grader
    until its timeout, turning a FAIL into a BLOCKED; and links into what the agent's sandbox
    hid from it (`hidden`, but for what stayed `readable` there), which a grader, running
    as the developer, would read or write through."""
    found: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(ws, followlinks=False):
        for name in dirs + files:
            seen += 1
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
                if stat.S_ISLNK(mode):  # a link to a FIFO anywhere is the same trap
                    if hidden and _reaches(path, hidden, readable):
                        mode = stat.S_IFIFO  # as much a trap
                    else:
                        mode = os.stat(path).st_mode
            except OSError:
                continue
            if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                found.append(os.path.relpath(os.path.join(folder, name), ws))
                if len(found) >= SPECIAL_SHOWN:
                    return found
        if seen >= SPECIAL_WALK:
            break
    return found


def _reaches(link: str, hidden: Sequence[Path], readable: Sequence[Path]) -> bool:
    target = Path(os.path.realpath(link))
    return any(target.is_relative_to(h) for h in hidden) and not any(
        target.is_relative_to(r) for r in readable)


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
                thread = threading.Thread(target=self._drain, daemon=True,
                                          name="jaato-workspace-bin")
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had (the process is at its limit)
                    thread = None
                self._thread = thread
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
