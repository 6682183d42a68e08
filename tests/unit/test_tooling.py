"""The suite is also the lint gate: ruff, mypy and import-linter, configured in pyproject.toml,
must be clean.

All three come with the `test` extra, so `./dev pytest tests/` (and CI, which runs it) checks them
without another command. A finding prints exactly as the tool reports it.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(f"{tool} is not installed beside {sys.executable}; "
                    f"install the test extra: pip install -e '.[test]'")
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def test_ruff_is_clean():
    result = _run("ruff", "check", "--no-cache", "pytest_jaato_eval", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean():
    # mypy keeps its cache in .mypy_cache (git-ignored): the first run in a checkout takes
    # about a minute on a loaded 2-core machine, later ones a few seconds.
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_import_contract_holds():
    # The layers, no cycle inside a folder, pytest only where it belongs: [tool.importlinter].
    # --no-cache: a cache beside the sources would be one more file to ignore, for ~1 s saved.
    result = _run("lint-imports", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout
