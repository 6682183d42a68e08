"""A driver arm: a process that opens its own sessions is the arm (D1-D5).

The engine watches the arm's cascade id as an observer (registered before the
process starts), reads the exit code through a fixed vocabulary, and attributes
sessions by where the daemon wrote their records: this workspace.
"""
from __future__ import annotations

import asyncio
import logging
import collections
import itertools
import os
import shlex
import signal
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from jaato_sdk.client.ipc import IPCClient
from jaato_sdk.events import ClientType, EventType

from .. import faults, processes
from ..contract import build_contract_env
from . import files
from .files import inside
from .accounting import TurnAccumulator, USAGE_KEYS, empty_usage, merge_tracker, tracker_record
from .agent_run import AgentRun
from .ceiling import Ceiling
from .connection import STOP_WAIT, connect_patiently, disconnect
from .sandbox import Confinement, confined_path, missing_command

log = logging.getLogger(__name__)
TAIL_LINES = 40
TERM_GRACE = 5.0
LINGER = 2.0     # seconds a driver's leftover child may hold its pipes after it exits
CHUNK = 65536
MAX_SESSIONS = 256  # session records read from one workspace
LINE_CAP = 4096  # bytes of one output line kept as evidence
EX_TEMPFAIL = 75


@dataclass
class DriverArmSpec:
    socket_path: str
    workspace: Path
    config_root: Path
    run: str
    params: dict | None
    cascade_id: str
    ceiling: Ceiling = field(default_factory=lambda: Ceiling(900))
    env_passthrough: tuple[str, ...] = ()  # harness.env_passthrough (contract.curated_env)
    author_modules: Path | None = None  # the harness's copy of the fixture (contract.py)
    confinement: Confinement | None = None  # the agent's sandbox, when it has one


def run_driver_arm(spec: DriverArmSpec) -> AgentRun:
    return asyncio.run(_DriverArm(spec).run())


def exit_verdict(code: int, stderr_tail: list[str], missing: str | None = None
                 ) -> tuple[str | None, str | None]:
    """D3: (blocked_reason, error) for a driver's exit code. (None, None) means graded.
    `missing`: a command word of harness.run not found before it ran (faults.TOOL_MISSING)."""
    last = next((line for line in reversed(stderr_tail) if line.strip()), "")
    if code == 0:
        return None, None
    if code == EX_TEMPFAIL:
        return f"driver exited 75 (EX_TEMPFAIL): it reported an environment fault - {last}", None
    could_not = faults.could_not_run(code, missing)
    if could_not is not None:
        fault, what = could_not
        if fault.agents:  # its own words all ran: a program it ran (the agent's, maybe) said it
            return None, (f"DriverStoppedShort: driver exited {code} ({what}) from a program "
                          f"it ran; every command harness.run names was found — {last}"
                          ).rstrip(" —")
        return (f"driver exited {code} ({what}): `{missing}` is not on its PATH; write "
                f"harness.run against \"$JAATO_EVAL_PYTHON\", not a PATH bet - {last}"), None
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"driver killed by {name}, a signal nobody here sent - {last}", None
    return None, f"DriverStoppedShort: driver exited {code} — {last}".rstrip(" —")


