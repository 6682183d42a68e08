"""A session arm: one connection, one session, one prompt, driven to its terminus (S1-S9, S11).

Everything that can go wrong here is an environment fault (BLOCKED) except the
unsigned terminal (S8): the agent worked but never signed off, so it is graded.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaato_sdk.client.convenience import AgentError, SessionEnded, Session
from jaato_sdk.client.errors import SessionCreateFailed, SessionNotConfirmed
from jaato_sdk.client.ipc import IPCClient
from jaato_sdk.events import ClientType, EventType

from ..activity import ACTIVITY
from .accounting import (TurnAccumulator, merge_tracker, session_ids_in,
                         tracker_record)
from .agent_run import UNSIGNED_ERRORS, AgentRun
from .ceiling import Ceiling
from .connection import STOP_WAIT, connect_patiently, disconnect, unless_disconnected
from .load import overload_note

__all__ = ["AgentRun", "Ceiling", "SessionArmSpec", "run_session_arm", "UNSIGNED_ERRORS"]

log = logging.getLogger(__name__)
# The daemon's answers to session.new that a starved host produces and a second try clears.
TRANSIENT_CREATE_ERRORS = ("SessionInitializationError",)
HISTORY_WAIT = 5.0
# session.new's answer. The SDK's own wait is 60 s; beside a CPU hog on 2 cores a cold runner's
# first session took 35 s to answer (bench/JOURNAL.md, "A busy machine: the waits"), and more on a
# busier host: 5x the measured worst.
CREATE_WAIT = 180.0
# Tries of session.new before the session exists: nothing is spent yet (no model call), so a
# transient failure is sent again while the time before the session stays under the ceiling.
CREATE_TRIES = 3
# The daemon's terminal after session.stop: measured at 0.01 s idle and beside a CPU hog
# (bench/JOURNAL.md); past this the arm ends without the confirmation, and says so.
STOP_CONFIRM_WAIT = 10.0
# After the daemon's notice that it deleted the arm's session: how often, and how far apart,
# its listing is asked whether the session is gone (its record leaves the disk after the notice).
DELETION_CONFIRM_TRIES = 20
DELETION_CONFIRM_PAUSE = 0.5


class _Deleted(Exception):
    """The arm's session was deleted under it (by a client on the daemon's socket)."""


@dataclass
class SessionArmSpec:
    socket_path: str
    workspace: Path
    config_root: Path
    profile: str
    prompt: str
    agent: str | None = None
    agent_params: dict | None = None
    cascade_id: str | None = None
    ceiling: Ceiling = field(default_factory=lambda: Ceiling(900))
    env_file: str = ".env"  # relative: in the workspace; the judge passes its own, absolute


_PROVIDER_RAISED = re.compile(r"model loop raised (?P<cls>[A-Za-z_][\w.]*): (?P<rest>.*)", re.S)


def provider_error(text: str) -> str | None:
    """Name the provider's own exception (RateLimitError, InternalServerError, ...).

    The daemon wraps every provider failure as RunnerCallError and keeps the real
    class only in its text; the class is what tells a 429 from a broken stream.
    """
    m = _PROVIDER_RAISED.search(text)
    if not m:
        return None
    return f"provider error: {m['cls']}: {' '.join(m['rest'].split())[:400]}"


def session_error(error_type: str, summary: str | None, events: list[tuple[str, str]],
                  detail: str | None = None) -> str:
    """A session that ended in error, in jaato's own words: the error's type and summary,
    then what the daemon said in its error events (a runner that failed to bootstrap, a
    loop that timed out) and the terminal's detail, each once: the record's `error`, and
    its reason when the session is BLOCKED."""
    parts = [f"{error_type}: {summary or ''}".rstrip(": ")]
    for etype, text in events:
        said = f"{etype}: {text}".rstrip(": ") if text else etype
        if said and not any(said in p or p in said for p in parts):
            parts.append(said)
    if detail and not any(detail in p for p in parts):
        parts.append(detail)
    return " | ".join(" ".join(p.split()) for p in parts)[:2000]


def denied(tools: list[str]) -> str:
    """The record's note on the permission asks a session's tools made, all denied."""
    names = ", ".join(dict.fromkeys(tools[:20]))
    return (f"permission: {len(tools)} tool call(s) asked for a permission the profile leaves "
            f"to a person ({names}); each was denied, as in a run nobody attends, and the "
            f"session went on (allow a tool the task needs in the profile's "
            f"plugin_configs.permission.policy)")


def run_session_arm(spec: SessionArmSpec) -> AgentRun:
    """Run one session arm to its terminus on its own event loop."""
    return asyncio.run(_SessionArm(spec).run())


class _SessionArm:
    def __init__(self, spec: SessionArmSpec):
        self.spec = spec
        self.out = AgentRun()
        self.acc = TurnAccumulator()
        self.errors: list[tuple[str, str]] = []
        self.history_box: asyncio.Future | None = None
        self.client: IPCClient | None = None
        self.terminated = asyncio.Event()
        self.deletion_said = asyncio.Event()

    # -- events -------------------------------------------------------------
    def _on_info(self, ev: Any) -> None:
        if getattr(ev, "model_name", None) and self.out.model is None:
            self.out.model = ev.model_name  # S3: what the daemon bound, not the set's name
            self.out.provider = getattr(ev, "model_provider", None)

    def _on_error(self, ev: Any) -> None:
        self.errors.append((getattr(ev, "error_type", "") or "Error", getattr(ev, "error", "")))

    def _on_terminated(self, ev: Any) -> None:
        self.terminated.set()
        self.out.termination_reason = getattr(ev, "reason", None)
        if getattr(ev, "error_type", None):
            self.out.error_type = ev.error_type
        summary = getattr(ev, "error_summary", None)
        details = getattr(ev, "details", None)
        self.out.termination_detail = summary or (str(details) if details else None)

    def _on_system(self, ev: Any) -> None:
        # The daemon's notice to the clients attached to a session it deletes; it sends the
        # session no terminal. Only a hint: the listing decides (_until_deleted).
        if str(getattr(ev, "message", "")).startswith("Session deleted"):
            self.deletion_said.set()

    def _on_history(self, ev: Any) -> None:
        if self.history_box is not None and not self.history_box.done():
            self.history_box.set_result(list(getattr(ev, "history", []) or []))
            # tokens and seconds per turn, for the transcript (the same answer, read once)
            self.out.turn_accounting = list(getattr(ev, "turn_accounting", []) or [])

    # -- the run ------------------------------------------------------------
    async def run(self) -> AgentRun:
        spec = self.spec
        self.started = started = time.monotonic()
        # S7: armed when the session exists (_arm_ceiling): connecting and session.new have
        # bounds of their own, and a daemon's cold start or a starved host's slow create is
        # not the arm's time.
        self.ceiling = ceiling = asyncio.timeout(None)
        try:
            async with ceiling:
                await self._drive()
        except TimeoutError as exc:
            if ceiling.expired():
                self.out.blocked_reason = spec.ceiling.reason()
                if await self._session_gone():  # deleted under the arm: nothing to stop
                    self.out.termination_reason = "deleted"
                else:
                    await self._stop_session()  # S7: stop the spend, not only the wait
            else:
                self.out.blocked_reason = f"daemon: timed out: {exc or type(exc).__name__}"
        except (ConnectionError, OSError, EOFError) as exc:
            self.out.blocked_reason = f"daemon: connection lost: {type(exc).__name__}: {exc}"
        finally:
            if self.out.duration_seconds is None and self.out.session_id:
                self.out.duration_seconds = round(time.monotonic() - started, 3)
            await disconnect(self.client, "session arm")
        self._fold()
        return self.out

    async def _open(self) -> bool:
        """A fresh connection with every handler subscribed before any session exists (S1)."""
        spec = self.spec
        if not await self._connect():
            self.out.blocked_reason = f"daemon: could not connect to {spec.socket_path}"
            return False
        client = self.client
        assert client is not None  # connected
        client.subscribe(EventType.SESSION_INFO, self._on_info)
        client.subscribe(EventType.ERROR, self._on_error)
        client.subscribe(EventType.TURN_COMPLETED, self._acc_turn)
        client.subscribe(EventType.SESSION_TERMINATED, self._on_terminated)
        client.subscribe(EventType.HISTORY, self._on_history)
        client.subscribe(EventType.RETRY, self._on_retry)
        client.subscribe(EventType.TOOL_CALL_START, self._on_tool)
        client.subscribe(EventType.SYSTEM_MESSAGE, self._on_system)
        return True

    def _on_retry(self, ev: Any) -> None:
        kind = getattr(ev, "error_type", "") or "retry"
        ACTIVITY.retry(f"{kind}: {' '.join(str(getattr(ev, 'message', '')).split())}")

    def _on_tool(self, ev: Any) -> None:
        if getattr(ev, "agent_id", "main") in ("main", "", None, self.spec.agent):
            ACTIVITY.phase(f"turn {self.acc.turns + 1}, tool {getattr(ev, 'tool_name', '?')}")

    async def _connect(self) -> bool:
        """The handshake; a refused one tried again while nothing is spent (connection.py)."""
        spec = self.spec
        self.client, connected, note = await connect_patiently(lambda: IPCClient(
            spec.socket_path, client_type=ClientType.API, auto_start=False,
            env_file=spec.env_file, workspace_path=str(spec.workspace),
            config_root=str(spec.config_root)))
        if note:
            self.out.caveats.append(note)
        return connected

    async def _create(self, kwargs: dict) -> str | None:
        """session.new, sent again on a fresh connection after a transient daemon failure.

        On a starved host the daemon's own loop stalls; its session bootstrap then misses
        its deadline (SessionInitializationError), and when the create raises inside the
        daemon it closes the client's connection with its answer still queued
        (SessionNotConfirmed, the connection dropped), or answers past the wait. These pass
        on another try, and nothing was spent yet: no prompt was sent. Tries stop at
        CREATE_TRIES, or once the time before the session reaches the arm's ceiling. The
        arm's workspace is its own, so a session an earlier try left is found by its record
        there and stopped: a retry never leaves a second session running.
        """
        for attempt in range(1, CREATE_TRIES + 1):
            if attempt > 1 and not await self._open():
                return None
            self.errors.clear()  # this try's errors only: the cause is the last of them
            ACTIVITY.phase("opening the session" + (f" (try {attempt})" if attempt > 1 else ""))
            assert self.client is not None  # connected: by _open, or before the first try
            try:
                return await self.client.create_session(timeout=CREATE_WAIT, **kwargs)
            except SessionCreateFailed as exc:
                first = self._named_error(exc)
                if attempt == CREATE_TRIES or not self._transient(exc) or self._past_ceiling():
                    self.out.blocked_reason = first + overload_note(first)
                    return None
                await disconnect(self.client, "session arm")
                self.out.caveats.append(await self._after_failed_create(first, attempt + 1))
        return None

    def _past_ceiling(self) -> bool:
        seconds = self.spec.ceiling.seconds
        return bool(seconds) and time.monotonic() - self.started >= seconds

    def _arm_ceiling(self) -> None:
        """S7: the arm's wall clock starts now, with its session."""
        if self.spec.ceiling.seconds:
            self.ceiling.reschedule(asyncio.get_running_loop().time() + self.spec.ceiling.seconds)

    def _transient(self, exc: SessionCreateFailed) -> bool:
        if isinstance(exc, SessionNotConfirmed):
            return getattr(exc, "cause", "") in ("disconnect", "timeout")
        return bool(self.errors) and self.errors[-1][0] in TRANSIENT_CREATE_ERRORS

    async def _after_failed_create(self, first: str, attempt: int) -> str:
        said = (f"session.new was sent again (try {attempt} of at most {CREATE_TRIES}, before "
                f"any model call) after a transient daemon failure: {first[:300]}")
        if not await self._open():
            self.out.blocked_reason = None  # the retry's own connect decides
            return said
        leftovers = session_ids_in(self.spec.workspace)
        assert self.client is not None  # _open connected it
        for sid in leftovers:
            try:
                async with asyncio.timeout(STOP_WAIT):
                    await self.client.stop_session(sid)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - best effort
                pass
        await disconnect(self.client, "session arm")
        return said + (f" (session {', '.join(leftovers)} of an earlier try was stopped)"
                       if leftovers else "")

    async def _drive(self) -> None:
        spec, out = self.spec, self.out
        if not await self._open():
            return
        kwargs: dict[str, Any] = {"profile": spec.profile}
        for key, value in (("agent", spec.agent), ("agent_params", spec.agent_params),
                           ("cascade_driver_id", spec.cascade_id)):
            if value:
                kwargs[key] = value  # S2: only when set
        sid = await self._create(kwargs)
        if sid is None:
            return
        self._arm_ceiling()
        client = self.client
        out.session_id, out.session_ids = sid, [sid]  # S3: recorded the moment it exists
        asked: list[str] = []

        def deny(ev: Any) -> str:
            # Nobody answers in an eval run: the ask is denied, as a CI run would deny it, and
            # the session goes on. Never a BLOCKED an agent could choose by calling a tool
            # its profile leaves to a person.
            asked.append(str(getattr(ev, "tool_name", "?")))
            return "n"

        session = Session(client, sid, deny)
        ACTIVITY.phase("turn 1")
        t0 = time.monotonic()
        try:
            out.payload = await self._complete_unless_deleted(session, spec.prompt)
        except _Deleted:
            out.termination_reason = "deleted"
        except AgentError as exc:
            out.error_type = exc.error_type or out.error_type or "AgentError"
            text = f"{out.error_type}: {exc.error_summary or ''}".rstrip(": ")
            if out.error_type in UNSIGNED_ERRORS:
                out.error = text  # S8: graded, not blocked
            else:  # BLOCKED, with the daemon's own account of what failed
                out.error = session_error(out.error_type, exc.error_summary, self.errors,
                                          out.termination_detail)
                out.blocked_reason = (provider_error(out.error)
                                      or f"session error: {out.error}") + overload_note(out.error)
        except SessionEnded as exc:
            out.blocked_reason = f"session ended: {exc.reason}: {exc}"
        finally:
            out.duration_seconds = round(time.monotonic() - t0, 3)
            if asked:
                out.caveats.append(denied(asked))
        terminus = session.terminus
        if terminus is not None and out.termination_reason is None:
            out.termination_reason = terminus.reason
        await self._fetch_history()

    async def _complete_unless_deleted(self, session: Session, prompt: str) -> Any:
        """The session's answer; _Deleted as soon as the daemon no longer lists it. A deleted
        session sends no terminal, so the arm would otherwise wait out its whole ceiling."""
        assert self.client is not None
        answer = asyncio.ensure_future(unless_disconnected(self.client, session.complete(prompt)))
        gone = asyncio.ensure_future(self._until_deleted())
        try:
            await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
            if answer.done():
                return answer.result()
            raise _Deleted
        finally:
            for task in (answer, gone):
                if not task.done():
                    task.cancel()
            await asyncio.gather(answer, gone, return_exceptions=True)

    async def _until_deleted(self) -> None:
        """Returns once the daemon has said the session was deleted and its listing agrees.
        The notice comes before the daemon removes the session's record from disk, which the
        listing also reads: it is asked again for a while (DELETION_CONFIRM_TRIES)."""
        while True:
            await self.deletion_said.wait()
            self.deletion_said.clear()
            for _ in range(DELETION_CONFIRM_TRIES):
                if await self._session_gone():
                    return
                await asyncio.sleep(DELETION_CONFIRM_PAUSE)

    def _acc_turn(self, ev: Any) -> None:
        # The session's own agent is "main", or the persona's name when the arm runs one;
        # any other id is a subagent's turn.
        if getattr(ev, "agent_id", "main") in ("main", "", None, self.spec.agent):
            self.acc.add(ev)
            ACTIVITY.phase(f"turn {self.acc.turns + 1}")

    def _named_error(self, exc: BaseException) -> str:
        """The daemon's own words, which name the cause best.

        A failed session bootstrap is answered with a generic SessionInitializationError
        ("see the ConfigurationError emitted during init"); the cause is an error event the
        daemon sent just before it (RunnerBootstrapFailed, ConfigurationError, ...), which
        the reason carries in its place.
        """
        if not self.errors:
            return f"{type(exc).__name__}: {exc}"
        etype, text = self.errors[-1]
        if etype not in TRANSIENT_CREATE_ERRORS:
            return f"{etype}: {text}"
        causes = [f"{t}: {x}" for t, x in self.errors[:-1] if t not in TRANSIENT_CREATE_ERRORS]
        if not causes:
            return (f"{etype}: session initialization failed and the daemon sent no cause "
                    f"before it (its log may name one)")
        return f"{etype}: session initialization failed: {' | '.join(causes[-2:])}"

    async def _fetch_history(self) -> None:
        """S5: ask for the history with a bounded wait; no answer stays None (absent)."""
        assert self.client is not None
        self.history_box = asyncio.get_running_loop().create_future()
        try:
            await self.client.request_history()
            self.out.history = await asyncio.wait_for(self.history_box, HISTORY_WAIT)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            self.out.history = None

    async def _session_gone(self) -> bool:
        """Whether the daemon no longer lists the arm's session (a client deleted it: it
        then waits for nothing and sends no terminal). False when the daemon does not say."""
        if self.client is None or not self.out.session_id:
            return False
        listed: asyncio.Future = asyncio.get_running_loop().create_future()

        def on_list(ev: Any) -> None:
            if not listed.done():
                listed.set_result(list(getattr(ev, "sessions", None) or []))
        unsubscribe = self.client.subscribe(EventType.SESSION_LIST, on_list)
        try:
            async with asyncio.timeout(STOP_WAIT):
                await self.client.list_sessions()
                rows = await listed
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - no answer: not gone
            return False
        finally:
            unsubscribe()
        return not any(isinstance(r, dict) and r.get("id") == self.out.session_id for r in rows)

    async def _stop_session(self) -> None:
        if self.client is None or not self.out.session_id:
            return
        self.out.stopped = True
        try:
            async with asyncio.timeout(STOP_WAIT):
                await self.client.stop_session(self.out.session_id)
            async with asyncio.timeout(STOP_CONFIRM_WAIT):
                await self.terminated.wait()  # the daemon confirms with the session's terminal
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - best effort on a dying arm
            log.debug("session arm: stopping %s failed", self.out.session_id, exc_info=True)
        if not self.terminated.is_set():
            self.out.termination_detail = (
                f"session.stop was sent; the daemon did not confirm it with the session's "
                f"terminal within {STOP_CONFIRM_WAIT:g} s")

    def _fold(self) -> None:
        out = self.out
        out.turns, out.finish_reason = self.acc.turns, self.acc.finish_reason
        out.completion_gap, out.usage = self.acc.completion_gap, dict(self.acc.usage)
        if out.session_id and out.blocked_reason:  # S9: spend is recorded on blocked paths too
            out.usage, out.turns = merge_tracker(
                out.usage, out.turns, tracker_record(self.spec.workspace, out.session_id))
