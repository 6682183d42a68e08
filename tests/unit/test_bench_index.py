"""bench/README.md indexes every file in bench/, and its figures point at the journal.

The index is three tables (live benchmarks, finished investigations, helpers and the workload),
one row per script or task folder, its first cell the file's name in backticks. A script added
without a row, or a row left behind by a script removed, fails here; so does a row that quotes
a section of bench/JOURNAL.md that has no such heading.
"""
from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
INDEX_SECTIONS = ("## Live benchmarks", "## Finished investigations", "## Helpers and the workload")
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")
# A figure's source: its date, then the journal section's heading in quotes, then `:` or `)`.
SECTION_REF = re.compile(r'\d{4}-\d{2}-\d{2}, "(.+?)"(?=[:)])')


def index_sections(text: str) -> dict[str, list[str]]:
    """The index's tables: each section heading with the table rows under it."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.strip() if line.strip() in INDEX_SECTIONS else None
            if current:
                sections[current] = []
        elif current and line.startswith("|"):
            sections[current].append(line)
    return sections


def indexed_names(text: str) -> list[str]:
    return [m.group(1) for rows in index_sections(text).values()
            for m in map(ROW.match, rows) if m]


def files_in_bench() -> set[str]:
    scripts = {p.name for p in BENCH.glob("*.py")}
    scripts |= {p.name for p in (BENCH / "tasks").rglob("*.py")}
    tasks = {f"tasks/{p.name}/" for p in (BENCH / "tasks").iterdir() if p.is_dir()}
    return scripts | tasks


def readme() -> str:
    return (BENCH / "README.md").read_text(encoding="utf-8")


def test_the_index_has_its_three_tables():
    assert set(index_sections(readme())) == set(INDEX_SECTIONS)


def test_every_bench_file_has_one_row_and_every_row_a_file():
    names = indexed_names(readme())
    assert sorted(n for n in set(names) if names.count(n) > 1) == [], "named twice in the index"
    on_disk = files_in_bench()
    assert sorted(on_disk - set(names)) == [], "in bench/ but not in bench/README.md's index"
    assert sorted(set(names) - on_disk) == [], "in bench/README.md's index but not in bench/"


def test_every_benchmark_row_cites_a_journal_section_that_exists():
    journal = (BENCH / "JOURNAL.md").read_text(encoding="utf-8")
    headings = [line.lstrip("#").strip() for line in journal.splitlines() if line.startswith("#")]
    sections = index_sections(readme())
    for title in INDEX_SECTIONS[:2]:
        for row in sections[title][2:]:  # past the header row and its rule
            cited = SECTION_REF.findall(row)
            assert cited, f"no dated journal section in: {row[:60]}"
            for section in cited:
                assert any(section in h for h in headings), f"JOURNAL.md has no section {section!r}"