class _DriverArm:
    def __init__(self, spec: DriverArmSpec):
        self.spec = spec
        self.out = AgentRun()
        self.acc: dict[str, TurnAccumulator] = {}
        self.terminated: set[str] = set()
        self.client: IPCClient | None = None

    def _on_turn(self, ev: Any) -> None:
        sid = getattr(ev, "session_id", "")
        if sid and getattr(ev, "agent_id", "main") in ("main", "", None):
            self.acc.setdefault(sid, TurnAccumulator()).add(ev)

    def _on_terminated(self, ev: Any) -> None:
        if getattr(ev, "session_id", ""):
            self.terminated.add(ev.session_id)

    async def run(self) -> AgentRun:
        spec, out = self.spec, self.out
        client: IPCClient | None = None
        try:
            client, connected, note = await connect_patiently(lambda: IPCClient(
                spec.socket_path, client_type=ClientType.API, auto_start=False, env_file=".env",
                workspace_path=str(spec.workspace), config_root=str(spec.config_root)))
            self.client = client
            if note:
                out.caveats.append(note)
            if not connected:
                out.blocked_reason = f"daemon: could not connect to {spec.socket_path}"
                return out
            client.subscribe(EventType.TURN_COMPLETED, self._on_turn)
            client.subscribe(EventType.SESSION_TERMINATED, self._on_terminated)
            await client.cascade_register(spec.cascade_id, role="observer")  # D1: before start
            await self._drive()
        except (ConnectionError, OSError) as exc:
            out.blocked_reason = out.blocked_reason or f"daemon: {type(exc).__name__}: {exc}"
        finally:
            self._attribute()
            await disconnect(client, "driver arm")
        return out

    async def _drive(self) -> None:
        """The driver, in the agent's sandbox when it has one (engine/sandbox.Confinement):
        it reads what the agent's sessions leave, and may run it."""
        spec, out = self.spec, self.out
        if spec.confinement is None:
            return await self._drive_as(spec.run)
        seen = [spec.config_root, Path(spec.socket_path).parent,
                *([spec.author_modules] if spec.author_modules else [])]
        with spec.confinement.command(["/bin/sh", "-c", spec.run], writable=[spec.workspace],
                                      readable=seen) as confined:
            await self._drive_as(shlex.join(confined.argv), confined.pass_fds,
                                 confined.returncode)
            if not confined.ran() and not out.blocked_reason:
                out.blocked_reason = ("the driver's sandbox could not be set up: "
                                      + (out.termination_detail or "").strip()[-300:])
                out.error = out.error_type = out.termination_reason = out.finish_reason = None

    async def _drive_as(self, command: str, pass_fds: tuple[int, ...] = (),
                        returncode: Callable[[int], int] = lambda code: code) -> None:
        spec, out = self.spec, self.out
        env = build_contract_env(workspace=spec.workspace, config_root=spec.config_root,
                                 params=spec.params, socket=spec.socket_path,
                                 cascade_id=spec.cascade_id, passthrough=spec.env_passthrough,
                                 author_modules=spec.author_modules)
        # looked up before it runs, on the PATH it runs with: nothing of the agent's moves it
        missing = missing_command(spec.run, confined_path(os.environ.get("PATH", os.defpath))
                                  if spec.confinement is not None else env.get("PATH", ""))
        started = time.monotonic()
        proc, tree = await processes.start_async(
            command, cwd=spec.workspace, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, pass_fds=pass_fds)
        tails: dict[str, collections.deque[str]] = {"stdout": collections.deque(maxlen=TAIL_LINES),
                 "stderr": collections.deque(maxlen=TAIL_LINES)}
        readers = [asyncio.ensure_future(_pump(proc.stdout, tails["stdout"])),
                   asyncio.ensure_future(_pump(proc.stderr, tails["stderr"]))]
        ceiling = asyncio.timeout(spec.ceiling.seconds or None)
        try:
            async with ceiling:
                code = returncode(await _exited(proc, tree))
            # The driver is the arm: a child still holding its pipes gets a moment, no more.
            await asyncio.wait(readers, timeout=LINGER)
        except TimeoutError:
            if not ceiling.expired():
                raise
            await _end_tree(proc, tree)
            for r in readers:
                r.cancel()
            out.blocked_reason = spec.ceiling.reason()
            out.duration_seconds = round(time.monotonic() - started, 3)
            self._attribute()
            await self._stop_live_sessions()  # D4: a stage left behind would keep spending
            out.termination_detail = "\n".join(tails["stderr"]) or None
            return
        finally:
            await asyncio.to_thread(tree.kill, 0.5)  # whatever it left behind ends with it
            for r in readers:
                r.cancel()
            try:  # its pipes are closed now, so asyncio can finish with the process
                async with asyncio.timeout(TERM_GRACE):
                    await proc.wait()
            except TimeoutError:
                pass
        out.duration_seconds = round(time.monotonic() - started, 3)
        out.termination_detail = "\n".join(tails["stderr"]) or None
        assert self.client is not None  # connected before the driver started
        if not self.client.is_connected:  # the daemon died under the driver: not its verdict
            out.blocked_reason = (f"daemon: connection lost while the driver ran (it exited "
                                  f"{code}); the daemon died or closed the connection")
            return
        out.blocked_reason, out.error = exit_verdict(code, list(tails["stderr"]), missing)
        if out.error:
            out.error_type = "DriverStoppedShort"
            out.termination_reason = "error"
        else:
            out.termination_reason = "natural" if code == 0 else "error"
            out.finish_reason = "stop" if code == 0 else None
        await asyncio.sleep(0.3)  # late turn events of the last session

    async def _stop_live_sessions(self) -> None:
        for sid in self.out.session_ids:
            if sid in self.terminated:
                continue
            assert self.client is not None  # a session id came over it
            try:
                async with asyncio.timeout(STOP_WAIT):
                    await self.client.stop_session(sid)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - best effort
                log.debug("driver arm: stopping session %s failed", sid, exc_info=True)
        await asyncio.sleep(0.2)

    def _attribute(self) -> None:
        """D5: the arm's sessions are those whose record the daemon wrote in THIS workspace."""
        out = self.out
        records, over = _session_records(self.spec.workspace)
        if over:
            # The sessions are the agent's acts (and the folder is agent-writable): counting
            # only what was read would report fewer sessions and less usage than spent.
            out.exhausted = out.exhausted or over
        out.session_ids = [sid for sid, _ in records]
        out.session_id = out.session_ids[0] if out.session_ids else None
        if records:
            snap = records[0][1].get("profile_snapshot")
            snap = snap if isinstance(snap, dict) else {}  # agent-writable: trust no shape
            out.model, out.provider = (v if isinstance(v, str) else None
                                       for v in (snap.get("model"), snap.get("provider")))
        usage, turns, finish = empty_usage(), 0, out.finish_reason
        for sid, record in records:  # a sibling's sessions seen on a shared cid are dropped
            acc = self.acc.get(sid, TurnAccumulator())
            s_usage, s_turns = merge_tracker(acc.usage, acc.turns, record)
            accounting = record.get("turn_accounting")
            s_turns = max(s_turns, len(accounting) if isinstance(accounting, list) else 0)
            for key in USAGE_KEYS:
                if s_usage[key] is not None:
                    usage[key] = (usage[key] or 0) + s_usage[key]
            turns += s_turns
            finish = acc.finish_reason or finish
        out.usage, out.turns = usage, turns
        if out.finish_reason is None:
            out.finish_reason = finish


