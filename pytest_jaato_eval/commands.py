"""Store commands: `report`, `compare`, `validate` (`python -m pytest_jaato_eval ...`).

They read any result store, ours or one written by jaato-eval 0.3.4 (same R2 record;
ours adds keys). One exit-code vocabulary for all three:

    0  ok
    1  problems found (validate) / a group regressed (compare)
    2  unusable input: a missing or unreadable store, one with no record, a bad option

Bad input is one line naming the file (and line, and key), never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import review, stats
from .pivot import Cell, build_cells, interval_text, pct, render_pivot
from .record import RECORD_KEYS, RESULTS_VERSION
from .render import safe_text
from .report.pins import pin_differences, pins
from .store import latest_by_arm
from .verdict import BLOCKED, FAIL, PASS, STATES


def say(line: str, file=None) -> None:
    """Print one line of a command's output. Arm ids, task ids and reasons come from a
    store anybody may have written, so no control character reaches the terminal."""
    print(safe_text(line, None, collapse=False), file=file or sys.stdout)


EXIT_OK, EXIT_PROBLEMS, EXIT_UNUSABLE = 0, 1, 2
VERDICT_KEYS = ("grader_id", "claim", "state", "detail", "evidence", "blocked_reason")
PROG = "python -m pytest_jaato_eval"


class Unusable(Exception):
    """Input no command can work with; the message is the one line the user sees."""


# -- reading a store, line by line ------------------------------------------------------
@dataclass
class StoreFile:
    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    line_of: list[int] = field(default_factory=list)        # the line each record came from
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    partial_last: int | None = None                          # a cut last line (R1)

    def skipped_notes(self) -> list[str]:
        notes = [f"{self.path}:{n}: skipped: {why}" for n, why in self.bad_lines]
        if self.partial_last:
            notes.append(f"{self.path}:{self.partial_last}: skipped: partial last line "
                         f"(a run stopped mid-write)")
        return notes


def read_store(path: str | Path) -> StoreFile:
    path = Path(path)
    if not path.exists():
        raise Unusable(f"{path}: no such file")
    if path.is_dir():
        raise Unusable(f"{path}: is a directory, expected a JSONL result store")
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    store = StoreFile(path)
    lines = text.split("\n")
    cut = not text.endswith("\n")  # the writer ends every record with a newline
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if i == last and cut:
                store.partial_last = i + 1
            else:
                store.bad_lines.append((i + 1, "not JSON"))
            continue
        if not isinstance(record, dict) or not isinstance(record.get("arm_id"), str):
            store.bad_lines.append((i + 1, "not a result record (no string arm_id)"))
            continue
        store.records.append(record)
        store.line_of.append(i + 1)
    if not store.records:
        raise Unusable(f"{path}: no result record (expected one JSON object per line, "
                       f"each with an arm_id)")
    return store


# -- report ---------------------------------------------------------------------------------
def cmd_report(args) -> int:
    from .report import html, pdf
    if args.pdf:  # P4: fail before doing anything, naming the install line
        try:
            pdf.load_weasyprint()
        except pdf.PdfUnavailable as exc:
            say(f"error: --pdf: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
    store = read_store(args.store)
    for note in store.skipped_notes():
        say(note, file=sys.stderr)
    latest = latest_by_arm(store.records)
    say(f"{store.path}: {len(latest)} arms")
    for line in render_pivot(build_cells(latest.values()), k=args.k):
        say(line)
    if args.html or args.pdf:
        document = html.render(latest.values(), source=str(store.path), k=args.k)
        if args.html:
            Path(args.html).parent.mkdir(parents=True, exist_ok=True)
            Path(args.html).write_text(document, encoding="utf-8")
            say(f"html report: {args.html}")
        if args.pdf:
            pdf.write(Path(args.pdf), document)
            say(f"pdf report: {args.pdf}")
    return EXIT_OK


# -- validate -------------------------------------------------------------------------------
def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def record_problems(r: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of one record against R2 and G6."""
    problems, warnings = [], []
    version = r.get("results_version")
    if "results_version" not in r:
        problems.append("results_version missing: not a store this reader knows")
    elif version != RESULTS_VERSION:
        problems.append(f"results_version {version!r}: this reader knows {RESULTS_VERSION!r}")
    missing = [k for k in RECORD_KEYS if k not in r]
    if missing:
        problems.append(f"missing keys: {', '.join(missing)} (R2: every key, nulls included)")
    state = r.get("state")
    if state not in STATES:
        problems.append(f"state {state!r}: expected one of {', '.join(STATES)}")
    for key, ok, what in (("task_id", lambda v: isinstance(v, str), "a string"),
                          ("repeat", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
                          ("verdicts", lambda v: isinstance(v, list), "a list"),
                          ("usage", lambda v: v is None or isinstance(v, dict),
                           "a mapping or null"),
                          ("session_ids", lambda v: v is None or isinstance(v, list), "a list"),
                          ("caveats", lambda v: v is None or isinstance(v, list), "a list")):
        if key in r and not ok(r[key]):
            problems.append(f"{key}: expected {what}, got {type(r[key]).__name__}")
    verdicts = r.get("verdicts") if isinstance(r.get("verdicts"), list) else []
    for i, v in enumerate(verdicts):
        if not isinstance(v, dict):
            problems.append(f"verdicts[{i}]: expected a mapping, got {type(v).__name__}")
            continue
        vmissing = [k for k in VERDICT_KEYS if k not in v]
        if vmissing:
            problems.append(f"verdicts[{i}]: missing keys: {', '.join(vmissing)}")
        if v.get("state") not in STATES:
            problems.append(f"verdicts[{i}].state {v.get('state')!r}: expected one of "
                            f"{', '.join(STATES)}")
        elif v.get("state") == BLOCKED and not v.get("blocked_reason"):
            problems.append(f"verdicts[{i}] is BLOCKED without a blocked_reason (G6)")
    vstates = [v.get("state") for v in verdicts if isinstance(v, dict)]
    if state == BLOCKED and not r.get("blocked_reason"):
        problems.append("BLOCKED without a blocked_reason (G6: a BLOCKED arm carries its reason)")
    if state in (PASS, FAIL) and r.get("blocked_reason"):
        problems.append(f"{state} with a blocked_reason: the roll-up (G6) says otherwise")
    if state == PASS and (not vstates or any(s != PASS for s in vstates)):
        problems.append("PASS, but not every grader verdict is PASS (G6)")
    if state == FAIL and FAIL not in vstates:
        problems.append("FAIL, but no grader verdict is FAIL (G6)")
    if isinstance(r.get("task_id"), str) and _is_int(r.get("repeat")):
        expected = f"{r['task_id']}@{r.get('profile_set') or 'default'}#{r['repeat']}"
        if r["arm_id"] != expected:
            warnings.append(f"arm_id does not match task_id@profile_set#repeat ({expected})")
    return problems, warnings


def cmd_validate(args) -> int:
    store = read_store(args.store)
    problems: list[str] = []
    warnings: list[str] = []
    where = {}
    for record, line in zip(store.records, store.line_of):
        arm = record["arm_id"]
        where.setdefault(arm, []).append((line, record.get("run_id")))
        p, w = record_problems(record)
        problems += [f"{store.path}:{line}: {arm}: {m}" for m in p]
        warnings += [f"{store.path}:{line}: {arm}: {m}" for m in w]
    for arm, seen in where.items():
        if len(seen) < 2:
            continue
        lines = ", ".join(str(line) for line, _ in seen)
        runs = [run for _, run in seen if run is not None]
        if len(runs) != len(set(runs)):
            problems.append(f"{store.path}: {arm}: written more than once by one run "
                            f"(lines {lines}): one writer writes each arm once (R1)")
        else:
            warnings.append(f"{store.path}: {arm}: appears {len(seen)} times (lines {lines}); "
                            f"the last counts (R3)")
    problems += [f"{store.path}:{n}: {why}" for n, why in store.bad_lines]
    if store.partial_last:
        problems.append(f"{store.path}:{store.partial_last}: partial last line: a run stopped "
                        f"mid-write and this arm's record is lost (readers skip it, R1)")
    for w in warnings:
        say(f"warning: {w}")
    for p in problems:
        say(f"problem: {p}")
    summary = (f"{store.path}: {len(store.records)} records, {len(problems)} problems, "
               f"{len(warnings)} warnings")
    say(summary if problems else f"{summary}: ok")
    return EXIT_PROBLEMS if problems else EXIT_OK


# -- compare --------------------------------------------------------------------------------
@dataclass
class GroupChange:
    task_id: str
    profile_set: str
    base: Cell | None
    new: Cell | None
    down: list[str] = field(default_factory=list)       # PASS -> FAIL
    up: list[str] = field(default_factory=list)         # FAIL -> PASS
    blocked: list[str] = field(default_factory=list)    # "arm: X -> Y" where one side is BLOCKED

    @property
    def delta(self) -> float | None:
        if self.base is None or self.new is None:
            return None
        if self.base.pass_rate is None or self.new.pass_rate is None:
            return None
        return self.new.pass_rate - self.base.pass_rate

    @property
    def regressed(self) -> bool:
        """More arms flipped to FAIL than to PASS, or a drop the intervals cannot explain.

        Paired flips, not averaged rates: a 2-arm group going 50% -> 50% with two
        opposite flips has churned, not regressed, and says so.
        """
        if len(self.down) > len(self.up):
            return True
        return (self.base is not None and self.new is not None
                and stats.clearly_below(self.new.interval, self.base.interval))


def _cell_text(c: Cell | None) -> str:
    if c is None:
        return "absent"
    return f"{pct(c.pass_rate)} ({interval_text(c.interval)}) n={c.exercised}" + (
        f" +{c.blocked}B" if c.blocked else "")


def compare_groups(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[GroupChange]:
    bcells = {(c.task_id, c.profile_set): c for c in build_cells(base)}
    ncells = {(c.task_id, c.profile_set): c for c in build_cells(new)}
    changes = []
    for key in sorted(set(bcells) | set(ncells)):
        g = GroupChange(*key, bcells.get(key), ncells.get(key))
        barms = {r["arm_id"]: r for r in (g.base.arms if g.base else [])}
        narms = {r["arm_id"]: r for r in (g.new.arms if g.new else [])}
        for arm in sorted(set(barms) & set(narms)):
            b, n = barms[arm].get("state"), narms[arm].get("state")
            if (b, n) == (PASS, FAIL):
                g.down.append(arm)
            elif (b, n) == (FAIL, PASS):
                g.up.append(arm)
            elif b != n and BLOCKED in (b, n):
                reason = narms[arm].get("blocked_reason") if n == BLOCKED else None
                g.blocked.append(f"{arm}: {b} → {n}" + (
                    f" ({' '.join(str(reason).split())[:120]})" if reason else ""))
        changes.append(g)
    return changes


def cmd_compare(args) -> int:
    base, new = read_store(args.base), read_store(args.new)
    for note in base.skipped_notes() + new.skipped_notes():
        say(note, file=sys.stderr)
    blatest = list(latest_by_arm(base.records).values())
    nlatest = list(latest_by_arm(new.records).values())
    say(f"base: {base.path} ({len(blatest)} arms)")
    say(f"new:  {new.path} ({len(nlatest)} arms)")
    for w in pin_differences(pins(blatest), pins(nlatest)):
        say(f"warning: pins differ: {w}")
    changes = compare_groups(blatest, nlatest)
    header = ("group", "base", "new", "Δ pass rate", "flips", "")
    rows = [header]
    for g in changes:
        d = g.delta
        flips = ", ".join(x for x in (f"{len(g.down)} PASS→FAIL" if g.down else "",
                                      f"{len(g.up)} FAIL→PASS" if g.up else "") if x) or "—"
        rows.append((f"{g.task_id} @ {g.profile_set}", _cell_text(g.base), _cell_text(g.new),
                     "—" if d is None else f"{100 * d:+.0f} pts", flips,
                     "REGRESSED" if g.regressed else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        say("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    for g in changes:
        name = f"{g.task_id} @ {g.profile_set}"
        for arm in g.down:
            say(f"PASS→FAIL {arm}")
        for arm in g.up:
            say(f"FAIL→PASS {arm}")
        for line in g.blocked:
            say(f"blocked change {line}")
        if g.base is None:
            say(f"note: {name} is only in the new store")
        elif g.new is None:
            say(f"note: {name} is only in the base store")
    regressed = [g for g in changes if g.regressed]
    if regressed:
        names = ", ".join(f"{g.task_id} @ {g.profile_set}" for g in regressed)
        say(f"regressed: {len(regressed)} group(s): {names}")
        return EXIT_PROBLEMS
    say(f"no group regressed ({len(changes)} compared)")
    return EXIT_OK


# -- entry point ----------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own exit code for usage errors is 2: ours too
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_UNUSABLE)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Read jaato-eval result stores (JSONL).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    rep = sub.add_parser("report", help="print the pivot of a store; optionally write HTML/PDF")
    rep.add_argument("store", help="a result store (ours or jaato-eval 0.3.4's)")
    rep.add_argument("--html", metavar="PATH", help="write the self-contained HTML report")
    rep.add_argument("--pdf", metavar="PATH", help="write the same report as PDF (needs "
                                                   "pip install 'pytest-jaato-eval[pdf]')")
    rep.add_argument("--k", type=_positive, default=None, metavar="K",
                     help="k for pass@k / pass^k (default: the smallest sample among cells "
                          "with repeats)")
    rep.set_defaults(func=cmd_report)
    cmp_ = sub.add_parser("compare", help="compare two stores per (task, profile set); "
                                          "exit 1 when a group regressed")
    cmp_.add_argument("base")
    cmp_.add_argument("new")
    cmp_.set_defaults(func=cmd_compare)
    val = sub.add_parser("validate", help="check a store against the record schema (R2); "
                                          "exit 1 on problems")
    val.add_argument("store")
    val.set_defaults(func=cmd_validate)
    review.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Unusable as exc:
        say(f"error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    except OSError as exc:  # e.g. the --html target cannot be written
        say(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNUSABLE
