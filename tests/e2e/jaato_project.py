"""What end-to-end tests build with: echo profiles, and a project of tasks run through
pytest (in this process unless the run is about its process) against a real daemon (the
fixtures are in conftest.py)."""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import yaml


REPO = Path(__file__).resolve().parents[2]
# How long a nested run may take before a test calls it hung: a guard against hangs, far past
# what the slowest run here takes beside a busy machine (about four times its idle time).
HANG = 900

WRITER = {
    "name": "writer", "provider": "echo", "model": "echo",
    "plugins": ["file_edit(preload)", "permission"],
    "plugin_configs": {
        "echo": {"tool_call": {"name": "writeNewFile",
                               "args": {"path": "answer.txt", "content": "READY\n"}},
                 "response": "done", "usage": {"prompt_tokens": 10, "output_tokens": 5,
                                               "cost_usd": 0.001}},
        "permission": {"policy": {"defaultPolicy": "allow"}},
    },
    "runtime_limits": {"unload_grace_seconds": 0},
}

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def signer(payload: dict) -> dict:
    """An echo profile that signs off at once with `payload` (a real signal_completion)."""
    return dict(WRITER, name="signer", completion_payload_schema=SCHEMA, plugin_configs={
        "echo": {"tool_call": {"name": "signal_completion", "args": payload}, "response": "ok"},
        "permission": {"policy": {"defaultPolicy": "allow"}}})


def shell_agent(name: str, command: str) -> dict:
    """An echo profile whose agent runs `command` with jaato's shell tool, then answers."""
    return {"name": name, "provider": "echo", "model": "echo",
            "plugins": ["cli(preload)", "permission"],
            "plugin_configs": {
                "echo": {"tool_call": {"name": "cli_based_tool", "args": {"command": command}},
                         "response": "done"},
                "permission": {"policy": {"defaultPolicy": "allow"}}},
            "runtime_limits": {"unload_grace_seconds": 0}}


