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
from pathlib import Path
from typing import Sequence

from . import review, show_command
from .. import kept_daemon
from .command_io import EXIT_OK, EXIT_UNUSABLE, Unusable, expand, open_stores, say
from .compare import cmd_compare
from .merge_command import cmd_merge
from .cell import Cell
from .pivot_formats import FORMATS, RENDERERS
from .pivot_text import render_pivot
from .store import check_output
from .validation import cmd_validate

EXIT_PASSED, EXIT_FAILED, EXIT_BLOCKED = 0, 1, 2  # report: the verdict vocabulary
PROG = "python -m pytest_jaato_eval"


# -- report ---------------------------------------------------------------------------------
def report_exit(cells: list[Cell]) -> int:
    """0 every arm passed, 1 any FAIL, 2 any BLOCKED (or an unknown state) or nothing ran.
    A FAIL under an xfail mark is no FAIL here, a PASS under a strict one is: as the run."""
    if any(c.fails_the_run for c in cells):
        return EXIT_FAILED
    if any(c.blocked for c in cells) or not any(c.passed for c in cells):
        return EXIT_BLOCKED
    return EXIT_PASSED


def cmd_report(args) -> int:
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
    pivot = open_stores(stores)  # several: read as one (merge.py)
    for note in pivot.skipped_notes():
        say(note, file=sys.stderr)
    if args.format == "text":
        say(f"{pivot.source}: {pivot.counted}")
        lines = render_pivot(pivot.cells, k=args.k)
    else:  # stdout holds the document alone, for a pipe or a file
        lines = RENDERERS[args.format](pivot.cells, k=args.k, source=str(pivot.source),
                                       arms=pivot.arm_count).splitlines()
    for line in lines:
        say(line)
    said = sys.stdout if args.format == "text" else sys.stderr
    document = {"source": str(pivot.source), "k": args.k}
    if args.html:  # streamed to the file, a task at a time
        html.write(Path(args.html), pivot, **document)
        say(f"html report: {args.html}", file=said)
    if args.pdf:
        pdf.write(Path(args.pdf), html.render(pivot, **document))
        say(f"pdf report: {args.pdf}", file=said)
    code = report_exit(pivot.cells)
    if args.exit_zero:
        return EXIT_OK
    return code


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
    rep.add_argument("--format", choices=FORMATS, default="text",
                     help="the pivot on stdout as: text (the table, default), markdown "
                          "(GitHub-flavoured, for $GITHUB_STEP_SUMMARY or a PR comment), json "
                          "(each cell's n, rates and intervals as numbers), csv")
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
    show_command.add_parser(sub)
    kept_daemon.add_parser(sub)
    return parser


def _cmd_schema(args) -> int:
    from ..task.load import cmd_schema  # pydantic only when asked
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
