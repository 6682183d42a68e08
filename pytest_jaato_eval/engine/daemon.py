"""The jaato daemon an arm runs on: a private one we own, or a socket we were given.

A private daemon gets its own socket and log in a folder of its own (the
defaults are global and collide with any other daemon), is ready when a connect
succeeds, and is stopped, runners and all, when the run ends. The SDK's
auto-start is never used: it would leave a daemon on global paths behind.

Confined, the daemon's folder is writable to the agent, so the harness keeps its own files
about it (the daemon's output and the pid to signal) beside the folder, never in it, and
opens them through `files.open_own` and `files.write_own` (no link followed, no FIFO
waited on). What it reads from the folder (the daemon's log, for an error's last line) it
reads through `files.read_tail`.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .. import launch, processes
from .files import open_own, read_tail, remove, write_own
from .leftovers import Owned
from .sandbox import Limits, Sandbox, confined_path, prefer_for_oom, seal_interpreter


# First on a private daemon's PYTHONPATH: its `sitecustomize` warms jaato's runner template
# (the folder's module says how), so each session's runner starts without importing again.
WARM_TEMPLATE = str(Path(__file__).resolve().parent / "warm_template")


def warm_template_path(pythonpath: str | None) -> str:
    """The daemon's PYTHONPATH: the warm-up's folder, then what it had."""
    return os.pathsep.join([WARM_TEMPLATE, *([pythonpath] if pythonpath else [])])


class DaemonError(Exception):
    """The daemon could not be started or reached; arms on it are BLOCKED."""


class StartAbandoned(DaemonError):
    """The run abandoned a start it no longer needed; an arm that needs the daemon after
    all starts it afresh."""


def can_connect(path: str, timeout: float = 1.0, *, greeted: bool = False) -> bool:
    """True when something accepts a connection at `path` in time; greeted=True: and
    sends its first bytes in time too."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        return not greeted or len(s.recv(4)) > 0
    except OSError:
        return False
    finally:
        s.close()


ABANDONED = "daemon: its start was abandoned: the run ended before it needed the daemon"
GREETING_WAIT = 10.0  # a daemon greets a new client at once; a loaded one within seconds


def greets(path: str, timeout: float = GREETING_WAIT) -> bool:
    """True when whatever listens at `path` sends the first bytes of a greeting in time.

    A jaato daemon speaks first (its ConnectedEvent); a socket that accepts and then
    says nothing would hold every arm's handshake until the arm ceiling.
    """
    return can_connect(path, timeout, greeted=True)


