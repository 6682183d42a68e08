#!/usr/bin/env python3
"""Where a command's CPU goes: by kind of process, and in its own session or in others.

Samples `/proc` every `--every` seconds while the command runs and keeps, per process (its pid
and start time), the last CPU time seen. A process that ends between two samples loses what it
spent since the last one, so the figures are floors. Processes that were running before the
command count only what they spent after it started (kernel threads among them).

"In its session" is what the scheduler shares with everything else the command's session runs
(Linux's autogroup: bench/hog_share.py); jaato's daemons, which the plugin starts in sessions of
their own, are outside it.

    ./dev python bench/cpu_by_kind.py -- ./dev pytest tests/ -n 3
"""
from __future__ import annotations

import argparse
import collections
import os
import subprocess
import time
from dataclasses import dataclass

import benchkit as bk

HZ = os.sysconf("SC_CLK_TCK")


@dataclass
class Seen:
    kind: str
    session: int
    first: float  # CPU-s at the first sample
    last: float


def kind_of(cmd: str, parent_kind: str | None) -> str:
    if "--template-mode" in cmd:
        return "jaato runner" if parent_kind in ("jaato template", "jaato runner") \
            else "jaato template"
    if "jaato_server" in cmd:
        return "jaato daemon"
    if os.path.basename(cmd.split(" ")[0]) == "bwrap":
        return "bwrap"
    if "exec(eval(sys.stdin.readline()))" in cmd:
        return "xdist worker"
    if "pytest_jaato_eval " in cmd or cmd.endswith("pytest_jaato_eval"):
        return "the plugin's commands"
    if "pytest" in cmd:
        return "pytest"
    if "jaato_eval" in cmd or "jaato-eval" in cmd:
        return "jaato-eval (the reference)"
    if not cmd:
        return "kernel threads, exited"
    return os.path.basename(cmd.split(" ")[0])[:24]


def sample(seen: dict[tuple[int, str], Seen], kinds: dict[int, str], baseline: bool) -> None:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            rest = stat[stat.rindex(")") + 2:].split()
            key = (int(name), rest[19])  # pid, start time
            cpu = (int(rest[11]) + int(rest[12])) / HZ
            if key not in seen:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                kind = kind_of(cmd, kinds.get(int(rest[1])))
                kinds[int(name)] = kind
                seen[key] = Seen(kind, int(rest[3]), cpu if baseline else 0.0, cpu)
            seen[key].last = cpu
        except (OSError, ValueError, IndexError):
            continue


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--every", type=float, default=0.25, help="seconds between samples")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("a command to run is needed")
    seen: dict[tuple[int, str], Seen] = {}
    kinds: dict[int, str] = {}
    sample(seen, kinds, baseline=True)
    wall = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        sample(seen, kinds, baseline=False)
        time.sleep(args.every)
    sample(seen, kinds, baseline=False)
    wall = time.monotonic() - wall
    session = os.getsid(0)
    by_kind: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for s in seen.values():
        spent = s.last - s.first
        if spent <= 0:
            continue
        row = by_kind[s.kind]
        row[0] += 1
        row[1 if s.session == session else 2] += spent
    rows = sorted(by_kind.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))
    print(f"`{' '.join(command)}`: exit {proc.returncode}, {wall:.0f} s of wall; CPU-s (floors)")
    print("\n".join(bk.table(
        ["kind", "processes", "in its session", "in other sessions"],
        [[k, int(n), f"{a:.1f}", f"{b:.1f}"] for k, (n, a, b) in rows if a + b >= 0.5]
        + [["all", int(sum(r[0] for _, r in rows)), f"{sum(r[1] for _, r in rows):.1f}",
            f"{sum(r[2] for _, r in rows):.1f}"]], markdown=True)))
    return proc.returncode


if __name__ == "__main__":
    bk.run_cli(main)
