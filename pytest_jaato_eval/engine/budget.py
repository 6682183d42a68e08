"""Budgets: the task pool (B1, B2) and the profile's own ceiling (B3, B4).

A task with `budget:` gets one cascade pool per run; every arm of the task is
stamped with its cascade id, so the daemon clamps and refuses spawns itself.
The pool is declared and read on one long-lived owner connection, which runs on
its own thread because each arm runs on a fresh event loop.
"""
from __future__ import annotations

import asyncio
import logging
import json
import re
import threading
from pathlib import Path
from typing import Any

import yaml

from ..number import is_number
from .files import load_yaml, read_bounded

log = logging.getLogger(__name__)
READ_WAIT = 5.0
LIMIT_KEYS = ("usd", "tokens", "turns", "seconds", "tool_calls")
PROFILE_CAP = 1024 * 1024  # bytes of one profile file read
MAX_PROFILES = 32          # profiles followed along one `inherits` chain
_SIMPLE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class PoolError(Exception):
    """The pool could not be declared: its arms are BLOCKED naming it."""


class PoolOwner:
    """One connection that declares task pools and reads them, for the whole run."""

    def __init__(self, socket_path: str, workspace: Path):
        # The SDK, optional until an arm runs: collecting a task reads this module's
        # ceilings, not its pool.
        from jaato_sdk.client.ipc import IPCClient  # the SDK: only once a pool is declared
        from jaato_sdk.events import ClientType, EventType  # the SDK, as above
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="jaato-pool-owner",
                                       daemon=True)
        self.thread.start()
        self.replies: dict[str, asyncio.Future] = {}
        self.client = IPCClient(socket_path, client_type=ClientType.API, auto_start=False,
                                workspace_path=str(workspace), config_root=str(workspace))
        if not self._call(self.client.connect(timeout=10)):
            self.close()
            raise PoolError(f"pool: could not connect to {socket_path}")
        self.client.subscribe(EventType.SYSTEM_MESSAGE, self._on_message)

    def _call(self, coro, timeout: float = 15.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _on_message(self, ev: Any) -> None:
        try:
            body = json.loads(getattr(ev, "message", "") or "")
        except ValueError:
            return
        if isinstance(body, dict):
            waiter = self.replies.pop(str(body.get("cascade_driver_id")), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(body)

    async def _read(self, cid: str) -> dict | None:
        waiter = self.loop.create_future()
        self.replies[cid] = waiter
        await self.client.cascade_budget_get(cid)
        try:
            return await asyncio.wait_for(waiter, READ_WAIT)
        except asyncio.TimeoutError:
            self.replies.pop(cid, None)
            return None

    def declare(self, cid: str, budget: dict) -> None:
        """B1: declare the pool once; confirmed by reading it back."""
        limits = {k: budget[k] for k in LIMIT_KEYS if k in budget}
        self._call(self.client.cascade_budget_set(cid, limits, budget.get("degrade")))
        body = self.reading(cid)
        if not body or not body.get("declared"):
            raise PoolError(f"pool: the daemon did not confirm pool {cid} ({limits})")

    def reading(self, cid: str) -> dict | None:
        """B2: the pool as the daemon sees it now (limits, remaining, usage_fraction)."""
        try:
            return self._call(self._read(cid))
        except Exception:  # noqa: BLE001 - a reading is evidence, never a reason to fail an arm
            return None

    def close(self) -> None:
        try:
            self._call(self.client.disconnect(), timeout=5)
        except Exception:  # noqa: BLE001
            log.debug("pool owner: disconnect failed", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


def _load_profile(path: Path, config_root: Path) -> dict | None:
    raw = read_bounded(path, PROFILE_CAP, root=config_root)
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text)
    except (ValueError, yaml.YAMLError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _find_profile(config_root: Path, profile_set: str | None, name: str) -> dict | None:
    if not _SIMPLE_NAME.fullmatch(name) or (profile_set and not _SIMPLE_NAME.fullmatch(profile_set)):
        return None  # a name is one path component: `inherits: ../../x` reads nothing
    folders = ([config_root / "profiles" / profile_set] if profile_set else []) + [
        config_root / "profiles"]
    for folder in folders:  # the set's directory first, then the regular tier
        for suffix in (".yaml", ".yml", ".json"):
            found = _load_profile(folder / f"{name}{suffix}", config_root)
            if found is not None:
                return found
    return None


def profile_ceiling(config_root: Path, profile_set: str | None, name: str) -> dict | None:
    """B3: the arm's own budget_control.limits, following `inherits`, merged by minimum.

    A child may only tighten a ceiling. Unknown (no profile file, no limits) is None.
    Never raises: a profile of any shape gives a ceiling or None; cycles and long
    chains stop after MAX_PROFILES profiles.
    """
    limits: dict[str, float] = {}
    seen: set[str] = set()
    todo = [name]
    while todo and len(seen) < MAX_PROFILES:
        current = todo.pop(0)
        if not isinstance(current, str) or current in seen:  # inheritance cycles are safe
            continue
        seen.add(current)
        profile = _find_profile(Path(config_root), profile_set, current)
        if profile is None:
            continue
        control = profile.get("budget_control")
        own = control.get("limits") if isinstance(control, dict) else None
        for key, value in (own.items() if isinstance(own, dict) else ()):
            if isinstance(key, str) and is_number(value, finite=True):
                limits[key] = min(value, limits.get(key, value))
        parents = profile.get("inherits")
        if isinstance(parents, str):
            todo.append(parents)
        elif isinstance(parents, list):
            todo += [p for p in parents[:MAX_PROFILES] if isinstance(p, str)]
    return limits or None


def ceiling_warning(task_id: str, budget: dict | None, arm_ceiling: float,
                    source: str = "--arm-timeout") -> str | None:
    """B4: a pool's seconds above the per-arm ceiling can never be reached by one arm.
    `source`: where the ceiling's value came from (the default, --arm-timeout, the ini)."""
    seconds = (budget or {}).get("seconds")
    if seconds and arm_ceiling and seconds > arm_ceiling:
        whence = ("the default; raise it with --arm-timeout" if source == "the default"
                  else f"from {source}")
        return (f"task {task_id!r}: budget.seconds ({seconds:g}) exceeds the per-arm ceiling "
                f"({arm_ceiling:g} s, {whence}); an arm is cut by the ceiling first, so the "
                f"pool's seconds beyond it are never reached (budget.seconds is the clock of "
                f"the task's arms together, not of one arm)")
    return None
