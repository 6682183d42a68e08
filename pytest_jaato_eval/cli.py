"""`python -m pytest_jaato_eval COMMAND`: every command, its options and its exit codes.

The store commands read any result store, ours or one written by jaato-eval 0.3.4
(same record; ours adds keys), in one streaming pass where they can: a store of any
size costs a summary per arm, never its whole records. Exit codes:

    report    as the run that wrote the store: 0 every arm passed (an xfail arm that
              failed as expected too) · 1 an arm failed the run · 2 an arm BLOCKED
              (--exit-zero: 0 whatever the verdicts)
    compare   0 no regression · 1 a profile set regressed (its paired two-sided interval,
              Holm over the sets at 5%, lies below 0, or below -margin) · 3 no set did,
              but a task @ set group did (Holm over the groups) · 2 too little in both
    validate  0 ok · 1 problems found
    merge     0 written · 2 refused (an invalid input, a task changed between the inputs)
    show      0 shown · 1 no arm matched
    review    0 nothing awaits review · 1 some arm does
    all       2 unusable input: a missing or unreadable store, one with no record, a
              bad option, an output that would overwrite an input

Bad input is one line naming the file (and line, and key), never a traceback. What is
read is results/ (stores.py reads, pivot.py counts); what is written for people is
report/. `daemon` (keep a daemon running between runs) is kept_daemon.py's.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from . import kept_daemon
from .render import safe_text
from .report import html, pdf
from .report.arms import cost_text, evidence_tail
from .results import snapshots, transcripts
from .results.compare import (ArmFlip, cell_text, compare_document, compare_groups, compare_markdown,
                               compare_sets, cost_delta_text,
                               delta_text, grader_flips)
from .results.pins import (changed_tasks, compared_lines, pin_differences, pin_notes,
                           pins_of, side_changes)
from .results.account import account
from .results.formats import FORMATS, document
from .results.pivot import level_text, open_stores, pair_lines, plural, points
from .results.table import table_lines
from .results.record import ArmRecord
from .results.review import awaiting_review
from .results.outputs import check_output
from .results.store import StoreError, free_name
from .results.stores import Merged, Refused, Unusable, combine, limited, read_store
from .results.transcript_view import seconds, text_lines
from .results.validate import validate_across, validate_store

EXIT_OK, EXIT_PROBLEMS, EXIT_UNUSABLE = 0, 1, 2
EXIT_SET_REGRESSED, EXIT_GROUP_REGRESSED = 1, 3  # compare: which rule fired
EXIT_PASSED, EXIT_FAILED, EXIT_BLOCKED = 0, 1, 2  # report: the verdict vocabulary
PROG = "python -m pytest_jaato_eval"


def say(line: str, file=None) -> None:
    """Print one line of a command's output. Arm ids, task ids and reasons come from a
    store anybody may have written, so no control character reaches the terminal."""
    print(safe_text(line, None, collapse=False), file=file or sys.stdout)


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


# -- report ---------------------------------------------------------------------------------
def terminal_width() -> int | None:
    """The width `report` fits its table to: the terminal's when stdout is one (`COLUMNS`
    honoured, as pytest does); None (every column) when the output goes to a file or a
    pipe, where nothing wraps it."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def cmd_report(args) -> int:
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
    pivot = open_stores(stores)
    for note in pivot.skipped_notes():
        say(note, file=sys.stderr)
    acc = account(pivot)
    # a document (not text) is stdout's alone, for a pipe or a file
    for line in document(acc, args.format, k=args.k, source=str(pivot.source),
                         detect=_share(args.detect),
                         width=None if args.all_columns else terminal_width()).splitlines():
        say(line)
    said = sys.stdout if args.format == "text" else sys.stderr
    html_args = {"source": str(pivot.source), "k": args.k}
    if args.html:  # streamed to the file, a task at a time
        html.write(Path(args.html), pivot, **html_args)
        say(f"html report: {args.html}", file=said)
    if args.pdf:
        pdf.write(Path(args.pdf), html.render(pivot, **html_args))
        say(f"pdf report: {args.pdf}", file=said)
    return EXIT_OK if args.exit_zero else acc.exit_status


# -- compare --------------------------------------------------------------------------------
def cmd_compare(args) -> int:
    """The text, or (--format) a JSON or Markdown document of the same decisions: the text
    then goes nowhere, the document to stdout."""
    if args.format == "text":
        return _compare(args, {})
    found: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        status = _compare(args, found)
    if "sets" in found:
        doc = compare_document(found["changes"], found["sets"], args.margin / 100, status)
        text = json.dumps(doc, indent=2) if args.format == "json" else compare_markdown(doc)
        for line in text.splitlines():  # JSON escapes control characters; say() the rest
            say(line)
    return status


