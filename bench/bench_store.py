#!/usr/bin/env python3
"""Big stores: our store commands against jaato-eval 0.3.4's `report`, on the same store,
in one invocation.

    python3 bench/bench_store.py [STORE] [--records 100000] [--rounds 3]
                                 [--ref-python /tmp/refvenv/bin/python] [--json OUT]

STORE defaults to a generated one (bench/make_store.py: records made by the plugin's own
producer, ~250 MB at 100,000 records) in a scratch folder, made once and reused when the
path is given. Each round runs, in alternating order:

* ours       ``PY -m pytest_jaato_eval report STORE --exit-zero``  (the streaming pivot)
* ours       ``PY -m pytest_jaato_eval compare STORE STORE`` and ``validate STORE``
* reference  ``REFPY -m jaato_eval report STORE``

Wall time and peak RSS (the child's own, from wait4) per command; the table shows the
median over rounds and the ratio ours / reference. Stdlib only. The reference venv needs
only `pip install jaato-eval==0.3.4` (its `report` starts no daemon).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def measure(cmd: list[str]) -> dict:
    """Wall seconds, peak RSS (MB) and exit code of one command, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")[-400:]
    proc.stderr.close()
    return {"wall": wall, "rss_mb": usage.ru_maxrss / 1024, "rc": proc.returncode, "stderr": err}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", nargs="?", type=Path)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    ap.add_argument("--ref-python", default="/tmp/refvenv/bin/python")
    ap.add_argument("--only", choices=("ours", "ref"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    store = args.store or Path(tempfile.mkdtemp(prefix="bench-store-")) / "store.jsonl"
    if not store.exists():
        print(f"[bench] writing {args.records:,} records to {store}", file=sys.stderr)
        subprocess.run([args.python, str(HERE / "make_store.py"), str(store),
                        "--records", str(args.records)], check=True, cwd=REPO)
    size_mb = store.stat().st_size / 1e6
    with open(store, "rb") as fh:
        lines = sum(1 for _ in fh)

    commands = {
        "ours report": [args.python, "-m", "pytest_jaato_eval", "report", str(store),
                        "--exit-zero"],
        "ours compare": [args.python, "-m", "pytest_jaato_eval", "compare", str(store),
                         str(store)],
        "ours validate": [args.python, "-m", "pytest_jaato_eval", "validate", str(store)],
        "reference report": [args.ref_python, "-m", "jaato_eval", "report", str(store)],
    }
    if args.only == "ours":
        commands.pop("reference report")
    elif args.only == "ref":
        commands = {"reference report": commands["reference report"]}
    if "reference report" in commands and not Path(args.ref_python).exists():
        ap.error(f"--ref-python {args.ref_python}: not found (python3.12 -m venv /tmp/refvenv "
                 f"&& /tmp/refvenv/bin/pip install jaato-eval==0.3.4)")

    runs: dict[str, list[dict]] = {name: [] for name in commands}
    for rnd in range(args.rounds):
        order = list(commands) if rnd % 2 == 0 else list(reversed(commands))
        for name in order:
            m = measure(commands[name])
            runs[name].append(m)
            print(f"[bench] round {rnd + 1} {name}: {m['wall']:.2f} s, {m['rss_mb']:.0f} MB, "
                  f"rc {m['rc']}", file=sys.stderr)

    load = os.getloadavg()
    print(f"\nstore: {store} ({lines:,} lines, {size_mb:.0f} MB); {args.rounds} rounds, median; "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n")
    ref = runs.get("reference report")
    ref_wall = statistics.median(m["wall"] for m in ref) if ref else None
    ref_rss = statistics.median(m["rss_mb"] for m in ref) if ref else None
    print("| command | wall | peak RSS | wall / reference report | RSS / reference |")
    print("|---|---|---|---|---|")
    for name, ms in runs.items():
        wall = statistics.median(m["wall"] for m in ms)
        rss = statistics.median(m["rss_mb"] for m in ms)
        ratio = f"{wall / ref_wall:.2f}" if ref_wall else "—"
        rss_ratio = f"{rss / ref_rss:.2f}" if ref_rss else "—"
        print(f"| {name} | {wall:.2f} s | {rss:.0f} MB | {ratio} | {rss_ratio} |")
    if args.json:
        args.json.write_text(json.dumps({"store": str(store), "lines": lines, "mb": size_mb,
                                         "load": load, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
