"""An arm's snapshot (R4): what its graders graded, kept beside the store so that it can be
graded again without running the agent again (R5, docs/regrading.md).

One gzip-compressed tar file per arm in `<store stem>.snapshots/` beside the store
(`results.jsonl` -> `results.snapshots/`); the record's `snapshot` names the file. It
holds `snapshot.json` (the run's facts a grader reads: the agent's run as the engine
observed it — payload, history, usage, how it ended, a driver's exit and output —, the
tool-call ledger, the cascade id, the parameters, the sample, the agent's side of the
arm) and `workspace/`, the workspace as the agent left it, taken after the agent's run
ended and before the first grader ran. The daemon may still write its own files there (a
session record renamed into place, a log appended to): a file is kept as it was read, and one
gone since it was listed is not kept.

The workspace is the agent's, so it is read as an adversary's: walked without following
a link (a link is kept as a link, its target as written), every file opened with
O_NOFOLLOW|O_NONBLOCK and read only when it is a regular file, a FIFO, socket or device
refused (the snapshot is then left out, said in one line: never the arm's failure), and
the whole bounded by a size cap before anything is compressed. Extracting one never
writes outside its target: tarfile's `data` filter (no absolute name, no `..`, no link
pointing out, no special file, no high permission bits), and before it our own checks
(no hard link, no name twice, no name below a link, a bounded number and size of
members), so nothing is written through a link whatever the archive holds.
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import files as tree_files
from . import transcripts

FORMAT = "pytest-jaato-eval snapshot 1"
SUFFIX = ".tar.gz"
FACTS = "snapshot.json"
ROOT = "workspace"
COMPRESSLEVEL = 6
DEFAULT_MAX_MB = 32          # the workspace's files and the facts, before compression
MB = 1_000_000
MAX_ENTRIES = 100_000        # files, folders and links: as many as a fixture may hold
# The longest path below the workspace a snapshot keeps: a restore makes each member by its
# path, under a folder of its own (room left for it), and the kernel refuses a longer one.
MAX_PATH = os.pathconf("/", "PC_PATH_MAX") - 1024 if hasattr(os, "pathconf") else 3072
MAX_FACTS_BYTES = 256 * MB   # what a reader takes of `snapshot.json`
MAX_MEMBER_BYTES = 4096 * MB  # what a reader takes of a whole snapshot, unpacked
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@#+=-]{0,160}\.tar\.gz$")
_KINDS = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"))


# -- where ------------------------------------------------------------------------------------
def folder_of(store: Path | str) -> Path:
    """The snapshots folder of a store: `results.jsonl` -> `results.snapshots/`."""
    store = Path(store)
    return store.with_name(f"{store.stem}.snapshots")


def file_name(arm_id: str, run_id: str | None) -> str:
    """Readable, unique per (run, arm), never a path: the transcript's name, as a tar."""
    return transcripts.file_name(arm_id, run_id)[:-len(transcripts.SUFFIX)] + SUFFIX


def valid_name(name: Any) -> bool:
    """A record's `snapshot` is a file name in the folder, nothing else."""
    return type(name) is str and bool(_NAME.match(name)) and ".." not in name


def max_bytes(task_max_mb: float | None, ini_max_mb: float | None) -> int:
    """The cap of a task's snapshots in bytes: the task's `snapshot.max_mb`, else the ini's
    `jaato_snapshot_max_mb`, else DEFAULT_MAX_MB; 0 keeps none."""
    mb = task_max_mb if task_max_mb is not None else (
        ini_max_mb if ini_max_mb is not None else DEFAULT_MAX_MB)
    return int(mb * MB)


# -- taking one -------------------------------------------------------------------------------
class LeftOut(Exception):
    """No snapshot of this arm: the one line its record says (`snapshot_note`)."""


@dataclass
class Taken:
    path: Path     # the compressed file
    entries: int   # files, folders and links of the workspace
    read: int      # bytes read: the workspace's files and the facts
    size: int      # the compressed file's size


def _shown(rel: str) -> str:
    return rel.encode("utf-8", "backslashreplace").decode()[:200]


