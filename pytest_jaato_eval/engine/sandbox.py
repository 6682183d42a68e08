"""The agent's confinement: the private daemon, and so every runner and tool below it, in a
bubblewrap sandbox.

jaato runs the agent's tools in runner processes its daemon forks (from one warm template),
so the unit we can confine without reaching into jaato is the daemon's whole tree. Inside it:

- the file system is the host's, read-only, with the folders that hold secrets or answers
  hidden under empty tmpfs mounts (the pytest rootdir with the checkout, the task folders,
  the store's folder, HOME) and only the daemon's own folder, the arms' folder and a private
  /tmp writable: the agent writes its workspace and nothing the harness grades with;
- a pid namespace of its own: pytest, the graders, other workers' daemons and every other
  process on the machine are invisible and out of reach of a signal; `/proc/<ancestor>/environ`
  names nothing outside the sandbox;
- no capabilities: root inside is an ordinary user to the kernel (no ptrace of the daemon, no
  mounts, no reading other users' files);
- when the sandbox's first process ends, the kernel ends every process left in its namespace,
  so nothing the agent started outlives the daemon, whoever kills what.

Where bubblewrap is missing or the kernel refuses its namespaces, there is no sandbox
(`sandbox: none` in the header and in every record); docs/security.md says what an
unconfined agent can do.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

BWRAP = "bwrap"
NONE = "none"
PROBE_WAIT = 30.0  # s: one bwrap start, on a loaded machine
OOM_SCORE_ADJ = 1000  # the most the kernel's OOM killer can prefer a process
_SYSTEM = tuple(Path(p) for p in ("/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc",
                                   "/proc", "/dev", "/sys", "/var", "/opt"))


@dataclass(frozen=True)
class Sandbox:
    """A working bubblewrap: `command` wraps a program's argv in it."""

    bwrap: str
    name = BWRAP

    def command(self, argv: list[str], *, writable: list[Path], hidden: list[Path],
                tmp: Path, readable: Sequence[Path] = (),
                sealed: tuple[Path, Path] | None = None) -> list[str]:
        """`argv` run confined: `writable` folders read-write at their own paths, `tmp` as
        /tmp, `hidden` folders empty and read-only, everything else read-only; the Python
        that runs it and its packages, and `readable`, stay readable under a hidden folder;
        `sealed` is (an execute-only copy, the program it stands in for): `seal_interpreter`."""
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        hidden = _outermost([Path("/tmp"), *hidden])[1:]  # /tmp is the private one already
        for folder in _parents_first(hidden):
            args += ["--tmpfs", str(folder)]
        args += ["--bind", str(tmp), "/tmp"]
        # after the private /tmp: an interpreter (a checkout's venv) may live under /tmp
        for folder in _parents_first([*python_folders(), *readable]):
            args += ["--ro-bind", str(folder), str(folder)]
        if sealed is not None:
            args += ["--ro-bind", str(sealed[0]), str(sealed[1])]
        for folder in _parents_first(writable):
            args += ["--bind", str(folder), str(folder)]
        for folder in _parents_first(hidden):  # once what is mounted inside them is in place
            args += ["--remount-ro", str(folder)]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--"]
        return args + argv


# The first process of a grader's sandbox: it runs the command and tells a signal's death
# apart from an exit of 128 + N (bubblewrap reports both alike) on a descriptor the command
# never holds. It runs the sealed interpreter, so nothing in the sandbox reaches that
# descriptor through /proc.
_REPORTER = ("import os, sys\n"
             "fd = int(sys.argv[1])\n"
             "try:  # the machine's OOM killer ends what the grader runs before anything else\n"
             f"    open('/proc/self/oom_score_adj', 'w').write('{OOM_SCORE_ADJ}')\n"
             "except OSError:\n"
             "    pass\n"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    os.close(fd)\n"
             "    try:\n"
             "        try:\n"
             "            os.execvp(sys.argv[2], sys.argv[2:])\n"
             "        except OSError as exc:  # a script with no #! line: the shell's, as execvp(3)\n"
             "            if exc.errno != 8:\n"
             "                raise\n"
             "            os.execv('/bin/sh', ['/bin/sh', *sys.argv[2:]])\n"
             "    except OSError as exc:\n"
             "        print(f'{sys.argv[2]}: {exc.strerror}', file=sys.stderr)\n"
             "        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)\n"
             "status = os.waitpid(pid, 0)[1]\n"
             "if os.WIFSIGNALED(status):\n"
             "    os.write(fd, b'%d' % os.WTERMSIG(status))\n"
             "    sys.exit(128 + os.WTERMSIG(status))\n"
             "sys.exit(os.waitstatus_to_exitcode(status))\n")