@dataclass
class ExternalDaemon:
    """A daemon somebody else runs (--jaato-socket): used, never started or stopped."""

    socket_path: str
    private: bool = False
    greeting_wait: float = GREETING_WAIT
    _checked: str | None = None  # "ok", or the error every later arm gets at once

    def ensure(self) -> str:
        if not can_connect(self.socket_path):
            raise DaemonError(f"daemon: nothing answers at {self.socket_path} (--jaato-socket); "
                              f"start one there or drop the option to use a private daemon")
        if self._checked is None:  # once per run: the handshake is what a daemon must answer
            self._checked = "ok" if greets(self.socket_path, self.greeting_wait) else (
                f"daemon: {self.socket_path} (--jaato-socket) accepted the connection but sent "
                f"no greeting within {self.greeting_wait:g} s; what listens there is not a "
                f"working jaato daemon (hung, or another program): restart it, or drop the "
                f"option to use a private daemon")
        if self._checked != "ok":
            raise DaemonError(self._checked)
        return self.socket_path

    def alive(self) -> bool:
        return can_connect(self.socket_path)

    def owned(self) -> Owned | None:
        return None  # not ours: what runs below it is not ours to end

    def request_stop(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def abandon_start(self) -> None:
        pass


# What the harness's own process knows and the agent's tools must not: the daemon hands its
# environment to every runner, and a runner to every tool. pytest's variables (the test
# running, xdist's worker), an outer eval run's, coverage's, and the developer's shell's
# (the folder it was in, the one before, the last command).
HARNESS_PREFIXES = ("PYTEST", "_PYTEST", "JAATO_EVAL", "COV_CORE_")
HARNESS_NAMES = frozenset({"OLDPWD", "PWD", "_"})


def harness_free(env: dict[str, str]) -> dict[str, str]:
    """`env` without a variable that names the harness, its run or the developer's shell."""
    return {k: v for k, v in env.items()
            if not k.startswith(HARNESS_PREFIXES) and k not in HARNESS_NAMES}


def pool_ceiling(pool_size: str) -> str:
    """jaato's ceiling on idle runner slots, with room for a small budget pool's reservations.

    The slots a task's `budget:` pool (or a driver arm's cascade) ran on stay reserved to it
    for five minutes (jaato's cascade affinity), and are never reused here: every arm has its
    own workspace. At jaato's default ceiling, twice the pool size, they fill a one-slot pool
    and every later arm on the daemon starts a runner from cold (bench/bench_pool_slots.py).
    Three more slots than the pool hold a small pool's reservations beside a free slot; a pool
    of many arms fills them too (docs/running.md, Budgets).
    """
    try:
        return str(max(int(pool_size), 0) + 3)
    except ValueError:  # jaato warns and uses its default; so do we
        return ""


class PrivateDaemon:
    """A daemon this run starts lazily, on its own files, and always stops."""

    private = True

    def __init__(self, run_dir: Path, python: str = sys.executable,
                 ready_timeout: float = 90.0, env: dict[str, str] | None = None,
                 sandbox: Sandbox | None = None, writable: tuple[Path, ...] = (),
                 hidden: tuple[Path, ...] = (), readable: tuple[Path, ...] = (),
                 refusal: str | None = None):
        self.run_dir = Path(run_dir)
        # Confined (engine/sandbox.py): the daemon's folder, its TMPDIR and `writable` are all
        # it and the agent's tools may write; `hidden` they cannot even read.
        self.sandbox = sandbox
        self.writable = tuple(writable)
        self.hidden = tuple(hidden)
        self.readable = tuple(readable)  # kept readable, read-only, inside what is hidden
        self.refusal = refusal  # why it must not start at all (a sandbox required, missing)
        self._limits: Limits | None = None  # its cgroup: pids and memory (sandbox.Limits)
        self.socket_path = str(self.run_dir / "daemon.sock")
        self.log_file = self.run_dir / "daemon.log"  # jaato's own, in its folder
        # The harness's own: beside the daemon's folder, out of the agent's reach.
        self.pid_file = pid_file_of(self.run_dir)
        self.out_file = self.run_dir.with_name(self.run_dir.name + ".out")
        self.python = python
        self.ready_timeout = ready_timeout
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._stop_asked: float | None = None  # when request_stop sent SIGTERM
        self._family: list[processes.Ident] = []
        self._abandoned = threading.Event()
        self.marker: str | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def owned(self) -> Owned | None:
        """Its pid and the marker every process below it carries (unless it cleared it)."""
        if not self.alive() or self.marker is None:
            return None
        assert self.proc is not None
        pid = self.proc.pid
        if self.sandbox is not None:  # bwrap, its pid-1 reaper, then the daemon
            for _ in range(2):
                kids = processes.children(pid)
                if len(kids) != 1:
                    return None
                pid = kids[0]
        return Owned(pid, self.marker, self._limits, restart=self.request_stop)

    def ensure(self) -> str:
        """Start the daemon if it is not running (again, if it died); return its socket."""
        if self.refusal:
            raise DaemonError(self.refusal)
        if self._abandoned.is_set():  # abandoned before it began: this start is the one
            self._abandoned.clear()
            raise StartAbandoned(ABANDONED)
        if self._stop_asked is not None:  # asked to go: let it, then start afresh
            self.stop()
        if self.alive():
            if self.sandbox is None or can_connect(self.socket_path):
                return self.socket_path
            # Alive, and out of reach: its socket removed or its folder closed from inside
            # the sandbox. Started afresh, or every later arm would be BLOCKED.
        if self.proc is not None:  # it died under us: reap it, then start afresh
            self._kill_group()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.chmod(0o755)  # as we made it, whatever was done to it from inside
        if self.sandbox is not None:
            # Its agents could write it: whatever they left there (a FIFO where jaato opens
            # its log or pid file would hold the start) goes, and the daemon starts on an
            # empty folder.
            for left in self.run_dir.iterdir():
                remove(left)
        for stale in (self.socket_path, self.pid_file):
            Path(stale).unlink(missing_ok=True)
        env = dict(os.environ if self.env is None else self.env)
        env = harness_free(env)
        # Two idle runner slots, jaato's default: the next arm asks for one before jaato has
        # taken back the last arm's or forked another (it looks every 0.5 s), and with one
        # slot that arm's runner would start cold, a whole interpreter's imports. Forked from
        # the warmed template (WARM_TEMPLATE), an idle slot costs a fork.
        env.setdefault("JAATO_RUNNER_POOL_SIZE", "2")
        env.setdefault("JAATO_RUNNER_POOL_MAX_SIZE", pool_ceiling(env["JAATO_RUNNER_POOL_SIZE"]))
        env["PYTHONPATH"] = warm_template_path(env.get("PYTHONPATH"))
        # The run's marker: a run killed outright leaves a daemon and runners a later run
        # can still name as ours (processes.kill_run_leftovers).
        env[processes.TREE_VAR] = self.marker = processes.run_prefix() + uuid.uuid4().hex[:12]
        argv = [self.python, "-m", "jaato_server", "--ipc-socket", self.socket_path,
                "--pid-file", str(self.pid_file), "--log-file", str(self.log_file)]
        try:
            out = open_own(self.out_file)
        except OSError as exc:
            raise DaemonError(f"daemon: could not open its log {self.out_file}: {exc}") from exc
        try:
            self.proc = self._spawn(argv, env, out)
        finally:
            os.close(out)
        if self.sandbox is not None:  # the pid a crashed owner's sweep may signal: the sandbox's
            write_own(self.pid_file, f"{self.proc.pid}\n")
        self.starts += 1
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonError(f"daemon: exited with code {self.proc.returncode} while "
                                  f"starting; {self._log_tail()}")
            if can_connect(self.socket_path, 0.5):
                return self.socket_path
            if self._abandoned.wait(0.1):
                self._abandoned.clear()
                self._end_start()
                raise StartAbandoned(ABANDONED)
        self._end_start()
        raise DaemonError(f"daemon: not ready after {self.ready_timeout:.0f} s; {self._log_tail()}")

    def _spawn(self, argv: list[str], env: dict[str, str], out: int) -> subprocess.Popen:
        """Start the daemon, writing to `out`: as it is, or confined (engine/sandbox.py)."""
        self._limits = self._limits or Limits.make(f"jaato-eval-{os.getpid()}-"
                                                   f"{self.run_dir.parent.name}")
        preexec = functools.partial(_start_held, self._limits)
        if self.sandbox is None:
            return self._popen(argv, env, out, preexec, ())
        # jaato writes the pid it has in the sandbox's namespace: never one to signal here.
        argv[argv.index(str(self.pid_file))] = str(self.run_dir / "daemon.ns-pid")
        # Inside: a private /tmp, and `python` the run's own (sandbox.confined_path).
        env = {**env, "TMPDIR": "/tmp",
               "PATH": confined_path(env.get("PATH", os.defpath))}
        try:
            sealed = seal_interpreter(self.run_dir.parent / "sealed", self.python)
        except OSError as exc:
            raise DaemonError(f"daemon: could not seal {self.python} for the sandbox: {exc}") from exc
        # The daemon's arguments and environment arrive on a descriptor: the sandbox's first
        # processes, whose command lines all inside can read, name no path and hold no key.
        handed = _handed_fd({"argv": argv[1:], "env": env})
        try:
            with self.sandbox.command([self.python, "-c", _BOOT, str(handed)],
                                      writable=[self.run_dir, *self.writable],
                                      hidden=list(self.hidden),
                                      readable=list(self.readable), sealed=sealed,
                                      path=env["PATH"]) as boxed:
                # bubblewrap's own environment stays readable to all inside: it carries no secret
                return self._popen(boxed.argv, {"PATH": env["PATH"],
                                                processes.TREE_VAR: env[processes.TREE_VAR]},
                                   out, preexec, (handed, *boxed.pass_fds))
        finally:
            os.close(handed)

    def _popen(self, argv, env, out: int, preexec, pass_fds) -> subprocess.Popen:
        try:
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.run_dir, env=env,
                start_new_session=True,  # its own group: Ctrl-C reaches us, we stop it
                preexec_fn=preexec, pass_fds=pass_fds)
        except OSError as exc:
            raise DaemonError(f"daemon: could not start {self.python} -m jaato_server: {exc}") from exc

    def _end_start(self) -> None:
        """End a daemon that never became ready, and the runners it already started (each in
        a session of its own, so outside its group)."""
        assert self.proc is not None
        family = processes.descendants(self.proc.pid)
        self._kill_group()
        processes.kill_all(family, grace=0)

    def abandon_start(self) -> None:
        """The run does not need the daemon now (a worker xdist gave no arm, a collection
        that failed): the start under way, or the next one if none is, ends at once."""
        self._abandoned.set()

    def _log_tail(self) -> str:
        for path in (self.out_file, self.log_file):
            lines = (read_tail(path) or "").strip().splitlines()
            if lines:
                return f"last line of {path.name}: {lines[-1][:300]}"
        return "it wrote no log"

    def request_stop(self) -> None:
        """SIGTERM the daemon and return at once; `stop` finishes the job.

        Sent when the run's last arm is over, so the daemon's own shutdown runs while
        pytest prints its summary and xdist tears its workers down. Runners live in
        their own sessions, so the ones alive now are noted first, to be killed by PID.
        """
        if self.proc is None or self._stop_asked is not None:
            return
        self._family = processes.descendants(self.proc.pid)
        self._stop_asked = time.monotonic()
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 0.5) -> None:
        """Stop the daemon and every process it started, runners included.

        The daemon gets `grace` seconds from its SIGTERM (its own shutdown would go on
        giving each runner seconds to exit, which a run that is over does not need);
        then whatever is left of its group and family is killed.
        """
        if self.proc is None:
            return
        self.request_stop()
        if self.proc.poll() is None:
            assert self._stop_asked is not None  # request_stop set it
            try:
                self.proc.wait(timeout=max(0.0, self._stop_asked + grace - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        family = set(self._family) | set(processes.descendants(self.proc.pid))
        self._kill_group(warned=True)
        processes.kill_all(family, grace=0)
        self._stop_asked, self._family = None, []
        if self._limits is not None:
            self._limits.remove()
            self._limits = None

    def _kill_group(self, warned: bool = False) -> None:
        """SIGKILL whatever is left of the group we started (the daemon and its runners).

        `warned`: it had its SIGTERM already (stop's grace), so it gets no second one.
        """
        assert self.proc is not None
        pgid = self.proc.pid  # start_new_session: the group id is the daemon's pid
        for sig in (signal.SIGKILL,) if warned else (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                break
            if sig == signal.SIGTERM:
                time.sleep(0.2)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


# The sandbox's first Python: it takes the daemon's arguments and environment from a
# descriptor and execs the daemon with them through the sealed interpreter, so that
# environment is only ever in processes whose /proc the agent's tools cannot read
# (sandbox.seal_interpreter).
_BOOT = ("import json, os, sys\n"
         "with os.fdopen(int(sys.argv[1]), 'rb') as handed:\n"
         "    given = json.load(handed)\n"
         "os.execve(sys.executable, [sys.executable, *given['argv']], given['env'])\n")


def _handed_fd(value: dict) -> int:
    """An anonymous in-memory file holding `value` as JSON, read from its start."""
    fd = os.memfd_create("jaato-daemon-start")  # close-on-exec: only the start passes it
    os.write(fd, json.dumps(value).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def pid_file_of(run_dir: Path) -> Path:
    """Where the harness notes the pid of the daemon whose folder is `run_dir`: beside it."""
    return Path(run_dir).with_name(Path(run_dir).name + ".pid")


def _start_held(limits: Limits | None) -> None:
    """The daemon's preexec: die with the starting thread, inside its limits, the first
    the OOM killer ends when the machine runs short (never pytest)."""
    launch.die_with_parent(signal.SIGTERM)
    prefer_for_oom()
    if limits is not None:
        limits.join()


def reap_orphan_daemon(run_dir: Path, marker: str, wait: float = 15.0) -> None:
    """Wait for (then kill) a daemon whose owner died: a crashed xdist worker's.

    Its parent-death signal already asked it to shut down; it may still be writing into its
    folder, which must not be removed under it. Unconfined, its agents could have written the
    pid file, so the pid is signalled only when that process carries this run's `marker`.
    """
    try:
        pid = int((read_tail(pid_file_of(run_dir), 64) or "").split()[0])
    except (ValueError, IndexError):
        return
    ident = processes.Ident.of(pid)
    if ident is None or not processes.marked(marker, [ident]):
        return
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and ident.alive():
        time.sleep(0.2)
    processes.signal_exact([ident], signal.SIGKILL)
