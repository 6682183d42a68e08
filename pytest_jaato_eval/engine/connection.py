"""The daemon connection an arm holds: its handshake bounded, and a wait that ends the
moment the connection drops (session.py, driver.py).
"""
from __future__ import annotations

import asyncio

from jaato_sdk.client.ipc import IPCClient

# Bound on stopping a session or disconnecting from a dying arm: best effort, never a hang.
STOP_WAIT = 5.0
HANDSHAKE_WAIT = 30.0


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
