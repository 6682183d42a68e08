"""Clean-up that owns only what it made.

Two kinds of leftovers, and the one rule for both: remove a thing only when it is
provably ours (an exact path we recorded), or provably orphaned (its owner, named by
pid and start time in the folder itself, is gone).

- The daemon gives every session a `<tmp>/jaato-<session id>/` folder and never
  removes it. We remove exactly those of our own sessions (ids we recorded), and
  only when the folder's trace names the arm's exact workspace path: session ids
  are timestamps that another daemon may give out in the same second.
- A pytest killed outright (`kill -9`) never runs its clean-up, so its run folder
  stays. Every run folder holds an owner file; a later run removes the folders of
  owners that are gone, after ending the processes that run left (found by their
  run marker, see processes.py). A live run's folder is never touched.
- A daemon that is not ours (`--jaato-socket`) may write a session's trackers into its
  workspace after the run removed the whole folder, making the path again, owner file
  and all gone. Such a remnant is removed by a later run once it is old enough that
  no daemon still writes there, and only when it holds nothing but such late writes.
"""
from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
import time
from pathlib import Path

from . import processes
from .engine.files import read_bounded
from .number import is_int
from .workspace import AGENTS, remove_tree

log = logging.getLogger(__name__)

OWNER_FILE = "owner.json"
RUN_PREFIX = "jaato-eval-"
TRACE_CAP = 8 * 1024 * 1024
REMNANT_AGE = 600.0  # seconds: past any daemon's unload grace (jaato's default is 60 s)
REMNANT_FILES = 20_000  # entries looked at before a folder is judged not a remnant
LATE_TRACKER = ".artifact_tracker.json"
_SESSION_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def write_owner(run_dir: Path, run_id: str) -> None:
    """Name this process (pid and start time) as the owner of `run_dir`."""
    me = processes.Ident.of(os.getpid())
    body = {"pid": os.getpid(), "started": me.started if me else None, "run_id": run_id}
    tmp = Path(run_dir) / f".{OWNER_FILE}.tmp"
    tmp.write_text(json.dumps(body), encoding="utf-8")
    tmp.replace(Path(run_dir) / OWNER_FILE)


def _owner(run_dir: Path) -> dict | None:
    raw = read_bounded(run_dir / OWNER_FILE, 4096)
    try:
        body = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def owner_gone(run_dir: Path) -> bool:
    """True only when the folder names its owner and that very process no longer runs."""
    body = _owner(run_dir)
    if body is None:
        return False  # no owner file (being made, or not ours): never removed
    pid, started = body.get("pid"), body.get("started")
    if not is_int(pid) or not isinstance(started, (int, float)):
        return False
    return not processes.Ident(pid, float(started)).alive()


def sweep_dead_runs(tmp_root: str | Path | None = None, keep: tuple[Path, ...] = ()) -> list[Path]:
    """Remove run folders under `tmp_root` whose owner is gone; return what was removed.

    Processes such a run left (its grader and driver trees, its daemon and runners)
    are ended first, by their run marker; kept workspaces of a dead run are kept.
    """
    root = Path(tmp_root or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        candidates = [p for p in root.glob(f"{RUN_PREFIX}*") if p not in keep]
    except OSError:
        return removed
    for folder in candidates:
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if is_late_remnant(folder):
            remove_tree(folder)
            removed.append(folder)
            continue
        if not owner_gone(folder):
            continue
        run_id = (_owner(folder) or {}).get("run_id")
        if isinstance(run_id, str) and run_id:
            processes.kill_run_leftovers(run_id)
        _remove_run_folder(folder)
        removed.append(folder)
    return removed


def is_late_remnant(folder: Path, now: float | None = None) -> bool:
    """A run folder an outside daemon made again after the run removed it: no owner file,
    nothing in it but what such a daemon writes late (`_late_write`, in an xdist worker's
    folder too) and the folders on their paths, and nothing changed for REMNANT_AGE. A
    kept workspace holds more (the `.env` the run wrote, the fixture), so it never matches."""
    oldest_change = (time.time() if now is None else now) - REMNANT_AGE
    try:
        if (folder / OWNER_FILE).exists() or folder.lstat().st_mtime > oldest_change:
            return False
        folders: set[Path] = set()
        on_a_late_path: set[Path] = set()
        for seen, path in enumerate(folder.rglob("*")):
            st = path.lstat()
            if seen >= REMNANT_FILES or st.st_mtime > oldest_change:
                return False
            parts = path.relative_to(folder).parts
            if parts[0].startswith(RUN_PREFIX):  # an xdist worker's folder in the run's
                parts = parts[1:]
            if stat.S_ISDIR(st.st_mode):
                folders.add(path)
            elif stat.S_ISREG(st.st_mode) and _late_write(parts):
                on_a_late_path.update(p for p in path.parents if p != folder)
            else:
                return False  # a link, a FIFO, or any other file
        return bool(on_a_late_path) and folders <= on_a_late_path
    except OSError:
        return False


def _late_write(parts: tuple[str, ...]) -> bool:
    """`workspaces/<arm>/.jaato/.artifact_tracker.json` or `.../.jaato/sessions/<id>.json`:
    what a daemon writes into a session's workspace when it lets the session go."""
    if parts[1:2] == (AGENTS,):  # the agents' folder, where a session's workspace was
        parts = parts[:1] + parts[2:]
    if len(parts) < 4 or parts[0] != "workspaces" or parts[2] != ".jaato":
        return False
    return parts[3:] == (LATE_TRACKER,) or (
        len(parts) == 5 and parts[3] == "sessions" and parts[4].endswith(".json"))


def _remove_run_folder(folder: Path) -> None:
    """Everything but kept workspaces (a user asked for those); the folder if then empty."""
    for child in list(folder.iterdir()):
        if child.name == "workspaces" and child.is_dir() and not child.is_symlink() and any(
                child.iterdir()):
            continue
        if child.is_dir() and not child.is_symlink():
            if (child / "workspaces").is_dir():  # an xdist worker's folder
                _remove_run_folder(child)
            else:
                remove_tree(child)
        else:
            child.unlink(missing_ok=True)
    try:
        folder.rmdir()  # only when nothing kept is left in it
    except OSError:
        pass


def remove_session_tmp(sessions: list[tuple[str, Path]], tmp_root: str | Path | None = None) -> int:
    """Remove `<tmp>/jaato-<sid>/` of each (session id, arm workspace) we recorded.

    Only a real folder of ours, and only when its trace names that arm's workspace
    as a whole path (never a prefix of another path).
    """
    # The daemon's temporary folder is its own: ours, or the system default.
    roots = [Path(tmp_root)] if tmp_root else sorted({Path(tempfile.gettempdir()), Path("/tmp")})
    removed = 0
    for root, (sid, ws) in ((r, s) for r in roots for s in sessions):
        if not isinstance(sid, str) or not _SESSION_ID.fullmatch(sid) or ".." in sid:
            continue
        folder = root / f"jaato-{sid}"
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
            if not _names_workspace(folder, Path(ws)):
                continue
        except OSError:
            continue
        remove_tree(folder)
        removed += 1
    return removed


def _names_workspace(folder: Path, ws: Path) -> bool:
    whole = re.compile(re.escape(str(ws)).encode() + rb"(?![^/\s\"',;:)\]}])")
    for trace in list(folder.glob("*.log"))[:16]:
        raw = read_bounded(trace, TRACE_CAP)
        if raw is not None and whole.search(raw):
            return True
    return False
