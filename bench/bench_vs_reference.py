#!/usr/bin/env python3
"""Benchmark pytest-jaato-eval side by side against the reference engine, jaato-eval 0.3.4.

One invocation measures, for the same tasks directory:

* ours       ``PY -m pytest TASKS -p no:cacheprovider -q --jaato-out PATH``
* reference  ``REFPY -m jaato_eval run TASKS --out PATH --socket S ...``

each cold (the first run, a fresh process) and warm (the runs after it), and prints wall
time, per-arm time and the ratio ours / reference. Per-arm time is measured the same way for
both: the gap between successive records landing in each side's JSONL store, watched from
outside. Each store's own ``duration_seconds`` is shown too, but the engines time different
spans.

Daemons are always PRIVATE: socket, pid file and log live in a scratch directory. Nothing
here may start a daemon on the global default paths (/tmp/jaato.sock, /tmp/jaato.pid):

* jaato-eval builds its ``IPCClient`` with the SDK default ``auto_start=True``. If the socket
  it is given does not answer, the SDK launches ``jaato_server --ipc-socket S --daemon`` with
  the GLOBAL default pid file and log, and may delete a stale global pid file first. So this
  script checks that its private daemon answers before every reference run and refuses to
  run the reference against a dead one.
* Without ``--socket`` jaato-eval would auto-start on /tmp/jaato.sock; it is always passed.
* The global paths are watched before and after every run, and a change is reported.

Only processes this script started are ever signalled, by pid / process-group id.

Stdlib only; runs under any python3 >= 3.11. See bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

REF_REQUIREMENTS = ["jaato-eval==0.3.4", "jaato-server[interactive]==1.2.0", "jaato-sdk==0.29.0"]
GLOBAL_PATHS = ("/tmp/jaato.sock", "/tmp/jaato.pid")
# Plugins of the dev venv (the `test` extra) that a user's install does not carry. hypothesis's
# terminal summary imports hypothesis: measured 0.7 s on the controller and 1.4 s per xdist
# worker at the end of every run, none of it ours. Blocked in every measured pytest command.
DEV_ONLY_PLUGINS = ["-p", "no:hypothesispytest"]
SOCKET_PATH_MAX = 100  # AF_UNIX sun_path is 108 bytes on Linux; keep a margin


def log(msg: str) -> None:
    # Never let a closed stderr (e.g. `| head`) abort a run before its daemons are stopped.
    try:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _terminate(signum: int, _frame: Any) -> None:
    # SIGTERM / SIGHUP unwind like Ctrl-C, so every `finally` stops the daemons it started.
    raise KeyboardInterrupt(f"signal {signum}")


# --------------------------------------------------------------------------- interpreters

def runs_python_312(candidate: str) -> bool:
    try:
        return subprocess.run(
            [candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def find_base_python() -> Optional[str]:
    """A Python >= 3.12 to build the reference venv with (jaato-eval requires >= 3.12)."""
    candidates: List[str] = []
    if sys.version_info >= (3, 12):
        candidates.append(sys.executable)
    for name in ("python3.12", "python3.13", "python3.14", "python3"):
        found = shutil.which(name)
        if found:
            candidates.append(found)
    # pyenv shims exist for every installed version but only run the active one.
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    versions = Path(root) / "versions"
    if versions.is_dir():
        for v in sorted(versions.iterdir(), key=lambda p: p.name):
            if re.fullmatch(r"3\.1[2-9](\.\d+)?", v.name):
                candidates.append(str(v / "bin" / "python"))
    for c in candidates:
        if runs_python_312(c):
            return c
    return None


def ensure_ref_python(args: argparse.Namespace, scratch: Path) -> str:
    """Return an interpreter with jaato-eval 0.3.4; create a venv for it if needed."""
    if args.ref_python and Path(args.ref_python).exists():
        return args.ref_python
    venv = Path(args.ref_python).parent.parent if args.ref_python else scratch / "refvenv"
    if args.ref_python:
        log(f"--ref-python {args.ref_python} does not exist: creating the venv {venv}")
    base = args.ref_base_python or find_base_python()
    if not base:
        raise SystemExit("bench: need a Python >= 3.12 to create the reference venv "
                         "(pass --ref-base-python or --ref-python)")
    log(f"creating reference venv {venv} with {base} (pip install {' '.join(REF_REQUIREMENTS)})")
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *REF_REQUIREMENTS], check=True)
    return str(py)


def distribution_versions(python: str, names: Sequence[str]) -> Dict[str, Optional[str]]:
    code = ("import json, sys\nfrom importlib.metadata import version\nout = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = version(n)\n"
            "    except Exception: out[n] = None\n"
            "print(json.dumps(out))")
    try:
        proc = subprocess.run([python, "-c", code, *names], capture_output=True, text=True,
                              timeout=60)
        return json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return {n: None for n in names}


# --------------------------------------------------------------------------- daemon

def socket_answers(path: str, timeout: float = 1.0) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        return s.connect_ex(path) == 0
    except OSError:
        return False
    finally:
        s.close()


def _proc_stat(pid: int) -> Optional[Tuple[str, int]]:
    """(state, ppid) from /proc/PID/stat, or None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def pid_alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def is_jaato(pid: int) -> bool:
    try:
        return b"jaato_server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def processes_naming(needle: str) -> List[int]:
    """Live processes (not this one) whose command line contains `needle`, e.g. a scratch dir."""
    me, found, text = os.getpid(), [], needle.encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me:
            try:
                if text in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return [p for p in found if pid_alive(p)]


