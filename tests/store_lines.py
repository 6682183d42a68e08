"""Store lines for the command tests (tests/unit/test_commands.py, test_merge.py), and the
command line itself: in a fresh interpreter, or in this one for a table of cases."""
from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from pytest_jaato_eval.cli import main
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


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """The commands' `main`, in this interpreter, its output captured: what a table of cases
    needs. An exception `main` does not turn into a line propagates, failing the test as a
    traceback would; run_cli keeps the entry point itself under test."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in args])
    return subprocess.CompletedProcess(["pytest_jaato_eval", *map(str, args)], code,
                                       out.getvalue(), err.getvalue())
