"""docs/behaviours.md stays the place where every cited rule id resolves.

Code, tests and docs cite rules by id (`S7`, `G5`, `X1`, ranges like `S1-S9`). This test
reads them all and fails when one has no entry in the catalogue, and when an entry names a
test that does not exist (a test that moved to another folder still counts: it is looked up
by file name and function name).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CATALOGUE = REPO / "docs" / "behaviours.md"
SCANNED = [REPO / "pytest_jaato_eval", REPO / "tests", REPO / "docs", REPO / "bench",
           REPO / "tasks", REPO / "README.md"]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".txt", ".toml", ".html", ".j2", ".jinja", ".css"}
SKIPPED_DIRS = {".venv", "__pycache__", ".git", "node_modules"}

# The catalogue's groups; an id is one of these letters and a number (C1, S11).
GROUPS = "MWSDCGBRPX"
CITATION = re.compile(rf"\b([{GROUPS}])(\d{{1,2}})(?:\s*[-–]\s*\1?(\d{{1,2}}))?\b")
ENTRY = re.compile(rf"^###\s+([{GROUPS}]\d{{1,2}})\b", re.M)
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _files():
    for root in SCANNED:
        if root.is_file():
            yield root
            continue
        for path in sorted(root.rglob("*")):
            if (path.is_file() and path.suffix in SUFFIXES
                    and not SKIPPED_DIRS.intersection(path.relative_to(REPO).parts)):
                yield path


def cited_ids(text: str) -> set[str]:
    ids = set()
    for letter, first, last in CITATION.findall(text):
        lo = int(first)
        hi = int(last) if last and int(last) > lo else lo
        ids.update(f"{letter}{n}" for n in range(lo, hi + 1))
    return ids


def catalogue_ids() -> set[str]:
    return set(ENTRY.findall(CATALOGUE.read_text(encoding="utf-8")))


def test_the_citation_pattern_reads_single_ids_and_ranges():
    assert cited_ids("stop the spend (S7 fix); rules C1-C4 and P1–P3") == {
        "S7", "C1", "C2", "C3", "C4", "P1", "P2", "P3"}
    assert cited_ids("S9-S11 and M10") == {"S9", "S10", "S11", "M10"}
    # Not rule ids: other letters, longer tokens, hex and words that merely contain one.
    assert cited_ids("A4 landscape, Z95, sha256, #0B2, MS7x, S123") == set()


def test_every_cited_rule_id_has_an_entry():
    known = catalogue_ids()
    assert len(known) >= 60, "the catalogue lost its entries"
    unresolved = {}
    for path in _files():
        for rule in cited_ids(path.read_text(encoding="utf-8", errors="replace")) - known:
            unresolved.setdefault(rule, []).append(str(path.relative_to(REPO)))
    assert not unresolved, (
        "rule ids cited but not in docs/behaviours.md (add the entry, or describe the "
        f"behaviour in docs/ without an id): {unresolved}")


def test_every_test_the_catalogue_names_exists():
    text = CATALOGUE.read_text(encoding="utf-8")
    refs = TEST_REF.findall(text)
    assert refs, "the catalogue names no tests"
    missing = []
    for relpath, name in refs:
        candidates = [p for p in (REPO / "tests").rglob(Path(relpath).name)
                      if "__pycache__" not in p.parts]
        if not any(re.search(rf"^\s*(async\s+)?def {name}\(", p.read_text(encoding="utf-8"), re.M)
                   for p in candidates):
            missing.append(f"{relpath}::{name}")
    assert not missing, f"docs/behaviours.md names tests that do not exist: {missing}"


def test_every_entry_names_at_least_one_test():
    sections = re.split(r"^### ", CATALOGUE.read_text(encoding="utf-8"), flags=re.M)[1:]
    untested = [s.split()[0] for s in sections if not TEST_REF.search(s)]
    assert not untested, f"catalogue entries without a test: {untested}"


def _marks(node: ast.AST) -> set[str]:
    """Names of the pytest marks in decorators or a `pytestmark` value (`pytest.mark.slow`)."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}


def slow_tests() -> set[tuple[str, str]]:
    """(file name, test name) of every test marked slow, itself or by its module."""
    slow = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_slow = any("slow" in _marks(n.value) for n in tree.body if isinstance(n, ast.Assign)
                          and any(getattr(t, "id", "") == "pytestmark" for t in n.targets))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    module_slow or any("slow" in _marks(d) for d in node.decorator_list)):
                slow.add((path.name, node.name))
    return slow


def test_the_fast_loop_still_shows_every_rule():
    """`-m "not slow"` is the developer's loop: each rule keeps a test that is not slow."""
    slow = slow_tests()
    assert slow, "no slow test found: the mark detection is broken"
    sections = re.split(r"^### ", CATALOGUE.read_text(encoding="utf-8"), flags=re.M)[1:]
    only_slow = [s.split()[0] for s in sections
                 if all((Path(f).name, name) in slow for f, name in TEST_REF.findall(s))]
    assert not only_slow, f"rules shown only by slow tests: {only_slow}"