@dataclass(frozen=True)
class Confinement:
    """The agent's sandbox, for the harness's own processes that touch what the agent left:
    the script graders, processors and drivers. They see what the agent saw (the same
    folders hidden), the harness's copies they grade with besides, and write only what they
    are given and a /tmp of their own, so a link the agent planted or a program of its that a
    grader runs reaches no further than the agent itself could."""

    sandbox: Sandbox
    hidden: tuple[Path, ...]
    readable: tuple[Path, ...]
    scratch: Path  # where each process's private /tmp is made: a folder the agent cannot see
    sealed: tuple[Path, Path]  # seal_interpreter's: the reporter's interpreter
    python: str = sys.executable

    @contextlib.contextmanager
    def command(self, argv: list[str], *, writable: Sequence[Path],
                readable: Sequence[Path] = (), lend: bool = True) -> Iterator["Wrapped"]:
        """`argv` wrapped, for as long as it runs (its /tmp is removed after). `lend`: what
        the agent's sandbox keeps readable for its daemon (jaato's own folder) stays readable
        here too: a driver's sessions may need it, a grader never does."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=self.scratch))
        status, signalled = tmp.with_name(tmp.name + ".status"), tmp.with_name(tmp.name + ".signal")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        fds = (os.open(status, flags, 0o600), os.open(signalled, flags, 0o600))
        try:
            reported = [self.python, "-I", "-S", "-c", _REPORTER, str(fds[1]), *argv]
            wrapped = self.sandbox.command(reported, writable=list(writable),
                                           hidden=list(self.hidden), tmp=tmp,
                                           readable=[*(self.readable if lend else ()),
                                                     *readable],
                                           sealed=self.sealed)
            # its /tmp is its own: a TMPDIR of the host's may be hidden from it, or missing
            yield Wrapped([wrapped[0], "--json-status-fd", str(fds[0]),
                           "--setenv", "TMPDIR", "/tmp", *wrapped[1:]], fds, status, signalled)
        finally:
            for fd in fds:
                os.close(fd)
            for path in (status, signalled):
                path.unlink(missing_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Wrapped:
    """A command as it is started: its argv, the descriptors it must inherit, and where
    bubblewrap says whether the command itself ran and the reporter how it ended (None: not
    confined)."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    status: Path | None = None
    signalled: Path | None = None

    def returncode(self, code: int) -> int:
        """The command's own return code, as Popen gives one: -N when a signal ended it."""
        if self.signalled is None:
            return code
        try:
            said = self.signalled.read_text()[:8].strip()
        except OSError:
            return code
        return -int(said) if said.isdigit() else code

    def ran(self) -> bool:
        """Whether its exit code is the command's own: bubblewrap writes one only for a
        command it started, never for its own failure to set the sandbox up."""
        if self.status is None:
            return True
        try:
            return '"exit-code"' in self.status.read_text(errors="replace")[-4096:]
        except OSError:
            return False


def hideable(folders: list[Path]) -> list[Path]:
    """The folders worth hiding: real ones, never the root or a system folder (hiding /usr
    would hide the Python that runs the daemon; such a run is not confined there)."""
    out = []
    for folder in folders:
        try:
            folder = Path(folder).resolve()
        except OSError:
            continue
        if folder.is_dir() and not any(folder == s or s.is_relative_to(folder)
                                       for s in _SYSTEM):
            out.append(folder)
    return out


def python_folders() -> list[Path]:
    """What the daemon's interpreter reads: the venv and the Python it was made from."""
    return [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}
            if Path(p).is_dir()]


def seal_interpreter(folder: Path, python: str) -> tuple[Path, Path]:
    """An execute-only copy of the `python` program (a venv's `python` is a link to it) made
    in `folder`, one the sandbox hides; and the program, for `Sandbox.command(sealed=)`.

    Bound over the interpreter inside the sandbox, it makes every Python process there (the
    daemon, its runner template and runners, which all hold the daemon's environment with
    the provider keys) one the kernel marks not dumpable at exec, because its program cannot
    be read: its /proc/<pid>/environ, memory and descriptors are closed to every other
    process of the user that lacks CAP_SYS_PTRACE, which nothing in the sandbox has.
    """
    program = Path(python).resolve()
    copy = Path(folder) / f"sealed-{program.name}"
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        part = copy.with_name(copy.name + ".part")
        shutil.copyfile(program, part)
        part.chmod(0o111)
        part.replace(copy)
    return copy, program


