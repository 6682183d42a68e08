"""The suite is also the lint gate: ruff, mypy and import-linter, configured in pyproject.toml,
must be clean.

All three come with the `test` extra, so `./dev pytest tests/` (and CI, which runs it) checks them
without another command. A finding prints exactly as the tool reports it.
"""
from __future__ import annotations

import ast
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


FUNCTION_IMPORTS_AT_MOST = 20


def function_level_imports(package: Path) -> list[tuple[str, int, bool]]:
    """Every import inside a function of the package: (file, line, whether a comment on its
    line or the line above says why)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        seen: set[int] = set()
        for func in ast.walk(ast.parse(text)):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in seen:
                    seen.add(id(node))
                    here, above = lines[node.lineno - 1], lines[node.lineno - 2]
                    said = "#" in here or above.strip().startswith("#")
                    found.append((str(path.relative_to(package.parent)), node.lineno, said))
    return sorted(found)


def test_imports_are_at_the_top_but_a_few_each_saying_why():
    """Imports at the top, except the plugin's one lazy registration and heavy optional
    dependencies (the SDK until an arm runs, weasyprint, msgspec, Jinja2, pytest-html, xdist):
    at most 20, each with its reason in a comment."""
    found = function_level_imports(REPO / "pytest_jaato_eval")
    unsaid = [f"{file}:{line}" for file, line, said in found if not said]
    assert not unsaid, f"an import inside a function without a comment saying why: {unsaid}"
    assert len(found) <= FUNCTION_IMPORTS_AT_MOST, (
        f"{len(found)} imports inside functions (at most {FUNCTION_IMPORTS_AT_MOST}): "
        + ", ".join(f"{file}:{line}" for file, line, _ in found))


def test_the_import_count_sees_nested_and_uncommented_imports(tmp_path):
    """The count above can fail: an import in a nested function or a method is found, and
    one without a comment is told apart."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        "import os\n"
        "def f():\n"
        "    def g():\n"
        "        import json\n"
        "    # why: heavy\n"
        "    import re\n"
        "class C:\n"
        "    def m(self):\n"
        "        from sys import path  # why\n")
    assert function_level_imports(package) == [("pkg/m.py", 4, False), ("pkg/m.py", 6, True),
                                               ("pkg/m.py", 9, True)]