def _walk(workspace: Path | int, budget: int) -> tuple[int, int]:
    """(how many entries are below the workspace, the regular files' bytes), every entry
    looked at from its folder's descriptor (files.walk_tree: never into a link, never by a
    path the agent could have changed). Raises LeftOut on a special file, a path past
    MAX_PATH, past MAX_ENTRIES, or past `budget` bytes."""
    count = total = 0
    for entry in tree_files.walk_tree(workspace, open_up=True, unlisted=_unlisted):
        mode, rel = entry.st.st_mode, entry.rel
        if stat.S_ISREG(mode):
            total += entry.st.st_size
        elif not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            kind = next((k for test, k in _KINDS if test(mode)), "special file")
            raise LeftOut(f"the workspace holds a {kind}, {_shown(rel)!r}: a snapshot "
                          f"keeps files, folders and links only")
        count += 1
        if len(os.fsencode(rel)) > MAX_PATH:
            raise LeftOut(f"the workspace holds a path longer than {MAX_PATH:,} bytes, which a "
                          f"restore could not make (snapshots.MAX_PATH), {_shown(rel)!r}")
        if count > MAX_ENTRIES:
            raise LeftOut(f"the workspace holds more than {MAX_ENTRIES:,} files, folders "
                          f"and links, the snapshot's bound (snapshots.MAX_ENTRIES)")
        if total > budget:
            raise LeftOut(over_cap(total, budget))
    return count, total


def _unlisted(rel: str, exc: OSError) -> None:
    raise LeftOut(f"the workspace's folder {_shown(rel)!r} cannot be listed: "
                  f"{exc.strerror or exc}")


def over_cap(size: int, budget: int) -> str:
    return (f"the workspace and the run's facts hold more than {budget / MB:,.1f} MB "
            f"({size / MB:,.1f} MB read so far), over the snapshot cap (task.yaml "
            f"`snapshot: {{max_mb: N}}`, ini `jaato_snapshot_max_mb`)")


