"""What end-to-end tests build with: echo profiles, and a project of tasks run through
pytest in a subprocess against a real daemon (the fixtures are in conftest.py)."""
from __future__ import annotations

import json
import os
import tempfile
import textwrap
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
    """A throwaway project of tasks, run through `pytest` in a subprocess."""

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

    def run(self, *args: str, shared_daemon: bool = True, timeout: float = HANG):
        argv = ["-p", "no:cacheprovider", *unused_plugins(args), f"--jaato-out={self.store}",
                *args]
        if shared_daemon:
            argv.append(f"--jaato-socket={self.daemon.socket_path}")
        self.monkeypatch.setenv("TMPDIR", str(self.tmp))
        return self.pytester.runpytest_subprocess(*argv, timeout=timeout)

    def spy_on_daemon_starts(self) -> Path:
        """A root conftest that notes every private daemon start of later runs (xdist
        workers included) in the file returned."""
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

_ensure = daemon.PrivateDaemon.ensure


def ensure(self):  # records that a private daemon was asked to start, then starts it
    with open({mark!r}, "a") as f:
        f.write("started\\n")
    return _ensure(self)


daemon.PrivateDaemon.ensure = ensure
"""


def unused_plugins(args) -> list[str]:
    """`-p no:X` for the installed plugins a run does not use: together they cost ~0.4 s of
    CPU at every pytest start (hypothesis's alone ~0.8 s more), and the suite starts hundreds."""
    off = ["hypothesispytest", "anyio"]
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
