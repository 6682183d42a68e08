"""The agent's confinement: the private daemon, and so every runner and tool below it, in a
bubblewrap sandbox that shows it only what it needs.

jaato runs the agent's tools in runner processes its daemon forks (from one warm template),
so the unit we can confine without reaching into jaato is the daemon's whole tree. The
sandbox is an allow-list: its root is an empty file system of bubblewrap's, made read-only
once these, and nothing else, are mounted in it, each at its own path:

- the system, read-only: `/usr`, and `/bin`, `/sbin`, `/lib*` as the host has them (links into
  /usr where /usr is merged, folders where not);
- the few `/etc` files a program reads to run (`ETC`): name resolution and the network's
  names, TLS roots (the certificates only, never `ssl/private`), users and groups (no
  password hashes: `shadow` is not among them), the loader's cache, the time zone, Debian's
  alternatives, os-release;
- the run's interpreter and the packages it runs from, read-only: the venv (`sys.prefix`),
  the Python it was made from (`sys.base_prefix`), the package folders on `sys.path` outside
  them, and this plugin's own package where it is installed from a checkout; each bound
  alone, so a venv inside a checkout shows the venv, not the checkout;
- what its caller names: the folders the agent writes (the arms' folder, the daemon's own
  folder: its socket and log), and folders it may read (`~/.jaato`, whose provider logins
  and user profiles the daemon reads);
- a private `/tmp` of bounded size (`TMP_SIZE`, `/var/tmp` the same) and `/dev/shm`, fresh
  `/dev` and `/proc`.

So the checkout, the task folders, the store, HOME, the host's `/tmp`, other workers' and
other users' folders are not there at all, whatever their paths: nothing is hidden, because
nothing is shown but these. Bubblewrap reads this list from a descriptor (`--args`), so the
sandbox's first process, whose command line every process inside can read, names no path.
`PATH` inside puts the run's interpreter's folder first (`python` is the run's own, as in an
activated venv) and keeps only the host's entries the sandbox shows.

Besides the files:

- a pid namespace of its own: pytest, the graders, other workers' daemons and every other
  process on the machine are invisible and out of reach of a signal; `/proc/<ancestor>/environ`
  names nothing outside the sandbox;
- no capabilities: root inside is an ordinary user to the kernel (no ptrace of the daemon, no
  mounts, no reading other users' files);
- the host's network: the daemon calls the model's provider from inside (docs/security.md
  says what else that reaches);
- when the sandbox's first process ends, the kernel ends every process left in its namespace,
  so nothing the agent started outlives the daemon, whoever kills what.

What it leaves open: the host's network (the internet, services on 127.0.0.1, abstract unix
sockets, and `/proc/net/unix`'s list of the host's socket paths, though no socket with a path
outside the allow-list can be reached); `~/.jaato`, read-only; `/etc/passwd`'s user names; the
daemon's socket (a session the agent opens there is stopped after its run); the host's kernel.
docs/security.md keeps the same list with the threats it answers.

Where bubblewrap is missing or the kernel refuses its namespaces, there is no sandbox
(`sandbox: none` in the header and in every record); docs/security.md says what an
unconfined agent can do.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shlex
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

BWRAP = "bwrap"
NONE = "none"
PROBE_WAIT = 30.0  # s: one bwrap start, on a loaded machine
TMP_SIZE = 1 << 30  # bytes: the sandbox's /tmp (a tmpfs: memory, used as it fills)
SHM_SIZE = 64 << 20  # bytes: its /dev/shm (POSIX semaphores and shared memory)
OOM_SCORE_ADJ = 1000  # the most the kernel's OOM killer can prefer a process
_SYSTEM = tuple(Path(p) for p in ("/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc",
                                   "/proc", "/dev", "/sys", "/var", "/opt"))
# The system's programs and libraries: /usr, and the usrmerge links (or folders) beside it.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc a program reads to run, each named (missing ones are skipped).
ETC = (
    # name resolution and the network's names
    "resolv.conf", "hosts", "host.conf", "gai.conf", "nsswitch.conf", "services", "protocols",
    # TLS roots: the certificates and OpenSSL's configuration, never a private key
    "ssl/certs", "ssl/cert.pem", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
    "pki/tls/certs", "pki/tls/cert.pem", "pki/tls/openssl.cnf", "pki/ca-trust",
    # users and groups (`id`, git, Python's getpass): names and homes, no password hashes
    "passwd", "group",
    # the loader, the time zone, Debian's alternatives (/usr/bin/awk -> /etc/alternatives/awk)
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives",
    "os-release", "mime.types", "locale.alias")


@dataclass(frozen=True)
class Boxed:
    """A command as bubblewrap starts it: its argv, and the descriptor bubblewrap reads the
    sandbox's description from (`--args`), which the start must pass. Started once."""

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...]


