"""The JSONL result store: one record per arm, appended and flushed as each arm ends (R1, X5)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, Any, Iterator


class Store:
    """The run's one writer. Opened lazily, so a run that grades nothing writes nothing (X1)."""

    def __init__(self, path: Path, append: bool = False):
        self.path = Path(path)
        self.append_to_existing = append
        self.rotated_to: Path | None = None
        self._fh: IO[str] | None = None
        self.written = 0

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and not self.append_to_existing and self.path.stat().st_size:
            # X5: never append silently, never delete: keep the old file under a new name.
            stamp = time.strftime("%Y%m%d-%H%M%S")
            target = self.path.with_name(f"{self.path.stem}.{stamp}{self.path.suffix}")
            n = 1
            while target.exists():
                target = self.path.with_name(f"{self.path.stem}.{stamp}-{n}{self.path.suffix}")
                n += 1
            self.path.rename(target)
            self.rotated_to = target
        self._fh = open(self.path, "a", encoding="utf-8")
        if self._fh.tell() and not _ends_with_newline(self.path):
            self._fh.write("\n")  # a cut last line stays cut; ours starts on a fresh line

    def append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self._open()
        self._fh.write(json.dumps(record, sort_keys=False, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())  # a killed run keeps every arm it finished
        self.written += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record; a partial or unreadable line is skipped (R1)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "arm_id" in record:
                yield record


def latest_by_arm(records) -> dict[str, dict[str, Any]]:
    """R3: a repeated arm id counts once; the last record wins."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        out.pop(record["arm_id"], None)
        out[record["arm_id"]] = record
    return out
