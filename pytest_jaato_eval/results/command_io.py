"""What every store command shares: the stores it was given (paths and quoted globs),
opened or refused in one line naming the file, and how it prints and exits.
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .pivot import Pivot
from .record import ArmRecord
from ..render import safe_text
from .store import is_evidence
from .store_reader import scan


def say(line: str, file=None) -> None:
    """Print one line of a command's output. Arm ids, task ids and reasons come from a
    store anybody may have written, so no control character reaches the terminal."""
    print(safe_text(line, None, collapse=False), file=file or sys.stdout)


EXIT_OK, EXIT_PROBLEMS, EXIT_UNUSABLE = 0, 1, 2


class Unusable(Exception):
    """Input no command can work with; the message is the one line the user sees."""


def readable(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise Unusable(f"{path}: no such file")
    if path.is_dir():
        raise Unusable(f"{path}: is a directory, expected a JSONL result store")
    if is_evidence(path):
        raise Unusable(f"{path}: the evidence of a store written into while its run went on "
                       f"(set aside by that run, which wrote the store again): not a store")
    return path


def no_record(path: Path) -> Unusable:
    return Unusable(f"{path}: no result record (expected one JSON object per line, each "
                    f"with an arm_id)")


def open_pivot(path: str | Path) -> Pivot:
    """The pivot of a store, streamed; Unusable when there is nothing to pivot."""
    path = readable(path)
    try:
        pivot = Pivot.of_store(path)
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not pivot.cells:
        raise no_record(path)
    return pivot


@dataclass
class StoreFile:
    """A whole store in memory (small stores: tests, tools)."""
    path: Path
    records: list[ArmRecord] = field(default_factory=list)


def read_store(path: str | Path) -> StoreFile:
    path = readable(path)
    records = [line.record for line in scan(path) if line.record is not None]
    if not records:
        raise no_record(path)
    return StoreFile(path, records)


def expand(patterns: Sequence[str]) -> list[Path]:
    """Paths and glob patterns (a pattern the shell left alone, e.g. quoted) -> the stores,
    each once, in the order given (a pattern's matches sorted)."""
    out: list[Path] = []
    seen: set[str] = set()
    for pattern in patterns:
        if glob.has_magic(pattern) and not os.path.lexists(pattern):
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise Unusable(f"{pattern}: no file matches this pattern")
        else:
            matches = [pattern]
        for match in matches:
            key = os.path.realpath(match)
            if key not in seen:  # a file named twice (or by two patterns) is read once
                seen.add(key)
                out.append(Path(match))
    return out


def open_stores(paths: Sequence[Path]) -> Pivot:
    """One store's pivot, or several stores read as one (merge.py)."""
    if len(paths) == 1:
        return open_pivot(paths[0])
    from .merge import merged_pivot
    return merged_pivot(paths)

