#!/usr/bin/env python3
"""Benchmark pytest-jaato-eval side by side against the reference engine, jaato-eval 0.3.4.

One invocation measures, for the same tasks directory:

* ours       ``PY -m pytest TASKS -p no:cacheprovider -q --jaato-out PATH``
* reference  ``REFPY -m jaato_eval run TASKS --out PATH --socket S ...``

each cold (the first run, a fresh process) and warm (the runs after it), and prints wall
time, per-arm time and the ratio ours / reference. Per-arm time is measured the same way for
both: the gap between successive records landing in each side's JSONL store, watched from
outside. Each store's own ``duration_seconds`` is shown too, but the engines time different
spans.

Daemons are always PRIVATE (benchkit.PrivateDaemon). jaato-eval's client auto-starts a daemon
on the GLOBAL pid file and log when the socket it is given does not answer, so a reference
run is refused unless its private daemon answers; ``--socket`` is always passed, and the
global paths are watched around every run. Run with ``./dev python``; see bench/README.md.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Sequence

import benchkit as bk


def with_repeats(tasks: Path, repeats: int, dest: Path) -> Path:
    """A copy of the tasks tree with every task.yaml's top-level ``repeats:`` set to N.

    jaato-eval 0.3.4 has no repeats flag: ``repeats`` is read from each manifest only.
    """
    shutil.copytree(tasks, dest, symlinks=True)
    for manifest in dest.rglob("task.yaml"):
        text = manifest.read_text(encoding="utf-8")
        if re.search(r"(?m)^repeats\s*:", text):
            text = re.sub(r"(?m)^repeats\s*:.*$", f"repeats: {repeats}", text)
        else:
            text = text.rstrip("\n") + f"\nrepeats: {repeats}\n"
        manifest.write_text(text, encoding="utf-8")
    return dest


def traces_of(arms: list[dict[str, Any]]) -> list[str]:
    """The /tmp/jaato-<sid>/ trace folders the daemon left for this run's sessions."""
    return [f"/tmp/jaato-{sid}" for arm in arms for sid in arm["session_ids"]
            if isinstance(sid, str) and re.fullmatch(r"[0-9_]+", sid)
            and os.path.isdir(f"/tmp/jaato-{sid}")]


# --------------------------------------------------------------------------- the two sides

class Side:
    def __init__(self, name: str, python: str, tasks: Path, args: argparse.Namespace,
                 scratch: Path) -> None:
        self.name, self.python, self.tasks, self.args = name, python, tasks, args
        self.scratch = scratch / name
        self.scratch.mkdir(parents=True, exist_ok=True)

    def unavailable(self) -> str | None:
        if self.name == "reference":
            return None
        if not Path(self.python).exists():
            return f"{self.python} does not exist (create it with ./dev, or pass --python)"
        try:
            helptext = subprocess.run([self.python, "-m", "pytest", "--help"], capture_output=True,
                                      text=True, timeout=120, cwd=str(self.scratch)).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            return f"pytest --help failed: {exc}"
        for flag in ["--jaato-out"] + (["--jaato-repeats"] if self.args.repeats else []):
            if flag not in helptext:
                return f"the plugin does not offer {flag} yet (pytest --help)"
        return None

    def command(self, run_dir: Path, store: Path, socket_path: str | None) -> list[str]:
        a = self.args
        if self.name == "ours":
            cmd = bk.our_pytest(self.python, self.tasks, store)
            cmd += ["--jaato-repeats", str(a.repeats)] if a.repeats else []
            cmd += ["--jaato-socket", socket_path] if socket_path else []
            return cmd + list(a.ours_arg)
        assert socket_path, "the reference is never run without a private socket"
        # A fresh --workspaces per run: the daemon writes <ws>/<arm>/.jaato/ after the engine
        # discards an arm's workspace, and jaato-eval BLOCKS every arm whose workspace exists.
        return [self.python, "-m", "jaato_eval", "run", str(self.tasks), "--out", str(store),
                "--socket", socket_path, "--workspaces", str(run_dir / "workspaces"),
                "--concurrency", str(a.ref_concurrency), *a.ref_arg]


