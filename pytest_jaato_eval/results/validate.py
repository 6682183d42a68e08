"""`validate`: every line of a store checked against the record schema (its types by
`ArmRecord.from_dict`, its consistency by `record_problems`), and several stores against
each other (stores.py's rules for reading them as one).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .pins import pin_notes
from .pivot import plural
from .record import ArmRecord, record_problems
from .snapshots import folder_of, valid_name
from .stores import Unusable, combine, no_record, read_store, readable, scan


def validate_across(paths: Sequence[Path]) -> tuple[list[str], list[str]]:
    """(problems, warnings) `validate` adds when given several stores."""
    stores = [read_store(p) for p in paths]
    merged = combine(stores)
    return merged.changed, merged.replaced + pin_notes(stores)


def snapshot_warnings(path: Path, r: ArmRecord) -> list[str]:
    """A record's snapshot, looked for beside its store: a name that is no file name, or a
    file that is not there, is a warning (a regrade blocks that arm)."""
    if r.snapshot is None:
        return []
    if not valid_name(r.snapshot):
        return [f"snapshot {str(r.snapshot)[:80]!r} is not a file name; a regrade blocks "
                f"this arm"]
    if not (folder_of(path) / r.snapshot).is_file():
        return [f"snapshot {r.snapshot} is not in {folder_of(path)}; a regrade blocks this arm"]
    return []


def validate_store(path: Path) -> tuple[list[str], list[str], str]:
    """(problems, warnings, a summary line) of one store, read in one streaming pass."""
    path = readable(path)
    problems: list[str] = []
    warnings: list[str] = []
    where: dict[str, list[tuple[int, str | None]]] = {}
    records = 0
    try:
        for line in scan(path, check=True):
            if line.record is None:
                if line.partial:
                    problems.append(f"{path}:{line.number}: partial last line: a run stopped "
                                    f"mid-write and this arm's record is lost (readers skip it)")
                else:
                    problems.append(f"{path}:{line.number}: {line.problem}")
                continue
            records += 1
            r = line.record
            where.setdefault(r.arm_id, []).append((line.number, r.run_id))
            p, w = record_problems(r)
            w = w + snapshot_warnings(path, r)
            problems += [f"{path}:{line.number}: {r.arm_id}: {m}" for m in (line.problems or []) + p]
            warnings += [f"{path}:{line.number}: {r.arm_id}: {m}" for m in w]
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not records:
        raise no_record(path)
    for arm, seen in where.items():
        if len(seen) < 2:
            continue
        lines = ", ".join(str(n) for n, _ in seen)
        runs = [run for _, run in seen if run is not None]
        if len(runs) != len(set(runs)):
            problems.append(f"{path}: {arm}: written more than once by one run "
                            f"(lines {lines}): a run writes each arm once")
        else:
            warnings.append(f"{path}: {arm}: appears {len(seen)} times (lines {lines}); "
                            f"the last counts")
    counted = "" if len(where) == records else (
        f" of {plural(len(where), 'arm')} (the last record of an arm is the one counted)")
    summary = (f"{path}: {plural(records, 'record')}{counted}, "
               f"{plural(len(problems), 'problem')}, {plural(len(warnings), 'warning')}")
    return problems, warnings, summary