def _compare(args, found: dict[str, Any]) -> int:
    if args.more:
        raise Unusable(f"compare takes two sides, BASE and NEW, got {2 + len(args.more)} "
                       f"arguments; for several stores a side, quote a pattern "
                       f"('shards/*.jsonl') so it reaches compare as one argument")
    base, new = open_stores(expand([args.base])), open_stores(expand([args.new]))
    for note in base.skipped_notes() + new.skipped_notes():
        say(note, file=sys.stderr)
    say(f"base: {base.source} ({plural(base.arm_count, 'arm')})")
    say(f"new:  {new.source} ({plural(new.arm_count, 'arm')})")
    base_pins = pins_of(base)
    runs = set(base_pins.get("run_id") or ())
    regraded = {c.task_id for c in new.cells if c.regraded and all(
        a.regraded_from in runs for a in c.arms if a.regraded_from)}
    new_pins = pins_of(new)
    task_changes = side_changes(base, new, changed_tasks(base_pins, new_pins) - regraded)
    for w in pin_differences(base_pins, new_pins, regraded, task_changes):
        say(f"warning: pins differ: {w}")
    for line in compared_lines(task_changes):
        say(f"note: {line}")
    paired: list[str] = []
    margin = args.margin / 100
    changes = compare_groups(base.cells, new.cells, paired, margin, _share(args.detect))
    for line in paired:
        say(f"note: {line}")
    header = ("group", "base", "new", "Δ pass rate (CI)", "Δ cost/arm", "flips", "")
    rows = []
    for g in changes:
        flips = ", ".join(x for x in (f"{len(g.down)} PASS→FAIL" if g.down else "",
                                      f"{len(g.up)} FAIL→PASS" if g.up else "",
                                      f"{plural(len(g.counts), 'item')} changed" if g.counts
                                      else "") if x) or "—"
        rows.append((f"{g.task_id} @ {g.profile_set}", cell_text(g.base), cell_text(g.new),
                     delta_text(g), cost_delta_text(g), flips,
                     "REGRESSED" if g.regressed else ""))
    for line in table_lines(header, rows):
        say(line)
    both = sum(g.in_both for g in changes)
    if both > 1:  # the table's CI column, said under it
        say(f"CI of a group: two-sided, at its step of Holm over {both} groups "
            f"({100 - 5 / both:.4g}% to 95%)")
    for g in changes:
        name = f"{g.task_id} @ {g.profile_set}"
        for arm in g.down:
            say(f"PASS→FAIL {arm}")
        for arm in g.up:
            say(f"FAIL→PASS {arm}")
        for line in g.counts:
            say(f"changed {line}")
        for line in g.blocked:
            say(f"blocked change {line}")
        if g.base is None:
            say(f"note: {name} is only in the new store")
        elif g.new is None:
            say(f"note: {name} is only in the base store")
    by_grader = grader_flips(base, new, changes)
    if by_grader:
        say("")
        say("grader by grader (each arm whose verdict or a grader's verdict changed):")
        for flip in by_grader:
            for line in flip_lines(flip):
                say(line)
    one_side = len(changes) - both
    sets = compare_sets(changes, margin, _share(args.detect))
    found.update(changes=changes, sets=sets)
    if sets:
        say("")
        say("Profile sets (new − base, paired by task and sample):")
    for sc in sets:
        for line in pair_lines(sc.change, name=f"{sc.profile_set}: new − base"):
            say(line)
    below = f"below -{args.margin:g} pts (the margin)" if margin else "below 0"
    regressed = [g for g in changes if g.regressed]
    for sc in sets:
        if sc.regressed:
            assert sc.change.interval is not None and sc.change.diff is not None  # read off its CI
            lo, hi = sc.change.interval
            say(f"regressed: profile set {sc.profile_set}: {points(sc.change.diff)} pts, its "
                f"{level_text(sc.change.alpha)} CI ({points(lo)} to {points(hi)} pts) lies "
                f"{below}" + (f" (Holm over {plural(len(sets), 'set')})" if len(sets) > 1
                              else ""))
    if regressed:
        names = ", ".join(f"{g.task_id} @ {g.profile_set}" for g in regressed)
        say(f"regressed: {plural(len(regressed), 'group')}: {names} (its interval, "
            f"Holm over {plural(both, 'group')}, lies {below})")
    if any(sc.regressed for sc in sets):
        return EXIT_SET_REGRESSED
    if regressed:
        return EXIT_GROUP_REGRESSED
    if not both:
        say(f"nothing compared: no group (task @ profile set) is in both stores "
            f"({plural(one_side, 'group')} in only one)")
        return EXIT_UNUSABLE
    smaller = min(sum(g.base is not None for g in changes), sum(g.new is not None for g in changes))
    if 2 * both < smaller:  # "no group regressed" would be a claim about groups never compared
        say(f"refused: only {both} of the {smaller} groups of the smaller store are in both "
            f"stores; compare stores of the same tasks and profile sets (the groups in only "
            f"one are listed above)")
        return EXIT_UNUSABLE
    tail = f"; {plural(one_side, 'group')} in only one store" if one_side else ""
    say(f"no group regressed ({plural(both, 'group')} in both stores compared{tail}); "
        f"no profile set regressed ({plural(len(sets), 'set')}): no interval lies {below}")
    return EXIT_OK


