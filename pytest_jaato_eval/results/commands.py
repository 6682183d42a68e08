"""Store commands: `report`, `compare`, `validate`, `merge` (`python -m pytest_jaato_eval ...`).

They read any result store, ours or one written by jaato-eval 0.3.4 (same record;
ours adds keys), in one streaming pass: a store of any size costs a summary per arm,
never its whole records. Exit codes:

    report    0 every arm passed · 1 an arm FAILED · 2 an arm BLOCKED, or nothing ran
              (--exit-zero: 0 whatever the verdicts)
    compare   0 no group regressed · 1 a group regressed
    validate  0 ok · 1 problems found
    merge     0 written · 2 refused (an invalid input, a task changed between the inputs)
    all       2 unusable input: a missing or unreadable store, one with no record, a
              bad option, an output that would overwrite an input

Bad input is one line naming the file (and line, and key), never a traceback.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from . import review, stats
from .pivot import Cell, Pivot, interval_text, pct, plural, render_pivot
from .record import RESULTS_VERSION, ArmRecord
from ..render import safe_text
from ..report.pins import pin_differences, pins_of
from .store import check_output, scan
from ..verdict import BLOCKED, FAIL, PASS, STATES


def say(line: str, file=None) -> None:
    """Print one line of a command's output. Arm ids, task ids and reasons come from a
    store anybody may have written, so no control character reaches the terminal."""
    print(safe_text(line, None, collapse=False), file=file or sys.stdout)


EXIT_OK, EXIT_PROBLEMS, EXIT_UNUSABLE = 0, 1, 2
EXIT_PASSED, EXIT_FAILED, EXIT_BLOCKED = 0, 1, 2  # report: the verdict vocabulary
PROG = "python -m pytest_jaato_eval"


class Unusable(Exception):
    """Input no command can work with; the message is the one line the user sees."""


# -- reading a store ----------------------------------------------------------------------
def _readable(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise Unusable(f"{path}: no such file")
    if path.is_dir():
        raise Unusable(f"{path}: is a directory, expected a JSONL result store")
    return path


def _no_record(path: Path) -> Unusable:
    return Unusable(f"{path}: no result record (expected one JSON object per line, each "
                    f"with an arm_id)")


def open_pivot(path: str | Path) -> Pivot:
    """The pivot of a store, streamed; Unusable when there is nothing to pivot."""
    path = _readable(path)
    try:
        pivot = Pivot.of_store(path)
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not pivot.cells:
        raise _no_record(path)
    return pivot


@dataclass
class StoreFile:
    """A whole store in memory (small stores: tests, tools)."""
    path: Path
    records: list[ArmRecord] = field(default_factory=list)


def read_store(path: str | Path) -> StoreFile:
    path = _readable(path)
    records = [line.record for line in scan(path) if line.record is not None]
    if not records:
        raise _no_record(path)
    return StoreFile(path, records)


# -- report ---------------------------------------------------------------------------------
def report_exit(cells: list[Cell]) -> int:
    """0 every arm passed, 1 any FAIL, 2 any BLOCKED (or an unknown state) or nothing ran."""
    if any(c.failed for c in cells):
        return EXIT_FAILED
    if any(c.blocked for c in cells) or not any(c.passed for c in cells):
        return EXIT_BLOCKED
    return EXIT_PASSED


def cmd_report(args) -> int:
    from .merge import expand
    from ..report import html, pdf
    stores = expand(args.store)
    for option in ("html", "pdf"):
        refusal = check_output(f"--{option}", getattr(args, option),
                               *(("store", p) for p in stores))
        if refusal:
            raise Unusable(refusal)
    if args.pdf:  # P4: fail before doing anything, naming the install line
        try:
            pdf.load_weasyprint()
        except pdf.PdfUnavailable as exc:
            say(f"error: --pdf: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
    pivot = _open_stores(stores)  # several: read as one (merge.py)
    for note in pivot.skipped_notes():
        say(note, file=sys.stderr)
    say(f"{pivot.source}: {plural(pivot.arm_count, 'arm')}")
    for line in render_pivot(pivot.cells, k=args.k):
        say(line)
    document = {"source": str(pivot.source), "k": args.k}
    if args.html:  # streamed to the file, a task at a time
        html.write(Path(args.html), pivot, **document)
        say(f"html report: {args.html}")
    if args.pdf:
        pdf.write(Path(args.pdf), html.render(pivot, **document))
        say(f"pdf report: {args.pdf}")
    code = report_exit(pivot.cells)
    if args.exit_zero:
        return EXIT_OK
    return code


# -- validate -------------------------------------------------------------------------------
def record_problems(r: ArmRecord) -> tuple[list[str], list[str]]:
    """(problems, warnings) of one record beyond its types (which `from_dict` reports):
    the version, the states, and whether the arm's state agrees with its verdicts."""
    problems, warnings = [], []
    if r.results_version != RESULTS_VERSION:
        problems.append(f"results_version {r.results_version!r}: this reader knows "
                        f"{RESULTS_VERSION!r}")
    if r.state not in STATES:
        problems.append(f"state {r.state!r}: expected one of {', '.join(STATES)}")
    for i, v in enumerate(r.verdicts):
        if v["state"] not in STATES:
            problems.append(f"verdicts[{i}].state {v['state']!r}: expected one of "
                            f"{', '.join(STATES)}")
        elif v["state"] == BLOCKED and not v.get("blocked_reason"):
            problems.append(f"verdicts[{i}] is BLOCKED without a blocked_reason")
    vstates = [v["state"] for v in r.verdicts]
    if r.state == BLOCKED and not r.blocked_reason:
        problems.append("BLOCKED without a blocked_reason (a BLOCKED arm carries its reason)")
    if r.state in (PASS, FAIL) and r.blocked_reason:
        problems.append(f"{r.state} with a blocked_reason: the verdicts say otherwise")
    if r.state == PASS and (not vstates or any(s != PASS for s in vstates)):
        problems.append("PASS, but not every grader verdict is PASS")
    if r.state == FAIL and FAIL not in vstates:
        problems.append("FAIL, but no grader verdict is FAIL")
    if r.task_id is not None and r.repeat is not None:
        expected = f"{r.task_id}@{r.set_name}#{r.repeat}"
        if r.arm_id != expected:
            warnings.append(f"arm_id does not match task_id@profile_set#repeat ({expected})")
    return problems, warnings


