"""docs/coming-from-jaato-eval.md: its step-by-step move of a tasks folder, and the examples it
points at, as a fresh clone has them (git keeps no empty folder)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from document_checks import code_blocks

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "coming-from-jaato-eval.md"


def test_the_pages_examples_collect_on_a_fresh_clone(tmp_path):
    """The checklist's collect command, run on a fresh clone's `tests/parity/tasks` (the page's
    examples): every task collects, none missing a `fixture/` or `.jaato/` git dropped."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    commands = [line for info, text in code_blocks(PAGE) if info == "bash"
                for line in text.splitlines() if "my-tasks/" in line]
    assert commands == ["pytest my-tasks/ --collect-only -q"], commands
    argv = commands[0].replace("my-tasks/", "tests/parity/tasks").split()[1:]
    done = subprocess.run([sys.executable, "-m", "pytest", *argv, "-p", "no:cacheprovider"],
                          cwd=clone, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    tasks = sorted(p.parent.name for p in (clone / "tests/parity/tasks").glob("*/task.yaml"))
    collected = {line.split("/")[3] for line in done.stdout.splitlines() if "::" in line}
    assert sorted(collected) == tasks, done.stdout[-3000:]
    assert f"all {len(tasks)} tasks collect on a fresh clone" in " ".join(PAGE.read_text().split())


def test_the_page_says_the_users_own_profiles_are_not_searched():
    text = " ".join(PAGE.read_text().split())
    assert "`~/.jaato/profiles/` is **not searched**" in text
    assert "`<config_root>/profiles/<set>/` and then `<config_root>/profiles/`, nowhere else" in text