DETAIL_WIDTH = 72


def flip_lines(flip: ArmFlip) -> list[str]:
    """An arm's flip, grader by grader: each grader's old and new state, and its old and new
    detail where it changed (a line of its own each, to fit 80 columns)."""
    arm = safe_text(flip.arm_id, 120, collapse=False)
    lines = [f"{arm}: {flip.before} → {flip.after}" if flip.before != flip.after
             else f"{arm}: {flip.after} (graders changed)"]
    for gid, b, n in flip.graders:
        name = safe_text(gid, 60)
        bs, ns = (b or {}).get("state", "absent"), (n or {}).get("state", "absent")
        bd = safe_text((b or {}).get("detail") or "", DETAIL_WIDTH)
        nd = safe_text((n or {}).get("detail") or "", DETAIL_WIDTH)
        if bs == ns and bd == nd:
            lines.append(f"  {name}: {ns}, unchanged" + (f" ({nd})" if nd else ""))
            continue
        lines.append(f"  {name}: {bs} → {ns}")
        lines.append(f"    was: {bd or '—'}")
        lines.append(f"    now: {nd or '—'}")
    return lines


# -- validate -------------------------------------------------------------------------------
def cmd_validate(args) -> int:
    paths = expand(args.store)
    results = [validate_store(path) for path in paths]
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


# -- merge: one store written from several, by stores.py's rules ---------------------------
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
    target = free_name(out)
    os.replace(out, target)
    return target


def write_merged(out: Path, merged: Merged) -> Path | None:
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
    for note in pin_notes(stores):
        say(f"warning: {note}", file=sys.stderr)
    kept = write_merged(out, merged)
    if kept is not None:
        transcripts.follow(out, kept)  # the old OUT's transcripts and snapshots go with it
        snapshots.follow(out, kept)
    missing = lost = 0  # each counted record's transcript and snapshot, copied beside OUT
    for index, position in merged.chosen:
        store = merged.stores[index]
        record = store.records[position]
        name = record.transcript
        if name is not None and not transcripts.copy(store.path, out, name):
            missing += 1
        if record.snapshot is not None and not snapshots.copy(store.path, out,
                                                              record.snapshot):
            lost += 1
    total = sum(len(s.records) for s in stores)
    say(f"{out}: {len(merged.records)} arms from {len(stores)} stores ({total} records read"
        + (f", {len(merged.replaced)} arms in more than one store" if merged.replaced else "")
        + ")")
    if kept is not None:
        say(f"the previous {out.name} was kept as {kept}")
    if missing:
        say(f"warning: {missing} record(s) name a transcript their input's folder does not "
            f"hold; the merged store names it all the same", file=sys.stderr)
    if lost:
        say(f"warning: {lost} record(s) name a snapshot their input's folder does not hold; "
            f"a regrade of the merged store blocks those arms", file=sys.stderr)
    return EXIT_OK


# -- show: an arm's story in the terminal ----------------------------------------------------
def _matcher(expr: str | None) -> Callable[..., bool] | None:
    if expr is None:
        return None
    from _pytest.mark.expression import Expression  # pytest's -k grammar loads all of pytest (~0.3 s): only for -k
    try:
        compiled = Expression.compile(expr)
    except SyntaxError as exc:  # what pytest's parser raises (ParseError in older pytest)
        raise Unusable(f"-k {expr!r}: {getattr(exc, 'msg', None) or exc}") from None

    def matches(*words: str) -> bool:
        lowered = [w.lower() for w in words]
        def found(name: str, /, **_: Any) -> bool:
            return any(name.lower() in w for w in lowered)
        return compiled.evaluate(found)
    return matches


def cmd_show(args) -> int:
    pivot = open_stores([Path(args.store)])
    for note in pivot.skipped_notes():
        say(note)
    matches = _matcher(args.expr)
    wanted = set(args.arm_ids)
    shown = 0
    for cell in pivot.cells:
        chosen = {a.arm_id for a in cell.arms
                  if (not wanted or a.arm_id in wanted)
                  and (matches is None or matches(a.arm_id, a.task_id, a.profile_set,
                                                  str(a.state)))}
        if not chosen:
            continue
        for record in pivot.arms(cell):
            if record.arm_id in chosen:
                if shown:
                    say("")
                for line in story(record, args.store):
                    say(line)
                shown += 1
    if not shown:
        what = ", ".join(sorted(wanted)) if wanted else (f"-k {args.expr!r}" if args.expr
                                                         else "")
        say(f"{args.store}: no arm matches {what}".rstrip())
        return EXIT_PROBLEMS
    if shown > 1:
        say("")
        say(f"{plural(shown, 'arm')} shown")
    return EXIT_OK


def story(record: ArmRecord, store: str) -> list[str]:
    """One arm: its heading, its transcript, then its verdicts and their evidence."""
    lines = ["=" * 78, safe_text(f"{record.arm_id}: {record.state} · {cost_text(record)} · "
                                 f"arm {seconds(record.arm_seconds)} · session "
                                 f"{seconds(record.duration_seconds)} · turns "
                                 f"{record.turns if record.turns is not None else '—'}",
                                 400, collapse=False)]
    if record.blocked_reason:
        lines.append(f"blocked: {safe_text(record.blocked_reason, 2000)}")
    if record.error:
        lines.append(f"error: {safe_text(record.error, 2000)}")
    try:
        lines += text_lines(transcripts.read(store, record.transcript))
    except transcripts.TranscriptUnreadable as exc:
        lines.append(f"transcript: {safe_text(exc, 600)}")
    lines += ["", "verdicts:"]
    for v in record.verdicts:
        lines.append(safe_text(f"  {v['grader_id']}: {v['state']} — "
                               f"{v.get('blocked_reason') or v['detail']}", 600,
                               collapse=False))
        lines += [f"      {line}" for line in evidence_tail(v)]
    if not record.verdicts:
        lines.append("  (no grader ran)")
    return lines


# -- review: the arms a judge handed to a human ----------------------------------------------
def cmd_review(args) -> int:
    store = read_store(args.store)  # unreadable lines are skipped; `validate` names them
    waiting = awaiting_review(store.records)
    if not waiting:
        say(f"{store.path}: no arm awaits human review")
        return EXIT_OK
    say(f"{store.path}: {len(waiting)} arm(s) await human review")
    for record, verdict in waiting:
        say("")
        say(f"{record.arm_id}  (task {record.task_id}, profile set "
            f"{record.profile_set}, model {record.model or '—'})")
        say(f"  {verdict['grader_id']}: {verdict['blocked_reason']}")
        for line in verdict["evidence"]:
            say(f"    {line}")
        if record.workspace:
            say(f"  workspace kept: {record.workspace}")
    return EXIT_PROBLEMS


def cmd_schema(args) -> int:
    from .task.load import cmd_schema  # pydantic and the task model, heavy: only for `schema`
    return cmd_schema(args)


# -- the parser -----------------------------------------------------------------------------
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


def _points(text: str, positive: bool = False) -> float:
    """Percentage points: a number from 0 (above 0 when `positive`) to 100."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected percentage points (e.g. 5), got "
                                         f"{text!r}") from None
    if not (0 < value <= 100 if positive else 0 <= value <= 100):
        raise argparse.ArgumentTypeError(f"expected percentage points "
                                         f"{'above 0' if positive else 'from 0'} to 100, "
                                         f"got {text}")
    return value


def _share(points: float | None) -> float | None:
    """Percentage points as a share of 1, as the analysis takes them."""
    return None if points is None else points / 100


def _detect_points(text: str) -> float:
    return _points(text, positive=True)


DETECT_HELP = ("the difference in percentage points a 'to detect' line plans the runs for "
               "(default 10: a smallest difference worth finding, declared before the data)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Read jaato-eval result stores (JSONL).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    rep = sub.add_parser(
        "report", help="print the pivot of a store and the arms that did not pass; "
                       "optionally write HTML/PDF; exit as the run did: 0 every arm passed, "
                       "1 on a FAIL, 2 on a BLOCKED arm",
        description="Print the pivot of a result store and the arms that did not pass. Exit "
                    "status, as for the run that wrote it: 0 every arm passed (or failed as "
                    "its xfail mark expected), 1 an arm FAILED, 2 an arm was BLOCKED (also: "
                    "unusable input). --exit-zero: 0 whatever the verdicts.")
    rep.add_argument("store", nargs="+", help="a result store (ours or jaato-eval 0.3.4's); "
                                              "several, or a quoted glob, are read as one")
    rep.add_argument("--format", choices=FORMATS, default="text",
                     help="the pivot on stdout as: " + ", ".join(
                         f"{name} ({f.help})" for name, f in FORMATS.items()))
    rep.add_argument("--html", metavar="PATH", help="write the self-contained HTML report")
    rep.add_argument("--pdf", metavar="PATH", help="write the same report as PDF (needs "
                                                   "pip install 'pytest-jaato-eval[pdf]')")
    rep.add_argument("--k", type=_positive, default=None, metavar="K",
                     help="k for pass@k / pass^k (default: the smallest sample among cells "
                          "with repeats)")
    rep.add_argument("--detect", type=_detect_points, default=None, metavar="PTS",
                     help=DETECT_HELP)
    rep.add_argument("--all-columns", action="store_true",
                     help="text: every column of the pivot, whatever the terminal's width "
                          "(default: the most read columns that fit it; every column when "
                          "stdout is not a terminal)")
    rep.add_argument("--exit-zero", action="store_true",
                     help="exit 0 whatever the verdicts (only the table is wanted); unusable "
                          "input still exits 2")
    rep.set_defaults(func=cmd_report)
    cmp_ = sub.add_parser(
        "compare", help="compare two stores per profile set and per (task, profile set), "
                        "paired by task, sample and repeat; exit 1 when a profile set "
                        "regressed, 3 when only a group did, 2 when too little is in both",
        description="Compare two stores. A regression is NEW − BASE with a two-sided interval "
                    "wholly below 0 (or below -MARGIN), never a single flip; the profile "
                    "sets are one family and the groups another, each at 5%% by Holm's "
                    "step-down. Exit status: 0 "
                    "no regression; 1 a profile set regressed (paired over its tasks); 3 no "
                    "set did, but a task @ profile set group did (over its samples or "
                    "repeats); 2 too little in both stores to "
                    "compare, or unusable input.")
    cmp_.add_argument("base", help="a store, or a quoted glob of stores read as one")
    cmp_.add_argument("new", help="the same, for the new side")
    cmp_.add_argument("--margin", type=_points, default=0.0, metavar="PTS",
                      help="a drop is a regression only when its interval lies below -PTS "
                           "percentage points (default 0)")
    cmp_.add_argument("--detect", type=_detect_points, default=None, metavar="PTS",
                      help=DETECT_HELP)
    cmp_.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                      help="text (default), or a JSON or Markdown document of each profile "
                           "set's and group's difference, interval, se, df, method, p-value, "
                           "decision and the family it was taken in")
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
    sch.set_defaults(func=cmd_schema)
    rev = sub.add_parser("review", help="list the arms a judge left for human review, with "
                                        "its reasoning and evidence; exit 1 when any")
    rev.add_argument("store")
    rev.set_defaults(func=cmd_review)
    show = sub.add_parser(
        "show", help="print arms' transcripts and verdicts (by arm id, or -k EXPR); exit 1 "
                     "when no arm matches",
        description="Print each chosen arm's transcript (prompt, messages, tool calls with "
                    "arguments and results, turns, payload) and its graders' verdicts with "
                    "their evidence. The transcript is read from the folder beside the store "
                    "(<store>.transcripts/).")
    show.add_argument("store", help="a result store")
    show.add_argument("arm_ids", nargs="*", metavar="ARM_ID", help="arm ids, exactly")
    show.add_argument("-k", dest="expr", metavar="EXPR", default=None,
                      help="pytest's -k: substrings of the arm id, task, profile set or state, "
                           "with and / or / not and parentheses (e.g. 'write and FAIL')")
    show.set_defaults(func=cmd_show)
    kept_daemon.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (Unusable, StoreError) as exc:  # StoreError: no free name to keep an old OUT under
        say(f"error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    except BrokenPipeError:  # `report ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return EXIT_OK
    except OSError as exc:  # e.g. the --html target cannot be written
        say(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNUSABLE
