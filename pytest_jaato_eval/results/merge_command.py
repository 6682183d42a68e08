"""`merge OUT STORE...`: one store written from several, by merge.py's rules; OUT never
overwrites an input, and an existing OUT is kept under a timestamped name.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from . import transcripts
from .command_io import EXIT_OK, Unusable, expand, say
from .merge import Merged, Refused, combine, limited, read_store


def _refuse_output_over_input(out: Path, inputs: list[Path]) -> None:
    for path in inputs:
        same = os.path.realpath(out) == os.path.realpath(path)
        if not same and out.exists():
            try:
                same = os.path.samefile(out, path)
            except OSError:
                pass
        if same:
            raise Refused(f"{out}: is also an input ({path}); merge never writes over an "
                          f"input: name a new OUT")


def _keep_existing(out: Path) -> Path | None:
    """An existing OUT is kept under a timestamped name, never overwritten (as a run's store)."""
    if not out.exists() and not out.is_symlink():
        return None
    if out.is_dir():
        raise Unusable(f"{out}: is a directory, expected the merged store's file name")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target, n = out.with_name(f"{out.stem}.{stamp}{out.suffix}"), 1
    while target.exists() or target.is_symlink():
        target, n = out.with_name(f"{out.stem}.{stamp}-{n}{out.suffix}"), n + 1
    out.rename(target)
    return target


def write_store(out: Path, merged: Merged) -> Path | None:
    """Write the records that count to OUT, each line exactly as its input had it, whole
    or not at all; returns where an old OUT was kept."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.merging-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            for index, store in enumerate(merged.stores):
                offsets = [store.offset_of[p] for i, p in merged.chosen if i == index]
                with open(store.path, "rb") as src:
                    for offset in offsets:
                        src.seek(offset)
                        line = src.readline()
                        fh.write(line if line.endswith(b"\n") else line + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        kept = _keep_existing(out)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return kept


def cmd_merge(args) -> int:
    out = Path(args.out)
    inputs = expand(args.stores)
    _refuse_output_over_input(out, inputs)
    stores = [read_store(p) for p in inputs]
    problems = [p for s in stores for p in s.problems]
    if problems:
        for line in limited(problems, "problems"):
            say(f"problem: {line}", file=sys.stderr)
        raise Refused(f"{len(problems)} problem(s) in the inputs (listed above; `validate` "
                      f"shows them all): a merged store must be valid; nothing written")
    merged = combine(stores)
    merged.refuse_changed()
    for note in merged.skipped_notes():
        say(note, file=sys.stderr)
    for note in merged.pin_notes:
        say(f"warning: {note}", file=sys.stderr)
    kept = write_store(out, merged)
    if kept is not None:
        transcripts.follow(out, kept)  # the old OUT's transcripts go with it
    missing = copy_transcripts(out, merged)
    total = sum(len(s.records) for s in stores)
    say(f"{out}: {len(merged.records)} arms from {len(stores)} stores ({total} records read"
        + (f", {len(merged.replaced)} arms in more than one store" if merged.replaced else "")
        + ")")
    if kept is not None:
        say(f"the previous {out.name} was kept as {kept}")
    if missing:
        say(f"warning: {missing} record(s) name a transcript their input's folder does not "
            f"hold; the merged store names it all the same", file=sys.stderr)
    return EXIT_OK


def copy_transcripts(out: Path, merged: Merged) -> int:
    """Each counted record's transcript, copied beside OUT; how many could not be found."""
    missing = 0
    for index, position in merged.chosen:
        store = merged.stores[index]
        name = store.records[position].transcript
        if name is not None and not transcripts.copy(store.path, out, name):
            missing += 1
    return missing