async def _pump(stream, tail: collections.deque) -> None:
    """Keep the last lines of a stream, each cut at LINE_CAP bytes, whatever its size."""
    pending, cut = b"", False  # cut: the current line was already kept (its head)
    while chunk := await stream.read(CHUNK):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for raw in lines:
            if not cut:
                tail.append(_line(raw))
            cut = False
        if len(pending) > LINE_CAP:  # a line with no end yet: keep its head, drop the rest
            if not cut:
                tail.append(_line(pending))
            pending, cut = b"", True
    if pending and not cut:
        tail.append(_line(pending))


def _line(raw: bytes) -> str:
    text = raw[:LINE_CAP].decode(errors="replace").rstrip("\r")
    if len(raw) > LINE_CAP:
        text += f" [line cut at {LINE_CAP} bytes]"
    return text


async def _exited(proc, tree, every: float = 0.2) -> int:
    """The driver's exit code, as soon as it exits.

    Not `proc.wait()`: asyncio answers that only once every pipe is closed, which a
    child that keeps the driver's stdout open would put off until the ceiling. Its
    descendants are noted meanwhile: a child that leaves its group is still ours.
    """
    while proc.returncode is None:
        await asyncio.to_thread(tree.snapshot)
        await asyncio.sleep(every)
    return proc.returncode


async def _end_tree(proc, tree) -> None:
    """D4: SIGTERM the driver's whole tree (its chance to end its sessions), then SIGKILL."""
    await asyncio.to_thread(tree.kill, TERM_GRACE)
    try:
        async with asyncio.timeout(TERM_GRACE):
            await proc.wait()
    except TimeoutError:
        pass


def _session_records(workspace: Path) -> tuple[list[tuple[str, dict]], str | None]:
    """The session records of the workspace, from its first MAX_SESSIONS files, and what
    was left unread, if anything: one more file is looked for, and a record longer than
    files.LOG_CAP is read only in part."""
    folder = Path(workspace) / ".jaato" / "sessions"
    found: list[tuple[str, dict]] = []
    if not inside(folder, workspace):
        return found, None
    paths = list(itertools.islice(folder.glob("*.json"), MAX_SESSIONS + 1))
    over = None
    if len(paths) > MAX_SESSIONS:
        over = (f"the arm's workspace holds more than {MAX_SESSIONS} session records, the "
                f"bound on what the harness reads of them (driver.MAX_SESSIONS)")
    for path in paths[:MAX_SESSIONS]:
        if (record := tracker_record(workspace, path.stem)) is not None:
            found.append((path.stem, record))
        elif _longer_than_read(path):
            over = over or (f"the session record {path.name} is longer than the harness reads "
                            f"of one ({files.LOG_CAP} bytes, files.LOG_CAP)")
    found.sort(key=lambda sr: (str(sr[1].get("created_at") or ""), sr[0]))  # creation order
    return found, over


def _longer_than_read(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > files.LOG_CAP
