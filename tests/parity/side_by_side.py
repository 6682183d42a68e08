"""Run one task set through jaato-eval 0.3.4 and through the plugin, on one daemon, and pair
the two stores' arms by (task, repeat).

Used by tests/e2e/test_reference_parity.py; also runnable by hand:

    ./dev python tests/parity/side_by_side.py [TASKS] [--ref-python PY]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks"
REFERENCE = "jaato-eval==0.3.4"
# The reference's own environment faults on a starved host: it sends session.new once and
# waits 60 s (ours sends it again). Such an arm says nothing about whether the two agree.
REFERENCE_FAULTS = ("SessionNotConfirmed",)


@dataclass
class Pair:
    key: tuple[str, int]
    reference: dict | None
    ours: dict | None

    @property
    def comparable(self) -> bool:
        why = (self.reference or {}).get("blocked_reason") or ""
        return not any(fault in why for fault in REFERENCE_FAULTS)

    @property
    def same(self) -> bool:
        return (self.reference is not None and self.ours is not None
                and self.reference.get("state") == self.ours.get("state"))

    def line(self) -> str:
        def show(record: dict | None) -> str:
            if record is None:
                return "missing"
            why = record.get("blocked_reason") or "; ".join(
                f"{v.get('grader_id')}={v.get('state')}" for v in record.get("verdicts") or [])
            return f"{record.get('state')} ({why[:140]})"
        mark = "same" if self.same else "DIFF" if self.comparable else "n/a (reference fault)"
        return f"{mark} {self.key[0]}#{self.key[1]}: reference {show(self.reference)} | ours {show(self.ours)}"


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pair(reference: list[dict], ours: list[dict]) -> list[Pair]:
    def keyed(rows: list[dict]) -> dict[tuple[str, int], dict]:
        return {(r["task_id"], int(r.get("repeat") or 0)): r for r in rows}
    ref, own = keyed(reference), keyed(ours)
    return [Pair(k, ref.get(k), own.get(k)) for k in sorted(set(ref) | set(own))]


def run_reference(ref_python: str, tasks: Path, store: Path, socket: str, scratch: Path,
                  env: dict[str, str]) -> subprocess.CompletedProcess:
    # A fresh --workspaces folder: jaato-eval refuses an arm whose workspace already exists.
    return subprocess.run(
        [ref_python, "-m", "jaato_eval", "run", str(tasks), "--out", str(store),
         "--socket", socket, "--workspaces", str(scratch / "ref-workspaces"),
         "--concurrency", "1", "--arm-timeout", "120"],
        cwd=scratch, env=env, capture_output=True, text=True, timeout=600)


def run_ours(tasks: Path, store: Path, socket: str, scratch: Path,
             env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**env, "COLUMNS": "200"}  # each arm's line whole, as the reference prints it
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(tasks), "-p", "no:cacheprovider",
         f"--jaato-out={store}", f"--jaato-socket={socket}", "--arm-timeout=120",
         f"--rootdir={tasks}"],
        cwd=scratch, env=env, capture_output=True, text=True, timeout=600)


def reference_python(cache: Path) -> str:
    """An interpreter with jaato-eval 0.3.4: this one if it has it, else a venv of its own
    under `cache` (made once)."""
    probe = subprocess.run([sys.executable, "-c", "import jaato_eval"], capture_output=True)
    if probe.returncode == 0:
        return sys.executable
    python = cache / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(cache)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", REFERENCE], check=True)
    return str(python)


def copy_tasks(tasks: Path, dest: Path) -> Path:
    """The tasks, with the empty folders their manifests name (git keeps no empty folder:
    a fresh clone has no `fixture/` or `.jaato/` of a task that ships nothing in it)."""
    shutil.copytree(tasks, dest)
    for manifest in dest.glob("*/task.yaml"):
        env = (yaml.safe_load(manifest.read_text()) or {}).get("environment") or {}
        for key in ("fixture", "config_root"):
            if isinstance(env.get(key), str):
                (manifest.parent / env[key]).mkdir(parents=True, exist_ok=True)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks", nargs="?", default=str(TASKS))
    ap.add_argument("--ref-python", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parents[1]))
    from pytest_jaato_eval.engine.daemon import PrivateDaemon
    scratch = Path(tempfile.mkdtemp(prefix="jsbs-", dir="/tmp"))
    tmp = scratch / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    daemon = PrivateDaemon(scratch / "d", env=env)
    daemon.ensure()
    try:
        ref_py = args.ref_python or reference_python(HERE.parents[1] / ".venv" / "jaato-eval-0.3.4")
        # Ours first: the reference then meets a daemon whose runners are warm.
        ours = run_ours(copy_tasks(Path(args.tasks), scratch / "our-tasks"),
                        scratch / "ours.jsonl", daemon.socket_path, scratch, env)
        ref = run_reference(ref_py, copy_tasks(Path(args.tasks), scratch / "ref-tasks"),
                            scratch / "ref.jsonl", daemon.socket_path, scratch, env)
    finally:
        daemon.stop()
    print(f"reference exit {ref.returncode}; ours exit {ours.returncode}; scratch {scratch}")
    if ref.returncode not in (0, 1, 2):
        print(ref.stderr[-3000:])
    pairs = pair(records(scratch / "ref.jsonl"), records(scratch / "ours.jsonl"))
    for p in pairs:
        print(p.line())
    same = sum(p.same for p in pairs)
    compared = sum(p.comparable for p in pairs)
    print(f"{same} of {compared} arms compared got the same verdict "
          f"({len(pairs) - compared} not compared: the reference's own environment fault)")
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if same == compared else 1


if __name__ == "__main__":
    sys.exit(main())
