#!/usr/bin/env python3
"""`report --html` on a big store: before (a git ref, default the branch point from main)
against this tree, in one invocation, on the same store.

    ./dev python bench/bench_html.py                 # 100,000 records, made once and kept
    ./dev python bench/bench_html.py --records 20000 --runs 3 --browser --json out.json

For each side it runs, in fresh processes, `python -m pytest_jaato_eval report STORE`
(the store read and the terminal pivot: the part this change does not touch) and the same
with `--html OUT`, and reports wall and CPU time (CPU is the steadier one on a shared
machine), peak RSS (the process's own maximum) and the
document's size; with `--browser`, how long headless chromium takes to load and paint each
document (a screenshot), next to an empty page. Ratios are after / before.

The store is made by `make_store` below: records with every key the plugin writes, verdicts
and evidence, in completion order with a few re-run arms (the last record wins).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

import benchkit as bk

ROOT = bk.REPO
KEYS = ("results_version", "caveats", "arm_id", "task_id", "profile_set", "repeat", "state",
        "blocked_reason", "verdicts", "usage", "duration_seconds", "turns", "finish_reason",
        "payload_hash", "error", "session_id", "session_ids", "model", "provider",
        "upstream_provider", "native_finish_reason", "completion_nudges", "budget_ceiling",
        "pool_limits", "pool_on_arrival", "provenance")
SETS = (("echo", "echo", 0.0), ("small", "openai/gpt-5-mini", 0.004),
        ("medium", "anthropic/claude-sonnet-4", 0.03), ("large", "openai/gpt-5", 0.09),
        ("local", "qwen3-coder-30b", 0.0008))
OUTPUT_LINES = ["Traceback (most recent call last):",
                '  File "check.py", line {n}, in <module>',
                "    assert parsed['name'] == expected, parsed",
                "AssertionError: {{'name': 'widget-{n}', 'count': {n}}}",
                "diff: expected 'READY' got 'READY!' at byte {n}",
                "FAILED check_output::test_{n} - AssertionError"]


def _verdicts(rng: random.Random, task: str, state: str) -> list[dict]:
    script = f"script:\"$JAATO_EVAL_PYTHON\" check.py --case {task}"
    judge = "judge:rubric.md"
    if state == "BLOCKED":
        reason = rng.choice(["ProviderError: 429 Too Many Requests",
                             "exit 127 (command not found); write `run` against an absolute tool",
                             "SessionNotConfirmed: the connection dropped before session.new"])
        return [{"grader_id": script, "claim": "check.py accepts the answer", "state": "BLOCKED",
                 "detail": reason, "evidence": [], "blocked_reason": reason}]
    failed = state == "FAIL"
    lines = ([OUTPUT_LINES[i % len(OUTPUT_LINES)].format(n=rng.randrange(10_000))
              for i in range(rng.randrange(12, 30))] if failed else
             [f"collected {rng.randrange(3, 40)} items", "check_output.py " + "." * 24,
              f"==== all passed in {rng.uniform(0.1, 3):.2f}s ===="])
    payload = json.dumps({"verdict": "partial" if failed else "good",
                          "reasons": ["the answer names every file it changed",
                                      "the summary quotes the failing test"][: 1 + failed],
                          "notes": "The agent's summary lists the files it touched and quotes "
                                   "the failing assertion; it does not claim more than the "
                                   "diff shows. " * (1 + rng.randrange(3)),
                          "score": 0.4 if failed else 0.9}, sort_keys=True)
    return [
        {"grader_id": script, "claim": "check.py accepts the answer",
         "state": "FAIL" if failed else "PASS",
         "detail": "exit 1, expected 0" if failed else "exit 0", "evidence": lines,
         "blocked_reason": None},
        {"grader_id": judge, "claim": "the summary is faithful", "state": "PASS",
         "detail": "score 0.9", "evidence": [f"judge session sess-{rng.getrandbits(48):012x} "
                                             f"(openai/gpt-5-mini)", payload],
         "blocked_reason": None}]


def make_record(rng: random.Random, task: str, set_name: str, model: str, price: float,
                repeat: int, run_id: str, state: str | None = None) -> dict:
    rate = 0.55 + 0.4 * (zlib.crc32(task.encode()) % 7) / 7 - (0.2 if set_name == "local" else 0.0)
    state = state or ("BLOCKED" if rng.random() < 0.04 else
                      "PASS" if rng.random() < rate else "FAIL")
    tokens = rng.randrange(2_000, 40_000)
    session = f"{rng.getrandbits(64):016x}"
    record = dict.fromkeys(KEYS)
    record.update(
        results_version="1", caveats=[], arm_id=f"{task}@{set_name}#{repeat}", task_id=task,
        profile_set=set_name, repeat=repeat, state=state,
        blocked_reason=None, verdicts=_verdicts(rng, task, state),
        usage={"spend_prompt_tokens": tokens - 800, "spend_output_tokens": 800,
               "spend_total_tokens": tokens, "spend_cache_read_tokens": 0,
               "spend_cache_creation_tokens": 0, "reasoning_tokens": 0, "thinking_tokens": 0,
               "cost_usd": None if state == "BLOCKED" else round(price * tokens / 10_000, 6)},
        duration_seconds=round(rng.uniform(3, 90), 2), turns=rng.randrange(1, 12),
        finish_reason="stop", payload_hash=(None if state == "BLOCKED"
                                            else f"{rng.getrandbits(256):064x}"),
        session_id=f"sess-{session}", session_ids=[f"sess-{session}"], model=model,
        provider="openrouter" if "/" in model else set_name, completion_nudges=rng.randrange(2),
        budget_ceiling={"usd": 0.5}, provenance={
            "jaato_sdk_path": "/home/ci/.venv/lib/python3.12/site-packages/jaato_sdk/__init__.py",
            "jaato_sdk_version": "0.29.0", "harness": "pytest-jaato-eval",
            "harness_version": "0.1.0"},
        run_id=run_id, task_hash=f"{zlib.crc32(task.encode()):08x}" * 8,
        termination_reason=None, workspace=None, finished_at=1764547200 + rng.random() * 86400)
    if state == "BLOCKED":
        record["blocked_reason"] = f"grader {record['verdicts'][0]['grader_id']}: " \
                                   f"{record['verdicts'][0]['blocked_reason']}"
    return record


def make_store(path: Path, records: int, seed: int = 14) -> Path:
    """`records` lines: tasks × 5 profile sets × repeats, about 1% of arms stored twice
    (BLOCKED first, then re-run), shuffled in blocks the way workers finish arms."""
    rng = random.Random(seed)
    repeats = 20
    tasks = max(1, records // (len(SETS) * repeats))
    plan = [(f"task-{t:04d}", s, r) for t in range(tasks) for s in range(len(SETS))
            for r in range(repeats)][:records]
    rng.shuffle(plan)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        written = 0
        for task, s, r in plan:
            name, model, price = SETS[s]
            if written < records - 1 and rng.random() < 0.01:
                fh.write(json.dumps(make_record(rng, task, name, model, price, r, "run-1",
                                                "BLOCKED")) + "\n")
                written += 1
            fh.write(json.dumps(make_record(rng, task, name, model, price, r, "run-2")) + "\n")
            written += 1
            if written >= records:
                break
    return path


def _run(python: str, pythonpath: Path, args: list[str], cwd: Path) -> dict:
    m = bk.measure([python, "-m", "pytest_jaato_eval", *args], cwd=cwd,
                   env=dict(os.environ, PYTHONPATH=str(pythonpath)))
    if m["rc"] not in (0, 1):
        raise SystemExit(f"{args}: exit {m['rc']}\n{m['stderr']}")
    return m


BROWSER_TIMEOUT = 600


def _browser(page: Path, scratch: Path) -> float | None:
    """Seconds until headless chromium has loaded, laid out and painted the page (its
    screenshot); BROWSER_TIMEOUT when it had not by then (its whole tree is then ended)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory(dir=scratch) as profile:
        ran = bk.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--disable-background-networking", f"--user-data-dir={profile}",
                      "--window-size=1400,1000", f"--screenshot={scratch / 'shot.png'}",
                      page.as_uri()], cwd=scratch, log_path=scratch / "chromium.log",
                     timeout=BROWSER_TIMEOUT)
        return float(BROWSER_TIMEOUT) if ran.timed_out else ran.wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="an existing store (default: made in --scratch)")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--before", default=None, help="git ref of the old code (default: the "
                                                   "merge base of HEAD and main)")
    ap.add_argument("--python", default=bk.OUR_PYTHON)
    ap.add_argument("--runs", type=int, default=1, help="runs per side (median shown)")
    ap.add_argument("--browser", action="store_true", help="also time chromium on each page")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "bench-html")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    scratch = args.scratch
    scratch.mkdir(parents=True, exist_ok=True)
    store = args.store or scratch / f"store-{args.records}.jsonl"
    if not store.exists():
        t = time.perf_counter()
        make_store(store, args.records)
        print(f"made {store} ({store.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t:.0f} s", flush=True)
    ref = args.before or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT,
                                        capture_output=True, text=True, check=True).stdout.strip()
    before = scratch / "before"
    shutil.rmtree(before, ignore_errors=True)
    bk.git_export(ref, before)
    sides = {"before": before, "after": ROOT}
    print(f"store {store} ({store.stat().st_size / 1e6:.0f} MB); before = {ref[:12]}, "
          f"after = this tree; {args.runs} run(s) each", flush=True)

    results: dict[str, dict] = {s: {"pivot": [], "html": []} for s in sides}
    for _ in range(args.runs):
        for side, path in sides.items():  # interleaved: both sides see the same load
            out = scratch / f"{side}.html"
            results[side]["pivot"].append(_run(args.python, path, ["report", str(store)], scratch))
            results[side]["html"].append(_run(args.python, path, ["report", str(store), "--html",
                                                                  str(out)], scratch))
            results[side]["size_mb"] = out.stat().st_size / 1e6
    if args.browser:
        empty = scratch / "empty.html"
        empty.write_text("<!DOCTYPE html><title>x</title><p>x</p>")
        results["empty page"] = {"browser": _browser(empty, scratch)}
        for side in sides:
            results[side]["browser"] = _browser(scratch / f"{side}.html", scratch)

    def med(side, kind, key):
        return statistics.median(r[key] for r in results[side][kind])

    rows = [("`report` (read + pivot), wall s", "pivot", "wall"),
            ("`report` (read + pivot), CPU s", "pivot", "cpu"),
            ("`report --html`, wall s", "html", "wall"),
            ("`report --html`, CPU s", "html", "cpu"),
            ("`report --html`, peak RSS MB", "html", "rss_mb")]
    print("\n| what | before | after | after/before |\n|---|---|---|---|")
    for label, kind, key in rows:
        b, a = med("before", kind, key), med("after", kind, key)
        print(f"| {label} | {b:.1f} | {a:.1f} | {a / b:.2f} |")
    for key in ("wall", "cpu"):
        b = med("before", "html", key) - med("before", "pivot", key)
        a = med("after", "html", key) - med("after", "pivot", key)
        print(f"| the HTML's own share (difference), {key} s | {b:.1f} | {a:.1f} | {a / b:.2f} |")
    b, a = results["before"]["size_mb"], results["after"]["size_mb"]
    print(f"| document size, MB | {b:.1f} | {a:.1f} | {a / b:.3f} |")
    if args.browser and results["before"]["browser"] is not None:
        e = results["empty page"]["browser"]
        b, a = results["before"]["browser"], results["after"]["browser"]
        cap = f"≥ {BROWSER_TIMEOUT} (cut)" if b >= BROWSER_TIMEOUT else f"{b:.1f}"
        print(f"| chromium load + screenshot, s (empty page: {e:.1f}) | {cap} | {a:.1f} | "
              f"{'≤ ' if b >= BROWSER_TIMEOUT else ''}{a / b:.2f} |")
    bk.write_json(args.json, {"store": str(store), "before": ref, **results})
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