def short_tmpdir(prefix: str) -> Path:
    """Unix socket paths must stay short; pytest's tmp paths are long."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class Project:
    """A throwaway project of tasks, run through `pytest` (`run`)."""

    def __init__(self, pytester, daemon, monkeypatch):
        self.pytester = pytester
        self.monkeypatch = monkeypatch
        self.daemon = daemon
        self.root = Path(pytester.path)
        self.store = self.root / "results.jsonl"
        self.tmp = short_tmpdir("jtp-")  # the plugin's TMPDIR: its run folder lands here

    def task(self, task_id: str, *, profile: dict | None = None, graders=None,
             profile_set: str | None = "echo", repeats: int = 1, prompt="Write READY.",
             directory: str | None = None, extra: dict | None = None) -> Path:
        d = self.root / "tasks" / (directory or task_id.replace("/", "_"))
        (d / "fixture").mkdir(parents=True, exist_ok=True)
        (d / "fixture" / "seed.txt").write_text("seed\n")
        profile = dict(profile or WRITER)
        where = d / ".jaato" / "profiles" / (profile_set or "")
        where.mkdir(parents=True, exist_ok=True)
        (where / f"{profile['name']}.yaml").write_text(yaml.safe_dump(profile))
        manifest = {
            "id": task_id,
            "environment": {"fixture": "fixture", "config_root": ".jaato"},
            "input": {"prompt": prompt},
            "harness": {"profile": profile["name"],
                        **({"profile_set": profile_set} if profile_set else {})},
            "graders": graders or [{"kind": "script", "run": "grep -qx READY answer.txt"}],
            "repeats": repeats,
        }
        manifest.update(extra or {})
        (d / "task.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
        return d / "task.yaml"

    def write(self, relpath: str, text: str) -> Path:
        p = self.root / relpath
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
        return p

    def run(self, *args: str, shared_daemon: bool = True, timeout: float = HANG,
            process: bool | None = None):
        """`pytest` on the project: in this process (an interpreter's start and its imports
        saved, about 0.7 s of CPU a run; the plugin is the same code either way), unless the
        run is about its process: an xdist run, a project whose conftest patches the plugin
        or ends its process (it would do so to this worker), or `process=True` (a test of
        what the run's own process or its environment does)."""
        argv = self.argv(*args, shared_daemon=shared_daemon)
        if process is None:
            process = (any(a.startswith(("-n", "--numprocesses", "--dist")) for a in args)
                       or self.conftest_reaches_the_process())
        if process:
            return self.pytester.runpytest_subprocess(*argv, timeout=timeout)
        return in_process(self.pytester, self.monkeypatch, argv, timeout)

    def argv(self, *args: str, shared_daemon: bool = True) -> list[str]:
        """pytest's arguments for a run of the project (the run's TMPDIR set)."""
        argv = ["-p", "no:cacheprovider", *unused_plugins(args), f"--jaato-out={self.store}",
                *args]
        if shared_daemon:
            argv.append(f"--jaato-socket={self.daemon.socket_path}")
        self.monkeypatch.setenv("TMPDIR", str(self.tmp))
        return argv

    def piped(self, *args: str, timeout: float = HANG) -> tuple[int, list[bytes]]:
        """`pytest` on the project in a process of its own, its output a pipe (as a CI log
        reads it): its exit status and each chunk of output as it arrived, in order."""
        argv = [sys.executable, "-m", "pytest", *self.argv(*args)]
        proc = subprocess.Popen(argv, cwd=self.root, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        chunks = []
        deadline = time.monotonic() + timeout
        try:
            while chunk := os.read(proc.stdout.fileno(), 65536):
                chunks.append(chunk)
                assert time.monotonic() < deadline, b"".join(chunks).decode(errors="replace")
            return proc.wait(timeout=max(deadline - time.monotonic(), 1)), chunks
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def conftest_reaches_the_process(self) -> bool:
        return any(needle in path.read_text(errors="replace")
                   for path in self.root.rglob("conftest.py")
                   for needle in ("pytest_jaato_eval", "os._exit", "os.kill", "signal."))

    def spy_on_daemon_starts(self) -> Path:
        """A root conftest that notes every private daemon start of later runs (xdist
        workers included) in the file returned, and that it was loaded at all in the same
        name with `.loaded` added: a spy that saw nothing must have been there to see it.
        (That `PrivateDaemon.ensure` is how a run starts its daemon is shown where a spied
        run does start one: test_pytest_layer_e2e.py's xdist run.)"""
        mark = self.root / "daemon-started"
        self.write("conftest.py", DAEMON_SPY.format(mark=str(mark)))
        return mark

    def records(self) -> list[dict]:
        if not self.store.exists():
            return []
        return [json.loads(line) for line in self.store.read_text().splitlines() if line.strip()]

    def run_dirs(self) -> list[Path]:
        """Folders the plugin made for its run (present only while a run needs them)."""
        return sorted(self.tmp.glob("jaato-eval-*"))


DAEMON_SPY = """\
import pytest_jaato_eval.engine.daemon as daemon

with open({mark!r} + ".loaded", "a") as f:
    f.write("loaded\\n")
_ensure = daemon.PrivateDaemon.ensure


def ensure(self):  # records that a private daemon was asked to start, then starts it
    with open({mark!r}, "a") as f:
        f.write("started\\n")
    return _ensure(self)


daemon.PrivateDaemon.ensure = ensure
"""


def in_process(pytester, monkeypatch, argv: list[str], timeout: float):
    """`pytester.runpytest_inprocess`, with the TMPDIR just set (tempfile caches the first it
    reads, a fresh interpreter would read this one). A run that hangs
    past `timeout` ends this worker with every thread's traceback, as a hung nested process
    would end in its timeout."""
    monkeypatch.setattr(tempfile, "tempdir", None)
    before = process_state()
    faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
    try:
        result = pytester.runpytest_inprocess(*argv)
    finally:
        faulthandler.cancel_dump_traceback_later()
    # The run changed nothing of the process that outlives it (the plugin's promise to
    # whatever runs pytest in process; and this worker's next test starts clean).
    deadline = time.monotonic() + 10
    while (after := process_state()) != before and time.monotonic() < deadline:
        time.sleep(0.1)
    changed = {f"{part}: {key}": (before[part].get(key), after[part].get(key))
               for part in before for key in {*before[part], *after[part]}
               if before[part].get(key) != after[part].get(key)}
    assert not changed, f"the run left its process changed (before, after): {changed}"
    return result


def process_state() -> dict:
    """What a run could leave changed in its process: signal handlers, a pending alarm, the
    environment, threads that still run."""
    return {"signals": {s.name: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT,
                                                            signal.SIGALRM, signal.SIGHUP)},
            # an alarm left armed ends this process when it goes off, handler or not
            "timers": {"ITIMER_REAL": signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0)},
            # pytest's own, which the inner run sets and removes as the outer one does
            "environ": {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
            # the plugin's own (the test's, a scripted model's or a proxy's, are its to end)
            "threads": {t.name: t.is_alive() for t in threading.enumerate()
                        if t.name.startswith("jaato")}}


def unused_plugins(args) -> list[str]:
    """`-p no:X` for the installed plugins a run does not use: together they cost ~0.3 s of
    CPU at every pytest start, and the suite starts hundreds (hypothesis's, which a user's
    install lacks, is left out of every nested pytest: tests/conftest.py)."""
    off = ["anyio"]
    if not any(a.startswith("--html") for a in args):
        off += ["html", "metadata"]
    if not any(a.startswith(("-n", "--numprocesses", "--dist")) for a in args):
        off.append("xdist")
    return [x for name in off for x in ("-p", f"no:{name}")]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (e.g. a run folder)."""
    import psutil
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or ())
        if text in cmd and proc.info["pid"] != os.getpid():
            out.append(cmd)
    return out


def late_remnant(run_dir: Path) -> bool:
    """The run folder only as a daemon that is not the run's remakes it when it writes a
    session's trackers late: the shape a later run sweeps (sweep.is_late_remnant), of any age."""
    from pytest_jaato_eval import sweep
    return sweep.is_late_remnant(run_dir, now=time.time() + 2 * sweep.REMNANT_AGE)