def run_once(side: Side, phase: str, index: int, shared: bk.PrivateDaemon | None) -> dict[str, Any]:
    args = side.args
    run_dir = side.scratch / f"{phase}-{index}"
    run_dir.mkdir(parents=True, exist_ok=True)
    store = run_dir / "results.jsonl"
    result: dict[str, Any] = dict.fromkeys(("rc", "wall", "daemon_ready", "daemon_stop", "total",
                                            "skipped", "global_paths_changed", "traces_left"))
    result.update(side=side.name, phase=phase, index=index, arms=[],
                  log=str(run_dir / "output.log"))
    # Ours without a shared daemon starts its own private one inside pytest.
    daemon = shared or (bk.PrivateDaemon(side.python, run_dir / "daemon", side.name)
                        if side.name == "reference" else None)
    before = bk.global_state()
    landed: list[float] = []
    try:
        if daemon is not None and daemon is not shared:
            result["daemon_ready"] = daemon.start(args.daemon_timeout)
        if daemon is not None and not daemon.alive():
            result["skipped"] = f"private daemon not answering on {daemon.socket}; run refused"
            return result
        ran = bk.run(side.command(run_dir, store, daemon.socket if daemon else None), cwd=run_dir,
                     log_path=run_dir / "output.log", timeout=args.timeout, watch=store)
        result.update(rc=ran.rc, wall=ran.wall, leftovers=ran.leftovers)
        landed = ran.landed
    finally:
        if daemon is not None and daemon is not shared:
            result["daemon_stop"] = daemon.stop(args.daemon_stop)
        result["global_paths_changed"] = bk.global_changes(before, f"{side.name} {phase}")
    result["arms"] = [{"arm_id": r.get("arm_id"), "duration_seconds": r.get("duration_seconds"),
                       "state": r.get("state") or r.get("verdict"), "landed_at": r["landed_at"],
                       "session_ids": r.get("session_ids") or
                       ([r["session_id"]] if r.get("session_id") else [])}
                      for r in bk.read_records(store, landed)]
    traces = traces_of(result["arms"])
    result["traces_left"] = len(traces)
    if not args.keep_traces:
        for folder in traces:
            shutil.rmtree(folder, ignore_errors=True)
    if result["wall"] is not None:
        result["total"] = result["wall"] + (result["daemon_ready"] or 0.0) + (result["daemon_stop"] or 0.0)
    return result


def run_side(side: Side) -> dict[str, Any]:
    reason = side.unavailable()
    if reason:
        bk.log(f"{side.name}: skipped: {reason}")
        return {"skipped": reason, "runs": []}
    args, runs, shared, ready = side.args, [], None, None
    try:
        if args.daemon == "shared":  # one private daemon for all of this side's runs
            shared = bk.PrivateDaemon(side.python, side.scratch / "daemon", side.name)
            ready = shared.start(args.daemon_timeout)
        for phase, index in [("cold", 0)] + [("warm", i) for i in range(args.warm_runs)]:
            runs.append(run_once(side, phase, index, shared))
    finally:
        stop = shared.stop(args.daemon_stop) if shared else None
    for r in runs:
        bk.log(f"{side.name} {r['phase']}-{r['index']}: rc={r['rc']} wall={bk.fmt(r['wall'])}s "
               f"arms={len(r['arms'])} {bk.count(a['state'] for a in r['arms'])} {r['skipped'] or ''}")
    return {"skipped": None, "runs": runs, "shared_daemon_ready": ready, "shared_daemon_stop": stop}


# --------------------------------------------------------------------------- report

def run_metrics(run: dict[str, Any]) -> dict[str, Any]:
    """One run's numbers: external (store landings) and self-reported (duration_seconds)."""
    arms, wall = run["arms"], run["wall"]
    durations = [a["duration_seconds"] for a in arms
                 if isinstance(a["duration_seconds"], (int, float))]
    landed = sorted(a["landed_at"] for a in arms if isinstance(a["landed_at"], (int, float)))
    return {
        "total": run["total"], "wall": wall, "ready": run["daemon_ready"], "stop": run["daemon_stop"],
        "first_landed": landed[0] if landed else None,
        "interval": bk.median(b - a for a, b in zip(landed, landed[1:])),
        "after_last": (wall - landed[-1]) if landed and wall is not None else None,
        "wall_per_arm": (wall / len(arms)) if arms and wall is not None else None,
        "self_first": durations[0] if durations else None,
        "self_steady": bk.median(durations[1:] if len(durations) > 1 else durations),
        "arms": len(arms), "rc": run["rc"],
    }


