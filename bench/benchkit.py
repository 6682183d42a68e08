"""What the bench scripts share: interpreters, private daemons, timed commands, their process
trees and memory, stores watched from outside, and a few numbers-and-tables helpers.

The scripts run under the project venv's interpreter (`./dev python bench/X.py`): every process
tree is started, found, measured and ended through the package's own
`pytest_jaato_eval.processes` (psutil), which names a process by its pid and start time, so a
recycled pid is never signalled.

Safety rules, kept here once for every script:

- a jaato daemon is always private: its socket, pid file and log live in a scratch directory,
  never on the global defaults (/tmp/jaato.sock, /tmp/jaato.pid), which are watched around runs;
- a script ends only processes it started and what those started, by pid;
- Ctrl-C, SIGTERM and SIGHUP unwind through every `finally`, so daemons are stopped and scratch
  directories removed (`run_cli`).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import psutil

from pytest_jaato_eval import launch, processes
from pytest_jaato_eval.processes import Ident

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUR_PYTHON = str(REPO / ".venv" / "bin" / "python")
REF_PYTHON = "/tmp/refvenv/bin/python"
REF_REQUIREMENTS = ["jaato-eval==0.3.4", "jaato-server[interactive]==1.2.0", "jaato-sdk==0.29.0"]
GLOBAL_PATHS = ("/tmp/jaato.sock", "/tmp/jaato.pid")
# Plugins of the dev venv (the `test` extra) that a user's install does not carry. hypothesis's
# terminal summary imports hypothesis: measured 0.7 s on the controller and 1.4 s per xdist
# worker at the end of every run, none of it ours. Blocked in every measured pytest command.
DEV_ONLY_PLUGINS = ["-p", "no:hypothesispytest"]
SOCKET_PATH_MAX = 100  # AF_UNIX sun_path is 108 bytes on Linux; keep a margin


# --------------------------------------------------------------------------- the script around

def log(msg: str) -> None:
    # Never let a closed stderr (e.g. `| head`) abort a run before its daemons are stopped.
    try:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_cli(main: Callable[[], int]) -> None:
    """A script's entry: SIGTERM and SIGHUP unwind like Ctrl-C, through every `finally`."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        raise SystemExit(main())
    except KeyboardInterrupt as exc:
        log(f"interrupted ({exc or 'Ctrl-C'}); what was started is stopped, scratch removed")
        raise SystemExit(130) from None


