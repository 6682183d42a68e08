#!/usr/bin/env python3
"""Big stores: our store commands against jaato-eval 0.3.4's `report`, on the same store,
in one invocation.

    ./dev python bench/bench_store.py [STORE] [--records 100000] [--rounds 3]
                                      [--ref-python /tmp/refvenv/bin/python] [--json OUT]

STORE defaults to a generated one (bench/make_store.py: records made by the plugin's own
producer, ~250 MB at 100,000 records) in a scratch folder, removed afterwards; a STORE path
that does not exist yet is written once and reused. Each round runs, in alternating order:

* ours       ``PY -m pytest_jaato_eval report STORE --exit-zero``  (the streaming pivot)
* ours       ``PY -m pytest_jaato_eval compare STORE STORE`` and ``validate STORE``
* ours       the store check a ``--resume`` run adds (results/store.py: the file's digest when
             the run claims it and again before the pivot, i.e. two reads of STORE)
* reference  ``REFPY -m jaato_eval report STORE``

Wall time and peak RSS (the child's own, from wait4) per command; the table shows the
median over rounds and the ratio ours / reference. The reference's `report` starts no
daemon; a missing --ref-python venv is created (benchkit.ensure_ref_python).
"""
from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import benchkit as bk


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", nargs="?", type=Path)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=bk.OUR_PYTHON)
    ap.add_argument("--ref-python", default=bk.REF_PYTHON)
    ap.add_argument("--only", choices=("ours", "ref"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    if args.store:
        return measure_store(args, args.store)
    with bk.scratch("bench-store-") as scratch:
        return measure_store(args, scratch / "store.jsonl")


def measure_store(args: argparse.Namespace, store: Path) -> int:
    if not store.exists():
        bk.log(f"writing {args.records:,} records to {store}")
        subprocess.run([args.python, str(bk.HERE / "make_store.py"), str(store),
                        "--records", str(args.records)], check=True, cwd=bk.REPO)
    size_mb = store.stat().st_size / 1e6
    with open(store, "rb") as fh:
        lines = sum(1 for _ in fh)
    ours = [args.python, "-m", "pytest_jaato_eval"]
    commands = {"ours report": [*ours, "report", str(store), "--exit-zero"],
                "ours compare": [*ours, "compare", str(store), str(store)],
                "ours validate": [*ours, "validate", str(store)],
                "ours store check (--resume)": [
                    args.python, "-c", "import sys; from pytest_jaato_eval.results.store import "
                    "_sealed; _sealed(sys.argv[1]); _sealed(sys.argv[1])", str(store)]}
    if args.only != "ours":
        ref_python = bk.ensure_ref_python(args.ref_python)
        commands["reference report"] = [ref_python, "-m", "jaato_eval", "report", str(store)]
    if args.only == "ref":
        commands = {"reference report": commands["reference report"]}

    runs: dict[str, list[dict]] = {name: [] for name in commands}
    for rnd in range(args.rounds):
        for name in (list(commands) if rnd % 2 == 0 else list(reversed(commands))):
            m = bk.measure(commands[name], cwd=bk.REPO)
            runs[name].append(m)
            bk.log(f"round {rnd + 1} {name}: {m['wall']:.2f} s, {m['rss_mb']:.0f} MB, rc {m['rc']}")

    print(f"\nstore: {store} ({lines:,} lines, {size_mb:.0f} MB); {args.rounds} rounds, median; "
          f"{bk.load()}\n")
    ref = runs.get("reference report") or []
    ref_wall, ref_rss = bk.median(m["wall"] for m in ref), bk.median(m["rss_mb"] for m in ref)
    rows = []
    for name, ms in runs.items():
        wall, rss = bk.median(m["wall"] for m in ms), bk.median(m["rss_mb"] for m in ms)
        rows.append([name, f"{wall:.2f} s", f"{rss:.0f} MB", bk.ratio(wall, ref_wall),
                     bk.ratio(rss, ref_rss)])
    print("\n".join(bk.table(["command", "wall", "peak RSS", "wall / reference report",
                              "RSS / reference"], rows, markdown=True)))
    bk.write_json(args.json, {"store": str(store), "lines": lines, "mb": size_mb,
                              "load": bk.load(), "runs": runs})
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
