"""Sessions on a daemon of the run's own that the harness did not open, ended before grading.

The agent's tools can reach the daemon's socket (it is in the sandbox with them), so a tool
can open a session of its own: its tools then run in a runner slot of the daemon's, which
the leftovers hunt leaves alone (engine/leftovers.py), and go on after the agent's session,
into the graders' time and later arms. After an agent's run, every loaded session the
harness does not know is stopped, and the arm says so: the agent's own doing, its FAIL.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from jaato_sdk.client.ipc import IPCClient
from jaato_sdk.events import ClientType, EventType

from .connection import STOP_WAIT, disconnect, handshake

log = logging.getLogger(__name__)

LIST_WAIT = 10.0  # the daemon answers session.list from memory; a loaded one within seconds


@dataclass
class Foreign:
    """What was found: the sessions stopped, or why the daemon could not be asked."""

    stopped: list[str] = field(default_factory=list)
    unknown: str | None = None


def end_foreign_sessions(socket_path: str, known: set[str | None], workspace: Path,
                         config_root: Path) -> Foreign:
    """Stop every loaded session on the daemon whose id is not in `known`. Never raises."""
    try:
        return asyncio.run(_end(socket_path, known, workspace, config_root))
    except Exception as exc:  # noqa: BLE001 - an unanswered question, said in the record
        log.debug("foreign sessions: the daemon could not be asked", exc_info=True)
        return Foreign(unknown=f"{type(exc).__name__}: {exc}")


async def _end(socket_path: str, known: set[str | None], workspace: Path,
               config_root: Path) -> Foreign:
    client = IPCClient(socket_path, client_type=ClientType.API, auto_start=False,
                       workspace_path=str(workspace), config_root=str(config_root))
    listed: asyncio.Future = asyncio.get_running_loop().create_future()

    def on_list(ev) -> None:
        if not listed.done():
            listed.set_result(list(getattr(ev, "sessions", []) or []))

    out = Foreign()
    if not await handshake(client):
        return Foreign(unknown="the daemon did not answer")
    try:
        client.subscribe(EventType.SESSION_LIST, on_list)
        await client.list_sessions()
        rows = await asyncio.wait_for(listed, LIST_WAIT)
        for row in rows:
            sid = str(row.get("id") or "")
            if sid and row.get("is_loaded") and sid not in known:
                async with asyncio.timeout(STOP_WAIT):
                    await client.stop_session(sid)
                out.stopped.append(sid)
    finally:
        await disconnect(client, "foreign sessions")
    return out