def _outermost(folders: list[Path]) -> list[Path]:
    """The first folder, then each other one not inside one kept before it."""
    kept: list[Path] = []
    for folder in folders[:1] + _parents_first(folders[1:]):
        if not any(folder.is_relative_to(k) for k in kept):
            kept.append(folder)
    return kept


def _parents_first(folders: list[Path]) -> list[Path]:
    """Each folder once, a parent mounted before what is inside it."""
    return sorted({Path(f) for f in folders}, key=lambda p: len(p.parts))


# Tasks (processes and threads) of one sandbox: jaato's daemon and runners use ~200, and the
# zombies of what an agent left count too (the daemon adopts orphans and does not reap them).
PIDS_MAX = 4096
CGROUP_FS = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory")


@dataclass
class Limits:
    """The cgroup one sandbox runs in: at most `PIDS_MAX` tasks and the memory it is given
    (`set_memory`), however the agent forks or allocates, so it can fill neither the
    machine's pid table nor its memory under other arms, pytest and the machine's other
    work; and the kernel's own counts of what it refused (forks, OOM kills).

    Where the run may write a controller: cgroup v1 (a folder per controller, made inside
    this process's own cgroup, else at the hierarchy's root) or v2 (a folder of both, made
    beside this process's cgroup where its parent hands the controllers down, else at the
    root). Where neither is writable (not root, nothing delegated) there is none.
    """

    folders: dict[str, Path]  # controller -> its folder (one folder for both under v2)
    fds: tuple[int, ...] = ()  # cgroup.procs of each folder, open for join()
    v2: bool = False

    @classmethod
    def make(cls, name: str, fs: Path = CGROUP_FS, own: str | None = None) -> "Limits | None":
        """`name` starts `jaato-eval-<pid>-`: a later run removes the empty cgroup of a run
        whose process is gone (killed before it could remove it). `fs` and `own` (the text
        of /proc/self/cgroup) are the machine's unless a test gives others."""
        own = _read(Path("/proc/self/cgroup")) if own is None else own
        folders: dict[str, Path] = {}
        for controller in CONTROLLERS:  # v1: each controller a hierarchy of its own
            root = fs / controller
            if (root / "cgroup.procs").exists() and not (root / "cgroup.controllers").exists():
                place = _v1_place(root, controller, own)
                folder = _made(place / name) if place is not None else None
                if folder is not None:
                    folders[controller] = folder
        v2 = False
        if not folders:
            place = _v2_place(fs, own)
            folder = _made(place / name) if place is not None else None
            if place is not None and folder is not None:
                handed = _read(place / "cgroup.subtree_control").split()
                folders, v2 = {c: folder for c in CONTROLLERS if c in handed}, True
        if not folders:
            return None
        try:
            fds = tuple(os.open(f / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
                        for f in sorted(set(folders.values())))
        except OSError:
            cls(folders, v2=v2).remove()
            return None
        limits = cls(folders, fds, v2)
        if "pids" in folders:
            limits._write("pids", "pids.max", f"{PIDS_MAX}\n")
        return limits

    @property
    def memory(self) -> bool:
        """Whether the memory it may use is bounded here."""
        return "memory" in self.folders

    def join(self) -> None:
        """In the sandbox's first process, before exec: it and all it starts are held."""
        for fd in self.fds:
            os.write(fd, b"0")

    def set_memory(self, limit: int) -> str | None:
        """Bound what its processes may hold in memory (swap included, where there is any);
        None when done, else why not (a limit below what they hold now, which the kernel
        cannot reclaim, is refused)."""
        if not self.memory:
            return "no memory controller"
        if self.v2:
            return self._write("memory", "memory.max", f"{limit}\n") or self._write(
                "memory", "memory.swap.max", "0\n", missing_ok=True)
        # v1: the memory+swap limit may never be below the memory one: raise it first, lower
        # it last
        current = _number(_read(self.folders["memory"] / "memory.limit_in_bytes"))
        order = [("memory.memsw.limit_in_bytes", True), ("memory.limit_in_bytes", False)]
        if current is not None and limit < current:
            order.reverse()
        for file, optional in order:
            failed = self._write("memory", file, f"{limit}\n", missing_ok=optional)
            if failed:
                return failed
        return None

    def oom_kills(self) -> int:
        """How many of its processes the kernel's OOM killer ended, at its memory limit."""
        if not self.memory:
            return 0
        text = _read(self.folders["memory"] / ("memory.events" if self.v2 else "memory.oom_control"))
        return _counter(text, "oom_kill")

    def refused(self) -> int:
        """How many forks the pids limit has refused so far (the kernel's own count)."""
        return _counter(_read(self.folders["pids"] / "pids.events"), "max") if (
            "pids" in self.folders) else 0

    def remove(self) -> None:
        """Once everything in it has ended (a cgroup with tasks cannot be removed)."""
        for fd in self.fds:
            os.close(fd)
        self.fds = ()
        for folder in set(self.folders.values()):
            try:
                folder.rmdir()
            except OSError:
                pass

    def _write(self, controller: str, file: str, text: str, missing_ok: bool = False) -> str | None:
        path = self.folders[controller] / file
        try:
            path.write_text(text)
        except FileNotFoundError:
            return None if missing_ok else f"{path}: missing"
        except OSError as exc:
            return f"{path}: {exc.strerror or exc}"
        return None


def prefer_for_oom() -> None:
    """In a sandbox's first process, before exec: the kernel's OOM killer, when the whole
    machine runs short, ends its processes (which inherit this) before any other, pytest's
    included. Raising it needs no privilege."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(f"{OOM_SCORE_ADJ}\n")
    except OSError:
        pass


def _v1_place(root: Path, controller: str, own: str) -> Path | None:
    """Where a v1 controller's cgroup goes: inside this process's own cgroup (so a limit set
    above it, a container's, still holds), else at the hierarchy's root."""
    mine = None
    for line in own.splitlines():
        _, names, path = (line.split(":", 2) + ["", ""])[:3]
        if controller in names.split(","):
            mine = root / path.strip().lstrip("/")
    for place in dict.fromkeys(p for p in (mine, root) if p is not None):
        _sweep(place)
        if os.access(place, os.W_OK) and (place / "cgroup.procs").exists():
            return place
    return None


def _v2_place(fs: Path, own: str) -> Path | None:
    """Where a v2 cgroup goes: beside this process's own (its parent holds no process and
    may hand controllers down: how a delegated subtree works), else at the root; only where
    the pids or memory controller is handed down and the folder is writable."""
    unified = fs if (fs / "cgroup.controllers").exists() else fs / "unified"
    mine = None
    for line in own.splitlines():
        if line.startswith("0::"):
            path = line[3:].strip().lstrip("/")
            mine = (unified / path).parent if path else None
    for place in dict.fromkeys(p for p in (mine, unified) if p is not None):
        _sweep(place)
        handed = _read(place / "cgroup.subtree_control").split()
        if any(c in handed for c in CONTROLLERS) and os.access(place, os.W_OK):
            return place
    return None


def _sweep(place: Path) -> None:
    """Remove the empty cgroups of runs whose process is gone."""
    try:
        left = list(place.glob("jaato-eval-*-*"))
    except OSError:
        return
    for folder in left:
        pid = folder.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                folder.rmdir()
            except OSError:
                pass


def _made(folder: Path) -> Path | None:
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder


def _names(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir()}
    except OSError:
        return set()


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, count = line.partition(" ")
        if name == key and count.strip().isdigit():
            return int(count)
    return 0


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@functools.cache
def probe(wanted: str = "auto") -> tuple[Sandbox | None, str]:
    """The sandbox this machine gives, and a line that says what it is or why there is none.

    `wanted`: "auto" (bubblewrap where it works), "bwrap" (the same; the caller refuses to
    run without it) or "none". Probed once per process: one throwaway bwrap start.
    """
    if wanted == NONE:
        return None, "none: turned off (--jaato-sandbox=none); the agent runs as you"
    exe = shutil.which(BWRAP)
    if exe is None:
        return None, ("none: bubblewrap (bwrap) is not installed; the agent runs as you "
                      "(apt-get install bubblewrap, or see docs/security.md)")
    try:
        done = subprocess.run(
            [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--cap-drop", "ALL", "--die-with-parent", "--", "/bin/sh", "-c", "exit 0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            timeout=PROBE_WAIT, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"none: bubblewrap could not start ({exc}); the agent runs as you"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return None, (f"none: bubblewrap is refused here ({why[-1] if why else done.returncode}:"
                      f" user or pid namespaces unavailable); the agent runs as you")
    return Sandbox(exe), f"{BWRAP}: the agent's tools see only their workspace and its daemon"
