"""How the leader of a process tree is launched so that it dies with the thread that
started it (the parent-death signal, Linux), armed before its program runs.

util-linux's `setpriv --pdeathsig` arms it without a Python preexec_fn, so subprocess can
vfork instead of copying this (large) process: several ms less per grader. Elsewhere a
preexec_fn arms it. processes.py owns the trees; this module only launches their leaders.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os
import shutil
import signal
import subprocess
import time


def _find_prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_prctl = _find_prctl()  # looked up once here, not in every forked child


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child before exec: get `sig` when the thread that started it dies (Linux)."""
    if _prctl is not None:
        _prctl(1, sig)  # PR_SET_PDEATHSIG


def _dies_with(parent: int):
    def preexec() -> None:
        die_with_parent()
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec


def popen(args, *, env: dict[str, str], **kwargs) -> subprocess.Popen:
    """Popen in a new session, the parent-death signal armed when this returns."""
    setpriv = _setpriv()
    if setpriv is None or "executable" in kwargs:
        return subprocess.Popen(args, env=env, start_new_session=True,
                                preexec_fn=_dies_with(os.getpid()), **kwargs)
    argv = _argv(args, kwargs.pop("shell", False), env, kwargs.get("cwd"))
    proc = subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *argv], env=env,
                            start_new_session=True, **kwargs)
    _until_exec(proc.pid, setpriv)
    return proc


@functools.cache
def _setpriv() -> str | None:
    """util-linux's setpriv, where `--pdeathsig` works: it arms the same signal without a
    Python preexec_fn, so subprocess can vfork instead of copying this (large) process,
    several ms less per grader. None elsewhere (the preexec_fn is used)."""
    found = shutil.which("setpriv")
    if found is None or not os.path.isdir("/proc/self"):
        return None
    try:
        ok = subprocess.run([found, "--pdeathsig", "KILL", "--", "true"], capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return os.path.realpath(found) if ok else None


def _until_exec(pid: int, setpriv: str, limit: float = 1.0) -> None:
    """Wait until setpriv has run the program: it arms the signal just before, so the
    promise of `start` holds when it returns."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/exe") != setpriv:
                return
        except OSError:  # already gone: nothing left to arm
            return
        time.sleep(0.0002)


def _argv(args, shell: bool, env: dict[str, str], cwd) -> list[str]:
    """The argument list Popen would run, refused as Popen refuses a program that cannot
    run (setpriv would only report it as an exit code)."""
    if shell:
        return ["/bin/sh", "-c", args] if isinstance(args, str) else ["/bin/sh", "-c", *args]
    argv = [os.fspath(a) for a in ([args] if isinstance(args, (str, os.PathLike)) else args)]
    program = argv[0]
    if os.sep in program:
        path = os.path.join(os.fspath(cwd), program) if cwd else program
    else:  # relative PATH entries ("" too) are the child's: found from its cwd, as Popen does
        dirs = env.get("PATH", os.defpath).split(os.pathsep)
        if cwd:
            dirs = [os.path.join(os.fspath(cwd), d) for d in dirs]
        path = shutil.which(program, path=os.pathsep.join(d or os.curdir for d in dirs)) or ""
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return argv  # setpriv looks `program` up on the same PATH
