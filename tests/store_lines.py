"""Store lines for the command tests (tests/unit/test_commands.py, test_merge.py), and the
command line itself in a fresh interpreter."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_jaato_eval.testing.records import PROVENANCE, arm_record, write_store


def arm(task, ps, repeat, state, *, run="run1", sdk="0.29.4", task_hash="h1", reason=None,
        cost=0.01):
    """A store line as a dict (tests edit it into hostile shapes)."""
    record = arm_record(task, ps, repeat, state, run_id=run, task_hash=task_hash, reason=reason,
                        cost=cost, session_ids=[], provenance={**PROVENANCE,
                                                               "jaato_sdk_version": sdk})
    return record.to_dict()


def write(path: Path, records, tail: str = "") -> Path:
    return write_store(path, records, tail)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The real entry point, in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "pytest_jaato_eval", *map(str, args)],
                          capture_output=True, text=True, timeout=120)