def cmd_validate(args) -> int:
    from .merge import expand, validate_across
    paths = expand(args.store)
    results = [_validate_one(path) for path in paths]
    across = validate_across(paths) if len(paths) > 1 else ([], [])
    for warning in [w for _, ws, _ in results for w in ws] + across[1]:
        say(f"warning: {warning}")
    for problem in [p for ps, _, _ in results for p in ps] + across[0]:
        say(f"problem: {problem}")
    for problems, _, summary in results:
        say(summary if problems else f"{summary}: ok")
    failed = any(ps for ps, _, _ in results) or across[0]
    if len(paths) > 1:
        say(f"{len(paths)} stores read as one: {plural(len(across[0]), 'problem')}, "
            f"{plural(len(across[1]), 'warning')} across them" + ("" if failed else ": ok"))
    return EXIT_PROBLEMS if failed else EXIT_OK


def _validate_one(path: Path) -> tuple[list[str], list[str], str]:
    path = _readable(path)
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
            problems += [f"{path}:{line.number}: {r.arm_id}: {m}" for m in line.problems + p]
            warnings += [f"{path}:{line.number}: {r.arm_id}: {m}" for m in w]
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not records:
        raise _no_record(path)
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
    summary = (f"{path}: {plural(records, 'record')}, {plural(len(problems), 'problem')}, "
               f"{plural(len(warnings), 'warning')}")
    return problems, warnings, summary


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
    def in_both(self) -> bool:
        return self.base is not None and self.new is not None

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
    return (f"{pct(c.pass_rate)} ({interval_text(c.interval)}) n={c.exercised}"
            + (f" +{c.blocked}B" if c.blocked else "") + f" det {c.det_text}")


def compare_groups(base: list[Cell], new: list[Cell]) -> list[GroupChange]:
    bcells = {(c.task_id, c.profile_set): c for c in base}
    ncells = {(c.task_id, c.profile_set): c for c in new}
    changes = []
    for key in sorted(set(bcells) | set(ncells)):
        g = GroupChange(*key, bcells.get(key), ncells.get(key))
        barms = {a.arm_id: a for a in (g.base.arms if g.base else [])}
        narms = {a.arm_id: a for a in (g.new.arms if g.new else [])}
        for arm in sorted(set(barms) & set(narms)):
            b, n = barms[arm].state, narms[arm].state
            if (b, n) == (PASS, FAIL):
                g.down.append(arm)
            elif (b, n) == (FAIL, PASS):
                g.up.append(arm)
            elif b != n and BLOCKED in (b, n):
                reason = narms[arm].blocked_reason if n == BLOCKED else None
                g.blocked.append(f"{arm}: {b} → {n}" + (
                    f" ({' '.join(str(reason).split())[:120]})" if reason else ""))
        changes.append(g)
    return changes


