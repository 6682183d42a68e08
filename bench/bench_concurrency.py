#!/usr/bin/env python3
"""Throughput and peak memory under concurrency: pytest-jaato-eval vs jaato-eval 0.3.4.

One invocation runs the SAME arms through both engines at every concurrency level:

* ours       ``PY -m pytest TASKS ... -n N --jaato-out PATH --profile-set s01,...,sNN
               --arm-timeout T``  (private daemons: every xdist worker starts its own)
* reference  ``REFPY -m jaato_eval run TASKS --out PATH --socket S --workspaces DIR
               --concurrency N --profile-set s01,...,sNN --arm-timeout T``
             on ONE private daemon this script starts before the run and stops after it

and prints wall seconds, arms/minute, spurious BLOCKED arms (every BLOCKED is spurious here),
the ratio ours / reference, and the peak memory of each run (the summed RSS of its process
tree, daemons and runners included). ``--phases`` adds the daemon's floor per arm, and ours'
per-arm overhead above the daemon's own work with the memory of both sides at every level.

The agent is a scripted OpenAI-compatible model (``pytest_jaato_eval.testing.model_server``)
answering every chat request after a fixed delay. Its script cursor is global, so each arm
gets its own server: the task runs under one profile set per arm (``s01`` ... ``sNN``, repeats
1), and set ``sK`` points at server K, whose script is ``writeNewFile answer.txt`` then
``signal_completion``. The servers live in a helper process (this file re-run with
``--serve-models``), started fresh for every run. Run with ``./dev python``; see bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import benchkit as bk

TASK_ID = "ready-scripted"
PROFILE = "agent"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
TURNS_PER_ARM = 2
SLOW_CREATE = 1.0  # a create_session this long met no warm runner slot
OVERHEAD_TARGET_MS = 50


# --------------------------------------------------------------------------- model helper

def serve_models(folder: Path, arms: int, delay: float) -> int:
    """Helper mode: N scripted servers plus the task tree. Prints one JSON line once all is
    up, serves until stdin closes, then prints one JSON line of what each server received."""
    from pytest_jaato_eval.testing.model_server import ScriptedModel, Turn

    task = folder / TASK_ID
    (task / "fixture").mkdir(parents=True)
    (task / "fixture" / "README.txt").write_text("Benchmark fixture.\n", encoding="utf-8")
    (task / "task.yaml").write_text(
        f"id: {TASK_ID}\n"
        "description: Scripted agent, ~1 s per turn; writes READY into answer.txt, then signs off.\n"
        "environment: {fixture: fixture, config_root: .jaato}\n"
        "input:\n  prompt: Write READY into answer.txt.\n"
        f"harness: {{profile: {PROFILE}}}\n"
        "graders:\n  - kind: script\n    run: 'grep -qx READY answer.txt'\n"
        "repeats: 1\n", encoding="utf-8")
    width = max(2, len(str(arms)))
    models: list[tuple[str, Any]] = []
    try:
        for i in range(arms):
            model = ScriptedModel([
                Turn.tool("writeNewFile", path="answer.txt", content="READY\n").after(delay),
                Turn.tool("signal_completion", answer="done").after(delay),
            ]).start()
            name = f"s{i + 1:0{width}d}"
            models.append((name, model))
            # The host is baked in: the profile set is this arm's own server.
            model.write_profile(task / ".jaato", PROFILE, profile_set=name,
                                completion_payload_schema=SCHEMA)
        print(json.dumps({"ready": True, "tasks": str(folder), "sets": [n for n, _ in models],
                          "urls": [m.url for _, m in models]}), flush=True)
        sys.stdin.read()  # until the driver closes our stdin (or dies)
    finally:
        stats = []
        for name, model in models:
            chats = model.chat_requests
            stats.append({"set": name, "chat_requests": len(chats),
                          "outcomes": [r.outcome for r in chats],
                          "durations": [r.duration for r in chats], "exhausted": model.exhausted})
            model.stop()
        try:
            print(json.dumps({"stats": stats}), flush=True)
        except (OSError, ValueError):
            pass
    return 0


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    return out[0].strip() if out else ""


class ModelHelper:
    """The helper process, driven from here."""

    def __init__(self, python: str, folder: Path, arms: int, delay: float) -> None:
        self.argv = [python, str(Path(__file__).resolve()), "--serve-models", str(folder),
                     "--arms", str(arms), "--delay", str(delay)]
        self.stderr = folder.parent / "models.err"
        self.proc: subprocess.Popen | None = None
        self.tree: Any = None

    def start(self, timeout: float = 60.0) -> dict[str, Any]:
        with self.stderr.open("wb") as err:
            self.proc, self.tree = bk.spawn(self.argv, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=err, text=True)
        line = _readline(self.proc, timeout)
        if not line:
            self.stop()
            raise RuntimeError(f"model helper did not start; see {self.stderr}: "
                               f"{self.stderr.read_text(errors='replace')[-2000:]}")
        return json.loads(line)

    def stop(self) -> list[dict[str, Any]]:
        """Close its stdin; read its per-server stats; end it by pid if it lingers."""
        if self.proc is None:
            return []
        stats: list[dict[str, Any]] = []
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        line = _readline(self.proc, 15.0)
        if line:
            try:
                stats = json.loads(line).get("stats", [])
            except ValueError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.tree.kill()
            self.proc.wait(timeout=10)
        self.tree.kill(0)
        self.proc = None
        return stats


def ref_openai_overlay(ref_python: str, our_python: str, scratch: Path) -> str | None:
    """A directory for the reference daemon's PYTHONPATH so it can import ``openai``.

    jaato's ``vllm`` provider needs ``openai``, an optional extra the reference venv
    (``jaato-server[interactive]``) lacks: without it every arm is BLOCKED with ``ImportError:
    openai package not installed``. Our ``openai`` version is installed ``--no-deps`` into the
    scratch dir, so the reference venv itself is left untouched. None when it has openai.
    """
    if subprocess.run([ref_python, "-c", "import openai"], capture_output=True).returncode == 0:
        return None
    version = bk.distribution_versions(our_python, ["openai"]).get("openai")
    target = scratch / "ref-openai"
    spec = f"openai=={version}" if version else "openai"
    bk.log(f"reference venv lacks openai (needed by the vllm provider): installing {spec} "
           f"into {target} for its daemon's PYTHONPATH")
    proc = subprocess.run([ref_python, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--disable-pip-version-check", "--target", str(target), spec],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"bench: could not install {spec} for the reference: {proc.stderr[-1000:]}")
    check = subprocess.run([ref_python, "-c", "import openai"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(target)})
    if check.returncode != 0:
        raise SystemExit(f"bench: the reference still cannot import openai: {check.stderr[-1000:]}")
    return str(target)


# --------------------------------------------------------------------------- one run

def run_one(side: str, conc: int, args: argparse.Namespace, scratch: Path,
            ref_python: str | None) -> dict[str, Any]:
    run_dir = scratch / f"{side}-c{conc}-{int(time.monotonic() * 1000) % 100000}"
    run_dir.mkdir(parents=True)
    store = run_dir / "results.jsonl"
    result: dict[str, Any] = {"side": side, "concurrency": conc, "log": str(run_dir / "output.log")}
    helper = ModelHelper(args.python, run_dir / "tasks", args.arms, args.delay)
    daemon: bk.PrivateDaemon | None = None
    phases = run_dir / "phases.jsonl" if side == "ours" and args.phases else None
    env = None
    before = bk.global_state()
    try:
        info = helper.start()
        tasks = info["tasks"]
        common = ["--profile-set", ",".join(info["sets"]), "--arm-timeout", str(args.arm_timeout)]
        if side == "reference":
            pool = str(max(2, conc)) if args.ref_pool_size == "match" else None
            result["ref_pool_size"] = pool or "default (2)"
            daemon = bk.PrivateDaemon(ref_python, run_dir / "daemon", "reference", env={
                "PYTHONPATH": args.ref_pythonpath, "JAATO_RUNNER_POOL_SIZE": pool})
            result["daemon_ready"] = daemon.start(args.daemon_timeout)
            if not daemon.alive():
                # jaato-eval's client would auto-start a daemon on the global pid file/log.
                result["skipped"] = f"private daemon not answering on {daemon.socket}"
                return result
            cmd = [ref_python, "-m", "jaato_eval", "run", tasks, "--out", str(store),
                   "--socket", daemon.socket, "--workspaces", str(run_dir / "workspaces"),
                   "--concurrency", str(conc), *common]
        else:
            cmd = bk.our_pytest(args.python, tasks, store, "-n", str(conc), *common)
            if phases is not None:  # time every arm and its daemon calls (phase_timing.py)
                cmd += ["-p", "phase_timing"]
                path = os.pathsep.join(filter(None, [str(bk.HERE), os.environ.get("PYTHONPATH")]))
                env = {**os.environ, "PYTHONPATH": path, "JAATO_BENCH_PHASES": str(phases)}
        ran = bk.run(cmd, cwd=run_dir, log_path=run_dir / "output.log", timeout=args.run_timeout,
                     env=env, watch=store, memory=conc in args.mem_at, settle=0,
                     also=lambda: [daemon.pid] if daemon and daemon.pid else [])
        result.update(rc=ran.rc, wall=ran.wall, landed=ran.landed, **(ran.memory or {}))
        if ran.timed_out:
            result["timed_out"] = True
        if ran.leftovers:
            result["leftover_processes"] = ran.leftovers
    finally:
        if daemon is not None:
            result["daemon_stop"] = daemon.stop(args.daemon_stop)
        result["model_stats"] = helper.stop()
        changed = bk.global_changes(before, f"{side} c={conc}")
        if changed:
            result["global_paths_changed"] = changed
        # Anything still naming this run's directory was started by it.
        left = bk.end_leftovers(needle=str(run_dir), label=f"{side} c={conc}")
        if left:
            result.setdefault("leftover_processes", []).extend(left)
    records = bk.read_records(store)
    states = bk.count(r.get("state") for r in records)
    result["states"] = states
    result["blocked_reasons"] = bk.count(
        str(r.get("blocked_reason") or r.get("error") or "?")[:160]
        for r in records if r.get("state") == "BLOCKED")
    result["stored"] = len(records)
    result["missing"] = max(0, args.arms - len({r.get("arm_id") for r in records}))
    result["blocked"] = states.get("BLOCKED", 0)
    result["graded"] = states.get("PASS", 0) + states.get("FAIL", 0)
    if result.get("wall"):
        result["total"] = result["wall"] + result.get("daemon_ready", 0.0) + result.get("daemon_stop", 0.0)
        result["arms_per_min"] = 60.0 * result["graded"] / result["wall"]
        result["arms_per_min_total"] = 60.0 * result["graded"] / result["total"]
    landed = result.get("landed") or []
    if landed and result.get("wall"):
        result["first_landed"] = landed[0]
        result["after_last"] = result["wall"] - landed[-1]
        # Mean spacing after the first record: records land in bursts at concurrency > 1, so
        # a median gap would mislead.
        result["arm_interval"] = ((landed[-1] - landed[0]) / (len(landed) - 1)
                                  if len(landed) > 1 else None)
    result["arm_self_median"] = bk.median(r.get("duration_seconds") for r in records)
    if phases is not None:
        result["phases"] = read_phases(phases)
    stats = result["model_stats"]
    chats = [s["chat_requests"] for s in stats]
    result["chat_requests"] = sum(chats)
    result["extra_chat_requests"] = sum(max(0, c - TURNS_PER_ARM) for c in chats)
    result["model_reply_median_s"] = bk.median(d for s in stats for d in s["durations"])
    bk.log(f"{side} c={conc}: rc={result.get('rc')} wall={bk.fmt(result.get('wall'))}s "
           f"stored={len(records)} {states} chat_requests={sum(chats)} "
           f"peak={result.get('peak_rss_mb', '—')} MB {result['blocked_reasons'] or ''}")
    return result


def read_phases(path: Path) -> dict[str, Any]:
    """phase_timing.py's lines, per call and per arm.

    Per arm, from the same run: its time is from the end of the previous arm on the same
    worker (its own start, for a worker's first) to its end, so what a worker does between
    two arms counts too; the daemon's own is its create_session + complete; the overhead is
    the difference. Arms without both calls (no session) are left out.
    """
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    own: dict[tuple[int, str], dict[str, float]] = {}
    for r in rows:
        if r["phase"] != "arm":
            calls = own.setdefault((r["pid"], r["arm"]), {})
            calls[r["phase"]] = calls.get(r["phase"], 0.0) + r["end"] - r["start"]
    arms, lane_end = [], {}
    for a in sorted((r for r in rows if r["phase"] == "arm"), key=lambda r: (r["pid"], r["start"])):
        first = a["pid"] not in lane_end
        since = lane_end.get(a["pid"], a["start"])
        lane_end[a["pid"]] = a["end"]
        calls = own.get((a["pid"], a["arm"]), {})
        if "create_session" in calls and "complete" in calls:
            daemon = calls["create_session"] + calls["complete"]
            arms.append({"arm": a["arm"], "pid": a["pid"], "first_on_worker": first,
                         "time": a["end"] - since, "between": a["start"] - since,
                         "create": calls["create_session"], "complete": calls["complete"],
                         "daemon": daemon, "overhead": a["end"] - since - daemon})
    return {"create": [r["end"] - r["start"] for r in rows if r["phase"] == "create_session"],
            "complete": [r["end"] - r["start"] for r in rows if r["phase"] == "complete"],
            "arms": arms}


# --------------------------------------------------------------------------- report

def summarise(results: list[dict[str, Any]], levels: Sequence[int]) -> dict[int, Any]:
    summary: dict[int, Any] = {}
    for c in levels:
        row: dict[str, Any] = {}
        for side in ("ours", "reference"):
            runs = [r for r in results if r["side"] == side and r["concurrency"] == c]
            row[side] = {"runs": len(runs),
                         "fail": sum(r.get("states", {}).get("FAIL", 0) for r in runs),
                         "arms": sum(r.get("stored", 0) for r in runs),
                         "timed_out": sum(1 for r in runs if r.get("timed_out")),
                         "peak_rss_mb": max((r["peak_rss_mb"] for r in runs if "peak_rss_mb" in r),
                                            default=None)}
            for key in ("blocked", "missing", "extra_chat_requests"):
                row[side][key] = sum(r.get(key, 0) for r in runs)
            for key in ("wall", "total", "arms_per_min", "arms_per_min_total", "first_landed",
                        "arm_interval", "after_last", "arm_self_median", "model_reply_median_s"):
                row[side][key] = bk.median(r.get(key) for r in runs)
        for key in ("arms_per_min", "arms_per_min_total"):
            row["ratio_" + key] = bk.ratio(row["ours"][key], row["reference"][key])
        summary[c] = row
    return summary


def phases_at(results: list[dict[str, Any]], c: int) -> dict[str, list[Any]]:
    """Ours' phase timings at concurrency c, pooled over rounds."""
    runs = [r["phases"] for r in results
            if r["side"] == "ours" and r["concurrency"] == c and r.get("phases")]
    return {k: [x for ph in runs for x in ph[k]] for k in ("create", "complete", "arms")}


def render_floor(results: list[dict[str, Any]], summary: dict[int, Any],
                 args: argparse.Namespace) -> list[str]:
    """What the daemon leaves to any client: the least seconds an arm can take.

    An arm cannot be quicker than its model turns plus the daemon's work around them
    (`complete`) plus a session on a warm runner slot (`create_session`, warm). At
    concurrency c, c lanes share the arms, so no client can store them faster than one per
    floor / c; the reference's measured interval over that is the best ratio possible.
    """
    rows = []
    for c in args.levels:
        ph = phases_at(results, c)
        warm = [x for x in ph["create"] if x < SLOW_CREATE]
        create, complete = bk.median(warm), bk.median(ph["complete"])
        if create is None or complete is None:
            continue
        slow = [x for x in ph["create"] if x >= SLOW_CREATE]
        floor = create + complete
        ref_iv = summary[c]["reference"]["arm_interval"]
        rows.append([f"-n {c}", 2 * args.delay, create, complete, floor, floor / c, ref_iv,
                     bk.ratio(ref_iv, floor / c), bk.ratio(ref_iv, complete / c),
                     summary[c]["ours"]["arm_interval"],
                     f"{len(slow)} (+{sum(x - create for x in slow):.1f} s)"])
    head = ["concurrency", "model/arm", "create warm", "complete", "floor/arm", "floor/c",
            "ref /arm", "best ratio", "bound", "ours /arm", "cold creates"]
    return bk.table(head, rows) if rows else []


def render_overhead(results: list[dict[str, Any]], summary: dict[int, Any],
                    args: argparse.Namespace) -> list[str]:
    """Ours' time per arm above the daemon's own, arm by arm, and both sides' peak memory."""
    rows = []
    for c in args.levels:
        arms = phases_at(results, c)["arms"]
        steady = [a for a in arms if not a["first_on_worker"]]
        over = [1000 * a["overhead"] for a in steady]
        peak_o, peak_r = summary[c]["ours"]["peak_rss_mb"], summary[c]["reference"]["peak_rss_mb"]
        rows.append([f"-n {c}", f"{len(steady)}/{len(arms)}",
                     bk.median(a["time"] for a in steady), bk.median(a["daemon"] for a in steady),
                     bk.fmt(bk.median(over), 0),
                     f"{min(over):.0f}..{max(over):.0f}" if over else "—",
                     bk.fmt(bk.median(1000 * a["between"] for a in steady), 0),
                     bk.median(a["overhead"] for a in arms if a["first_on_worker"]),
                     bk.fmt(peak_o, 0), bk.fmt(peak_r, 0), bk.ratio(peak_o, peak_r)])
    head = ["concurrency", "arms", "arm s", "daemon s", "overhead ms", "min..max",
            "between ms", "1st arm over s", "peak MB ours", "peak MB ref", "ours/ref"]
    return bk.table(head, rows)


def render(results: list[dict[str, Any]], summary: dict[int, Any], args: argparse.Namespace,
           notes: list[str]) -> str:
    rows, split = [], []
    for c in args.levels:
        for side in ("ours", "reference"):
            s, label = summary[c][side], (f"-n {c}" if side == "ours" else f"--conc {c}")
            ours = side == "ours"
            rows.append([label, side, s["wall"], s["total"], s["arms_per_min"],
                         s["arms_per_min_total"], s["blocked"], s["missing"], s["fail"],
                         bk.fmt(s["peak_rss_mb"], 0),
                         bk.fmt(summary[c]["ratio_arms_per_min"]) if ours else "",
                         bk.fmt(summary[c]["ratio_arms_per_min_total"]) if ours else ""])
            split.append([label, side, s["first_landed"], s["arm_interval"], s["after_last"],
                          s["arm_self_median"]])
    lines = bk.table(["concurrency", "side", "wall s", "total s", "arms/min", "(total)",
                      "BLOCKED", "missing", "FAIL", "peak MB", "ours/ref", "(total)"], rows, left=2)
    lines += [""] + bk.table(["concurrency", "side", "start->1st stored", "1st->last/arm",
                              "last->exit", "arm self med"], split, left=2) + [""]
    for r in results:
        if r.get("peak_breakdown"):
            parts = ", ".join(f"{k} {v['n']}x {v['mb']:.0f} MB" for k, v in r["peak_breakdown"].items())
            lines.append(f"peak memory {r['side']} c={r['concurrency']}: {r['peak_rss_mb']:.0f} MB "
                         f"over {r['peak_procs']} processes ({parts})")
        for reason, n in (r.get("blocked_reasons") or {}).items():
            lines.append(f"BLOCKED {r['side']} c={r['concurrency']}: {n}x {reason}")
    if args.phases:
        floor = render_floor(results, summary, args)
        if floor:
            lines += ["", "the daemon's floor (ours, from phase_timing.py; seconds):"] + floor
        lines += ["", "ours' time per arm above the daemon's own (create_session + complete), "
                      f"arm by arm in the same run (target <= {OVERHEAD_TARGET_MS} ms), and peak memory:"]
        lines += render_overhead(results, summary, args)
    return "\n".join(lines + [""] + [f"note: {n}" for n in notes])


# --------------------------------------------------------------------------- main

def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Throughput and peak memory at concurrency 1/2/4: ours (-n N, private "
                    "daemons) vs jaato-eval 0.3.4 (--concurrency N, one daemon).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--python", default=bk.OUR_PYTHON,
                   help="interpreter with pytest-jaato-eval and pytest-xdist (ours)")
    p.add_argument("--ref-python", default=bk.REF_PYTHON,
                   help="interpreter with jaato-eval 0.3.4; if missing, a venv is created at its ../..")
    p.add_argument("--arms", type=int, default=12,
                   help="arms per run: one profile set, and one scripted server, per arm")
    p.add_argument("--delay", type=float, default=1.0,
                   help="seconds the scripted model waits before each of its 2 replies per arm")
    p.add_argument("--levels", default="1,2,4", help="concurrency levels (comma-separated)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the whole grid this many times; the table shows medians")
    p.add_argument("--only", choices=("both", "ours", "ref"), default="both")
    p.add_argument("--order", choices=("ref-first", "ours-first"), default="ref-first",
                   help="which side runs first at each level (the two run back to back)")
    p.add_argument("--mem-at", default=None,
                   help="concurrency levels whose runs are memory-sampled, or 'all' "
                        "(default: 4; every level with --phases)")
    p.add_argument("--arm-timeout", type=float, default=120.0,
                   help="--arm-timeout for both engines. Their default, 900 s, would let one "
                        "stalled reference arm eat the whole time budget; much below 120 s cuts "
                        "reference arms that a stalled session.new delays to ~80 s but that "
                        "then pass")
    p.add_argument("--run-timeout", type=float, default=360.0,
                   help="ceiling per run; its process tree is ended after it")
    p.add_argument("--daemon-timeout", type=float, default=120.0)
    p.add_argument("--daemon-stop", choices=("flag", "sigterm"), default="flag",
                   help="how the reference's daemon is stopped (see bench_vs_reference.py)")
    p.add_argument("--ref-pool-size", choices=("default", "match"), default="default",
                   help="default: jaato-server's 2 warm runner slots for the reference daemon. "
                        "match: JAATO_RUNNER_POOL_SIZE = max(2, concurrency), as jaato-eval's "
                        "start-up warning advises")
    p.add_argument("--phases", action="store_true",
                   help="time ours' arms and their create_session and complete calls "
                        "(phase_timing.py): the daemon's per-arm floor beside the reference's "
                        "interval, ours' per-arm overhead, and memory at every level")
    p.add_argument("--json", default=None, help="write every raw measurement here")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--serve-models", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.arms < 1 or args.rounds < 1:
        p.error("--arms and --rounds must be >= 1")
    try:
        args.levels = [int(x) for x in str(args.levels).split(",") if x.strip()]
        mem_at = args.mem_at or ("all" if args.phases else "4")
        args.mem_at = (list(args.levels) if mem_at == "all"
                       else [int(x) for x in mem_at.split(",") if x.strip()])
    except ValueError:
        p.error("--levels and --mem-at: comma-separated integers")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_models:
        return serve_models(Path(args.serve_models), args.arms, args.delay)
    if not Path(args.python).exists():
        raise SystemExit(f"bench: {args.python} does not exist (create it with ./dev)")
    ref_python = bk.ensure_ref_python(args.ref_python) if args.only != "ours" else None
    with bk.scratch("jconc-", args.keep) as scratch:
        # Everything started from here (daemons included) puts its temp files, and the
        # daemons their /tmp/jaato-<sid>/ trace folders, under the scratch dir.
        (scratch / "t").mkdir()
        os.environ["TMPDIR"] = str(scratch / "t")
        report: dict[str, Any] = {"args": vars(args), "scratch": str(scratch)}
        notes: list[str] = []
        report["ours_versions"] = bk.distribution_versions(
            args.python, ["pytest-jaato-eval", "pytest-xdist", "pytest", "jaato-server", "jaato-sdk"])
        args.ref_pythonpath = None
        if ref_python:
            versions = report["reference_versions"] = bk.distribution_versions(
                ref_python, ["jaato-eval", "jaato-server", "jaato-sdk"])
            if versions.get("jaato-eval") != "0.3.4":
                notes.append(f"reference is jaato-eval {versions.get('jaato-eval')}, not 0.3.4")
            args.ref_pythonpath = ref_openai_overlay(ref_python, args.python, scratch)
            if args.ref_pythonpath:
                notes.append("the reference venv has no openai (needed by the vllm provider): its "
                             "daemon ran with PYTHONPATH holding ours' openai version, installed "
                             "--no-deps into the scratch dir")
        # Warm the page cache for both interpreters' imports; not measured.
        subprocess.run([args.python, "-c", "import pytest, xdist, pytest_jaato_eval, jaato_server, "
                        "pytest_jaato_eval.testing.model_server"], capture_output=True, timeout=120)
        if ref_python:
            subprocess.run([ref_python, "-c", "import jaato_eval, jaato_server, jaato_sdk"],
                           capture_output=True, timeout=120)
        sides = {"both": ["reference", "ours"], "ours": ["ours"], "ref": ["reference"]}[args.only]
        if args.order == "ours-first":
            sides.reverse()
        results: list[dict[str, Any]] = []
        load_start, started = bk.load(), time.monotonic()
        for rnd in range(args.rounds):
            for c in args.levels:
                for side in sides:
                    results.append({**run_one(side, c, args, scratch, ref_python), "round": rnd})
        report["results"] = results
        notes += [
            f"{args.arms} arms per run (1 task x {args.arms} profile sets x 1 repeat), scripted "
            f"model: 2 replies per arm, each after {args.delay:g} s; --arm-timeout "
            f"{args.arm_timeout:g} on both sides; {args.rounds} round(s), medians shown; memory "
            f"sampled at levels {args.mem_at}; whole benchmark {time.monotonic() - started:.0f} s",
            "ours runs with -p no:hypothesispytest (a dev-venv plugin a user's install lacks)",
            "what each column means: bench/README.md, bench_concurrency.py",
            f"at the start: {load_start}; at the end: {bk.load()}"]
        if args.ref_pool_size == "match":
            notes.append("reference daemon started with JAATO_RUNNER_POOL_SIZE = max(2, concurrency)")
        extra = sum(r.get("extra_chat_requests", 0) for r in results)
        if extra:
            notes.append(f"{extra} chat request(s) beyond the 2 per arm (retries) over all runs")
        replies = [r["model_reply_median_s"] for r in results if r.get("model_reply_median_s")]
        if replies:
            notes.append(f"median chat request duration at the model: {statistics.median(replies):.2f} s")
        for key, warning in (("global_paths_changed", "/tmp/jaato.sock or /tmp/jaato.pid changed "
                              "during a run"),
                             ("leftover_processes", "processes outlived a run and were ended "
                              "(see leftover_processes in --json)"),
                             ("skipped", "a run was skipped")):
            said = [str(r[key]) for r in results if r.get(key) and key == "skipped"]
            if any(r.get(key) for r in results):
                notes.append(f"WARNING: {warning}" + (": " + "; ".join(said) if said else ""))
        summary = report["summary"] = summarise(results, args.levels)
        print(render(results, summary, args, notes))
        bk.write_json(args.json, report)
        return 1 if any(r.get("rc") is None or r.get("skipped") for r in results) else 0


if __name__ == "__main__":
    bk.run_cli(main)