def summarise(side: dict[str, Any]) -> dict[str, Any]:
    """Numbers for the table: the cold run's, and the median over the warm runs."""
    runs = side.get("runs") or []
    out: dict[str, Any] = {}
    for phase in ("cold", "warm"):
        metrics = [run_metrics(r) for r in runs if r["phase"] == phase and r["wall"] is not None]
        if not metrics:
            continue
        for key in metrics[0]:
            if key == "rc":
                out[f"{phase}_rc"] = metrics[0]["rc"] if phase == "cold" else [m["rc"] for m in metrics]
            elif key == "arms" or phase == "cold":
                out[f"{phase}_{key}"] = metrics[0][key]
            else:
                out[f"{phase}_{key}"] = bk.median(m[key] for m in metrics)
    out["states"] = bk.count(a["state"] for r in runs for a in r["arms"])
    out["traces_left"] = sum(r["traces_left"] or 0 for r in runs)
    out["sessions"] = sum(len(a["session_ids"]) for r in runs for a in r["arms"])
    out["shared_ready"] = side.get("shared_daemon_ready")
    out["shared_stop"] = side.get("shared_daemon_stop")
    return out


ROWS = [("shared daemon ready (s)", "shared_ready")]
for _phase in ("cold", "warm"):
    ROWS += [(f"{_phase}{label}", f"{_phase}_{key}") for label, key in (
        (": total (s)  daemon+run+stop", "total"), (": command wall (s)", "wall"),
        (":   daemon ready, script's (s)", "ready"), (":   daemon stop, script's (s)", "stop"),
        (":   start -> 1st arm stored (s)", "first_landed"),
        (":   arm-to-arm, median (s)", "interval"),
        (":   last arm stored -> exit (s)", "after_last"), (":   wall / arm (s)", "wall_per_arm"),
        (":   self-reported 1st arm (s)", "self_first"),
        (":   self-reported rest, median (s)", "self_steady"))]
ROWS += [("shared daemon stop (s)", "shared_stop")]


def render_table(ours: dict[str, Any], ref: dict[str, Any], notes: list[str]) -> str:
    rows = [[label, ours.get(key), ref.get(key), bk.ratio(ours.get(key), ref.get(key))]
            for label, key in ROWS if ours.get(key) is not None or ref.get(key) is not None]
    lines = bk.table(["metric", "ours", "reference", "ours/ref"], rows)
    width = max(len(label) for label, _ in ROWS) + 2

    def both(label: str, a: str, b: str) -> None:
        lines.append(f"{label:<{width}}ours: {a}; reference: {b}")
    both("arms stored (cold / warm)", *(f"{s.get('cold_arms', '—')} / {s.get('warm_arms', '—')}"
                                        for s in (ours, ref)))
    both("arm states, all runs", *(", ".join(f"{k} {v}" for k, v in sorted(s["states"].items()))
                                   or "—" for s in (ours, ref)))
    both("exit codes (cold / warm)", *(f"{s.get('cold_rc', '—')} / {s.get('warm_rc', '—')}"
                                       for s in (ours, ref)))
    both("/tmp/jaato-<sid> left, all runs", *(f"{s['traces_left']} of {s['sessions']}"
                                              for s in (ours, ref)))
    lines[-1] += " (removed after counting unless --keep-traces)"
    return "\n".join(lines + [""] + [f"note: {n}" for n in notes])


# --------------------------------------------------------------------------- main

def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark pytest-jaato-eval against jaato-eval 0.3.4 on one tasks dir.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("tasks", nargs="?", default=str(bk.HERE / "tasks"),
                   help="directory holding task.yaml files")
    p.add_argument("--python", default=bk.OUR_PYTHON,
                   help="interpreter with pytest-jaato-eval installed (ours)")
    p.add_argument("--ref-python", default=None,
                   help="interpreter with jaato-eval 0.3.4; if missing, a venv is created "
                        "(at its ../.. when the path is given, else in the scratch dir)")
    p.add_argument("--ref-base-python", default=None,
                   help="Python >= 3.12 used to create the reference venv (default: the first found)")
    p.add_argument("--only", choices=("both", "ours", "ref"), default="both")
    p.add_argument("--order", choices=("ref-first", "ours-first"), default="ref-first")
    p.add_argument("--repeats", type=int, default=None,
                   help="repeats per task: ours gets --jaato-repeats N; the reference (no such "
                        "flag) runs on a copy of the tasks with `repeats: N` in each task.yaml")
    p.add_argument("--warm-runs", type=int, default=1, help="warm runs per side (median taken)")
    p.add_argument("--daemon", choices=("per-run", "shared"), default="per-run",
                   help="per-run: every run gets a fresh private daemon (ours: the plugin "
                        "starts its own; reference: this script starts and stops one around "
                        "the run). shared: one private daemon per side for all its runs, "
                        "started by this script; ours gets --jaato-socket")
    p.add_argument("--ref-concurrency", type=int, default=1,
                   help="jaato-eval --concurrency (its default is 2; ours runs arms "
                        "sequentially on one daemon, and concurrent sessions on one daemon "
                        "can deadlock)")
    p.add_argument("--ref-arg", action="append", default=[],
                   help="extra argument for `jaato_eval run` (repeatable; use --ref-arg=--x)")
    p.add_argument("--ours-arg", action="append", default=[],
                   help="extra argument for pytest (repeatable; use --ours-arg=-x)")
    p.add_argument("--timeout", type=float, default=1800.0, help="ceiling per run, seconds")
    p.add_argument("--daemon-stop", choices=("flag", "sigterm"), default="flag",
                   help="how the script stops a daemon it started: `jaato_server --stop` "
                        "(its orphan sweep costs 2-5 s) or SIGTERM + wait + end survivors")
    p.add_argument("--daemon-timeout", type=float, default=120.0,
                   help="ceiling for a daemon to become ready, seconds")
    p.add_argument("--json", default=None, help="write every raw measurement here")
    p.add_argument("--keep", action="store_true",
                   help="keep the scratch directory (stores, logs, workspaces, daemon logs)")
    p.add_argument("--keep-traces", action="store_true",
                   help="keep the daemon's /tmp/jaato-<session id>/ trace folders")
    args = p.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.warm_runs < 1:
        p.error("--warm-runs must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tasks = Path(args.tasks).resolve()
    if not any(tasks.rglob("task.yaml")):
        raise SystemExit(f"bench: no task.yaml under {tasks}")
    notes: list[str] = []
    with bk.scratch("jbench-", args.keep) as scratch:
        report: dict[str, Any] = {"tasks": str(tasks), "args": vars(args), "scratch": str(scratch)}
        sides: list[Side] = []
        if args.only in ("both", "ref"):
            ref_python = bk.ensure_ref_python(args.ref_python, scratch, args.ref_base_python)
            ref_tasks = tasks
            if args.repeats:
                ref_tasks = with_repeats(tasks, args.repeats, scratch / "ref-tasks")
                notes.append(f"reference ran a copy of the tasks with repeats: {args.repeats}")
            versions = report["reference_versions"] = bk.distribution_versions(
                ref_python, ["jaato-eval", "jaato-server", "jaato-sdk", "pexpect"])
            if versions.get("jaato-eval") != "0.3.4":
                notes.append(f"reference is jaato-eval {versions.get('jaato-eval')}, not 0.3.4")
            if not versions.get("pexpect"):
                notes.append("reference venv lacks pexpect: its daemon start-up is ~15 s slower")
            sides.append(Side("reference", ref_python, ref_tasks, args, scratch))
        if args.only in ("both", "ours"):
            if Path(args.python).exists():
                report["ours_versions"] = bk.distribution_versions(
                    args.python, ["pytest-jaato-eval", "jaato-server", "jaato-sdk", "pytest"])
            sides.append(Side("ours", args.python, tasks, args, scratch))
        if args.order == "ours-first":
            sides.reverse()
        raw = report["raw"] = {side.name: run_side(side) for side in sides}
        ours, ref = summarise(raw.get("ours", {})), summarise(raw.get("reference", {}))
        report["summary"] = {"ours": ours, "reference": ref}
        notes += [f"{name} skipped: {raw[name]['skipped']}" for name in ("ours", "reference")
                  if raw.get(name, {}).get("skipped")]
        notes.append(f"daemon mode: {args.daemon}; reference --concurrency {args.ref_concurrency}; "
                     "what each row means: bench/README.md. 'stored' rows (when records landed, "
                     "watched every 20 ms) compare like with like; 'self-reported' rows do not")
        all_runs = [r for side in raw.values() for r in side["runs"]]
        if any(r["global_paths_changed"] for r in all_runs):
            notes.append("WARNING: the global /tmp/jaato.sock or /tmp/jaato.pid changed during a run")
        if any(r.get("leftovers") for r in all_runs):
            notes.append("WARNING: processes outlived a run and were ended (leftovers in --json)")
        notes.append(f"at the end: {bk.load()} (other work on the machine skews every number)")
        print(render_table(ours, ref, notes))
        bk.write_json(args.json, report)
        return 1 if any(r["rc"] is None or r["skipped"] for r in all_runs) else 0


if __name__ == "__main__":
    bk.run_cli(main)
