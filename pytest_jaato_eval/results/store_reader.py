"""Reading a JSONL result store: `scan`, the one streaming reader of any store, ours or
jaato-eval 0.3.4's, line by line, with nothing kept; and the loaders every reader parses a
line with."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from .record import ArmRecord, RecordError


@dataclass(slots=True)
class Line:
    """One non-blank line of a store: its record, or why it has none."""
    number: int
    offset: int
    record: ArmRecord | None
    problem: str | None = None      # "not JSON", "not a result record (...)"
    partial: bool = False           # a cut last line: a run stopped mid-write
    problems: list[str] | None = None  # the record's own (only with check=True)


class TooDeep(ValueError):
    """A line nested deeper than a parser recurses: read as not JSON, never a traceback."""


def _int(text: str) -> int | float:
    """A JSON integer. One longer than Python converts (4,300 digits) is still a number,
    read as +/-inf (a number no reader can show: unknown), as msgspec does when it skips
    it, so the fast and the whole readers agree on which lines are records."""
    limit = sys.get_int_max_str_digits()
    if limit and len(text) - text.startswith("-") > limit:
        return float(text)
    return int(text)


def _json_loads(raw: bytes) -> Any:
    try:
        try:
            return json.loads(raw, parse_int=_int)
        except UnicodeDecodeError:  # invalid UTF-8 in some text: read it, shown replaced
            return json.loads(raw.decode("utf-8", errors="replace"), parse_int=_int)
    except RecursionError:
        raise TooDeep("nested too deeply") from None


def fields_loader(names: tuple[str, ...] | None = None) -> Callable[[bytes], Any]:
    """A loader of one store line, as `json.loads(raw)` reads it: the whole line, or with
    `names`, only those top-level keys ({key: value}, absent ones None).

    msgspec parses about three times faster than `json`, and with `names` skips the other
    keys (a failed verdict's evidence is most of a line) while still checking the whole
    line is JSON: about five times faster. A line it does not take (NaN, a number out of
    range, a lone surrogate, invalid UTF-8...) is read by `json`, so every line means what
    `json.loads` says it means (an integer of more than 4,300 digits: a number out of range,
    where `json.loads` alone would refuse the line).
    """
    try:
        import msgspec
    except ImportError:  # a minimal install: everything is read by json
        return _json_loads
    decode: Callable[[bytes], Any]
    if names is None:
        decode = msgspec.json.decode
    else:
        head = msgspec.defstruct("StoreLineHead", [(name, Any, None) for name in names])
        decode_head, asdict = msgspec.json.Decoder(head).decode, msgspec.structs.asdict

        def decode_keys(raw: bytes) -> Any:
            return asdict(decode_head(raw))
        decode = decode_keys

    def load(raw: bytes) -> Any:
        try:
            return decode(raw)
        except msgspec.MsgspecError:
            return _json_loads(raw)
        except RecursionError:
            raise TooDeep("nested too deeply") from None
    return load


_loads = fields_loader()


def scan(path: Path | str, check: bool = False) -> Iterator[Line]:
    """Every non-blank line of a store, in order, with its record; one pass, nothing
    kept. A line that is not a record says why; a cut last line is marked partial.
    Raises OSError when the file cannot be read."""
    with open(path, "rb") as fh:
        offset = 0
        number = 0
        for raw in fh:
            number += 1
            start, offset = offset, offset + len(raw)
            if raw.isspace():
                continue
            try:
                data = _loads(raw)
            except ValueError:
                yield Line(number, start, None, "not JSON", partial=not raw.endswith(b"\n"))
                continue
            problems: list[str] | None = [] if check else None
            try:
                record = ArmRecord.from_dict(data, problems)
            except RecordError as exc:
                yield Line(number, start, None, str(exc))
                continue
            yield Line(number, start, record, problems=problems)


def read_at(path: Path | str, offsets) -> Iterator[ArmRecord]:
    """The records starting at these byte offsets (from `scan`), in the order given."""
    with open(path, "rb") as fh:
        for offset in offsets:
            fh.seek(offset)
            yield ArmRecord.from_dict(_loads(fh.readline()))


def read_records(path: Path) -> Iterator[ArmRecord]:
    """Every complete record; a partial or unreadable line is skipped."""
    return (line.record for line in scan(path) if line.record is not None)


def latest_by_arm(records) -> dict[str, ArmRecord]:
    """A repeated arm id counts once, at its last record's place (R3: the last wins)."""
    out: dict[str, ArmRecord] = {}
    for record in records:
        record = record if isinstance(record, ArmRecord) else ArmRecord.from_dict(record)
        out.pop(record.arm_id, None)
        out[record.arm_id] = record
    return out


def task_ids_in(path: Path) -> set[str]:
    """The task ids a store holds (unreadable lines skipped)."""
    ids = set()
    load = fields_loader(("task_id",))
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    task = load(raw).get("task_id")
                except (ValueError, AttributeError):
                    continue
                if type(task) is str:
                    ids.add(task)
    except OSError:
        pass
    return ids