@dataclass(frozen=True)
class Sandbox:
    """A working bubblewrap: `command` wraps a program's argv in it."""

    bwrap: str
    tmp_size: int = TMP_SIZE
    name = BWRAP

    @contextlib.contextmanager
    def command(self, argv: list[str], *, writable: Sequence[Path], hidden: Sequence[Path] = (),
                tmp: Path | None = None, readable: Sequence[Path] = (),
                sealed: tuple[Path, Path] | None = None,
                path: str | None = None) -> Iterator[Boxed]:
        """`argv` run confined, for as long as the block lasts: what `mounts` shows, with
        `PATH` (default: this process's) as `confined_path` makes it."""
        options = [*self.mounts(writable=writable, hidden=hidden, tmp=tmp, readable=readable,
                                sealed=sealed),
                   "--setenv", "PATH", confined_path(os.environ.get("PATH", os.defpath)
                                                     if path is None else path),
                   "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                   "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        fd = os.memfd_create("jaato-sandbox-args")  # close-on-exec: only a start that passes it
        try:
            os.write(fd, b"".join(os.fsencode(o) + b"\0" for o in options))
            os.lseek(fd, 0, os.SEEK_SET)
            yield Boxed((self.bwrap, "--args", str(fd), "--", *argv), (fd,))
        finally:
            os.close(fd)

    def mounts(self, *, writable: Sequence[Path], hidden: Sequence[Path] = (),
               tmp: Path | None = None, readable: Sequence[Path] = (),
               sealed: tuple[Path, Path] | None = None) -> list[str]:
        """bubblewrap's options for the allow-list (the module's docstring), in order.

        `writable` folders are bound read-write and `readable` ones read-only, at their own
        paths; `tmp`, a host folder bound as /tmp (None: a tmpfs of `tmp_size` bytes);
        `sealed` is (an execute-only copy, the program it stands in for): `seal_interpreter`.
        A `hidden` folder that one of these would show (it lies inside one) is an empty,
        read-only folder there.
        """
        args = ["--dev", "/dev", "--proc", "/proc", *_system(),
                "--size", str(SHM_SIZE), "--tmpfs", "/dev/shm"]
        if tmp is None:
            args += ["--size", str(self.tmp_size), "--tmpfs", "/tmp"]
        else:
            args += ["--bind", str(tmp), "/tmp"]
        args += ["--dir", "/var", "--symlink", "../tmp", "/var/tmp"]
        shown: dict[Path, tuple[str, str]] = {}  # where -> (option, what)
        for option, folders in (("--ro-bind", [*python_folders(), *readable]),
                                ("--bind", writable)):
            for folder in folders:
                real = os.path.realpath(folder)  # at the path given and, if links differ, the real one
                for where in {Path(os.path.abspath(folder)), Path(real)}:
                    shown[where] = (option, real)
        masked = [h for h in map(Path, hidden)
                  if any(h != f and h.is_relative_to(f) for f in shown)]
        # parents before what is inside them; a mask before what is mounted inside it
        for folder in _parents_first([*shown, *masked]):
            if folder in shown and folder not in masked:
                option, what = shown[folder]
                args += [option, what, str(folder)]
            else:
                args += ["--tmpfs", str(folder)]
        if sealed is not None:
            args += ["--ro-bind", str(sealed[0]), str(sealed[1])]
        for folder in _parents_first(masked):  # once what is mounted inside them is in place
            args += ["--remount-ro", str(folder)]
        # nothing but the mounts above is writable: not the root bubblewrap made, nor /dev
        return args + ["--remount-ro", "/dev", "--remount-ro", "/"]


@functools.cache
def _system() -> tuple[str, ...]:
    """The system's mounts, as the host has them (looked at once per process): each of
    `SYSTEM_DIRS` (a usrmerge link stays a link), and the `ETC` files: a link into /usr or
    /proc stays a link (/etc/localtime, /etc/mtab); a link elsewhere (/etc/resolv.conf into
    /run) is the file it leads to, bound at the link's path; missing ones are left out."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        if os.path.islink(name):  # usrmerge: /bin -> usr/bin
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for name in ETC:
        path = os.path.join("/etc", name)
        if os.path.islink(path):
            target, real = os.readlink(path), os.path.realpath(path)
            if real.startswith(("/usr/", "/proc/")):
                args += ["--symlink", target, path]
                continue
            path_from = real
        else:
            path_from = path
        if os.path.exists(path_from):
            args += ["--ro-bind", path_from, path]
    return tuple(args)


def shown(*, writable: Sequence[Path] = (), readable: Sequence[Path] = ()) -> tuple[Path, ...]:
    """What of the host the sandbox shows, every link resolved: the system's folders, the
    `ETC` files, the interpreter's folders, and `readable` and `writable`. A link an agent
    leaves to anything else leads to what it could not see (its own /tmp, /proc and /dev
    included: a grader's are others)."""
    paths = [*SYSTEM_DIRS, *(os.path.join("/etc", name) for name in ETC),
             *map(str, python_folders()), *map(str, readable), *map(str, writable)]
    return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in paths if os.path.lexists(p)))