def _info(name: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    return info


def take(workspace: Path, facts: dict[str, Any], dest: Path, cap: int,
         at: int | None = None) -> Taken:
    """Write the snapshot of `workspace` with `facts` to `dest` (whole, or nothing there).
    `at`: the descriptor held on the workspace as made, which the tree is read through (a
    folder the agent put at its path since is never read). Raises LeftOut, with the line
    the record says, when it is not taken."""
    root = workspace if at is None else at
    data = json.dumps(facts, ensure_ascii=False, default=str,
                      separators=(",", ":")).encode("utf-8", "surrogatepass")
    if len(data) > cap:
        raise LeftOut(over_cap(len(data), cap))
    entries, _ = _walk(root, cap - len(data))
    budget = [cap - len(data)]  # what the files may still hold, as they are read
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.partial")
    try:
        with open(partial, "xb") as raw, tarfile.open(
                fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT,
                compresslevel=COMPRESSLEVEL) as tar:
            info = tarfile.TarInfo(FACTS)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
            top = os.fstat(at) if at is not None else os.lstat(workspace)
            tar.addfile(_info(ROOT, top, tarfile.DIRTYPE))
            for entry in tree_files.walk_tree(root, open_up=True, unlisted=_unlisted):
                _add(tar, entry, budget, cap)
        os.replace(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return Taken(dest, entries, cap - budget[0], dest.stat().st_size)


def _add(tar: tarfile.TarFile, entry: tree_files.Entry, budget: list[int], cap: int) -> None:
    """One entry, read from its folder's descriptor by its own name alone."""
    rel, st = entry.rel, entry.st
    name = f"{ROOT}/{rel}"
    if stat.S_ISDIR(st.st_mode):
        tar.addfile(_info(name, st, tarfile.DIRTYPE))
        return
    if stat.S_ISLNK(st.st_mode):
        info = _info(name, st, tarfile.SYMTYPE)
        try:
            info.linkname = os.readlink(entry.name, dir_fd=entry.folder)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise LeftOut(f"the link {_shown(rel)!r} cannot be read: {exc.strerror}") from None
        tar.addfile(info)
        return
    try:
        fd = os.open(entry.name, _OPEN, dir_fd=entry.folder)
    except FileNotFoundError:  # gone since it was listed: not in the workspace any more
        return
    except OSError as exc:  # replaced by a link since it was listed, or unreadable
        raise LeftOut(f"{_shown(rel)!r} cannot be opened as a regular file: "
                      f"{exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:  # buffered: read(n) reads until n bytes or the end
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):
            raise LeftOut(f"{_shown(rel)!r} is no longer a regular file")
        os.set_blocking(fd, True)
        # Read whole, then written: the daemon may still append to its log in the
        # workspace, and the file is kept as it was read.
        content = fh.read(budget[0] + 1)
    if len(content) > budget[0]:
        raise LeftOut(over_cap(cap - budget[0] + len(content), cap))
    budget[0] -= len(content)
    info = _info(name, now, tarfile.REGTYPE)
    info.size = len(content)
    tar.addfile(info, io.BytesIO(content))


# -- the folder -------------------------------------------------------------------------------
def put(store: Path | str, name: str, source: Path, move: bool) -> Path:
    """Bring one arm's snapshot into the store's folder: moved from where the arm staged it,
    or (a regrade) linked or copied from another store's folder. Whole or not at all."""
    if not valid_name(name):
        raise ValueError(f"not a snapshot file name: {name!r}")
    folder = transcripts.own_folder(store, folder_of, "snapshot")
    st = os.lstat(source)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{source}: not a regular file")
    target = folder / name
    partial = folder / f".{name}.partial"
    partial.unlink(missing_ok=True)
    if move:
        try:
            os.replace(source, target)
            return target
        except OSError:  # another file system: copied, then the staged file goes
            pass
    try:
        os.link(source, partial)  # a snapshot is never written to again: one file, two names
    except OSError:
        shutil.copyfile(source, partial, follow_symlinks=False)
    os.replace(partial, target)
    if move:
        os.unlink(source)
    return target


def follow(store: Path, moved_to: Path) -> None:
    """The store was set aside as `moved_to`: its snapshots go with it."""
    transcripts.follow(store, moved_to, folder=folder_of)


def copy(from_store: Path, to_store: Path, name: Any) -> bool:
    """Copy one snapshot from one store's folder to another's (merge); False when the input
    has none by that name."""
    if not valid_name(name):
        return False
    src = folder_of(from_store) / name
    if not src.is_file() or src.is_symlink():
        return False
    put(to_store, name, src, move=False)
    return True


def path_of(store: Path | str, name: Any) -> Path:
    """Where a record's snapshot is; raises Unreadable when its name is none."""
    if name is None:
        raise Unreadable("no snapshot kept")
    if not valid_name(name):
        raise Unreadable(f"the record's snapshot {str(name)[:80]!r} is not a file name; "
                         f"not read")
    return folder_of(store) / name


# -- reading one back -------------------------------------------------------------------------
class Unreadable(Exception):
    """The one line a regrade says instead of grading (the arm is BLOCKED)."""


@dataclass
class Restored:
    facts: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # what was not recreated, and why


def _open(path: Path) -> tarfile.TarFile:
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror or exc}") from None
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        fh.close()
        raise Unreadable(f"{path}: not a regular file")
    os.set_blocking(fd, True)
    try:
        return tarfile.open(fileobj=fh, mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as exc:
        fh.close()
        raise Unreadable(f"{path}: not a snapshot ({type(exc).__name__})") from None


def read_facts(path: Path) -> dict[str, Any]:
    """The facts of a snapshot (its first member), bounded; raises Unreadable."""
    with _open(path) as tar:
        return _facts(tar, path)


def _facts(tar: tarfile.TarFile, path: Path) -> dict[str, Any]:
    try:
        first = tar.next()
        if first is None or first.name != FACTS or not first.isreg():
            raise Unreadable(f"{path}: not a snapshot (no {FACTS} first)")
        if first.size > MAX_FACTS_BYTES:
            raise Unreadable(f"{path}: {FACTS} is larger than {MAX_FACTS_BYTES:,} bytes")
        member = tar.extractfile(first)
        assert member is not None
        facts = json.loads(member.read(MAX_FACTS_BYTES))
    except (tarfile.TarError, OSError, EOFError, ValueError, RecursionError) as exc:
        raise Unreadable(f"{path}: not a snapshot ({type(exc).__name__})") from None
    if not isinstance(facts, dict) or facts.get("format") != FORMAT:
        raise Unreadable(f"{path}: not a snapshot this version reads (format "
                         f"{str(facts.get('format') if isinstance(facts, dict) else None)[:40]!r})")
    return facts


def restore(path: Path, dest: Path) -> Restored:
    """Recreate a snapshot's workspace in `dest` (an empty folder) and return its facts.
    Raises Unreadable when the file is not a snapshot or holds what no workspace may."""
    if any(os.scandir(dest)):
        raise Unreadable(f"{dest}: not empty; a snapshot is restored into an empty folder")
    with _open(path) as tar:
        facts = _facts(tar, path)
        try:
            members = _checked(tar.getmembers()[1:], path)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise Unreadable(f"{path}: not a snapshot ({type(exc).__name__})") from None
        restored = Restored(facts)

        def data(member: tarfile.TarInfo, where: str) -> tarfile.TarInfo | None:
            try:
                return tarfile.data_filter(member, where)
            except (tarfile.AbsoluteLinkError, tarfile.LinkOutsideDestinationError):
                restored.notes.append(f"the link {member.name!r} -> {member.linkname!r} "
                                      f"points out of the workspace: not recreated")
                return None
            except tarfile.FilterError as exc:
                raise Unreadable(f"{path}: {exc}") from None

        try:
            tar.extractall(dest, members=members, filter=data)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise Unreadable(f"{path}: cannot be restored: {exc}") from None
    _unchain(dest, restored)
    return restored


def _unchain(dest: Path, restored: Restored) -> None:
    """Links that lead out once they are all in place: the filter looks at each link as it
    is extracted, and a later one can turn an earlier one's way out (`k -> m1/m2/x`,
    `l -> k/../../..`, then `m1 -> .`). Each is resolved again, one name at a time from
    descriptors, and one that leads out of the workspace is removed, with a note."""
    out = []
    for entry in tree_files.walk_tree(dest):
        if stat.S_ISLNK(entry.st.st_mode) and tree_files.resolve(dest, entry.rel)[0] != tree_files.IN:
            out.append((entry.rel, os.readlink(entry.name, dir_fd=entry.folder)))
    for rel, target in out:
        try:
            os.unlink(os.path.join(dest, rel))
        except OSError as exc:
            raise Unreadable(f"{rel!r}: a link out of the workspace that cannot be removed: "
                             f"{exc.strerror}") from None
        restored.notes.append(f"the link {rel!r} -> {target!r} points out of the workspace "
                              f"once every link is in place: not recreated")


def _checked(members: list[tarfile.TarInfo], path: Path) -> list[tarfile.TarInfo]:
    """The workspace's members, named relative to it; what no snapshot of ours holds is
    refused here, before anything is written."""
    if len(members) > MAX_ENTRIES + 1:
        raise Unreadable(f"{path}: more than {MAX_ENTRIES:,} members")
    if not members or members[0].name != ROOT or not members[0].isdir():
        raise Unreadable(f"{path}: not a snapshot (no {ROOT}/ folder)")
    out, seen, links, total = [], set(), set(), 0
    for m in members[1:]:
        name = m.name
        if not name.startswith(ROOT + "/"):
            raise Unreadable(f"{path}: {name[:100]!r} is outside {ROOT}/")
        rel = name[len(ROOT) + 1:]
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") for p in parts) or rel in seen:
            raise Unreadable(f"{path}: {name[:100]!r} is not a name a snapshot holds")
        if not (m.isreg() or m.isdir() or m.issym()):
            raise Unreadable(f"{path}: {name[:100]!r} is neither a file, a folder nor a "
                             f"symlink")
        if any("/".join(parts[:i]) in links for i in range(1, len(parts))):
            raise Unreadable(f"{path}: {name[:100]!r} lies below a link")
        total += max(m.size, 0)
        if total > MAX_MEMBER_BYTES:
            raise Unreadable(f"{path}: unpacks to more than {MAX_MEMBER_BYTES:,} bytes")
        seen.add(rel)
        if m.issym():
            links.add(rel)
        out.append(m.replace(name=rel, deep=False))
    return out