@contextlib.contextmanager
def scratch(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A fresh directory directly under /tmp (sockets inside it need a short path)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    log(f"scratch: {path}")
    try:
        yield path
    finally:
        if keep:
            log(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def busy_seconds() -> float:
    """The whole machine's busy CPU time so far (/proc/stat): a run's daemons and runners
    included, which a child's rusage misses once they are re-parented. Differences are
    the run's only on an otherwise idle machine."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = fh.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def write_json(path: str | Path | None, data: Any) -> None:
    """--json: every raw measurement, for whoever wants to re-read a run."""
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        log(f"raw measurements: {path}")


# --------------------------------------------------------------------------- numbers, tables

def median(xs: Iterable[Any]) -> float | None:
    nums = [x for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return statistics.median(nums) if nums else None


def ratio(a: Any, b: Any) -> float | None:
    ok = all(isinstance(x, (int, float)) for x in (a, b))
    return a / b if ok and b else None


def compare_rows(a: Sequence[dict], b: Sequence[dict], keys: Sequence[str] = ("wall", "cpu"),
                 label: Callable[[str], str] = lambda key: f"{key} (s)") -> list[list[str]]:
    """A table row per key: the median of side `a`, of side `b`, and a / b."""
    rows = []
    for key in keys:
        x, y = median(r[key] for r in a), median(r[key] for r in b)
        rows.append([label(key), fmt(x), fmt(y), fmt(ratio(x, y))])
    return rows


def on_off(runs: int, one_run: Callable[[str, int], dict]) -> dict[str, dict]:
    """A feature measured against itself switched off: `one_run(side, i)` for the sides "on"
    and "off", `runs` times each, alternating and each side first in turn (load drift, and
    whatever a run leaves the next one, fall on both sides alike). Per side: the median wall,
    the median time between two stored arms, the median `bytes` per arm, and its runs."""
    rs: dict[str, list[dict]] = {"on": [], "off": []}
    for i in range(runs):
        for side in (("off", "on") if i % 2 == 0 else ("on", "off")):
            rs[side].append(one_run(side, i))
    return {side: {"wall_s": median(r["wall"] for r in done),
                   "per_arm_s": median(r["per_arm"] for r in done),
                   "bytes_per_arm": median(r["bytes"] / max(r["arms"], 1) for r in done),
                   "runs": done} for side, done in rs.items()}


def fmt(x: Any, digits: int = 2) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def table(head: Sequence[str], rows: Iterable[Sequence[Any]], *, left: int = 1,
          markdown: bool = False) -> list[str]:
    """Lines of a table: columns aligned (the first `left` to the left), or markdown."""
    cells = [[c if isinstance(c, str) else fmt(c) for c in row] for row in rows]
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + \
               ["| " + " | ".join(row) + " |" for row in cells]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(head)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    top = line(head)
    return [top, "-" * len(top)] + [line(r) for r in cells]


# --------------------------------------------------------------------------- interpreters

def find_base_python() -> str | None:
    """A Python >= 3.12 (jaato-eval needs it): this one, one on PATH, or one under pyenv."""
    candidates = [sys.executable] if sys.version_info >= (3, 12) else []
    candidates += [p for p in map(shutil.which, ("python3.12", "python3.13", "python3.14",
                                                 "python3")) if p]
    # pyenv shims exist for every installed version but only run the active one.
    versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if versions.is_dir():
        candidates += [str(v / "bin" / "python") for v in sorted(versions.iterdir())
                       if re.fullmatch(r"3\.1[2-9](\.\d+)?", v.name)]
    for c in candidates:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            if subprocess.run([c, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"],
                              capture_output=True, timeout=30).returncode == 0:
                return c
    return None


def ensure_ref_python(path: str | None, scratch_dir: Path | None = None,
                      base: str | None = None) -> str:
    """An interpreter with jaato-eval 0.3.4. If `path` does not exist, a venv is made at its
    ../.. (kept for next time); without `path`, a throwaway one in `scratch_dir`."""
    if path and Path(path).exists():
        return path
    if path is None and scratch_dir is None:
        raise SystemExit("bench: no reference interpreter given")
    venv = Path(path).parent.parent if path else scratch_dir / "refvenv"
    base = base or find_base_python()
    if not base:
        raise SystemExit("bench: need a Python >= 3.12 to create the reference venv "
                         "(pass --ref-base-python or --ref-python)")
    log(f"creating reference venv {venv} with {base} (pip install {' '.join(REF_REQUIREMENTS)})")
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", *REF_REQUIREMENTS], check=True)
    return str(venv / "bin" / "python")


def distribution_versions(python: str, names: Sequence[str]) -> dict[str, str | None]:
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
        return dict.fromkeys(names)


def git_export(ref: str, dest: Path) -> Path:
    """The package as of `ref` (`git archive`d; nothing else of the repository) under dest:
    put dest first on PYTHONPATH to load that code through the same venv."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", ref, "pytest_jaato_eval"],
                          capture_output=True, check=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


ECHO_WRITER = {"name": "writer", "provider": "echo", "model": "echo",
               "plugins": ["file_edit(preload)", "permission"],
               "plugin_configs": {
                   "echo": {"tool_call": {"name": "writeNewFile",
                                          "args": {"path": "answer.txt", "content": "READY\n"}},
                            "response": "done",
                            "usage": {"prompt_tokens": 10, "output_tokens": 5}},
                   "permission": {"policy": {"defaultPolicy": "allow"}}},
               "runtime_limits": {"unload_grace_seconds": 0}}


def echo_task(tasks: Path, task_id: str, *, repeats: int = 1,
              budget: dict[str, Any] | None = None) -> Path:
    """An offline task: echo writes READY into answer.txt, a script grader checks it."""
    import yaml
    task = tasks / task_id
    (task / "fixture").mkdir(parents=True)
    (task / "fixture" / "seed.txt").write_text("seed\n")
    (task / ".jaato" / "profiles" / "echo").mkdir(parents=True)
    (task / ".jaato" / "profiles" / "echo" / "writer.yaml").write_text(yaml.safe_dump(ECHO_WRITER))
    manifest: dict[str, Any] = {
        "id": task_id, "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "Write READY."},
        "harness": {"profile": "writer", "profile_set": "echo"},
        "graders": [{"kind": "script", "run": "grep -qx READY answer.txt"}],
        "repeats": repeats}
    if budget:
        manifest["budget"] = budget
    (task / "task.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return task


def our_pytest(python: str, tasks: str | Path, store: str | Path, *extra: str) -> list[str]:
    """Ours, as every script measures it."""
    return [python, "-m", "pytest", str(tasks), "-p", "no:cacheprovider", "-q",
            *DEV_ONLY_PLUGINS, "--jaato-out", str(store), *extra]


# --------------------------------------------------------------------------- process trees

def spawn(cmd: Sequence[str], *, env: dict[str, str] | None = None,
          death_signal: int = signal.SIGKILL, **popen: Any) -> tuple[subprocess.Popen, processes.Tree]:
    """Start `cmd` as a tree of ours: its own session, our marker in its environment (so its
    descendants are found even re-parented), `death_signal` to it if this script dies."""
    env, marker = processes.new_tree_env(dict(os.environ if env is None else env))
    popen.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen(list(cmd), env=env, start_new_session=True,
                            preexec_fn=lambda: launch.die_with_parent(death_signal), **popen)
    return proc, processes.adopt(proc.pid, marker)


def describe(ident: Ident) -> str:
    proc = ident.process()
    try:
        cmd = " ".join(proc.cmdline()) if proc else "(gone)"
    except psutil.Error:
        cmd = "(gone)"
    return f"{ident.pid} {cmd[:160]}"


def naming(needle: str) -> list[Ident]:
    """Live processes of this user, other than this one, whose command line names `needle` (a
    scratch directory of this script's) and that were started inside a process tree of ours or
    of the plugin (their environment carries the tree marker): a shell merely looking at the
    directory is not one of them."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "uids"]):
        try:
            if (proc.pid != os.getpid() and proc.info["uids"].real == os.getuid()
                    and needle in " ".join(proc.info["cmdline"] or ())
                    and processes.TREE_VAR in proc.environ()):
                ident = Ident.of(proc.pid)
                if ident is not None and ident.alive():
                    found.append(ident)
        except (psutil.Error, AttributeError):
            continue
    return found


def end_leftovers(idents: Iterable[Ident] = (), needle: str | None = None,
                  settle: float = 0.0, label: str = "") -> list[str]:
    """What is still alive of `idents` (and of the processes naming `needle`) after `settle`
    seconds is reported and ended, by pid; returns their descriptions."""
    live = {i for i in idents if i.alive()} | set(naming(needle) if needle else ())
    if settle and live:
        processes.wait_gone(live, settle)
        live = {i for i in live if i.alive()}
    if not live:
        return []
    said = [describe(i) for i in sorted(live, key=lambda i: i.pid)]
    log(f"WARNING: {len(live)} process(es) of {label or 'a run'} outlived it; ending them: {said}")
    processes.kill_all(live, grace=2.0)
    return said


def kind(ident: Ident) -> str:
    """What a process is, for the memory breakdown."""
    try:
        cmd = ident.process().cmdline()
    except (psutil.Error, AttributeError):
        return "gone"
    text = " ".join(cmd)
    if "jaato_server" in text:
        return "daemon" if "--ipc-socket" in text else "runner"
    if "jaato_eval" in text:
        return "jaato_eval"
    if "pytest" in text:
        return "pytest"
    if "execnet" in text or "xdist" in text or "-c" in cmd[1:4]:
        return "xdist worker"  # execnet's `python -u -c "import sys;exec(eval(...))"`
    return Path(cmd[0]).name if cmd else "?"


class Background:
    """A daemon thread running `self._loop()` from the `with` block's start to its end
    (`self._stop` is set at the end)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def pss(proc: psutil.Process) -> int:
    """A process's proportional set size (bytes): each shared page split between the
    processes that map it, so runners forked from one template are not counted N times."""
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemorySampler(Background):
    """Peak of the summed RSS (`pss=True`: PSS) of every process below the roots, sampled
    every `interval` s.

    A process seen once stays counted while it lives (its pid and start time), so a runner
    re-parented after its parent exits is not lost. RSS counts shared pages in every process
    that maps them; PSS splits them (it reads each process's smaps: dearer per sample).
    """

    def __init__(self, roots: Callable[[], Iterable[int]], interval: float = 0.2,
                 pss: bool = False) -> None:
        self.roots, self.interval, self.pss = roots, interval, pss
        self.peak, self.peak_procs, self.samples = 0, 0, 0
        self.breakdown: dict[str, dict[str, float]] = {}
        self._seen: dict[Ident, str] = {}  # every process counted, and what it is
        super().__init__()

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        for pid in self.roots():
            root = Ident.of(pid)
            for ident in [root, *processes.descendants(pid)] if root else []:
                if ident not in self._seen:
                    self._seen[ident] = kind(ident)  # while it lives: its command line
        sizes: dict[Ident, int] = {}
        for ident in list(self._seen):
            proc = ident.process()
            try:
                sizes[ident] = 0 if proc is None else pss(proc) if self.pss else (
                    proc.memory_info().rss)
            except psutil.Error:
                sizes[ident] = 0
            if not sizes[ident]:  # gone for good: a pid and start time never come back
                del self._seen[ident], sizes[ident]
        total = sum(sizes.values())
        self.samples += 1
        self.peak_procs = max(self.peak_procs, len(sizes))
        if total > self.peak:
            self.peak = total
            kinds: dict[str, list[int]] = {}
            for ident, size in sizes.items():
                now = kind(ident)  # again: one first seen between fork and exec was its parent
                self._seen[ident] = self._seen[ident] if now == "gone" else now
                kinds.setdefault(self._seen[ident], []).append(size)
            self.breakdown = {k: {"n": len(v), "mb": round(sum(v) / 2**20, 1)}
                              for k, v in sorted(kinds.items())}

    def result(self) -> dict[str, Any]:
        return {"peak_rss_mb": round(self.peak / 2**20, 1), "peak_procs": self.peak_procs,
                "peak_breakdown": self.breakdown, "mem_samples": self.samples}


class StoreWatcher(Background):
    """Timestamps each record as it lands in a JSONL store, from outside the process.

    Both engines append and flush one line per arm as it finishes, so the gaps between
    landings are each engine's real per-arm cost, measured the same way for both.
    """

    POLL = 0.02

    def __init__(self, path: Path, started: float) -> None:
        self.path, self.started = path, started
        self.landed: list[float] = []  # seconds since the command started, one per line
        super().__init__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._poll()  # whatever landed in the last poll interval

    def _poll(self) -> None:
        try:
            lines = self.path.read_bytes().count(b"\n")
        except OSError:
            return
        now = time.monotonic() - self.started
        self.landed.extend([now] * max(0, lines - len(self.landed)))

    def _loop(self) -> None:
        while not self._stop.wait(self.POLL):
            self._poll()


@dataclass
class Run:
    rc: int | None  # None: it timed out and was ended
    wall: float
    landed: list[float] = field(default_factory=list)
    memory: dict[str, Any] | None = None
    leftovers: list[str] = field(default_factory=list)

    @property
    def timed_out(self) -> bool:
        return self.rc is None


def run(cmd: Sequence[str], *, cwd: Path, log_path: Path, timeout: float | None = None,
        env: dict[str, str] | None = None, watch: Path | None = None, memory: bool = False,
        also: Callable[[], Iterable[int]] = lambda: (), needle: str | None = None,
        settle: float = 1.0, pss: bool = False) -> Run:
    """Run `cmd` as a tree of ours, its output in `log_path`, and time it.

    `watch`: timestamp every line landing in that store. `memory`: the peak summed RSS (`pss`:
    PSS) of its tree and of the trees of the pids `also` gives (a daemon it talks to). On a timeout, or
    when this script is interrupted, the whole tree is ended by pid. Afterwards whatever of the
    tree (or naming `needle`) outlives it by `settle` seconds is reported and ended.
    """
    log("$ " + " ".join(map(str, cmd)))
    started = time.monotonic()
    with log_path.open("wb") as out:
        proc, tree = spawn(cmd, env=env, cwd=str(cwd), stdout=out, stderr=subprocess.STDOUT)
    result = Run(rc=None, wall=0.0)
    watcher = StoreWatcher(watch, started) if watch is not None else None
    sampler = MemorySampler(lambda: [proc.pid, *also()], pss=pss) if memory else None
    with contextlib.ExitStack() as stack:
        for ctx in (watcher, sampler):
            if ctx is not None:
                stack.enter_context(ctx)
        try:
            result.rc = processes.wait(proc, tree, timeout, poll=0.5)
        except subprocess.TimeoutExpired:
            log(f"timed out after {timeout:.0f}s: ending the tree of pid {proc.pid}")
            tree.kill()
            proc.wait()
        except BaseException:
            # Interrupted: end the run BEFORE its daemon is stopped, or a client would
            # auto-start a replacement daemon with global default paths.
            tree.kill()
            proc.wait()
            raise
        finally:
            result.wall = time.monotonic() - started
    result.landed = watcher.landed if watcher else []
    result.memory = sampler.result() if sampler else None
    result.leftovers = end_leftovers(tree.members() - {tree.leader}, needle, settle,
                                     label=" ".join(map(str, cmd[1:3])))
    tree.kill(0)  # forget the tree (nothing of it is alive now)
    return result


def measure(cmd: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None,
            output: Path | None = None) -> dict[str, Any]:
    """One child's wall and CPU seconds (user + system), peak RSS (MB, its own, from wait4)
    and exit code. stdout goes to `output` (else nowhere), stderr's tail is returned."""
    with tempfile.TemporaryFile() as err, \
            (output.open("wb") if output else open(os.devnull, "wb")) as out:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024, "rc": proc.returncode, "stderr": tail}


# --------------------------------------------------------------------------- daemons

def socket_answers(path: str, timeout: float = 1.0) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            return s.connect_ex(path) == 0
        except OSError:
            return False


def global_state() -> dict[str, str | None]:
    state: dict[str, str | None] = {}
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


def global_changes(before: dict[str, str | None], label: str) -> dict[str, Any] | None:
    """The global jaato paths' change since `before`, warned about, or None."""
    after = global_state()
    if after == before:
        return None
    log(f"WARNING: global jaato paths changed during {label}: {before} -> {after}. Something "
        f"auto-started a daemon on the global defaults; stop it with: python -m jaato_server --stop")
    return {"before": before, "after": after}


class PrivateDaemon:
    """A jaato daemon in the foreground, in its own session, with its own files.

    jaato-eval's client auto-starts a daemon on the GLOBAL pid file and log when its socket
    does not answer, so a reference run is only ever handed one whose `alive()` is true.
    """

    def __init__(self, python: str, root: Path, label: str,
                 env: dict[str, str | None] | None = None) -> None:
        self.python, self.root, self.label = python, root, label
        self.env = {k: v for k, v in (env or {}).items() if v}
        root.mkdir(parents=True, exist_ok=True)
        self.socket = str(root / "d.sock")
        self.pid_file = str(root / "d.pid")
        self.output = root / "d.out"
        self.proc: subprocess.Popen | None = None
        self.tree: processes.Tree | None = None
        if len(self.socket) > SOCKET_PATH_MAX:
            raise SystemExit(f"bench: socket path too long for AF_UNIX: {self.socket}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float) -> float:
        """Start, and wait until the socket accepts a connection. Returns seconds to ready."""
        started = time.monotonic()
        with self.output.open("ab") as out:
            # SIGTERM if this script dies: the daemon's own shutdown takes its runners along.
            self.proc, self.tree = spawn(
                [self.python, "-m", "jaato_server", "--ipc-socket", self.socket,
                 "--pid-file", self.pid_file, "--log-file", str(self.root / "d.log")],
                env={**os.environ, **self.env}, death_signal=signal.SIGTERM, stdout=out,
                stderr=subprocess.STDOUT, cwd=str(self.root))
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
        self.stop("sigterm")
        raise RuntimeError(f"{self.label} daemon not ready after {timeout:.0f}s; see {self.output}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and socket_answers(self.socket)

    def stop(self, how: str = "flag") -> float:
        """Stop the daemon and its runners; returns the seconds the stop itself took.

        ``flag``: ``jaato_server --stop`` with our own pid file and socket (the documented
        way); its orphan sweep gives every runner still alive a SIGTERM and up to 2 s, which
        usually costs 2-5 s here. ``sigterm``: SIGTERM to the daemon, a wait, then the
        descendants that outlived it are ended by pid; about 1 s.
        Either way, anything of its tree still alive afterwards is ended (not timed).
        """
        if self.proc is None or self.tree is None:
            return 0.0
        proc, tree = self.proc, self.tree
        started = time.monotonic()
        family = processes.descendants(proc.pid)
        if how == "sigterm":
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        else:
            # Reap the daemon while --stop waits on it: --stop polls os.kill(pid, 0), which a
            # zombie child still answers, so an unreaped daemon costs 5 s and a SIGKILL.
            reaper = threading.Thread(target=proc.wait, daemon=True)
            reaper.start()
            try:
                subprocess.run([self.python, "-m", "jaato_server", "--stop", "--pid-file",
                                self.pid_file, "--ipc-socket", self.socket],
                               capture_output=True, timeout=60)
            except subprocess.TimeoutExpired:
                log(f"{self.label} daemon: --stop timed out")
            reaper.join(timeout=15)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            log(f"{self.label} daemon pid {proc.pid} still alive: SIGKILL to its tree")
            tree.kill(grace=0)
            proc.wait(timeout=10)
        if how == "sigterm":
            survivors = [i for i in family if i.alive()]
            log(f"{self.label} daemon exited; {len(survivors)} of {len(family)} descendants "
                f"still alive")
            processes.kill_all(survivors, grace=3.0)  # runners it did not take along
            for name in (self.socket, self.pid_file):
                with contextlib.suppress(OSError):
                    os.unlink(name)
        took = time.monotonic() - started
        log(f"{self.label} daemon stopped ({how}) in {took:.2f}s")
        end_leftovers(tree.members() | set(family), label=f"the {self.label} daemon")
        tree.kill(0)
        self.proc = self.tree = None
        return took


# --------------------------------------------------------------------------- stores

def read_records(path: Path, landed: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """Every JSON object line of a store (a truncated last line is skipped); with `landed`
    (a StoreWatcher's), each gets `landed_at`: when its line appeared."""
    records: list[dict[str, Any]] = []
    if not path.is_file():
        return records
    for index, line in enumerate(path.read_text(encoding="utf-8").split("\n")):
        try:
            rec = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(rec, dict):
            if landed is not None:
                rec["landed_at"] = landed[index] if index < len(landed) else None
            records.append(rec)
    return records


def count(values: Iterable[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out
