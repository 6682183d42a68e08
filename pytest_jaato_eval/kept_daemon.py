"""A daemon kept across runs, for the edit-run loop (`python -m pytest_jaato_eval daemon ...`).

A run's private daemon starts with the run and stops with it: on a loaded machine that is
25-40 s a run. `daemon start` starts one that stays, in a folder of the project's own (by
default under /tmp, named after the directory it was started from), and prints its socket;
runs use it with `--jaato-socket`; `daemon stop` ends it, runners and all. Opt-in only:
nothing starts one for you, and nothing of it outlives `daemon stop`.

It is held by a small keeper process (`daemon serve`, started detached): the daemon is the
keeper's child, so it is a private daemon in every other respect (its own socket, pid and
log files, JAATO_EVAL variables stripped, stopped runners and all), and it dies if the
keeper is killed. The keeper's pid and start time are in `keeper.json`: `stop` signals that
exact process, never one that merely reuses its pid.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import processes
from .engine.daemon import DaemonError, PrivateDaemon, can_connect

START_WAIT = 120.0   # the keeper's daemon answering, at most
STOP_WAIT = 30.0
KEEPER = "keeper.json"


class KeptDaemonError(Exception):
    """The one line the user sees."""


def default_dir(cwd: Path | None = None) -> Path:
    """One folder per project (the directory the command runs in), short enough for a
    unix socket path, under a folder only this user can enter."""
    where = os.path.realpath(cwd or Path.cwd())
    return Path(f"/tmp/jaato-kept-{os.getuid()}") / hashlib.sha256(where.encode()).hexdigest()[:10]


def _own_folder(folder: Path) -> None:
    """Create `folder` (and its parent) for this user alone; refuse one somebody else could
    have placed (a link, another owner, open to others)."""
    for path in (folder.parent, folder):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise KeptDaemonError(f"{path}: not a folder of this user's alone (mode 0700); "
                                  f"remove it or choose another --dir")


def socket_of(folder: Path) -> Path:
    return folder / "d" / "daemon.sock"


def _keeper(folder: Path):
    """The live keeper of `folder` as a processes.Ident, or None."""
    try:
        data = json.loads((folder / KEEPER).read_text())
        ident = processes.Ident(int(data["pid"]), float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return ident if ident.alive() else None


def _answers(folder: Path) -> bool:
    return can_connect(str(socket_of(folder)), 1.0)


# -- the keeper --------------------------------------------------------------------------------
def serve(folder: Path) -> int:
    """Hold a private daemon in `folder` until SIGTERM; start it again if it dies."""
    processes.set_run(f"kept-{folder.name}")  # never the marker of a run's own trees
    tmp = folder / "tmp"
    tmp.mkdir(exist_ok=True)
    daemon = PrivateDaemon(folder / "d", env={**os.environ, "TMPDIR": str(tmp)})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    me = processes.Ident.of(os.getpid())
    assert me is not None  # this very process
    (folder / KEEPER).write_text(json.dumps({"pid": me.pid, "started": me.started}))
    try:
        while not stop.is_set():
            try:
                daemon.ensure()
            except DaemonError as exc:
                print(f"kept daemon: {exc}", file=sys.stderr, flush=True)
                return 1
            stop.wait(1.0)
    finally:
        daemon.stop()
        (folder / KEEPER).unlink(missing_ok=True)
    return 0


# -- the commands ------------------------------------------------------------------------------
def start(folder: Path) -> Path:
    """The kept daemon's socket, started (detached) when none is running."""
    _own_folder(folder)
    if _keeper(folder) is not None and _answers(folder):
        return socket_of(folder)
    stop(folder)  # a keeper without a daemon that answers: start afresh
    with open(folder / "keeper.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_jaato_eval", "daemon", "serve", str(folder)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=folder,
            start_new_session=True)  # detached: it outlives this command, by design
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise KeptDaemonError(f"the keeper exited with code {proc.returncode}; see "
                                  f"{folder / 'keeper.log'}")
        if _answers(folder) and _keeper(folder) is not None:
            return socket_of(folder)
        time.sleep(0.2)
    stop(folder)
    raise KeptDaemonError(f"the kept daemon did not answer within {START_WAIT:.0f} s; see "
                          f"{folder / 'keeper.log'}")


def stop(folder: Path) -> bool:
    """End the keeper (which stops its daemon, runners and all); True when one was running."""
    keeper = _keeper(folder)
    if keeper is None:
        return False
    processes.signal_exact([keeper], signal.SIGTERM)
    if not processes.wait_gone([keeper], STOP_WAIT):
        processes.kill_all([keeper], grace=0)
    shutil.rmtree(folder, ignore_errors=True)  # ours alone (0700): its files go with it
    return True


def add_parser(sub) -> None:
    d = sub.add_parser(
        "daemon", help="a jaato daemon kept across runs: start (prints its socket, for "
                       "--jaato-socket), status, stop",
        description="Keep one private jaato daemon across runs of this project: `start` "
                    "prints its socket (starting it when none runs), for pytest's "
                    "--jaato-socket; `stop` ends it, runners and all; `status` exits 0 when "
                    "it runs. The folder defaults to one per directory under /tmp.")
    d.add_argument("action", choices=("start", "status", "stop", "serve"),
                   help=argparse.SUPPRESS)
    d.add_argument("folder", nargs="?", help=argparse.SUPPRESS)  # serve's own
    d.add_argument("--dir", default=None, help="the kept daemon's folder (default: one per "
                                               "project directory, under /tmp)")
    d.set_defaults(func=cmd_daemon)


def cmd_daemon(args) -> int:
    folder = Path(args.folder or args.dir or default_dir()).absolute()
    try:
        if args.action == "serve":
            return serve(folder)
        if args.action == "start":
            print(start(folder))
            return 0
        if args.action == "status":
            running = _keeper(folder) is not None and _answers(folder)
            print(f"{socket_of(folder)}" if running else f"no kept daemon in {folder}")
            return 0 if running else 1
        print(f"stopped the kept daemon in {folder}" if stop(folder)
              else f"no kept daemon in {folder}")
        return 0
    except KeptDaemonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
