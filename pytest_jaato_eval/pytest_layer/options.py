"""Command-line options and their ini equivalents, resolved into one frozen Settings."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..contract import PASSTHROUGH_NAME
from ..engine.ceiling import Ceiling
from ..engine.resources import (DISK, DISK_KEY, MEMORY, MEMORY_KEY, SIZE_PHRASE,
                                parse_size)
from ..report.pdf import PdfUnavailable, load_weasyprint
from ..results.outputs import refuse_outputs
from .shard import Shard, parse_shard

DEFAULT_CEILING = 900.0
DEFAULT_STORE = "jaato-results.jsonl"
KEEP_CHOICES = ("never", "failed", "always")
SANDBOX_CHOICES = ("auto", "bwrap", "none")
PIVOT_CHOICES = ("fit", "all")
JUNIT_BLOCKED_CHOICES = ("skipped", "error")
DEFAULT_HEARTBEAT = 30.0


def add_options(parser) -> None:
    group = parser.getgroup("jaato-eval", "jaato agent-benchmark tasks (task.yaml)")
    group.addoption("--profile-set", dest="jaato_profile_set", default=None, metavar="A,B",
                    help="run every task under these profile sets (comma-separated); "
                         "blank: each task's own harness.profile_set")
    group.addoption("--jaato-repeats", dest="jaato_repeats", type=int, default=None, metavar="N",
                    help="override every task's repeats (quick runs)")
    group.addoption("--jaato-samples", dest="jaato_samples", type=int, default=None,
                    metavar="N", help="run only the first N samples of each task's dataset "
                                      "(quick runs; overrides its limit)")
    group.addoption("--arm-timeout", dest="jaato_arm_timeout", type=float, default=None,
                    metavar="SECONDS", help=f"per-arm wall-clock ceiling (default "
                                            f"{DEFAULT_CEILING:g}; 0 = off)")
    group.addoption("--jaato-socket", dest="jaato_socket", default=None, metavar="PATH",
                    help="use the jaato daemon at this socket (never auto-started); "
                         "default: a private daemon per run")
    group.addoption("--jaato-workspaces", dest="jaato_workspaces", default=None, metavar="DIR",
                    help="where arm workspaces are made, in a folder of the run's own, "
                         "DIR/run-<run id> (default: a fresh temporary folder)")
    group.addoption("--keep-workspaces", dest="jaato_keep", action="store_const",
                    const="always", default=None, help="keep every arm's workspace")
    group.addoption("--keep-failed-workspaces", dest="jaato_keep", action="store_const",
                    const="failed", help="keep the workspaces of FAIL and BLOCKED arms")
    group.addoption("--jaato-out", dest="jaato_out", default=None, metavar="PATH",
                    help=f"the JSONL result store (default: {DEFAULT_STORE} in the rootdir); one "
                         f"run at a time; the previous one is kept as NAME.previous (same "
                         f"tasks) or under a timestamped name")
    group.addoption("--jaato-keep-previous", dest="jaato_keep_previous", action="store_true",
                    default=False,
                    help="keep every previous store under a timestamped name (default: one "
                         "<name>.previous copy when the previous store holds the same tasks)")
    group.addoption("--resume", dest="jaato_resume", action="store_true", default=False,
                    help="run only the arms missing from the store and append to it; refused "
                         "when a task changed since the store was written")
    group.addoption("--retry-blocked", dest="jaato_retry_blocked", action="store_true",
                    default=False,
                    help="--resume, and also run again the arms whose latest record is BLOCKED "
                         "(an environment fault you have since fixed); the new record wins")
    group.addoption("--jaato-shard", dest="jaato_shard", default=None, metavar="I/N",
                    help="run only shard I of N (1-based): every arm of a task in one shard, "
                         "the same split on every machine (docs/running.md)")
    group.addoption("--no-jaato-transcripts", dest="jaato_transcripts", action="store_false",
                    default=True, help="keep no transcripts beside the store (default: each "
                                       "arm's, compressed, in <store>.transcripts/)")
    group.addoption("--no-jaato-snapshots", dest="jaato_snapshots", action="store_false",
                    default=True, help="keep no snapshots beside the store (default: each "
                                       "arm's final workspace and run facts, compressed, in "
                                       "<store>.snapshots/, for --jaato-regrade)")
    group.addoption("--jaato-regrade", dest="jaato_regrade", default=None, metavar="STORE",
                    help="grade the arms of STORE again from their snapshots with the tasks' "
                         "current graders, running no agent (docs/regrading.md); the new "
                         "store is --jaato-out, by default STORE's name with .regraded")
    group.addoption("--jaato-no-grade", dest="jaato_no_grade", action="store_true",
                    default=False,
                    help="run the agents and keep their snapshots, but run no grader: every "
                         "arm is BLOCKED 'not graded'; grade the store later with "
                         "--jaato-regrade (docs/regrading.md)")
    group.addoption("--jaato-html", dest="jaato_html", default=None, metavar="PATH",
                    help="also write a self-contained HTML report (pivot, chart, one row per arm)")
    group.addoption("--jaato-pdf", dest="jaato_pdf", default=None, metavar="PATH",
                    help="also write the same report as PDF (needs "
                         "pip install 'pytest-jaato-eval[pdf]')")
    group.addoption("--jaato-sandbox", dest="jaato_sandbox", default=None,
                    choices=SANDBOX_CHOICES,
                    help="confine the private daemon and the agent's tools (bubblewrap): auto "
                         "(default: where the machine allows, else said in the header), "
                         "bwrap (refuse to run without it), none")
    group.addoption("--jaato-pivot", dest="jaato_pivot", default=None, choices=PIVOT_CHOICES,
                    help="the pivot's columns in the terminal: fit (default: the most read "
                         "columns that fit its width; -v shows all) or all")
    group.addoption("--jaato-junit-blocked", dest="jaato_junit_blocked", default=None,
                    choices=JUNIT_BLOCKED_CHOICES,
                    help="a BLOCKED arm in --junitxml: skipped (default, pytest's convention) "
                         "or error (for dashboards that should go red)")
    group.addoption("--jaato-heartbeat", dest="jaato_heartbeat", type=float, default=None,
                    metavar="SECONDS",
                    help=f"without a terminal (CI logs), a line every SECONDS for each arm "
                         f"still running (default {DEFAULT_HEARTBEAT:g}; 0 = none); a terminal "
                         f"gets a live line instead")
    parser.addini("jaato_profile_set", "default for --profile-set", default="")
    parser.addini("jaato_pivot", "default for --jaato-pivot (fit | all)", default="")
    parser.addini("jaato_junit_blocked", "default for --jaato-junit-blocked (skipped | error)",
                  default="")
    parser.addini("jaato_heartbeat", "default for --jaato-heartbeat (seconds)", default="")
    parser.addini("jaato_detect", "the smallest difference worth finding, in percentage "
                  "points: what the pivot's 'to detect' lines plan for (default 10)", default="")
    parser.addini("jaato_sandbox", "default for --jaato-sandbox (auto | bwrap | none)",
                  default="")
    parser.addini("jaato_arm_timeout", "default for --arm-timeout (seconds)", default="")
    parser.addini("jaato_socket", "default for --jaato-socket", default="")
    parser.addini("jaato_workspaces", "default for --jaato-workspaces", default="")
    parser.addini("jaato_keep_workspaces", "never | failed | always", default="never")
    parser.addini("jaato_out", "default for --jaato-out", default="")
    parser.addini("jaato_snapshot_max_mb", "the largest arm snapshot kept, in MB before "
                  "compression (default 32; 0 keeps none; a task's snapshot: {max_mb: N} "
                  "wins)", default="")
    parser.addini(MEMORY_KEY, "the memory each arm's agent may use, its sandbox's whole "
                  "(512M, 8G; default 8G); a task's resources.memory overrides it", default="")
    parser.addini(DISK_KEY, "the disk each arm's agent may fill (default 10G); a task's "
                  "resources.disk overrides it", default="")
    parser.addini("jaato_daemon_env", "the only variables the private daemon (and so the "
                  "agent's runner) gets beyond a basic set: names, or NAME* patterns; blank: "
                  "the whole environment", type="linelist", default=[])


class UsageError(Exception):
    """A bad option or ini value: shown as a one-line usage error."""


@dataclass(frozen=True)
class Settings:
    profile_sets: tuple[str, ...] | None
    repeats: int | None
    ceiling: Ceiling
    socket: str | None
    workspaces: Path | None
    keep_workspaces: str
    store: Path
    resume: bool = False
    retry_blocked: bool = False  # R3 with BLOCKED arms counted as not done
    html: Path | None = None   # P4 report documents
    pdf: Path | None = None
    shard: Shard | None = None  # --jaato-shard: this machine's part of the sweep
    samples: int | None = None  # --jaato-samples: the first N samples of each dataset
    # How this run narrows the sweep (-k, -m, --lf, node ids, --deselect), or None: a
    # narrowed run appends to the store it narrows instead of starting a new one.
    narrowed: str | None = None
    keep_previous: str = "one"  # store.Store: "one" or "all" (--jaato-keep-previous)
    sandbox: str = "auto"  # --jaato-sandbox: engine/sandbox.py
    daemon_env: tuple[str, ...] = ()  # jaato_daemon_env: what the daemon gets; () = everything
    rootdir: Path | None = None  # hidden from a confined agent, with the checkout in it
    transcripts: bool = True  # each arm's transcript beside the store (results/transcripts.py)
    snapshots: bool = True  # each arm's snapshot beside the store (results/snapshots.py)
    snapshot_max_mb: float | None = None  # ini jaato_snapshot_max_mb; None: the default
    regrade: Path | None = None  # --jaato-regrade: the store whose arms are graded again
    grade: bool = True  # --jaato-no-grade: agents and snapshots, no grader
    pivot: str = "fit"  # --jaato-pivot: the terminal pivot's columns
    junit_blocked: str = "skipped"  # --jaato-junit-blocked: a BLOCKED arm's JUnit element
    heartbeat: float = DEFAULT_HEARTBEAT  # --jaato-heartbeat: seconds between liveness lines
    detect: float | None = None  # ini jaato_detect, as a share: what "to detect" plans for
    memory_limit: int = MEMORY  # bytes each arm's agent may use (engine/resources.py)
    disk_limit: int = DISK


def _path(value: str, rootdir: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (rootdir / p)


def read_settings(config) -> Settings:
    opt, ini = config.option, config.getini
    rootdir = Path(config.rootpath)

    raw_sets = opt.jaato_profile_set if opt.jaato_profile_set is not None else ini("jaato_profile_set")
    sets = tuple(s.strip() for s in str(raw_sets).split(",") if s.strip()) or None

    if opt.jaato_repeats is not None and opt.jaato_repeats < 1:
        raise UsageError(f"--jaato-repeats: expected an integer >= 1, got {opt.jaato_repeats}")
    if opt.jaato_samples is not None and opt.jaato_samples < 1:
        raise UsageError(f"--jaato-samples: expected an integer >= 1, got {opt.jaato_samples}")
    ceiling = _ceiling(opt, ini)
    keep = opt.jaato_keep or str(ini("jaato_keep_workspaces")).strip() or "never"
    if keep not in KEEP_CHOICES:
        raise UsageError(f"ini jaato_keep_workspaces: expected one of {', '.join(KEEP_CHOICES)}, "
                         f"got {keep!r}")
    if opt.jaato_pdf:  # P4: a PDF nobody can render fails now, before any arm spends money
        _check_pdf()
    shard = _shard(opt)

    socket = opt.jaato_socket or str(ini("jaato_socket")).strip() or None
    ws = opt.jaato_workspaces or str(ini("jaato_workspaces")).strip() or None
    store = opt.jaato_out or str(ini("jaato_out")).strip() or DEFAULT_STORE
    store_path = _path(store, rootdir) if not opt.jaato_out else _path(store, Path.cwd())
    regrade = _regrade(opt, store_path)
    if regrade is not None and not opt.jaato_out:  # never the store it grades again
        store_path = regrade.with_name(f"{regrade.stem}.regraded{regrade.suffix}")
    if store_path.is_dir():  # before --resume reads it
        raise UsageError(f"--jaato-out {store_path}: is a directory, expected a JSONL result "
                         f"store (a file)")
    html = _path(opt.jaato_html, Path.cwd()) if opt.jaato_html else None
    pdf = _path(opt.jaato_pdf, Path.cwd()) if opt.jaato_pdf else None
    if html or pdf or getattr(opt, "xmlpath", None) or getattr(opt, "htmlpath", None):
        refusal = refuse_outputs(config, store_path, html, pdf)
        if refusal:
            raise UsageError(refusal)
    return Settings(
        profile_sets=sets, repeats=opt.jaato_repeats, ceiling=ceiling,
        socket=str(_path(socket, Path.cwd())) if socket else None,
        workspaces=_path(ws, Path.cwd()) if ws else None, keep_workspaces=keep,
        sandbox=_sandbox(opt, ini), rootdir=rootdir, daemon_env=_daemon_env(ini),
        store=store_path,
        resume=bool(opt.jaato_resume or opt.jaato_retry_blocked),
        retry_blocked=bool(opt.jaato_retry_blocked),
        html=html, pdf=pdf,
        shard=shard, samples=opt.jaato_samples, narrowed=narrowed_by(config),
        keep_previous="all" if opt.jaato_keep_previous else "one",
        transcripts=bool(getattr(opt, "jaato_transcripts", True)),
        snapshots=bool(getattr(opt, "jaato_snapshots", True)),
        snapshot_max_mb=_snapshot_max_mb(ini), regrade=regrade, grade=_grade(opt),
        pivot=_choice(opt.jaato_pivot, ini, "jaato_pivot", PIVOT_CHOICES),
        junit_blocked=_choice(opt.jaato_junit_blocked, ini, "jaato_junit_blocked",
                              JUNIT_BLOCKED_CHOICES),
        heartbeat=_heartbeat(opt, ini), detect=_detect(ini),
        memory_limit=_size(ini, MEMORY_KEY, MEMORY), disk_limit=_size(ini, DISK_KEY, DISK),
    )


def narrowed_by(config) -> str | None:
    """What makes this run a part of the sweep rather than the sweep: the options that
    select some of what the paths name. `--jaato-shard` is not one (a shard writes its
    own store, merged later)."""
    opt = config.option
    lf = config.pluginmanager.get_plugin("lfplugin")
    found = [name for name, on in (
        ("-k", getattr(opt, "keyword", "")), ("-m", getattr(opt, "markexpr", "")),
        ("--lf", getattr(opt, "lf", False) and lf is not None and getattr(lf, "lastfailed", None)),
        ("--deselect", getattr(opt, "deselect", None)),
        ("a node id", any("::" in str(a) for a in getattr(config, "args", ()) or ())),
    ) if on]
    return ", ".join(found) or None


def _ceiling(opt, ini) -> Ceiling:
    """The per-arm ceiling: --arm-timeout, else the ini key, else the default."""
    if opt.jaato_arm_timeout is not None:
        ceiling = Ceiling(opt.jaato_arm_timeout, "--arm-timeout")
    elif str(ini("jaato_arm_timeout")).strip():
        try:
            ceiling = Ceiling(float(ini("jaato_arm_timeout")), "ini jaato_arm_timeout")
        except ValueError:
            raise UsageError(f"ini jaato_arm_timeout: expected seconds, got "
                             f"{ini('jaato_arm_timeout')!r}") from None
    else:
        ceiling = Ceiling(DEFAULT_CEILING, "the default")
    if not math.isfinite(ceiling.seconds) or ceiling.seconds < 0:
        raise UsageError(f"{ceiling.source}: expected a finite number of seconds >= 0 "
                         f"(0 = off), got {ceiling.seconds:g}")
    return ceiling


def _check_pdf() -> None:
    try:
        load_weasyprint()
    except PdfUnavailable as exc:
        raise UsageError(f"--jaato-pdf: {exc}") from None


def _shard(opt) -> Shard | None:
    try:
        shard = parse_shard(opt.jaato_shard) if opt.jaato_shard is not None else None
    except ValueError as exc:
        raise UsageError(f"--jaato-shard: {exc}") from None
    if shard is not None and getattr(opt, "lf", False):  # cacheprovider's, when loaded
        raise UsageError("--jaato-shard does not combine with --lf: --lf collects only the files "
                         "of this machine's last failures, and every machine must split the "
                         "same collection; run the shard again (--resume keeps what it finished)")
    return shard


def _regrade(opt, store: Path) -> Path | None:
    """--jaato-regrade STORE: a readable store, never the one this run writes."""
    if not getattr(opt, "jaato_regrade", None):
        return None
    path = _path(opt.jaato_regrade, Path.cwd())
    if not path.is_file():
        raise UsageError(f"--jaato-regrade {path}: no such store (a JSONL result store "
                         f"written by a run that kept snapshots)")
    if opt.jaato_out and store.resolve() == path.resolve():
        raise UsageError(f"--jaato-out {store}: is the store --jaato-regrade grades again; a "
                         f"regrade writes a store of its own: name another, or leave "
                         f"--jaato-out out ({path.stem}.regraded{path.suffix})")
    if opt.jaato_resume or opt.jaato_retry_blocked:
        raise UsageError("--jaato-regrade does not combine with --resume or --retry-blocked: "
                         "a regrade runs no agent; grade the store again whole")
    return path


def _grade(opt) -> bool:
    """--jaato-no-grade keeps what a later regrade grades: never without snapshots."""
    if not getattr(opt, "jaato_no_grade", False):
        return True
    if not getattr(opt, "jaato_snapshots", True):
        raise UsageError("--jaato-no-grade with --no-jaato-snapshots would keep nothing to grade "
                         "later: drop one")
    if getattr(opt, "jaato_regrade", None):
        raise UsageError("--jaato-no-grade with --jaato-regrade: a regrade runs graders and no "
                         "agent; drop one")
    return False


def _snapshot_max_mb(ini) -> float | None:
    return _ini_number(ini, "jaato_snapshot_max_mb", lambda v: v >= 0,
                       "a number of MB >= 0 (0 keeps none)")


def _ini_number(ini, key: str, fits: Callable[[float], bool], expected: str) -> float | None:
    """An ini key's number, None when unset; a value that is no number, or does not fit,
    is a one-line UsageError naming the key and what it expects."""
    raw = str(ini(key)).strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not fits(value):
        raise UsageError(f"ini {key}: expected {expected}, got {raw!r}")
    return value


def _sandbox(opt, ini) -> str:
    value = opt.jaato_sandbox or str(ini("jaato_sandbox")).strip() or "auto"
    if value not in SANDBOX_CHOICES:
        raise UsageError(f"ini jaato_sandbox: expected one of {', '.join(SANDBOX_CHOICES)}, "
                         f"got {value!r}")
    return value


def _choice(value: str | None, ini, key: str, choices: tuple[str, ...]) -> str:
    """An option's value, else its ini key's, else the first choice (the default)."""
    value = value or str(ini(key)).strip() or choices[0]
    if value not in choices:
        raise UsageError(f"ini {key}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def _detect(ini) -> float | None:
    """The declared smallest difference worth finding, from percentage points to a share."""
    points = _ini_number(ini, "jaato_detect", lambda v: 0 < v <= 100,
                         "percentage points above 0 and up to 100")
    return None if points is None else points / 100


def _heartbeat(opt, ini) -> float:
    raw, source = opt.jaato_heartbeat, "--jaato-heartbeat"
    if raw is None and str(ini("jaato_heartbeat")).strip():
        raw, source = str(ini("jaato_heartbeat")).strip(), "ini jaato_heartbeat"
    if raw is None:
        return DEFAULT_HEARTBEAT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise UsageError(f"{source}: expected a number of seconds >= 0 (0 = none), got {raw!r}")
    return seconds
def _size(ini, key: str, default: int) -> int:
    text = str(ini(key)).strip()
    if not text:
        return default
    size = parse_size(text)
    if size is None:
        raise UsageError(f"ini {key}: expected {SIZE_PHRASE}, got {text!r}")
    return size


def _daemon_env(ini) -> tuple[str, ...]:
    names = tuple(str(n).strip() for n in ini("jaato_daemon_env") if str(n).strip())
    for name in names:
        if not PASSTHROUGH_NAME.fullmatch(name):
            raise UsageError(f"ini jaato_daemon_env: {name!r}: expected a variable name or "
                             f"a NAME* pattern")
    return names
