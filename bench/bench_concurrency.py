#!/usr/bin/env python3
"""Throughput and peak memory under concurrency: pytest-jaato-eval vs jaato-eval 0.3.4.

One invocation runs the SAME arms through both engines at every concurrency level:

* ours       ``PY -m pytest TASKS -p no:cacheprovider -q -n N --jaato-out PATH
               --profile-set s01,...,sNN --arm-timeout T``
             (private daemons: every xdist worker starts its own; no --jaato-socket)
* reference  ``REFPY -m jaato_eval run TASKS --out PATH --socket S --workspaces DIR
               --concurrency N --profile-set s01,...,sNN --arm-timeout T``
             on ONE private daemon this script starts before the run and stops after it

and prints wall seconds, arms/minute, spurious BLOCKED arms (every BLOCKED is spurious here),
the ratio ours / reference, and the peak memory of each run (sum of RSS over its process tree,
daemons and runners included, sampled every 0.2 s from /proc).

The agent is a scripted OpenAI-compatible model (``pytest_jaato_eval.testing.model_server``)
that answers every chat request after a fixed delay (1 s by default). The server's script
cursor is global, so concurrent arms cannot share one 2-turn script deterministically. Each
arm therefore gets its own server: the task is run under one profile set per arm
(``s01`` ... ``sNN``, repeats 1), and profile set ``sK`` points at server K, whose script is
``writeNewFile answer.txt`` then ``signal_completion``. Every arm costs exactly two chat
requests and 2 x delay of model time, whatever the interleaving. The servers live in a helper
process (this file re-run under our venv's interpreter with ``--serve-models``), started
fresh for every run because the ports change and the cursors must start at 0.

Stdlib only for the driver (any python3 >= 3.11); it reuses the private-daemon and process
helpers of ``bench_vs_reference.py``. See bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing the sibling script

import bench_vs_reference as bvr  # noqa: E402  (our own sibling script)

TASK_ID = "ready-scripted"
PROFILE = "agent"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
TURNS_PER_ARM = 2
PAGE = os.sysconf("SC_PAGE_SIZE")

log = bvr.log


# --------------------------------------------------------------------------- model helper

def set_name(i: int, width: int) -> str:
    return f"s{i + 1:0{width}d}"


def serve_models(folder: Path, arms: int, delay: float) -> int:
    """Helper mode, run under OUR interpreter: N scripted servers plus the task tree.

    Prints one JSON line once everything is up, serves until stdin closes, then prints one
    JSON line of what each server received.
    """
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
    models: List[Tuple[str, Any]] = []
    try:
        for i in range(arms):
            model = ScriptedModel([
                Turn.tool("writeNewFile", path="answer.txt", content="READY\n").after(delay),
                Turn.tool("signal_completion", answer="done").after(delay),
            ]).start()
            name = set_name(i, width)
            models.append((name, model))
            # The host is baked in: the profile set is this arm's own server.
            model.write_profile(task / ".jaato", PROFILE, profile_set=name,
                                completion_payload_schema=SCHEMA)
        print(json.dumps({"ready": True, "tasks": str(folder),
                          "sets": [n for n, _ in models], "urls": [m.url for _, m in models]}),
              flush=True)
        sys.stdin.read()  # until the driver closes our stdin (or dies)
    finally:
        stats = []
        for name, model in models:
            chats = model.chat_requests
            stats.append({"set": name, "chat_requests": len(chats),
                          "outcomes": [r.outcome for r in chats],
                          "durations": [r.duration for r in chats],
                          "exhausted": model.exhausted})
            model.stop()
        try:
            print(json.dumps({"stats": stats}), flush=True)
        except (OSError, ValueError):
            pass
    return 0


class ModelHelper:
    """The helper process, driven from the stdlib side."""

    def __init__(self, python: str, folder: Path, arms: int, delay: float) -> None:
        self.python, self.folder, self.arms, self.delay = python, folder, arms, delay
        self.proc: Optional[subprocess.Popen] = None
        self.info: Dict[str, Any] = {}
        self.stderr = folder.parent / "models.err"

    def start(self, timeout: float = 60.0) -> Dict[str, Any]:
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [self.python, str(Path(__file__).resolve()), "--serve-models", str(self.folder),
                 "--arms", str(self.arms), "--delay", str(self.delay)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                start_new_session=True)
        line = _readline(self.proc, timeout)
        if not line:
            self.stop()
            raise RuntimeError(f"model helper did not start; see {self.stderr}: "
                               f"{self.stderr.read_text(errors='replace')[-2000:]}")
        self.info = json.loads(line)
        return self.info

    def stop(self) -> List[Dict[str, Any]]:
        """Close its stdin; read its per-server stats; end it by pid if it lingers."""
        if self.proc is None:
            return []
        stats: List[Dict[str, Any]] = []
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
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
        return stats


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    out: List[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    return out[0].strip() if out else ""


# --------------------------------------------------------------------------- memory

def _ppid_map() -> Dict[int, int]:
    out: Dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    raw = f.read()
                out[int(entry.name)] = int(raw[raw.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return out


def _starttime(pid: int) -> Optional[str]:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
        return raw[raw.rindex(b")") + 2:].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return None


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _kind(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "jaato_server" in cmd:
        return "daemon" if "--ipc-socket" in cmd else "runner"
    if "jaato_eval" in cmd:
        return "jaato_eval"
    if "pytest" in cmd:
        return "pytest"
    if "execnet" in cmd or "xdist" in cmd or "-c" in cmd.split()[1:4]:
        return "xdist worker"  # execnet's `python -u -c "import sys;exec(eval(...))"`
    return (cmd.split() or ["?"])[0].rsplit("/", 1)[-1]


class MemorySampler:
    """Peak of the summed RSS over every process below the given roots, every 0.2 s.

    A process seen once stays counted while it lives (same pid and start time), so a runner
    re-parented to init after its parent exits is not lost.
    """

    def __init__(self, roots: Callable[[], List[int]], interval: float = 0.2) -> None:
        self.roots = roots
        self.interval = interval
        self.peak = 0
        self.peak_breakdown: Dict[str, Any] = {}
        self.peak_procs = 0
        self.samples = 0
        self._seen: Dict[int, Optional[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        ppids = _ppid_map()
        children: Dict[int, List[int]] = {}
        for pid, ppid in ppids.items():
            children.setdefault(ppid, []).append(pid)
        todo = [p for p in self.roots() if p in ppids]
        for pid, start in list(self._seen.items()):
            if pid in ppids and _starttime(pid) == start:
                todo.append(pid)
        tree = set()
        while todo:
            pid = todo.pop()
            if pid in tree:
                continue
            tree.add(pid)
            todo.extend(children.get(pid, []))
        for pid in tree:
            if pid not in self._seen:
                self._seen[pid] = _starttime(pid)
        sizes = {pid: _rss(pid) for pid in tree}
        total = sum(sizes.values())
        self.samples += 1
        self.peak_procs = max(self.peak_procs, len(tree))
        if total > self.peak:
            self.peak = total
            kinds: Dict[str, List[int]] = {}
            for pid, size in sizes.items():
                kinds.setdefault(_kind(pid), []).append(size)
            self.peak_breakdown = {k: {"n": len(v), "mb": round(sum(v) / 2**20, 1)}
                                   for k, v in sorted(kinds.items())}


# --------------------------------------------------------------------------- one run

def read_records(path: Path) -> List[Dict[str, Any]]:
    records: List[Dict[str, Any]] = []
    if not path.is_file():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def ref_openai_overlay(ref_python: str, our_python: str, scratch: Path) -> Optional[str]:
    """A directory to put on the reference daemon's PYTHONPATH so it can import ``openai``.

    jaato's ``vllm`` provider needs ``openai``, an optional extra of jaato-server that the
    reference venv (``jaato-server[interactive]``) lacks: without it every arm is BLOCKED with
    ``ImportError: openai package not installed``. The same ``openai`` version as ours is
    installed with ``--no-deps`` (the reference venv has every dependency) into the scratch
    dir, so the reference venv itself is left untouched. None when it already has openai.
    """
    if subprocess.run([ref_python, "-c", "import openai"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0:
        return None
    version = bvr.distribution_versions(our_python, ["openai"]).get("openai")
    target = scratch / "ref-openai"
    spec = f"openai=={version}" if version else "openai"
    log(f"reference venv lacks openai (needed by the vllm provider): installing {spec} "
        f"into {target} for its daemon's PYTHONPATH")
    proc = subprocess.run([ref_python, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--disable-pip-version-check", "--target", str(target), spec],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"bench: could not install {spec} for the reference: {proc.stderr[-1000:]}")
    check = subprocess.run([ref_python, "-c", "import openai, sys; sys.stdout.write(openai.__version__)"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(target)})
    if check.returncode != 0:
        raise SystemExit(f"bench: the reference still cannot import openai: {check.stderr[-1000:]}")
    return str(target)


class _environ:
    """Set environment variables for what is started inside the block (the daemon)."""

    def __init__(self, **values: Optional[str]) -> None:
        self.values = {k: v for k, v in values.items() if v}
        self.saved: Dict[str, Optional[str]] = {}

    def __enter__(self) -> None:
        for k, v in self.values.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc: Any) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_one(side: str, conc: int, args: argparse.Namespace, scratch: Path,
            ref_python: Optional[str]) -> Dict[str, Any]:
    run_dir = scratch / f"{side}-c{conc}-{int(time.monotonic() * 1000) % 100000}"
    run_dir.mkdir(parents=True)
    store = run_dir / "results.jsonl"
    out_log = run_dir / "output.log"
    result: Dict[str, Any] = {"side": side, "concurrency": conc, "log": str(out_log)}
    helper = ModelHelper(args.python, run_dir / "tasks", args.arms, args.delay)
    daemon: Optional[bvr.PrivateDaemon] = None
    phases_file: Optional[Path] = None
    before = bvr.global_state()
    try:
        info = helper.start()
        tasks, sets = info["tasks"], ",".join(info["sets"])
        if side == "reference":
            assert ref_python
            daemon = bvr.PrivateDaemon(ref_python, run_dir / "daemon", "reference")
            pool = str(max(2, conc)) if args.ref_pool_size == "match" else None
            result["ref_pool_size"] = pool or "default (2)"
            with _environ(PYTHONPATH=args.ref_pythonpath, JAATO_RUNNER_POOL_SIZE=pool):
                result["daemon_ready"] = daemon.start(args.daemon_timeout)
            if not daemon.alive():
                # jaato-eval's client would auto-start a daemon on the global pid file/log.
                result["skipped"] = f"private daemon not answering on {daemon.socket}"
                return result
            cmd = [ref_python, "-m", "jaato_eval", "run", tasks, "--out", str(store),
                   "--socket", daemon.socket, "--workspaces", str(run_dir / "workspaces"),
                   "--concurrency", str(conc), "--profile-set", sets,
                   "--arm-timeout", str(args.arm_timeout)]
            d = daemon
            roots: Callable[[], List[int]] = lambda: [p for p in (proc_pid[0], d.proc.pid if d.proc else None) if p]
        else:
            cmd = [args.python, "-m", "pytest", tasks, "-p", "no:cacheprovider", "-q",
                   *bvr.DEV_ONLY_PLUGINS, "-n", str(conc), "--jaato-out", str(store), "--profile-set", sets,
                   "--arm-timeout", str(args.arm_timeout)]
            if args.phases:  # time the daemon calls of every arm (phase_timing.py)
                cmd[3:3] = ["-p", "phase_timing"]
                phases_file = run_dir / "phases.jsonl"
            roots = lambda: [proc_pid[0]] if proc_pid[0] else []
        proc_pid: List[Optional[int]] = [None]
        run_env = dict(os.environ)
        if phases_file is not None:
            run_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), run_env.get("PYTHONPATH")]))
            run_env["JAATO_BENCH_PHASES"] = str(phases_file)
        sampler = MemorySampler(roots) if conc in args.mem_at else None
        log(f"{side} c={conc}: $ {' '.join(cmd)}")
        started = time.monotonic()
        with out_log.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=str(run_dir), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, env=run_env)
            proc_pid[0] = proc.pid
            watcher = bvr.StoreWatcher(store, started).__enter__()
            if sampler:
                sampler.__enter__()
            try:
                result["rc"] = proc.wait(timeout=args.run_timeout)
            except subprocess.TimeoutExpired:
                log(f"{side} c={conc}: timed out after {args.run_timeout:.0f}s: ending its group")
                bvr.end_group(proc)
                result["rc"] = None
                result["timed_out"] = True
            except BaseException:
                bvr.end_group(proc)
                raise
            finally:
                result["wall"] = time.monotonic() - started
                watcher.__exit__()
                result["landed"] = watcher.landed
                if sampler:
                    sampler.__exit__()
        if sampler:
            result["peak_rss_mb"] = round(sampler.peak / 2**20, 1)
            result["peak_breakdown"] = sampler.peak_breakdown
            result["peak_procs"] = sampler.peak_procs
            result["mem_samples"] = sampler.samples
    finally:
        if daemon is not None:
            result["daemon_stop"] = daemon.stop(args.daemon_stop)
        result["model_stats"] = helper.stop()
        after = bvr.global_state()
        if after != before:
            result["global_paths_changed"] = {"before": before, "after": after}
            log(f"WARNING: global jaato paths changed during {side} c={conc}: {before} -> {after}")
        leftovers = bvr.processes_naming(str(run_dir))
        if leftovers:
            # Started (indirectly) by this run, named by its scratch path: end them by pid.
            result["leftover_processes"] = leftovers
            log(f"WARNING: {len(leftovers)} process(es) of {side} c={conc} outlived the run: "
                f"{leftovers}; sending SIGTERM")
            for p in leftovers:
                try:
                    os.kill(p, signal.SIGTERM)
                except ProcessLookupError:
                    pass
    records = read_records(store)
    states: Dict[str, int] = {}
    reasons: Dict[str, int] = {}
    for rec in records:
        state = str(rec.get("state"))
        states[state] = states.get(state, 0) + 1
        if state == "BLOCKED":
            reason = str(rec.get("blocked_reason") or rec.get("error") or "?")[:160]
            reasons[reason] = reasons.get(reason, 0) + 1
    result["states"] = states
    result["blocked_reasons"] = reasons
    result["stored"] = len(records)
    result["distinct_arms"] = len({r.get("arm_id") for r in records})
    result["missing"] = max(0, args.arms - result["distinct_arms"])
    result["blocked"] = states.get("BLOCKED", 0)
    result["graded"] = states.get("PASS", 0) + states.get("FAIL", 0)
    if result.get("wall"):
        result["arms_per_min"] = 60.0 * result["graded"] / result["wall"]
        result["total"] = result["wall"] + result.get("daemon_ready", 0.0) + result.get("daemon_stop", 0.0)
        result["arms_per_min_total"] = 60.0 * result["graded"] / result["total"]
    landed = result.get("landed") or []
    if landed and result.get("wall"):
        # When records landed in the store, watched from outside every 20 ms.
        result["first_landed"] = landed[0]
        result["after_last"] = result["wall"] - landed[-1]
        # Mean spacing of records after the first: records land in bursts at concurrency > 1,
        # so a median gap would mislead.
        result["arm_interval"] = ((landed[-1] - landed[0]) / (len(landed) - 1)
                                  if len(landed) > 1 else None)
    durations_self = [r["duration_seconds"] for r in records
                      if isinstance(r.get("duration_seconds"), (int, float))]
    result["arm_self_median"] = statistics.median(durations_self) if durations_self else None
    if phases_file is not None:
        result["phases"] = read_phases(phases_file)
    stats = result["model_stats"]
    chats = [s["chat_requests"] for s in stats]
    durations = [d for s in stats for d in s["durations"] if isinstance(d, (int, float))]
    result["chat_requests"] = sum(chats)
    result["extra_chat_requests"] = sum(max(0, c - TURNS_PER_ARM) for c in chats)
    result["model_reply_median_s"] = statistics.median(durations) if durations else None
    log(f"{side} c={conc}: rc={result.get('rc')} wall={bvr.fmt(result.get('wall'))}s "
        f"stored={len(records)} {states} chat_requests={sum(chats)} "
        f"peak={result.get('peak_rss_mb', '—')} MB {reasons or ''}")
    return result


def read_phases(path: Path) -> Dict[str, Any]:
    """Medians of phase_timing.py's lines. A create_session over SLOW_CREATE seconds met no
    warm runner slot (the daemon booted one for it); the rest are the warm-slot cost."""
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    creates = [r["end"] - r["start"] for r in rows if r.get("phase") == "create_session"]
    completes = [r["end"] - r["start"] for r in rows if r.get("phase") == "complete"]
    warm = [x for x in creates if x < SLOW_CREATE]
    warm_med = statistics.median(warm) if warm else None
    slow = [x for x in creates if x >= SLOW_CREATE]
    return {"creates": len(creates), "create_warm_median": warm_med,
            "create_slow": len(slow),
            "create_slow_extra": sum(x - (warm_med or 0.0) for x in slow),
            "complete_median": statistics.median(completes) if completes else None}


SLOW_CREATE = 1.0


def render_floor(results: List[Dict[str, Any]], summary: Dict[Any, Any], levels: Sequence[int],
                 args: argparse.Namespace) -> List[str]:
    """What the daemon leaves to any client: the least seconds an arm can take.

    An arm cannot be quicker than its model turns plus the daemon's own work around them
    (`complete`) plus a session on a warm runner slot (`create_session`, warm). At
    concurrency c, c lanes share the arms, so no client can store them faster than one per
    floor / c; the reference's measured interval over that is the best ratio possible.
    """
    lines = []
    head = (f"{'concurrency':<12}{'model/arm':>10}{'create warm':>12}{'complete':>10}"
            f"{'floor/arm':>10}{'floor/c':>9}{'ref /arm':>9}{'best ratio':>11}{'bound':>7}"
            f"{'ours /arm':>10}{'cold creates':>18}")
    for c in levels:
        runs = [r for r in results if r["side"] == "ours" and r["concurrency"] == c
                and r.get("phases")]
        if not runs:
            continue
        ph = runs[0]["phases"]
        create, complete = ph["create_warm_median"], ph["complete_median"]
        if create is None or complete is None:
            continue
        floor = create + complete
        ref_iv = summary[c]["reference"].get("arm_interval")
        best = (ref_iv / (floor / c)) if ref_iv else None
        bound = (ref_iv / (complete / c)) if ref_iv else None  # even with no session cost at all
        if not lines:
            lines += [head, "-" * len(head)]
        lines.append(f"{'-n ' + str(c):<12}{2 * args.delay:>10.2f}{create:>12.2f}{complete:>10.2f}"
                     f"{floor:>10.2f}{floor / c:>9.2f}{fmt(ref_iv, 2):>9}{fmt(best, 2):>11}"
                     f"{fmt(bound, 2):>7}"
                     f"{fmt(summary[c]['ours'].get('arm_interval'), 2):>10}"
                     f"{ph['create_slow']:>6} (+{ph['create_slow_extra']:.1f} s)")
    return lines


# --------------------------------------------------------------------------- report

def fmt(x: Any, digits: int = 1) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:.{digits}f}" if isinstance(x, float) else str(x)
    return "—" if x is None else str(x)


def median_of(runs: List[Dict[str, Any]], key: str) -> Optional[float]:
    xs = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return statistics.median(xs) if xs else None


def render(results: List[Dict[str, Any]], levels: Sequence[int], args: argparse.Namespace,
           notes: List[str]) -> Tuple[str, Dict[str, Any]]:
    summary: Dict[str, Any] = {}
    for c in levels:
        row: Dict[str, Any] = {}
        for side in ("ours", "reference"):
            runs = [r for r in results if r["side"] == side and r["concurrency"] == c]
            row[side] = {
                "runs": len(runs),
                "wall": median_of(runs, "wall"), "total": median_of(runs, "total"),
                "arms_per_min": median_of(runs, "arms_per_min"),
                "arms_per_min_total": median_of(runs, "arms_per_min_total"),
                "blocked": sum(r.get("blocked", 0) for r in runs),
                "missing": sum(r.get("missing", 0) for r in runs),
                "fail": sum(r.get("states", {}).get("FAIL", 0) for r in runs),
                "arms": sum(r.get("stored", 0) for r in runs),
                "peak_rss_mb": max((r["peak_rss_mb"] for r in runs if "peak_rss_mb" in r),
                                   default=None),
                "extra_chat_requests": sum(r.get("extra_chat_requests", 0) for r in runs),
                "model_reply_median_s": median_of(runs, "model_reply_median_s"),
                "timed_out": sum(1 for r in runs if r.get("timed_out")),
                "first_landed": median_of(runs, "first_landed"),
                "after_last": median_of(runs, "after_last"),
                "arm_interval": median_of(runs, "arm_interval"),
                "arm_self_median": median_of(runs, "arm_self_median"),
            }
        o, f = row["ours"], row["reference"]
        for key in ("arms_per_min", "arms_per_min_total"):
            a, b = o.get(key), f.get(key)
            row["ratio_" + key] = (a / b) if a and b else None
        summary[c] = row

    head = (f"{'concurrency':<12}{'side':<11}{'wall s':>8}{'total s':>9}{'arms/min':>10}"
            f"{'(total)':>9}{'BLOCKED':>9}{'missing':>9}{'FAIL':>6}{'peak MB':>9}"
            f"{'ours/ref':>10}{'(total)':>9}")
    lines = [head, "-" * len(head)]
    for c in levels:
        row = summary[c]
        for side in ("ours", "reference"):
            s = row[side]
            ratio = fmt(row["ratio_arms_per_min"], 2) if side == "ours" else ""
            ratio_t = fmt(row["ratio_arms_per_min_total"], 2) if side == "ours" else ""
            label = (f"-n {c}" if side == "ours" else f"--conc {c}")
            lines.append(f"{label:<12}{side:<11}{fmt(s['wall']):>8}{fmt(s['total']):>9}"
                         f"{fmt(s['arms_per_min']):>10}{fmt(s['arms_per_min_total']):>9}"
                         f"{s['blocked']:>9}{s['missing']:>9}{s['fail']:>6}"
                         f"{fmt(s['peak_rss_mb'], 0):>9}{ratio:>10}{ratio_t:>9}")
    lines.append("")
    head2 = (f"{'concurrency':<12}{'side':<11}{'start->1st stored':>19}{'1st->last/arm':>15}"
             f"{'last->exit':>12}{'arm self med':>14}")
    lines += [head2, "-" * len(head2)]
    for c in levels:
        for side in ("ours", "reference"):
            s = summary[c][side]
            label = (f"-n {c}" if side == "ours" else f"--conc {c}")
            lines.append(f"{label:<12}{side:<11}{fmt(s['first_landed']):>19}"
                         f"{fmt(s['arm_interval'], 2):>15}{fmt(s['after_last']):>12}"
                         f"{fmt(s['arm_self_median']):>14}")
    lines.append("")
    for r in results:
        if r.get("peak_breakdown"):
            parts = ", ".join(f"{k} {v['n']}x {v['mb']:.0f} MB" for k, v in r["peak_breakdown"].items())
            lines.append(f"peak memory {r['side']} c={r['concurrency']}: {fmt(r['peak_rss_mb'], 0)} MB "
                         f"over {r['peak_procs']} processes ({parts})")
    for r in results:
        if r.get("blocked_reasons"):
            for reason, n in r["blocked_reasons"].items():
                lines.append(f"BLOCKED {r['side']} c={r['concurrency']}: {n}x {reason}")
    floor = render_floor(results, summary, levels, args)
    if floor:
        lines += ["", "the daemon's floor (ours, from phase_timing.py; seconds):"] + floor
        notes.append("floor table: create warm = median create_session that found a warm runner "
                     f"slot (< {SLOW_CREATE:g} s); complete = median prompt-to-answer (model turns + "
                     "the daemon's turn work); floor/arm = their sum, the least any client of this "
                     "daemon pays per arm; floor/c = the least interval at concurrency c; best ratio "
                     "= reference interval / floor/c, the most any client could gain in steady "
                     "state; bound = the same with no session cost at all (complete alone, as if "
                     "every session were created while the previous arm ran); cold creates = sessions that met no warm slot, and their extra seconds")
    lines += [""] + [f"note: {n}" for n in notes]
    return "\n".join(lines), summary


# --------------------------------------------------------------------------- main

def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Throughput and peak memory at concurrency 1/2/4: ours (-n N, private "
                    "daemons) vs jaato-eval 0.3.4 (--concurrency N, one daemon).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"),
                   help="interpreter with pytest-jaato-eval and pytest-xdist (ours)")
    p.add_argument("--ref-python", default="/tmp/refvenv/bin/python",
                   help="interpreter with jaato-eval 0.3.4 (see bench_vs_reference.py to make one)")
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
    p.add_argument("--mem-at", default="4",
                   help="concurrency levels whose runs are memory-sampled ('all' for every one)")
    p.add_argument("--arm-timeout", type=float, default=120.0,
                   help="--arm-timeout for both engines. Their default, 900 s, would let one "
                        "stalled reference arm eat the whole time budget; much below 120 s cuts "
                        "reference arms that a stalled session.new delays to ~80 s but that "
                        "then pass")
    p.add_argument("--run-timeout", type=float, default=360.0,
                   help="ceiling per run; its process group is ended after it")
    p.add_argument("--daemon-timeout", type=float, default=120.0)
    p.add_argument("--daemon-stop", choices=("flag", "sigterm"), default="flag",
                   help="how the reference's daemon is stopped (see bench_vs_reference.py)")
    p.add_argument("--ref-pool-size", choices=("default", "match"), default="default",
                   help="default: the reference daemon starts like bench_vs_reference.py's, with "
                        "jaato-server's 2 warm runner slots. match: JAATO_RUNNER_POOL_SIZE = "
                        "max(2, concurrency) for it, as jaato-eval's start-up warning advises")
    p.add_argument("--phases", action="store_true",
                   help="time ours' create_session and complete calls (phase_timing.py) and "
                        "print the daemon's per-arm floor beside the reference's interval")
    p.add_argument("--json", default=None, help="write every raw measurement here")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--serve-models", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.arms < 1 or args.rounds < 1:
        p.error("--arms and --rounds must be >= 1")
    try:
        args.levels = [int(x) for x in str(args.levels).split(",") if x.strip()]
    except ValueError:
        p.error("--levels: comma-separated integers")
    if args.mem_at == "all":
        args.mem_at = list(args.levels)
    else:
        args.mem_at = [int(x) for x in str(args.mem_at).split(",") if x.strip()]
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.serve_models:
        return serve_models(Path(args.serve_models), args.arms, args.delay)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, bvr._terminate)
    if not Path(args.python).exists():
        raise SystemExit(f"bench: {args.python} does not exist (create it with ./dev)")
    ref_python = None
    if args.only in ("both", "ref"):
        ref_python = args.ref_python
        if not Path(ref_python).exists():
            raise SystemExit(f"bench: {ref_python} does not exist; create it with "
                             "bench_vs_reference.py --ref-python PATH, or pass --ref-python")
    # /tmp directly: sockets need a short path.
    scratch = Path(tempfile.mkdtemp(prefix="jconc-", dir="/tmp"))
    # Everything started from here (daemons included) puts its temp files, and the daemons
    # their /tmp/jaato-<sid>/ trace folders, under the scratch dir, removed at the end.
    tmp = scratch / "t"
    tmp.mkdir()
    os.environ["TMPDIR"] = str(tmp)
    log(f"scratch: {scratch}")
    report: Dict[str, Any] = {"args": {k: v for k, v in vars(args).items()}, "scratch": str(scratch)}
    notes: List[str] = []
    try:
        report["ours_versions"] = bvr.distribution_versions(
            args.python, ["pytest-jaato-eval", "pytest-xdist", "pytest", "jaato-server", "jaato-sdk"])
        if ref_python:
            report["reference_versions"] = bvr.distribution_versions(
                ref_python, ["jaato-eval", "jaato-server", "jaato-sdk"])
            if report["reference_versions"].get("jaato-eval") != "0.3.4":
                notes.append(f"reference is jaato-eval {report['reference_versions'].get('jaato-eval')}, not 0.3.4")
        args.ref_pythonpath = None
        if ref_python:
            args.ref_pythonpath = ref_openai_overlay(ref_python, args.python, scratch)
            if args.ref_pythonpath:
                notes.append(f"the reference venv has no openai (needed by the vllm provider): "
                             f"its daemon ran with PYTHONPATH holding openai "
                             f"{bvr.distribution_versions(args.python, ['openai']).get('openai')}, "
                             f"ours' version, installed --no-deps into the scratch dir")
        # Warm the page cache for both interpreters' imports; not measured.
        subprocess.run([args.python, "-c", "import pytest, xdist, pytest_jaato_eval, jaato_server, "
                        "pytest_jaato_eval.testing.model_server"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        if ref_python:
            subprocess.run([ref_python, "-c", "import jaato_eval, jaato_server, jaato_sdk"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        sides = {"both": ["reference", "ours"], "ours": ["ours"], "ref": ["reference"]}[args.only]
        if args.order == "ours-first":
            sides.reverse()
        results: List[Dict[str, Any]] = []
        load_start = os.getloadavg()
        started = time.monotonic()
        for rnd in range(args.rounds):
            for c in args.levels:
                for side in sides:
                    res = run_one(side, c, args, scratch, ref_python)
                    res["round"] = rnd
                    results.append(res)
        elapsed = time.monotonic() - started
        report["results"] = results
        load = os.getloadavg()
        notes.append("ours runs with -p no:hypothesispytest: the dev venv's test extra carries "
                     "hypothesis, whose pytest plugin costs ~2 s at the end of a run; a user's "
                     "install does not have it")
        notes.append(f"{args.arms} arms per run (1 task x {args.arms} profile sets x 1 repeat), "
                     f"scripted model: 2 replies per arm, each after {args.delay:g} s; "
                     f"--arm-timeout {args.arm_timeout:g} on both sides; {args.rounds} round(s), "
                     f"medians shown; whole benchmark {elapsed:.0f} s")
        notes.append("wall = the pytest / jaato_eval command alone. total = wall + the reference's "
                     "script-managed daemon start and stop (ours starts and stops its per-worker "
                     "daemons inside the command, so its total = wall)")
        notes.append("second table (seconds, from the store watched every 20 ms): process start "
                     "to the first record; (last record - first record) / (arms - 1); last record "
                     "to exit; median of each store's own duration_seconds (the two engines time "
                     "different spans)")
        notes.append("arms/min counts graded arms (PASS or FAIL); BLOCKED and missing arms earn "
                     "nothing. Every BLOCKED arm is spurious here: each arm's model answers")
        notes.append(f"peak MB = max over 0.2 s samples of the summed RSS of the run's process tree "
                     f"(reference: jaato_eval + its daemon + runners); sampled at levels {args.mem_at}. "
                     f"Shared pages count in every process that maps them (RSS, not PSS)")
        notes.append(f"load average {load_start[0]:.2f} at the start, {load[0]:.2f} {load[1]:.2f} "
                     f"{load[2]:.2f} at the end, on {os.cpu_count()} CPUs")
        if args.ref_pool_size == "match":
            notes.append("reference daemon started with JAATO_RUNNER_POOL_SIZE = max(2, concurrency)")
        extra = sum(r.get("extra_chat_requests", 0) for r in results)
        if extra:
            notes.append(f"{extra} chat request(s) beyond the 2 per arm (retries) over all runs")
        replies = [r["model_reply_median_s"] for r in results if r.get("model_reply_median_s")]
        if replies:
            notes.append(f"median chat request duration at the model: {statistics.median(replies):.2f} s")
        if any(r.get("global_paths_changed") for r in results):
            notes.append("WARNING: /tmp/jaato.sock or /tmp/jaato.pid changed during a run")
        if any(r.get("leftover_processes") for r in results):
            notes.append("WARNING: processes outlived a run (see leftover_processes in --json)")
        if any(r.get("skipped") for r in results):
            notes.append("WARNING: a run was skipped: " +
                         "; ".join(r["skipped"] for r in results if r.get("skipped")))
        table, summary = render(results, args.levels, args, notes)
        report["summary"] = summary
        print(table)
        bvr.write_report(args.json, report)
        bad = [r for r in results if r.get("rc") is None or r.get("skipped")]
        return 1 if bad else 0
    finally:
        if args.keep:
            log(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    bvr.run_cli(main)
