#!/usr/bin/env python3
"""The waits the engine bounds, measured idle and beside a hog: what its timeouts are sized from.

For each condition (idle, then 6 busy loops + a memory hog on this machine's cores) a fresh
private daemon is started and timed to its first answer; then, on it, one after another:

- `--arms` echo sessions: the connection's handshake, `session.new`'s answer (the first one
  starts a runner from cold), the prompt's turn to its terminal, the history's answer;
- one session on a fixture of `--files` files (the daemon walks the workspace at init);
- one session whose scripted model hangs: the time from `session.stop` to the daemon's
  terminal for it (`termination_reason`).

    ./dev python bench/load_waits.py [--arms 8] [--files 20000] [--hog-seconds 60]

Prints the maxima per wait and condition, and loaded/idle ratios. The hogs are bounded by
`timeout` and ended by pid (hog.py); the daemons are private and stopped.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import time
from pathlib import Path

import yaml

import benchkit as bk
from hog import Hog, describe
from jaato_sdk.client.convenience import Session
from jaato_sdk.client.ipc import IPCClient
from jaato_sdk.events import ClientType, EventType

from pytest_jaato_eval.engine.daemon import PrivateDaemon
from pytest_jaato_eval.testing.model_server import ScriptedModel, Turn


def workspace(base: Path, name: str, files: int = 0) -> Path:
    ws = base / name
    ws.mkdir()
    (ws / ".env").write_text("JAATO_PROFILE_SET=echo\n")
    for i in range(files):
        sub = ws / "tree" / f"d{i // 500}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.txt").write_text("x\n")
    return ws


async def session(sock: str, ws: Path, cr: Path, profile: str, *, hang: ScriptedModel | None = None,
                  ) -> dict[str, float | str | None]:
    """One session: handshake, create, then its turn (or a stop, on a hanging model)."""
    client = IPCClient(sock, client_type=ClientType.API, auto_start=False, env_file=".env",
                       workspace_path=str(ws), config_root=str(cr))
    out: dict[str, float | str | None] = {}
    t = time.monotonic()
    await client.connect(timeout=60)
    out["handshake"] = time.monotonic() - t
    ended = asyncio.Event()
    reasons: list[str] = []
    client.subscribe(EventType.SESSION_TERMINATED,
                     lambda ev: (reasons.append(getattr(ev, "reason", None)), ended.set()))
    history = asyncio.Event()
    client.subscribe(EventType.HISTORY, lambda ev: history.set())
    try:
        t = time.monotonic()
        sid = await client.create_session(profile=profile, timeout=600)
        out["create"] = time.monotonic() - t
        turn = asyncio.ensure_future(Session(client, sid).complete("Write READY."))
        t = time.monotonic()
        if hang is None:
            await asyncio.wait_for(turn, 600)
            out["turn"] = time.monotonic() - t
            t = time.monotonic()
            await client.request_history()
            await asyncio.wait_for(history.wait(), 120)
            out["history"] = time.monotonic() - t
            return out
        await asyncio.to_thread(hang.wait_for_chat_requests, 1, 300)
        t = time.monotonic()
        await client.stop_session(sid)
        await asyncio.wait_for(ended.wait(), 300)
        out["stop_to_terminal"] = time.monotonic() - t
        out["reason"] = reasons[-1] if reasons else None
        turn.cancel()
        return out
    finally:
        await client.disconnect()


def condition(base: Path, args: argparse.Namespace, hog: Hog | None) -> dict:
    cr = base / "cr"
    rows: dict[str, list[float]] = {}
    d = PrivateDaemon(base / "daemon", env={**os.environ, "TMPDIR": str(base)})
    reasons = []
    try:
        t = time.monotonic()
        sock = d.ensure()
        rows["daemon_ready"] = [time.monotonic() - t]
        for i in range(args.arms):
            got = asyncio.run(session(sock, workspace(base, f"ws{i}"), cr, "writer"))
            for key, value in got.items():
                rows.setdefault(key, []).append(value)
        got = asyncio.run(session(sock, workspace(base, "big", args.files), cr, "writer"))
        rows["create_big_fixture"] = [got["create"]]
        rows["create_warm"] = rows["create"][1:] or rows["create"]
        with ScriptedModel([Turn.hang()]) as model:
            model.write_profile(cr, "hang", profile_set="echo")
            got = asyncio.run(session(sock, workspace(base, "hang"), cr, "hang", hang=model))
        rows["stop_to_terminal"] = [got["stop_to_terminal"]]
        reasons.append(got["reason"])
    finally:
        d.stop()
    bk.log(f"{describe(hog)}: " + ", ".join(f"{k} max {max(v):.2f}" for k, v in rows.items()))
    return {"rows": rows, "reasons": reasons}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", type=int, default=8)
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--cpu", type=int, default=6)
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--hog-seconds", type=float, default=60.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    results = {}
    for label in ("idle", "loaded"):
        with bk.scratch("jlw-") as base:
            cr = base / "cr" / "profiles" / "echo"
            cr.mkdir(parents=True)
            (cr / "writer.yaml").write_text(yaml.safe_dump(bk.ECHO_WRITER))
            if label == "idle":
                results[label] = condition(base, args, None)
            else:
                with Hog(args.cpu, args.memory_mb, args.hog_seconds) as hog:
                    results[label] = condition(base, args, hog)
            shutil.rmtree(base, ignore_errors=True)
    idle, loaded = results["idle"]["rows"], results["loaded"]["rows"]
    print("\n".join(bk.table(["wait", "idle max s", "loaded max s", "loaded/idle"],
                   [[k, bk.fmt(max(idle[k])), bk.fmt(max(loaded[k])),
                     bk.fmt(bk.ratio(max(loaded[k]), max(idle[k])))] for k in idle], markdown=True)))
    print(f"stop reasons: idle {results['idle']['reasons']}, loaded {results['loaded']['reasons']}")
    print(f"loaded: {args.cpu} busy loops + {args.memory_mb} MB on {os.cpu_count()} CPUs; {bk.load()}")
    bk.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    bk.run_cli(main)