@functools.lru_cache(maxsize=16)
def confined_path(value: str) -> str:
    """`PATH` in the sandbox: the run's interpreter's folder first, so `python` (and `pip`,
    and what the venv installs) is the run's own as in an activated venv, then each of
    `value`'s entries the sandbox shows read-only from the system or the interpreter; an
    entry it does not show (a pyenv shim under HOME, a relative one) is left out."""
    system = [Path(os.path.realpath(p)) for p in (*SYSTEM_DIRS, *map(str, python_folders()))]
    kept = [os.path.dirname(sys.executable)]
    for entry in value.split(os.pathsep):
        if not os.path.isabs(entry) or entry in kept:
            continue
        real = Path(os.path.realpath(entry))
        if any(real.is_relative_to(s) for s in system):
            kept.append(entry)
    return os.pathsep.join(kept)


# What `sh` runs itself: never looked up on PATH. The words after which a command word
# comes next, and the shell's own separators and redirections.
SHELL_OWN = frozenset(
    ". : [ alias bg break cd continue echo eval exit export false fc fg getopts hash jobs "
    "kill local printf pwd read readonly return set shift test times trap true type ulimit "
    "umask unalias unset wait fi done } esac".split())
_LEADING = frozenset("! { if then else elif do while until time command exec".split())
_SEPARATORS = frozenset(";|&()\n")
_REDIRECTS = frozenset("<>&")


