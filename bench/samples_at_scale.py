#!/usr/bin/env python3
"""Samples at scale: 50 samples x 2 profile sets x 2 repeats (200 arms), sharded, resumed,
validated and reported, as a dataset task and as a parametrised Python arm.

The suite proves each behaviour on a small sweep (tests/e2e/test_samples_e2e.py); this is the
demonstration at the size users run, with its figures. For each form, against one private
daemon (its own socket and HOME, so the user's `~/.jaato` is neither read nor grown):

1. shard 1 of 2 runs: every sample it holds has all 4 of its arms (2 sets x 2 repeats);
2. `--resume` runs exactly the arms shard 1 did not, and deselects the rest;
3. the store holds each of the 200 arms once, all PASS (`validate` finds no duplicate);
4. `report` prints one row per profile set, 100 arms each (the per-task pivot of samples).

    ./dev python bench/samples_at_scale.py [--samples 50] [--keep]

Prints, per form, the arms, PASS, duplicates, samples per shard, and each step's wall time.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import benchkit as bk
import yaml

SETS = ("echo", "other")
REPEATS = 2
PARAM_ARM = '''
import pytest


@pytest.mark.parametrize("n", range({samples}))
@pytest.mark.jaato(config_root="../tasks/words/.jaato", fixture="../tasks/words/fixture",
                   profile="writer", repeats={repeats})
def test_many(jaato_arm, n):
    jaato_arm.run(f"Write READY, then the number {{n}}.")
    assert (jaato_arm.workspace / "answer.txt").read_text() == "READY\\n"
'''


def dataset_task(root: Path, samples: int) -> None:
    """The suite's `words` task: each row's word reaches the grader as parameter and sample."""
    task = root / "tasks" / "words"
    (task / "fixture").mkdir(parents=True)
    (task / "fixture" / "seed.txt").write_text("seed\n")
    for name in SETS:
        (task / ".jaato" / "profiles" / name).mkdir(parents=True)
        (task / ".jaato" / "profiles" / name / "writer.yaml").write_text(
            yaml.safe_dump(bk.ECHO_WRITER))
    manifest = {
        "id": "words", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "Write {{ word }} to answer.txt.",
                  "agent_params": {"word": "{{ word }}"}},
        "harness": {"profile": "writer", "profile_set": "echo"},
        "graders": [{"kind": "script",
                     "run": 'test "$JAATO_EVAL_PARAM_WORD" = "$JAATO_EVAL_SAMPLE_ID" && '
                            'test -n "$JAATO_EVAL_SAMPLE"'}],
        "repeats": REPEATS,
        "dataset": {"rows": [{"id": f"s{i:02d}", "word": f"s{i:02d}"} for i in range(samples)]}}
    (task / "task.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))


def step(label: str, cmd: list[str], cwd: Path, env: dict[str, str], log_dir: Path) -> dict:
    ran = bk.run(cmd, cwd=cwd, env=env, timeout=1800, log_path=log_dir / f"{label}.log")
    out = (log_dir / f"{label}.log").read_text(errors="replace")
    return {"rc": ran.rc, "wall": ran.wall, "out": out}


def sweep(form: str, target: str, samples: int, scratch: Path, socket: str,
          env: dict[str, str]) -> dict[str, Any]:
    root = scratch / form
    root.mkdir()
    dataset_task(root, samples if form == "dataset" else 1)
    if form == "python":
        (root / "arms").mkdir()
        (root / "arms" / "test_many.py").write_text(
            PARAM_ARM.format(samples=samples, repeats=REPEATS))
    store = root / "results.jsonl"
    base = bk.our_pytest(bk.OUR_PYTHON, target, store, f"--profile-set={','.join(SETS)}",
                         f"--jaato-socket={socket}")
    started = time.monotonic()
    first = step(f"{form}-shard1", [*base, "--jaato-shard=1/2"], root, env, scratch)
    half = bk.read_records(store)
    per_sample = bk.count(r.get("sample_id") for r in half)
    rest = step(f"{form}-resume", [*base, "--resume"], root, env, scratch)
    records = bk.read_records(store)
    tail = [line for line in rest["out"].splitlines() if " in " in line][-1:]
    checked = subprocess.run([bk.OUR_PYTHON, "-m", "pytest_jaato_eval", "validate", str(store)],
                             capture_output=True, text=True, timeout=300)
    shown = subprocess.run([bk.OUR_PYTHON, "-m", "pytest_jaato_eval", "report", str(store)],
                           capture_output=True, text=True, timeout=300)
    first_col = "words" if form == "dataset" else "arms/"
    pivot = [line for line in shown.stdout.splitlines() if line.startswith(first_col)]
    ids = [r.get("arm_id") for r in records]
    return {
        "form": form, "expected": samples * len(SETS) * REPEATS,
        "shard1": {"rc": first["rc"], "wall": first["wall"], "arms": len(half),
                   "samples": len(per_sample), "arms per sample": sorted(set(per_sample.values()))},
        "resume": {"rc": rest["rc"], "wall": rest["wall"], "summary": tail},
        "arms": len(records), "distinct": len(set(ids)), "duplicates": len(ids) - len(set(ids)),
        "pass": sum(r.get("state") == "PASS" for r in records),
        "samples": len({r.get("sample_id") for r in records}),
        "validate": {"rc": checked.returncode, "out": checked.stdout.strip()[-300:]},
        "report": {"rc": shown.returncode, "pivot": pivot},
        "wall": time.monotonic() - started}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    bk.log(bk.load())
    results = []
    with bk.scratch("jaato-bench-samples-", keep=args.keep) as scratch:
        home, tmp = scratch / "home", scratch / "tmp"
        home.mkdir()
        tmp.mkdir()
        env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp)}
        daemon = bk.PrivateDaemon(bk.OUR_PYTHON, scratch / "d", "samples",
                                  env={"HOME": str(home), "TMPDIR": str(tmp)})
        daemon.start(timeout=120)
        try:
            for form, target in (("dataset", "tasks"), ("python", "arms")):
                results.append(sweep(form, target, args.samples, scratch, daemon.socket, env))
        finally:
            daemon.stop()
    bk.log(bk.load())
    rows = [(r["form"], r["expected"], r["arms"], r["pass"], r["duplicates"], r["samples"],
             f"{r['shard1']['samples']} ({r['shard1']['arms per sample']})",
             r["validate"]["rc"], r["shard1"]["wall"], r["resume"]["wall"], r["wall"])
            for r in results]
    print("\n".join(bk.table(
        ["form", "arms wanted", "arms stored", "PASS", "duplicates", "samples",
         "shard 1: samples (arms each)", "validate rc", "shard 1 s", "resume s", "total s"],
        rows, markdown=True)))
    for r in results:
        print(f"\n{r['form']}: resume {r['resume']['summary']}; report rc {r['report']['rc']}:")
        print("\n".join("    " + line for line in r["report"]["pivot"]))
    bk.write_json(args.json, results)
    ok = all(r["arms"] == r["expected"] == r["pass"] and not r["duplicates"]
             and r["validate"]["rc"] == 0 and r["shard1"]["arms per sample"] == [4]
             for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    bk.run_cli(main)