def cmd_compare(args) -> int:
    from .merge import expand
    if args.more:
        raise Unusable(f"compare takes two sides, BASE and NEW, got {2 + len(args.more)} "
                       f"arguments; for several stores a side, quote a pattern "
                       f"('shards/*.jsonl') so it reaches compare as one argument")
    base, new = _open_stores(expand([args.base])), _open_stores(expand([args.new]))
    for note in base.skipped_notes() + new.skipped_notes():
        say(note, file=sys.stderr)
    say(f"base: {base.source} ({plural(base.arm_count, 'arm')})")
    say(f"new:  {new.source} ({plural(new.arm_count, 'arm')})")
    for w in pin_differences(pins_of(base), pins_of(new)):
        say(f"warning: pins differ: {w}")
    changes = compare_groups(base.cells, new.cells)
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
    both = sum(g.in_both for g in changes)
    one_side = len(changes) - both
    regressed = [g for g in changes if g.regressed]
    if regressed:
        names = ", ".join(f"{g.task_id} @ {g.profile_set}" for g in regressed)
        say(f"regressed: {plural(len(regressed), 'group')}: {names}")
        return EXIT_PROBLEMS
    if not both:
        say(f"nothing compared: no group (task @ profile set) is in both stores "
            f"({plural(one_side, 'group')} in only one)")
        return EXIT_UNUSABLE
    tail = f"; {plural(one_side, 'group')} in only one store" if one_side else ""
    say(f"no group regressed ({plural(both, 'group')} in both stores compared{tail})")
    return EXIT_OK


# -- several stores as one: merge.py ---------------------------------------------------------
def _open_stores(paths: Sequence[Path]) -> Pivot:
    if len(paths) == 1:
        return open_pivot(paths[0])
    from .merge import merged_pivot
    return merged_pivot(paths)


def cmd_merge(args) -> int:
    from .merge import cmd_merge as merge
    return merge(args)


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
    rep = sub.add_parser(
        "report", help="print the pivot of a store; optionally write HTML/PDF; exit 0 when "
                       "every arm passed, 1 on a FAIL, 2 on a BLOCKED arm or when nothing ran",
        description="Print the pivot of a result store. Exit status, as for the run that "
                    "wrote it: 0 every arm passed, 1 an arm FAILED, 2 an arm was BLOCKED or "
                    "nothing ran (also: unusable input). --exit-zero: 0 whatever the verdicts.")
    rep.add_argument("store", nargs="+", help="a result store (ours or jaato-eval 0.3.4's); "
                                              "several, or a quoted glob, are read as one")
    rep.add_argument("--html", metavar="PATH", help="write the self-contained HTML report")
    rep.add_argument("--pdf", metavar="PATH", help="write the same report as PDF (needs "
                                                   "pip install 'pytest-jaato-eval[pdf]')")
    rep.add_argument("--k", type=_positive, default=None, metavar="K",
                     help="k for pass@k / pass^k (default: the smallest sample among cells "
                          "with repeats)")
    rep.add_argument("--exit-zero", action="store_true",
                     help="exit 0 whatever the verdicts (only the table is wanted); unusable "
                          "input still exits 2")
    rep.set_defaults(func=cmd_report)
    cmp_ = sub.add_parser("compare", help="compare two stores per (task, profile set); "
                                          "exit 1 when a group regressed, 2 when no group "
                                          "is in both")
    cmp_.add_argument("base", help="a store, or a quoted glob of stores read as one")
    cmp_.add_argument("new", help="the same, for the new side")
    cmp_.add_argument("more", nargs="*", help=argparse.SUPPRESS)  # an unquoted glob's spill
    cmp_.set_defaults(func=cmd_compare)
    val = sub.add_parser("validate", help="check a store against the record schema; "
                                          "exit 1 on problems")
    val.add_argument("store", nargs="+", help="a store; several, or a quoted glob, are "
                                             "also checked against each other")
    val.set_defaults(func=cmd_validate)
    mrg = sub.add_parser("merge", help="write one store from several (the shards of a sweep); "
                                       "exit 2 if a task changed between them")
    mrg.add_argument("out", help="the merged store to write (never one of the inputs)")
    mrg.add_argument("stores", nargs="+", help="the stores to merge (paths or quoted globs)")
    mrg.set_defaults(func=cmd_merge)
    sch = sub.add_parser("schema", help="print the JSON Schema of task.yaml (for an editor's "
                                        "YAML language server)")
    sch.set_defaults(func=_cmd_schema)
    review.add_parser(sub)
    return parser


def _cmd_schema(args) -> int:
    from ..task_schema import cmd_schema  # pydantic only when asked
    return cmd_schema(args)


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
