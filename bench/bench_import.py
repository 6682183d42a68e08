#!/usr/bin/env python3
"""What the plugin costs a pytest run that has no tasks, side by side.

One invocation runs, alternately and N times each, in a scratch project holding one
plain test:

* with     ``PY -m pytest -q -p no:cacheprovider``  (the plugin loads, as in any run)
* without  the same plus ``-p no:jaato_eval``
* before   (with ``--before REF``) the same with the plugin as of REF, first on PYTHONPATH

and prints the median wall and CPU time of each, their differences and ratios, and the
plugin module's own import time (``python -X importtime``), with whether the
run imported ``jaato_sdk``.

    ./dev python bench/bench_import.py [--runs 15] [--before REF] [--json OUT]

Measure on an idle machine: the difference is tens of milliseconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import benchkit as bk

PLAIN_TEST = """
import sys

def test_one():
    assert True

def test_no_sdk_was_imported():
    assert "jaato_sdk" not in sys.modules
"""


def timed_run(python: str, cwd: Path, extra: list[str],
              pythonpath: str | None = None) -> tuple[float, float]:
    """(wall, CPU seconds) of one run."""
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *bk.DEV_ONLY_PLUGINS, *extra]
    env = dict(os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {}))
    m = bk.measure(argv, cwd=cwd, env=env, output=cwd.parent / "pytest.out")
    if m["rc"] != 0:
        out = (cwd.parent / "pytest.out").read_text(errors="replace")
        raise SystemExit(f"{' '.join(argv)} failed ({m['rc']}):\n{out[-2000:]}{m['stderr']}")
    return m["wall"], m["cpu"]


def import_time(python: str, pythonpath: str | None = None) -> tuple[float, bool]:
    """Cumulative import time of the plugin module (s) once pytest is loaded, as in a
    pytest run, and whether it pulled in the SDK."""
    env = dict(os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {}))
    proc = subprocess.run([python, "-X", "importtime", "-c",
                           "import pytest; import pytest_jaato_eval.plugin"],
                          capture_output=True, text=True, check=True, env=env,
                          cwd=tempfile.gettempdir())  # never the repository: `-c` puts cwd first
    total, sdk = None, False
    for line in proc.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[1].isdigit():
            if parts[2] == "pytest_jaato_eval.plugin":
                total = int(parts[1]) / 1e6
            sdk = sdk or parts[2].startswith("jaato_sdk")
    return total or 0.0, sdk


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=bk.OUR_PYTHON)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", default=None)
    ap.add_argument("--before", default=None, metavar="REF",
                    help="also time the plugin module's import as of this commit")
    ap.add_argument("--imports", type=int, default=5, help="import-time samples (median)")
    args = ap.parse_args(argv)

    before = None
    with bk.scratch("jaato-bench-import-") as scratch:
        root = scratch / "project"
        root.mkdir()
        (root / "test_plain.py").write_text(PLAIN_TEST)
        (root / "pytest.ini").write_text("[pytest]\n")
        old = str(bk.git_export(args.before, scratch / "old")) if args.before else None
        timed_run(args.python, root, [])  # warm the file cache once, unmeasured
        with_plugin, without, with_before = [], [], []
        for _ in range(args.runs):  # alternate, so drift in machine load hits all alike
            with_plugin.append(timed_run(args.python, root, []))
            without.append(timed_run(args.python, root, ["-p", "no:jaato_eval"]))
            if old:
                with_before.append(timed_run(args.python, root, [], pythonpath=old))
        own = statistics.median(import_time(args.python)[0] for _ in range(args.imports))
        sdk = import_time(args.python)[1]
        if old:
            before = statistics.median(import_time(args.python, old)[0]
                                       for _ in range(args.imports))
    a, b = (statistics.median(w for w, _ in xs) for xs in (with_plugin, without))
    ca, cb = (statistics.median(c for _, c in xs) for xs in (with_plugin, without))
    result = {"runs": args.runs, "with_plugin_s": round(a, 4), "without_plugin_s": round(b, 4),
              "added_ms": round((a - b) * 1000, 1), "ratio": round(a / b, 3),
              "with_plugin_cpu_s": round(ca, 4), "without_plugin_cpu_s": round(cb, 4),
              "plugin_import_s": round(own, 4), "plugin_import_pulls_sdk": sdk,
              "plugin_import_before_s": before, "load_average": os.getloadavg()[0]}
    print(f"one-test pytest run, median of {args.runs} (alternating), wall / CPU:")
    print(f"  with the plugin      {a * 1000:8.1f} ms / {ca * 1000:8.1f} ms")
    print(f"  -p no:jaato_eval     {b * 1000:8.1f} ms / {cb * 1000:8.1f} ms")
    print(f"  added by the plugin  {(a - b) * 1000:8.1f} ms / {(ca - cb) * 1000:8.1f} ms"
          f"  (ratio {a / b:.3f} / {ca / cb:.3f})")
    if with_before:
        wa, wc = (statistics.median(x[i] for x in with_before) for i in (0, 1))
        result.update(before_s=round(wa, 4), before_cpu_s=round(wc, 4),
                      ratio_to_before=round(a / wa, 3), cpu_ratio_to_before=round(ca / wc, 3))
        print(f"  the plugin as of {args.before}: {wa * 1000:8.1f} ms / {wc * 1000:8.1f} ms"
              f"  (now {a / wa:.3f} / {ca / wc:.3f} of it)")
    print(f"  import pytest_jaato_eval.plugin: {own * 1000:.1f} ms cumulative; "
          f"imports jaato_sdk: {'yes' if sdk else 'no'}")
    if before is not None:
        print(f"  the same import as of {args.before}: {before * 1000:.1f} ms "
              f"(now {own / before:.3f} of it)")
    print(f"  at the end: {bk.load()}")
    bk.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