def missing_command(command: str, path: str) -> str | None:
    """The first command word the author wrote in `command` (a `sh -c` line) that `path`
    does not find, looked up before the line runs: the word first in each of its simple
    commands, past assignments and redirections. A word the line computes (`$x`, a glob),
    names by a relative path (a file of the workspace, the agent's) or follows a `for` or
    `case` is not looked up. None when each is found, or the line is not ours to parse."""
    try:
        lexer = shlex.shlex(command.replace("\n", ";"), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return None
    first, skip = True, False
    for word in words:
        if skip:  # a redirection's target
            skip = False
            continue
        if word and set(word) <= _SEPARATORS:
            first = True
            continue
        if word and set(word) <= _REDIRECTS:
            if word.startswith("<<"):
                return None  # a here-document's lines follow: not ours to read
            skip = True
            continue
        if not first:
            continue
        if word in ("for", "case", "select", "function"):
            return None  # what follows is no command word: the rest is not ours to read
        if word in _LEADING or word.isdigit() or (
                "=" in word and word.split("=", 1)[0].isidentifier()):
            continue  # a command word comes next (after `2` a redirection)
        first = False
        if word in SHELL_OWN:
            continue
        if any(c in word for c in "$`*?[~"):
            continue
        if "/" in word:
            if os.path.isabs(word) and not os.path.exists(word):
                return word
            continue
        if shutil.which(word, path=path) is None:
            return word
    return None


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
            with self.sandbox.command(reported, writable=list(writable),
                                      hidden=list(self.hidden), tmp=tmp,
                                      readable=[*(self.readable if lend else ()), *readable],
                                      sealed=self.sealed) as boxed:
                # its /tmp is its own: a TMPDIR of the host's may be hidden from it, or missing
                yield Wrapped((boxed.argv[0], "--json-status-fd", str(fds[0]),
                               "--setenv", "TMPDIR", "/tmp", *boxed.argv[1:]),
                              (*fds, *boxed.pass_fds), status, signalled)
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

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...] = ()
    status: Path | None = None
    signalled: Path | None = None
    limits: "Limits | None" = None  # its own memory cgroup, where one could be made

    def in_cgroup(self, limits: "Limits | None") -> "Wrapped":
        """The same command, started inside `limits` (its first process joins the cgroup,
        then becomes the command: all it starts is held there)."""
        if limits is None:
            return self
        joins = " && ".join(f"echo $$ > {shlex.quote(str(f / 'cgroup.procs'))}"
                            for f in sorted(set(limits.folders.values())))
        return dataclasses.replace(self, argv=("/bin/sh", "-c", f'{joins} && exec "$@"', "sh",
                                               *self.argv), limits=limits)

    def oom_killed(self) -> int:
        """How many of its processes the OOM killer ended in its own memory cgroup."""
        return self.limits.oom_kills() if self.limits is not None else 0

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


@functools.cache
def python_folders() -> tuple[Path, ...]:
    """What the run's interpreter (the daemon's) reads: the venv and the Python it was made
    from, the package folders on `sys.path` outside them (a user site, a distribution's
    dist-packages), and this plugin's own package where it lies outside them (installed
    editable from a checkout: the package, not the checkout). Each folder once, as Python
    names it."""
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    on_path = {os.path.realpath(p) for p in sys.path if p}
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix,
                  *(p for p in sites if os.path.realpath(p) in on_path),
                  str(Path(__file__).resolve().parents[1])]
    kept: list[Path] = []
    for folder in candidates:
        folder = os.path.abspath(folder)
        if os.path.isdir(folder) and not any(
                Path(os.path.realpath(folder)).is_relative_to(os.path.realpath(k)) for k in kept):
            kept.append(Path(folder))
    return tuple(kept)


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


def machine_oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has ended on this machine since it
    started (/proc/vmstat's `oom_kill`), None where it is not said."""
    try:
        with open("/proc/vmstat", "rb") as f:
            for line in f:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


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
    sandbox = Sandbox(exe)
    try:  # the sandbox as it will be made (an old bubblewrap lacks --args or --size)
        with sandbox.command(["/bin/sh", "-c", "exit 0"], writable=[]) as boxed:
            done = subprocess.run(
                boxed.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, timeout=PROBE_WAIT, pass_fds=boxed.pass_fds,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"none: bubblewrap could not start ({exc}); the agent runs as you"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return None, (f"none: bubblewrap is refused here ({why[-1] if why else done.returncode}:"
                      f" user or pid namespaces unavailable, or a bubblewrap older than 0.8);"
                      f" the agent runs as you")
    return sandbox, (f"{BWRAP}: the agent's tools see only their workspace, their daemon and "
                     f"the system's read-only parts")
