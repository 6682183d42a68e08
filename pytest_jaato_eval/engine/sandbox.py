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
                readable: Sequence[Path] = ()) -> Iterator["Wrapped"]:
        """`argv` wrapped, for as long as it runs (its /tmp is removed after)."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=self.scratch))
        status, signalled = tmp.with_name(tmp.name + ".status"), tmp.with_name(tmp.name + ".signal")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        fds = (os.open(status, flags, 0o600), os.open(signalled, flags, 0o600))
        try:
            reported = [self.python, "-I", "-S", "-c", _REPORTER, str(fds[1]), *argv]
            wrapped = self.sandbox.command(reported, writable=list(writable),
                                           hidden=list(self.hidden), tmp=tmp,
                                           readable=[*self.readable, *readable],
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
_CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))  # cgroup v1, then v2


@dataclass
class PidsLimit:
    """A pids cgroup for one sandbox: however the agent forks, the sandbox holds at most
    `PIDS_MAX` tasks, so it cannot fill the machine's pid table under other arms and runs.
    Where no pids controller can be written (not root, no cgroup), there is none."""

    folder: Path
    fd: int | None = None

    @classmethod
    def make(cls, name: str) -> "PidsLimit | None":
        """`name` starts `jaato-eval-<pid>-`: a later run removes the empty cgroup of a run
        whose process is gone (killed before it could remove it)."""
        for root in _CGROUP_ROOTS:
            for left in root.glob("jaato-eval-*-*"):
                pid = left.name.split("-")[2]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    cls(left).remove()
            if root == Path("/sys/fs/cgroup") and "pids" not in _read(root / "cgroup.subtree_control"):
                continue  # v2: only where the root already hands the controller down
            if not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
                continue
            folder = root / name
            try:
                folder.mkdir(exist_ok=True)
                (folder / "pids.max").write_text(f"{PIDS_MAX}\n")
                fd = os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
            except OSError:
                cls(folder).remove()
                continue
            return cls(folder, fd)
        return None

    def refused(self) -> int:
        """How many forks the limit has refused so far (the kernel's own count)."""
        for line in _read(self.folder / "pids.events").splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and count.strip().isdigit():
                return int(count)
        return 0

    def join(self) -> None:
        """In the sandbox's first process, before exec: it and all it starts are held."""
        if self.fd is not None:
            os.write(self.fd, b"0")

    def remove(self) -> None:
        """Once everything in it has ended (a cgroup with tasks cannot be removed)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        try:
            self.folder.rmdir()
        except OSError:
            pass


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
