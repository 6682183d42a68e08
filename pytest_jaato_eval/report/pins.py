"""Run pins: what must be equal for two runs to be comparable.

A record carries the harness and SDK it ran under (`provenance`), its `run_id`,
and the content hash of its task (`task_hash`). Stores written by jaato-eval 0.3.4
carry only the SDK pins; a pin nobody recorded is unknown, not a difference.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

PROVENANCE_PINS = ("harness", "harness_version", "jaato_sdk_version", "jaato_sdk_path")


def _provenance(record: dict[str, Any]) -> dict[str, Any]:
    p = record.get("provenance")
    return p if isinstance(p, dict) else {}


def pins(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """{pin: sorted distinct values}, plus `task_hash` as {task id: sorted distinct hashes}
    and `run_id` as the distinct run ids. Unrecorded values are left out."""
    out: dict[str, set] = defaultdict(set)
    tasks: dict[str, set] = defaultdict(set)
    for r in records:
        prov = _provenance(r)
        for key in PROVENANCE_PINS:
            if prov.get(key) is not None:
                out[key].add(str(prov[key]))
        if r.get("run_id") is not None:
            out["run_id"].add(str(r["run_id"]))
        if r.get("task_hash") is not None:
            tasks[str(r.get("task_id"))].add(str(r["task_hash"]))
    result: dict[str, Any] = {k: sorted(v) for k, v in out.items()}
    result["task_hash"] = {t: sorted(h) for t, h in sorted(tasks.items())}
    return result


def pin_differences(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Warnings, one line each, for pins that differ between two stores."""
    lines = []
    for key in PROVENANCE_PINS:
        b, n = base.get(key), new.get(key)
        if b and n and b != n:
            lines.append(f"{key} differs: {', '.join(b)} (base) vs {', '.join(n)} (new)")
        elif bool(b) != bool(n):
            lines.append(f"{key} recorded in only one store: "
                         f"{', '.join(b or n)} ({'base' if b else 'new'}); "
                         f"cannot tell if it changed")
    bt, nt = base.get("task_hash", {}), new.get("task_hash", {})
    for task in sorted(set(bt) & set(nt)):
        if bt[task] != nt[task]:
            lines.append(f"task {task} changed between the runs (task_hash "
                         f"{', '.join(h[:12] for h in bt[task])} → "
                         f"{', '.join(h[:12] for h in nt[task])}): "
                         f"its arms measure different tasks")
    return lines


def pins_summary(p: dict[str, Any]) -> list[str]:
    """Human lines for a report header."""
    def one(key):
        return ", ".join(p.get(key) or []) or "—"
    harness = " ".join(", ".join(p[k]) for k in ("harness", "harness_version") if p.get(k))
    return [
        f"harness: {harness or '— (not recorded)'}",
        f"jaato-sdk: {one('jaato_sdk_version')} ({one('jaato_sdk_path')})",
        f"runs: {one('run_id')}",
    ]