def write_report(path: Optional[str], report: Dict[str, Any]) -> None:
    """--json: every raw measurement, for whoever wants to re-read a run."""
    if path:
        Path(path).write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        log(f"raw measurements: {path}")


def run_cli(main: Callable[[], int]) -> None:
    """The scripts' entry: Ctrl-C still stops the daemons and removes the scratch dir."""
    try:
        raise SystemExit(main())
    except KeyboardInterrupt as exc:
        log(f"interrupted ({exc or 'Ctrl-C'}); daemons stopped, scratch removed")
        raise SystemExit(130) from None


def descendants_of(root: int) -> List[int]:
    """Every live descendant of ``root`` (stdlib only: walks /proc)."""
    children: Dict[int, List[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None:
                children.setdefault(stat[1], []).append(int(entry.name))
    out: List[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class PrivateDaemon:
    """A jaato daemon in the foreground, in its own session, with its own files."""

    def __init__(self, python: str, root: Path, label: str) -> None:
        self.python = python
        self.root = root
        self.label = label
        root.mkdir(parents=True, exist_ok=True)
        self.socket = str(root / "d.sock")
        self.pid_file = str(root / "d.pid")
        self.log_file = str(root / "d.log")
        self.output = root / "d.out"
        self.proc: Optional[subprocess.Popen] = None
        if len(self.socket) > SOCKET_PATH_MAX:
            raise SystemExit(f"bench: socket path too long for AF_UNIX: {self.socket}")

    def start(self, timeout: float) -> float:
        """Start and wait until the socket accepts a connection. Returns seconds to ready."""
        started = time.monotonic()
        with self.output.open("ab") as out:
            self.proc = subprocess.Popen(
                [self.python, "-m", "jaato_server", "--ipc-socket", self.socket,
                 "--pid-file", self.pid_file, "--log-file", self.log_file],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=str(self.root), start_new_session=True)
        # Ready = a successful connect; the socket file appears before the daemon listens.
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} daemon exited with {self.proc.returncode} "
                                   f"before it was ready; see {self.output}")
            if socket_answers(self.socket, timeout=0.5):
                ready = time.monotonic() - started
                log(f"{self.label} daemon pid {self.proc.pid} ready in {ready:.2f}s on {self.socket}")
                return ready
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.label} daemon not ready after {timeout:.0f}s; see {self.output}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and socket_answers(self.socket)

    def stop(self, how: str = "flag") -> float:
        """Stop the daemon; returns seconds taken.

        ``flag``: ``jaato_server --stop`` with our own pid file and socket (the documented
        way). Its orphan sweep gives every descendant still alive when the daemon has gone
        a SIGTERM and up to 2 s, which usually costs 2-5 s here.
        ``sigterm``: SIGTERM to the daemon (our child), wait for it, then end any of its
        descendants that outlived it; ~1 s.
        """
        if self.proc is None:
            return 0.0
        started = time.monotonic()
        if how == "sigterm":
            self._stop_by_signal()
            took = time.monotonic() - started
            log(f"{self.label} daemon stopped (SIGTERM) in {took:.2f}s")
            self.proc = None
            return took
        # Reap the daemon while --stop waits on it: --stop polls os.kill(pid, 0), which a
        # zombie child still answers, so an unreaped daemon costs 5 s and a SIGKILL.
        reaper = threading.Thread(target=self.proc.wait, daemon=True)
        reaper.start()
        try:
            subprocess.run([self.python, "-m", "jaato_server", "--stop",
                            "--pid-file", self.pid_file, "--ipc-socket", self.socket],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        except subprocess.TimeoutExpired:
            log(f"{self.label} daemon: --stop timed out")
        reaper.join(timeout=15)
        if self.proc.poll() is None:
            # Only the process group this script created, by its id.
            log(f"{self.label} daemon pid {self.proc.pid} still alive after --stop: SIGKILL to its group")
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        took = time.monotonic() - started
        log(f"{self.label} daemon stopped in {took:.2f}s")
        self.proc = None
        return took

    def _stop_by_signal(self) -> None:
        assert self.proc is not None
        descendants = descendants_of(self.proc.pid)
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            log(f"{self.label} daemon pid {self.proc.pid} ignored SIGTERM: SIGKILL to its group")
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        log(f"{self.label} daemon exited; {sum(pid_alive(p) for p in descendants)} of "
            f"{len(descendants)} descendants still alive")
        # Runners the daemon started and did not take down with it; ours, by pid.
        deadline = time.monotonic() + 3
        # A pid is only ours while it still runs jaato code (pids are recycled).
        survivors = [p for p in descendants if pid_alive(p) and is_jaato(p)]
        for p in survivors:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass
        while survivors and time.monotonic() < deadline:
            time.sleep(0.05)
            survivors = [p for p in survivors if pid_alive(p)]
        if survivors:
            log(f"{self.label} daemon: SIGKILL to {len(survivors)} runner(s) that outlived it")
        for p in survivors:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in (self.socket, self.pid_file):
            try:
                os.unlink(name)
            except OSError:
                pass


# --------------------------------------------------------------------------- runs

def global_state() -> Dict[str, Optional[str]]:
    state: Dict[str, Optional[str]] = {}
    for p in GLOBAL_PATHS:
        path = Path(p)
        if path.is_socket():
            state[p] = f"socket mtime {path.stat().st_mtime}"
        elif path.is_file():
            try:
                state[p] = "file " + path.read_text(errors="replace").strip()[:40]
            except OSError:
                state[p] = "file (unreadable)"
        else:
            state[p] = None
    return state


@dataclass
class RunResult:
    side: str
    phase: str  # cold | warm
    index: int
    rc: Optional[int] = None
    wall: Optional[float] = None        # the command alone
    daemon_ready: Optional[float] = None  # script-managed daemon, when one was started for this run
    daemon_stop: Optional[float] = None
    total: Optional[float] = None       # what a user waits for: daemon start + run + stop
    arms: List[Dict[str, Any]] = field(default_factory=list)  # arm_id, duration_seconds, state
    skipped: Optional[str] = None
    global_paths_changed: Optional[Dict[str, Any]] = None
    traces_left: Optional[int] = None  # /tmp/jaato-<sid>/ folders still there after the run
    log: Optional[str] = None


class StoreWatcher:
    """Timestamps each record as it lands in a JSONL store, from outside the process.

    Both engines append and flush one line per arm as it finishes, so the gaps between
    landings are each engine's real per-arm cost (session, grading, bookkeeping), measured
    the same way for both, whatever each one puts in its own ``duration_seconds``.
    """

    POLL = 0.02

    def __init__(self, path: Path, started: float) -> None:
        self.path = path
        self.started = started
        self.landed: List[float] = []  # seconds since the command started, one per line
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "StoreWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._poll()  # whatever landed in the last poll interval

    def _poll(self) -> None:
        try:
            lines = self.path.read_bytes().count(b"\n")
        except OSError:
            return
        now = time.monotonic() - self.started
        while len(self.landed) < lines:
            self.landed.append(now)

    def _loop(self) -> None:
        while not self._stop.wait(self.POLL):
            self._poll()


def run_command(cmd: Sequence[str], *, cwd: Path, log_path: Path, timeout: float,
                watch: Optional[Path] = None) -> Tuple[Optional[int], float, List[float]]:
    """Run in a new session; on timeout end that session's process group.

    Returns (exit code or None on timeout, wall seconds, landing time of each store line).
    """
    log("$ " + " ".join(cmd))
    started = time.monotonic()
    watcher = StoreWatcher(watch, started) if watch is not None else None
    with log_path.open("wb") as out:
        proc = subprocess.Popen(list(cmd), cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        if watcher is not None:
            watcher.__enter__()
        try:
            rc: Optional[int] = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"timed out after {timeout:.0f}s: ending process group {proc.pid}")
            end_group(proc)
            rc = None
        except BaseException:
            # Interrupted: end the run BEFORE its daemon is stopped, or its client would
            # auto-start a replacement daemon with global default paths.
            end_group(proc)
            raise
        finally:
            if watcher is not None:
                watcher.__exit__()
    return rc, time.monotonic() - started, (watcher.landed if watcher is not None else [])


def end_group(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, to the process group this script created for ``proc``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def read_store(path: Path) -> List[Dict[str, Any]]:
    arms: List[Dict[str, Any]] = []
    if not path.is_file():
        return arms
    for index, line in enumerate(path.read_text(encoding="utf-8").split("\n")):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a truncated trailing line
        if not isinstance(rec, dict):
            continue
        arms.append({"line": index, "arm_id": rec.get("arm_id"),
                     "duration_seconds": rec.get("duration_seconds"),
                     "state": rec.get("state") or rec.get("verdict"),
                     "session_ids": rec.get("session_ids") or
                     ([rec["session_id"]] if rec.get("session_id") else [])})
    return arms


def traces_of(arms: List[Dict[str, Any]]) -> List[str]:
    """The /tmp/jaato-<sid>/ trace folders the daemon left for this run's sessions."""
    found = []
    for arm in arms:
        for sid in arm.get("session_ids") or []:
            if isinstance(sid, str) and re.fullmatch(r"[0-9_]+", sid):
                if os.path.isdir(f"/tmp/jaato-{sid}"):
                    found.append(f"/tmp/jaato-{sid}")
    return found


def with_repeats(tasks: Path, repeats: int, dest: Path) -> Path:
    """A copy of the tasks tree with every task.yaml's top-level ``repeats:`` set to N.

    jaato-eval 0.3.4 has no repeats flag: ``repeats`` is read from each manifest only.
    """
    shutil.copytree(tasks, dest, symlinks=True)
    for manifest in dest.rglob("task.yaml"):
        text = manifest.read_text(encoding="utf-8")
        if re.search(r"(?m)^repeats\s*:", text):
            text = re.sub(r"(?m)^repeats\s*:.*$", f"repeats: {repeats}", text)
        else:
            text = text.rstrip("\n") + f"\nrepeats: {repeats}\n"
        manifest.write_text(text, encoding="utf-8")
    return dest


# --------------------------------------------------------------------------- the two sides

class Side:
    name = ""

    def __init__(self, args: argparse.Namespace, scratch: Path) -> None:
        self.args = args
        self.scratch = scratch / self.name
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.shared_daemon: Optional[PrivateDaemon] = None
        self.shared_ready: Optional[float] = None

    # per side
    def python(self) -> str:
        raise NotImplementedError

    def unavailable(self) -> Optional[str]:
        return None

    def command(self, run_dir: Path, store: Path, socket_path: Optional[str]) -> List[str]:
        raise NotImplementedError

    def needs_script_daemon(self) -> bool:
        """Whether this script must start a daemon for a run (ours can start its own)."""
        return True

    # shared-daemon mode: one daemon for all of this side's runs
    def open(self) -> None:
        if self.args.daemon == "shared":
            self.shared_daemon = PrivateDaemon(self.python(), self.scratch / "daemon", self.name)
            self.shared_ready = self.shared_daemon.start(self.args.daemon_timeout)

    def close(self) -> Optional[float]:
        if self.shared_daemon is not None:
            took = self.shared_daemon.stop(self.args.daemon_stop)
            self.shared_daemon = None
            return took
        return None

    def run(self, phase: str, index: int) -> RunResult:
        result = RunResult(side=self.name, phase=phase, index=index)
        run_dir = self.scratch / f"{phase}-{index}"
        run_dir.mkdir(parents=True, exist_ok=True)
        store = run_dir / "results.jsonl"
        log_path = run_dir / "output.log"
        result.log = str(log_path)
        daemon: Optional[PrivateDaemon] = None
        before = global_state()
        try:
            if self.shared_daemon is not None:
                daemon = self.shared_daemon
            elif self.needs_script_daemon():
                daemon = PrivateDaemon(self.python(), run_dir / "daemon", self.name)
                result.daemon_ready = daemon.start(self.args.daemon_timeout)
            if daemon is not None and not daemon.alive():
                # Never hand jaato-eval a dead socket: its client would auto-start a daemon
                # with the global pid file and log.
                result.skipped = f"private daemon not answering on {daemon.socket}; run refused"
                return result
            cmd = self.command(run_dir, store, daemon.socket if daemon else None)
            result.rc, result.wall, landed = run_command(
                cmd, cwd=run_dir, log_path=log_path, timeout=self.args.timeout, watch=store)
        finally:
            if daemon is not None and daemon is not self.shared_daemon:
                result.daemon_stop = daemon.stop(self.args.daemon_stop)
            after = global_state()
            if after != before:
                result.global_paths_changed = {"before": before, "after": after}
                log(f"WARNING: global jaato paths changed during {self.name} {phase}: "
                    f"{before} -> {after}. Something auto-started a daemon on the global "
                    f"defaults; stop it with: python -m jaato_server --stop")
        result.arms = read_store(store)
        for arm in result.arms:
            line = arm.pop("line")
            arm["landed_at"] = landed[line] if line < len(landed) else None
        traces = traces_of(result.arms)
        result.traces_left = len(traces)
        if not self.args.keep_traces:
            for folder in traces:
                shutil.rmtree(folder, ignore_errors=True)
        if result.wall is not None:
            result.total = result.wall + (result.daemon_ready or 0.0) + (result.daemon_stop or 0.0)
        return result


class Reference(Side):
    name = "reference"

    def __init__(self, args: argparse.Namespace, scratch: Path, ref_python: str,
                 tasks: Path) -> None:
        super().__init__(args, scratch)
        self.ref_python = ref_python
        self.tasks = tasks

    def python(self) -> str:
        return self.ref_python

    def command(self, run_dir: Path, store: Path, socket_path: Optional[str]) -> List[str]:
        assert socket_path, "the reference is never run without a private socket"
        # A fresh --workspaces per run: the daemon writes <ws>/<arm>/.jaato/ after the engine
        # discards an arm's workspace, and jaato-eval BLOCKS every arm whose workspace exists.
        cmd = [self.ref_python, "-m", "jaato_eval", "run", str(self.tasks),
               "--out", str(store), "--socket", socket_path,
               "--workspaces", str(run_dir / "workspaces"),
               "--concurrency", str(self.args.ref_concurrency)]
        for extra in self.args.ref_arg:
            cmd.append(extra)
        return cmd


class Ours(Side):
    name = "ours"

    def __init__(self, args: argparse.Namespace, scratch: Path, python: str, tasks: Path) -> None:
        super().__init__(args, scratch)
        self.our_python = python
        self.tasks = tasks

    def python(self) -> str:
        return self.our_python

    def needs_script_daemon(self) -> bool:
        return False  # without --jaato-socket the plugin starts its own private daemon

    def unavailable(self) -> Optional[str]:
        if not Path(self.our_python).exists():
            return f"{self.our_python} does not exist (create it with ./dev, or pass --python)"
        try:
            proc = subprocess.run([self.our_python, "-m", "pytest", "--help"],
                                  capture_output=True, text=True, timeout=120,
                                  cwd=str(self.scratch))
        except (OSError, subprocess.SubprocessError) as exc:
            return f"pytest --help failed: {exc}"
        if "--jaato-out" not in proc.stdout:
            return "the plugin does not offer --jaato-out yet (pytest --help)"
        if self.args.repeats and "--jaato-repeats" not in proc.stdout:
            return "the plugin does not offer --jaato-repeats yet (pytest --help)"
        return None

    def command(self, run_dir: Path, store: Path, socket_path: Optional[str]) -> List[str]:
        cmd = [self.our_python, "-m", "pytest", str(self.tasks), "-p", "no:cacheprovider", "-q",
               *DEV_ONLY_PLUGINS, "--jaato-out", str(store)]
        if self.args.repeats:
            cmd += ["--jaato-repeats", str(self.args.repeats)]
        if socket_path:
            cmd += ["--jaato-socket", socket_path]
        cmd += list(self.args.ours_arg)
        return cmd


def run_side(side: Side, warm_runs: int) -> Dict[str, Any]:
    reason = side.unavailable()
    if reason:
        log(f"{side.name}: skipped: {reason}")
        return {"skipped": reason, "runs": []}
    runs: List[RunResult] = []
    shared_stop: Optional[float] = None
    try:
        side.open()
        runs.append(side.run("cold", 0))
        for i in range(warm_runs):
            runs.append(side.run("warm", i))
    finally:
        shared_stop = side.close()
    for r in runs:
        states: Dict[str, int] = {}
        for a in r.arms:
            states[str(a.get("state"))] = states.get(str(a.get("state")), 0) + 1
        log(f"{side.name} {r.phase}-{r.index}: rc={r.rc} wall={fmt(r.wall)}s arms={len(r.arms)} "
            f"{states} {r.skipped or ''}")
    return {"skipped": None, "runs": [asdict(r) for r in runs],
            "shared_daemon_ready": side.shared_ready, "shared_daemon_stop": shared_stop}


# --------------------------------------------------------------------------- report

def fmt(x: Optional[float], digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def median(xs: Sequence[float]) -> Optional[float]:
    return statistics.median(xs) if xs else None


def run_metrics(run: Dict[str, Any]) -> Dict[str, Any]:
    """One run's numbers: external (store landings) and self-reported (duration_seconds)."""
    arms = run.get("arms") or []
    durations = [a["duration_seconds"] for a in arms
                 if isinstance(a.get("duration_seconds"), (int, float))]
    landed = sorted(a["landed_at"] for a in arms if isinstance(a.get("landed_at"), (int, float)))
    gaps = [b - a for a, b in zip(landed, landed[1:])]
    wall = run.get("wall")
    return {
        "total": run.get("total"), "wall": wall,
        "ready": run.get("daemon_ready"), "stop": run.get("daemon_stop"),
        "first_landed": landed[0] if landed else None,
        "interval": median(gaps),
        "after_last": (wall - landed[-1]) if landed and wall is not None else None,
        "wall_per_arm": (wall / len(arms)) if arms and wall is not None else None,
        "self_first": durations[0] if durations else None,
        "self_steady": median(durations[1:] if len(durations) > 1 else durations),
        "arms": len(arms), "rc": run.get("rc"),
    }


def summarise(side: Dict[str, Any]) -> Dict[str, Any]:
    """Numbers for the table: the cold run's, and the median over the warm runs."""
    out: Dict[str, Any] = {}
    runs = side.get("runs") or []
    cold = [run_metrics(r) for r in runs if r["phase"] == "cold" and r["wall"] is not None]
    warm = [run_metrics(r) for r in runs if r["phase"] == "warm" and r["wall"] is not None]
    if cold:
        out.update({f"cold_{k}": v for k, v in cold[0].items()})
    if warm:
        for key, value in warm[0].items():
            if key == "rc":
                out["warm_rc"] = [m["rc"] for m in warm]
            elif key == "arms":
                out["warm_arms"] = value
            else:
                out[f"warm_{key}"] = median([m[key] for m in warm
                                             if isinstance(m[key], (int, float))])
    states: Dict[str, int] = {}
    for r in runs:
        for a in r["arms"]:
            states[str(a.get("state"))] = states.get(str(a.get("state")), 0) + 1
    out["states"] = states
    out["traces_left"] = sum(r.get("traces_left") or 0 for r in runs)
    out["sessions"] = sum(len(a.get("session_ids") or []) for r in runs for a in r["arms"])
    out["shared_ready"] = side.get("shared_daemon_ready")
    out["shared_stop"] = side.get("shared_daemon_stop")
    return out


ROWS = [("shared daemon ready (s)", "shared_ready")]
for _phase in ("cold", "warm"):
    ROWS += [
        (f"{_phase}: total (s)  daemon+run+stop", f"{_phase}_total"),
        (f"{_phase}: command wall (s)", f"{_phase}_wall"),
        (f"{_phase}:   daemon ready, script's (s)", f"{_phase}_ready"),
        (f"{_phase}:   daemon stop, script's (s)", f"{_phase}_stop"),
        (f"{_phase}:   start -> 1st arm stored (s)", f"{_phase}_first_landed"),
        (f"{_phase}:   arm-to-arm, median (s)", f"{_phase}_interval"),
        (f"{_phase}:   last arm stored -> exit (s)", f"{_phase}_after_last"),
        (f"{_phase}:   wall / arm (s)", f"{_phase}_wall_per_arm"),
        (f"{_phase}:   self-reported 1st arm (s)", f"{_phase}_self_first"),
        (f"{_phase}:   self-reported rest, median (s)", f"{_phase}_self_steady"),
    ]
ROWS += [("shared daemon stop (s)", "shared_stop")]


def render_table(ours: Dict[str, Any], ref: Dict[str, Any], notes: List[str]) -> str:
    width = max(len(label) for label, _ in ROWS) + 2
    lines = [f"{'metric':<{width}}{'ours':>10}{'reference':>12}{'ours/ref':>10}",
             "-" * (width + 32)]
    for label, key in ROWS:
        a, b = ours.get(key), ref.get(key)
        if a is None and b is None:
            continue
        ratio = (f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float))
                 and b > 0 else "—")
        lines.append(f"{label:<{width}}{fmt(a):>10}{fmt(b):>12}{ratio:>10}")
    for label, key in (("arms stored (cold / warm)", ("cold_arms", "warm_arms")),):
        a = " / ".join(str(ours.get(k, "—")) for k in key)
        b = " / ".join(str(ref.get(k, "—")) for k in key)
        lines.append(f"{label:<{width}}{a:>10}{b:>12}")
    a = ", ".join(f"{k} {v}" for k, v in sorted(ours.get("states", {}).items())) or "—"
    b = ", ".join(f"{k} {v}" for k, v in sorted(ref.get("states", {}).items())) or "—"
    lines.append(f"{'arm states, all runs':<{width}}ours: {a}; reference: {b}")
    a = f"{ours.get('cold_rc', '—')} / {ours.get('warm_rc', '—')}"
    b = f"{ref.get('cold_rc', '—')} / {ref.get('warm_rc', '—')}"
    lines.append(f"{'exit codes (cold / warm)':<{width}}ours: {a}; reference: {b}")
    a = f"{ours.get('traces_left', '—')} of {ours.get('sessions', '—')}"
    b = f"{ref.get('traces_left', '—')} of {ref.get('sessions', '—')}"
    lines.append(f"{'/tmp/jaato-<sid> left, all runs':<{width}}ours: {a}; reference: {b} "
                 f"(removed after counting unless --keep-traces)")
    lines += [""] + [f"note: {n}" for n in notes]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark pytest-jaato-eval against jaato-eval 0.3.4 on one tasks dir.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("tasks", nargs="?", default=str(HERE / "tasks"),
                   help="directory holding task.yaml files")
    p.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"),
                   help="interpreter with pytest-jaato-eval installed (ours)")
    p.add_argument("--ref-python", default=None,
                   help="interpreter with jaato-eval 0.3.4; if missing, a venv is created "
                        "(at its ../.. when the path is given, else in the scratch dir)")
    p.add_argument("--ref-base-python", default=None,
                   help="Python >= 3.12 used to create the reference venv (default: the first found)")
    p.add_argument("--only", choices=("both", "ours", "ref"), default="both")
    p.add_argument("--order", choices=("ref-first", "ours-first"), default="ref-first")
    p.add_argument("--repeats", type=int, default=None,
                   help="repeats per task: ours gets --jaato-repeats N; the reference (no such "
                        "flag) runs on a copy of the tasks with `repeats: N` in each task.yaml")
    p.add_argument("--warm-runs", type=int, default=1, help="warm runs per side (median taken)")
    p.add_argument("--daemon", choices=("per-run", "shared"), default="per-run",
                   help="per-run: every run gets a fresh private daemon (ours: the plugin "
                        "starts its own; reference: this script starts and stops one around "
                        "the run). shared: one private daemon per side for all its runs, "
                        "started by this script; ours gets --jaato-socket")
    p.add_argument("--ref-concurrency", type=int, default=1,
                   help="jaato-eval --concurrency (its default is 2; ours runs arms "
                        "sequentially on one daemon, and concurrent sessions on one daemon "
                        "can deadlock)")
    p.add_argument("--ref-arg", action="append", default=[],
                   help="extra argument for `jaato_eval run` (repeatable; use --ref-arg=--x)")
    p.add_argument("--ours-arg", action="append", default=[],
                   help="extra argument for pytest (repeatable; use --ours-arg=-x)")
    p.add_argument("--timeout", type=float, default=1800.0, help="ceiling per run, seconds")
    p.add_argument("--daemon-stop", choices=("flag", "sigterm"), default="flag",
                   help="how the script stops a daemon it started: `jaato_server --stop` "
                        "(its orphan sweep costs 2-5 s) or SIGTERM + wait + end survivors")
    p.add_argument("--daemon-timeout", type=float, default=120.0,
                   help="ceiling for a daemon to become ready, seconds")
    p.add_argument("--json", default=None, help="write every raw measurement here")
    p.add_argument("--keep", action="store_true",
                   help="keep the scratch directory (stores, logs, workspaces, daemon logs)")
    p.add_argument("--keep-traces", action="store_true",
                   help="keep the daemon's /tmp/jaato-<session id>/ trace folders")
    args = p.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.warm_runs < 1:
        p.error("--warm-runs must be >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    tasks = Path(args.tasks).resolve()
    if not any(tasks.rglob("task.yaml")):
        raise SystemExit(f"bench: no task.yaml under {tasks}")
    # /tmp directly: sockets need a short path and TMPDIR can be long.
    base = "/tmp" if len(tempfile.gettempdir()) > 40 else None
    scratch = Path(tempfile.mkdtemp(prefix="jbench-", dir=base))
    log(f"scratch: {scratch}")
    notes: List[str] = []
    report: Dict[str, Any] = {"tasks": str(tasks), "args": vars(args), "scratch": str(scratch)}
    try:
        sides: List[Side] = []
        if args.only in ("both", "ref"):
            ref_python = ensure_ref_python(args, scratch)
            ref_tasks = tasks
            if args.repeats:
                ref_tasks = with_repeats(tasks, args.repeats, scratch / "ref-tasks")
                notes.append(f"reference ran a copy of the tasks with repeats: {args.repeats}")
            versions = distribution_versions(ref_python, ["jaato-eval", "jaato-server",
                                                          "jaato-sdk", "pexpect"])
            report["reference_versions"] = versions
            if versions.get("jaato-eval") != "0.3.4":
                notes.append(f"reference is jaato-eval {versions.get('jaato-eval')}, not 0.3.4")
            if not versions.get("pexpect"):
                notes.append("reference venv lacks pexpect: its daemon start-up is ~15 s slower")
            sides.append(Reference(args, scratch, ref_python, ref_tasks))
        if args.only in ("both", "ours"):
            report["ours_versions"] = distribution_versions(
                args.python, ["pytest-jaato-eval", "jaato-server", "jaato-sdk", "pytest"]) \
                if Path(args.python).exists() else None
            sides.append(Ours(args, scratch, args.python, tasks))
        if args.order == "ours-first":
            sides.reverse()
        raw: Dict[str, Any] = {}
        for side in sides:
            raw[side.name] = run_side(side, args.warm_runs)
        report["raw"] = raw
        ours = summarise(raw.get("ours", {}))
        ref = summarise(raw.get("reference", {}))
        report["summary"] = {"ours": ours, "reference": ref}
        for name in ("ours", "reference"):
            if raw.get(name, {}).get("skipped"):
                notes.append(f"{name} skipped: {raw[name]['skipped']}")
        notes.append(f"daemon mode: {args.daemon}; reference --concurrency {args.ref_concurrency}")
        notes.append("'stored' times are when each arm's record landed in the store, timed "
                     "from outside (20 ms polls): arm-to-arm is the full per-arm cost, same "
                     "yardstick for both. 'self-reported' is each store's duration_seconds, "
                     "which the two engines do not measure over the same span (jaato-eval: "
                     "connect + session + history wait, grading excluded)")
        if args.daemon == "per-run":
            notes.append("ours: daemon start/stop happen inside the pytest run, so its 'total' "
                         "is its command wall; the reference's total adds the script-managed "
                         "daemon's ready and stop times")
        if any(r.get("global_paths_changed") for side in raw.values()
               for r in side.get("runs") or []):
            notes.append("WARNING: the global /tmp/jaato.sock or /tmp/jaato.pid changed during a run")
        load = os.getloadavg()
        report["loadavg_at_end"] = load
        notes.append(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on "
                     f"{os.cpu_count()} CPUs (other work on the machine skews every number)")
        print(render_table(ours, ref, notes))
        write_report(args.json, report)
        failed = [r for side in raw.values() for r in side.get("runs") or []
                  if r.get("rc") is None or r.get("skipped")]
        return 1 if failed else 0
    finally:
        if args.keep:
            log(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    run_cli(main)
