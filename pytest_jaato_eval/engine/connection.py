"""The daemon connection an arm holds: its handshake bounded, and a wait that ends the
moment the connection drops (session.py, driver.py).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from jaato_sdk.client.ipc import IPCClient

# Bound on stopping a session or disconnecting from a dying arm: best effort, never a hang.
STOP_WAIT = 5.0
HANDSHAKE_WAIT = 30.0
# A refused connection before anything is spent: a daemon restarting answers again within
# its start (12-15 s beside a CPU hog, bench/JOURNAL.md); retried for this long.
CONNECT_PATIENCE = 30.0
log = logging.getLogger(__name__)


async def disconnect(client: IPCClient | None, who: str) -> None:
    """Close the connection, bounded; a failure is logged, never raised: the arm's
    outcome is decided by then."""
    if client is None:
        return
    try:
        async with asyncio.timeout(STOP_WAIT):
            await client.disconnect()
    except (Exception, asyncio.CancelledError):  # noqa: BLE001
        log.debug("%s: disconnect failed", who, exc_info=True)


async def unless_disconnected(client: IPCClient, waiting, poll: float = 0.5):
    """Await `waiting`, but raise ConnectionError as soon as the daemon connection drops.

    A daemon that dies mid-turn sends no terminal; without this the arm would sit
    out the whole ceiling before anyone noticed.
    """
    task = asyncio.ensure_future(waiting)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=poll)
            if not task.done() and not client.is_connected:
                raise ConnectionError("the daemon closed the connection mid-arm (did it die?)")
        return task.result()
    finally:
        if not task.done():
            task.cancel()


class HandshakeTimeout(ConnectionError):
    """The socket accepted the connection and the handshake never finished."""


async def handshake(client: IPCClient, wait: float = HANDSHAKE_WAIT) -> bool:
    """connect() with the whole handshake bounded (the SDK bounds only the socket connect)."""
    try:
        async with asyncio.timeout(wait):
            return await client.connect(timeout=10)
    except TimeoutError:
        raise HandshakeTimeout(f"the daemon accepted the connection and did not finish the "
                               f"handshake within {wait:g} s (hung or overloaded daemon; "
                               f"the arm ceiling is not the cause)") from None


async def connect_patiently(make: Callable[[], IPCClient], patience: float = CONNECT_PATIENCE,
                            ) -> tuple[IPCClient, bool, str | None]:
    """(client, connected, note): the handshake, tried again while a refused connection may
    be a daemon restarting on its path.

    Only for an arm that has spent nothing yet, and for `patience` seconds at most, with a
    fresh client each try (a failed one keeps its state). A daemon that accepts and then
    stalls (HandshakeTimeout) already had its wait; a refusal that outlasts the patience
    is raised. The note, when a retry connected, says what happened.
    """
    waited, pause, refused = 0.0, 0.5, ""
    while True:
        client = make()
        try:
            connected = await handshake(client)
        except HandshakeTimeout:
            raise
        except (ConnectionError, OSError) as exc:
            if waited + pause > patience:
                raise
            refused = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(pause)
            waited, pause = waited + pause, min(pause * 2, 8.0)
            continue
        note = (f"the daemon refused the connection ({refused[:200]}); connected after "
                f"{waited:g} s of retries, before any model call") if waited else None
        return client, connected, note
