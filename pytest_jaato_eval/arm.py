"""One arm, end to end: workspace -> agent run -> graders -> verdict -> record.

No pytest here: the collector turns the record into an outcome.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Protocol

from . import contamination, faults, processes, workspace
from .activity import ACTIVITY
from .task import grader_files, session_files
from .task.arms import Arm
from .engine.accounting import count_nudges, summed_usage, tracker_record
from .engine import resources
from .engine.budget import profile_ceiling
from .engine.daemon import DaemonError
from .engine.driver import DriverArmSpec, run_driver_arm
from .engine.foreign_sessions import end_foreign_sessions
from .engine.leftovers import Owned, Watch, end_new, ended_after
from .engine.sandbox import Confinement
from .engine.session import AgentRun, Ceiling, SessionArmSpec, run_session_arm
from .graders import run_graders
from .graders.context import GraderContext
from .graders.ledger import Ledger, ledger_of
from .task import sides
from .task.load import content_hash
from .task.model import DRIVER, Task
from .results import snapshots, transcripts
from .results.record import ArmRecord, build_record
from .redact import Redactor
from .verdict import BLOCKED, FAIL, Verdict, roll_up

if TYPE_CHECKING:
    from .regrade import RegradeSource


class Daemon(Protocol):
    def ensure(self) -> str: ...
    def owned(self) -> Owned | None: ...  # the daemon's pid and marker when this run started it


# An agent no sandbox confined (docs/security.md): said in its record's notes.
UNCONFINED = ("unconfined (sandbox: none): the agent ran as you, able to read and write "
              "whatever you can (docs/security.md)")


class Pools(Protocol):
    def pool_for(self, task: Task) -> tuple[str | None, str | None]: ...
    def pool_reading(self, cid: str) -> dict | None: ...


@dataclass(frozen=True)
class ArmSettings:
    """What a run decides once for its arms, before the first, and never changes; what
    they accumulate is the worker's `ArmState`."""

    workspace_root: Path
    keep_workspaces: str  # "never" | "failed" (FAIL and BLOCKED) | "always"
    ceiling: Ceiling
    run_id: str
    # Credentials in the environment at run start: masked in every record (redact.py).
    redact: Redactor = field(default_factory=Redactor.from_environ)
    # Where the harness's own copies of the config roots go (ArmState.owned): a folder the
    # agent's sandbox hides. None: the graders read the checkout.
    owned_dir: Path | None = None
    sandbox: str = "none"  # what confined the agents of this process (engine/sandbox.py)
    started: float = field(default_factory=time.time)
    # Where a link the agent leaves may lead out of its workspace without being a trap
    # (workspace.special_files): the interpreter's folders, besides the system's.
    lent: tuple[Path, ...] = ()
    # The same sandbox for the script graders and processors (None: they run as you).
    confinement: Confinement | None = None
    # What each arm's agent may use (engine/resources.py): the run's defaults (a task's
    # `resources:` overrides them), and the folders whose growth its disk limit bounds.
    memory_limit: int = resources.MEMORY
    disk_limit: int = resources.DISK
    watched: tuple[Path, ...] = ()
    # Keep each arm's transcript (results/transcripts.py).
    transcripts: bool = True
    # Keep each arm's snapshot (results/snapshots.py), staged in `staging` (a folder no
    # agent sees). `snapshot_max_mb`: the ini's cap (a task's own `snapshot.max_mb` wins).
    snapshots: bool = True
    snapshot_max_mb: float | None = None
    staging: Path | None = None
    # --jaato-regrade: the store whose arms are graded again instead of run (regrade.py).
    regrade: "RegradeSource | None" = None
    # --jaato-no-grade: the agents run and their snapshots are kept; no grader runs.
    grade: bool = True


@dataclass
class ArmState:
    """What this process's arms accumulate: owned by its worker (pytest_layer/worker.py),
    which removes at the run's end what they made and did not keep."""

    # Every workspace made, and those kept. The daemon may still write into a
    # discarded one a moment later, and an interrupted arm never reaches its own
    # discard, so the run removes every unkept one again at its end.
    made: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    # A descriptor on each workspace as made, until its agent's run is over and the path is
    # found to name that folder still (workspace.hold, workspace.replaced).
    held: dict[Path, int] = field(default_factory=dict)
    # (session id, workspace) of every session an arm opened: the clean-up's exact paths.
    sessions: list[tuple[str, Path]] = field(default_factory=list)
    # The harness's own copy of each config root (and fixture), taken at its task's first
    # arm in this process: the graders, the judge and the ceilings read it, and every
    # session gets a copy of it, never the checkout. Each grader's view of it, by
    # (config root, the grader's place in the manifest): grader_configs.
    owned: dict[Path, Path] = field(default_factory=dict)
    grader_views: dict[tuple[Path, int], Path] = field(default_factory=dict)
    # An arm's compressed transcript (name, bytes) and its staged snapshot (name, file, move
    # it), by arm id, until its report takes them to the store's writer.
    pending_transcripts: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    pending_snapshots: dict[str, tuple[str, Path, bool]] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    """What an arm kept of what its graders graded: its file's name, or why none."""

    name: str | None = None
    note: str | None = None
    noted: bool = False  # the note is also said beside the verdict (the record's notes)


@dataclass
class ArmRun:
    """One arm on its way, live or regraded: the arm, what the run decided, what this
    process's arms accumulate, and what this arm found as it went, for every step to read."""

    arm: Arm
    settings: ArmSettings
    state: ArmState
    ws: Path | None = None            # its workspace (None: not made, or not to be read)
    config: Path = field(init=False)  # the harness's copy of its config root, once taken
    views: tuple[Path, ...] = ()      # each grader's view of that copy (grader_configs)
    modules: Path | None = None       # the harness's copy of its fixture (owned_fixture)
    socket: str | None = None
    cascade_id: str | None = None
    on_arrival: dict | None = None    # its pool's reading as it started (B2)
    run: AgentRun = field(default_factory=AgentRun)
    ledger: Ledger | None = None      # read once: by the graders, then by contamination
    ceiling: dict | None | EllipsisType = ...  # `...`: not read yet (arm_record reads it)
    grader_runs: list = field(default_factory=list)  # (grader id, run) a judge's sessions
    at: int | None = None  # the descriptor held on the workspace: what reads it after the run
    listed: list[bool] = field(default_factory=list)  # whether each listing of sessions answered

    def __post_init__(self) -> None:
        self.config = self.arm.task.config_root

    def take_copies(self) -> None:
        """The harness's copies of the task's config root, each grader's view of it, and
        its fixture (raises WorkspaceError)."""
        task, settings, state = self.arm.task, self.settings, self.state
        self.config = owned_config(task, settings, state)
        self.views = grader_configs(task, settings, state)
        self.modules = owned_fixture(task, settings, state)


def owned_config(task: Task, settings: ArmSettings, arm_state: ArmState) -> Path:
    """The config root the harness grades with (raises WorkspaceError if it cannot be copied)."""
    return _owned(task.config_root, settings, arm_state, "")


def owned_fixture(task: Task, settings: ArmSettings, arm_state: ArmState) -> Path:
    """The harness's copy of the task's fixture, taken before any agent of the task ran:
    where a grader or driver imports the author's own packages from (contract.py)."""
    return _owned(task.fixture, settings, arm_state, "-fixture")


def grader_configs(task: Task, settings: ArmSettings, arm_state: ArmState,
                   ) -> tuple[Path, ...]:
    """Each grader's own view of the harness's config root, by its place in the manifest:
    the copy without the files the other graders name (task/grader_files.py), so a grader
    that runs the agent's code hands it no other grader's answer key. Made at the task's
    first arm in this process, in the folder the agent's sandbox hides; a grader that names
    nothing another hides sees the harness's copy itself."""
    owned = owned_config(task, settings, arm_state)
    views = []
    for index in range(len(task.graders)):
        hidden = grader_files.hidden_from(task, index)
        key = (Path(task.config_root).resolve(), index)
        if not hidden or settings.owned_dir is None:
            views.append(owned)
        elif key in arm_state.grader_views:
            views.append(arm_state.grader_views[key])
        else:
            dest = owned.with_name(f"{owned.name}-grader{index}")
            views.append(arm_state.grader_views.setdefault(
                key, workspace.copy_config(owned, dest, hidden)))
    return tuple(views)


def _owned(folder: Path, settings: ArmSettings, arm_state: ArmState, suffix: str) -> Path:
    """The harness's copy of a task's folder, taken at its first use in this process."""
    if settings.owned_dir is None:
        return folder
    source = Path(folder).resolve()
    if source not in arm_state.owned:
        arm_state.owned[source] = workspace.copy_config(
            source, Path(settings.owned_dir) / f"{len(arm_state.owned)}-{source.parent.name}{suffix}")
    return arm_state.owned[source]


def run_arm(arm: Arm, daemon: Daemon, settings: ArmSettings, arm_state: ArmState, pools: Pools,
            ws: Path | None = None) -> ArmRecord:
    """Run an arm and return its record. Never raises for an arm-level fault.

    `ws`: the workspace already made for it (the pytest layer's `jaato_workspace`),
    whose owner then discards it; without one the arm makes and discards its own.
    """
    task = arm.task
    one = ArmRun(arm, settings, arm_state, ws=ws)
    caveats: list[str] = grader_files.shared_with_session(task)  # W5: the agent can read them
    # Preflighted by its caller before any fixture (ArmItem.setup): an arm with a missing
    # set, profile or grader file never gets here, and started no daemon.
    try:
        one.take_copies()
        one.ceiling = budget_ceiling(arm, one.config)  # read before the agent runs
        if one.ws is None:
            one.ws = make_workspace(arm, settings, arm_state)
        one.socket = daemon.ensure()
    except (workspace.WorkspaceError, DaemonError) as exc:
        one.run.blocked_reason = str(exc)
    tampered = None
    if one.socket:
        # Unconfined, the agent can write the checkout: what it holds is hashed around the
        # agent's run (confined, it is hidden from the agent).
        before = _checkout_hash(task) if settings.sandbox == "none" else None
        one.run = run_agent(one, pools, owned=daemon.owned())
        if before is not None and _checkout_hash(task) != before:
            tampered = (f"the task's files in the checkout ({task.directory}) changed during "
                        f"the agent's run, which had no sandbox; graders used the harness's "
                        f"copy, taken before. Restore the checkout (git status) before the "
                        f"next run")

    run = one.run
    one.ledger = ledger_of(run.history)
    moved = replaced_workspace(one.ws, arm_state)
    if moved is not None:  # nothing at its path is read: not the trap walk, the snapshot,
        one.ws = None      # a grader, the contamination rule or the transcript
    # From here on the tree is read through the folder's descriptor, never its path: what
    # a process the agent left puts at the path after the check is not what is read.
    held = one.ws
    one.at = arm_state.held.get(held) if held is not None else None
    try:
        return _graded(one, moved, tampered, caveats, discard=ws is None)
    finally:
        if held is not None:
            workspace.release(arm_state.held.pop(held, None))


def _graded(one: ArmRun, moved: Verdict | None, tampered: str | None, caveats: list[str],
            discard: bool) -> ArmRecord:
    """What follows the agent's run: the traps, the snapshot and the graders, each reading
    the workspace through `one.at`; then the workspace's identity checked again (a process
    of the agent's that outlived its run may have replaced it while the graders ran)."""
    run, settings, arm_state = one.run, one.settings, one.state
    planted = traps(run, one.ws, settings, one.at)
    snapshot = Snapshot(note="the agent's run was blocked: there was nothing to grade")
    if moved is not None:
        snapshot = Snapshot(note="none: the workspace was not there after the agent's run, " + (
            "its files removed past its limits" if run.exhausted else "replaced by the agent"))
    elif not run.blocked_reason and one.ws is not None:  # the agent's run is over; no grader ran yet
        snapshot = keep_snapshot(one, tampered, planted)
        if snapshot.noted:
            caveats.append(str(snapshot.note))
    verdicts: list = []
    # past a limit, the harness removed what the agent added, its workspace with it: that
    # FAIL is said first (agent_act), as before any check of what is left
    act = moved if moved is not None and not run.exhausted else agent_act(
        run, one.ws, settings, tampered, planted)
    if moved is not None:
        run.blocked_reason = None  # whatever else went wrong, the agent's act decides
    if settings.grade or act is not None:  # the agent's act: said now
        verdicts = grade(one, act)
    elif not run.blocked_reason and one.ws is not None:
        run.blocked_reason = NOT_GRADED + (
            "" if snapshot.name else f"; and no snapshot was kept ({snapshot.note})")
    later = replaced_workspace(one.ws, arm_state, keep=False) if one.ws is not None else None
    if later is not None:  # replaced after the first check: what was graded is void
        verdicts, one.ws, run.blocked_reason = [later], None, None
        staged = arm_state.pending_snapshots.pop(one.arm.id, None)
        if staged is not None:  # a regrade of a replaced workspace is refused: none kept
            Path(staged[1]).unlink(missing_ok=True)
        snapshot = Snapshot(note="none: the workspace was replaced by the agent")
    return arm_record(one, verdicts, caveats, discard=discard, snapshot=snapshot)


NOT_GRADED = ("not graded (--jaato-no-grade): its snapshot waits for a regrade "
              "(--jaato-regrade STORE)")


def grade(one: ArmRun, act: Verdict | None) -> list:
    """The verdicts on what the agent left: the one path a live arm and a regrade share
    (the sessions graders opened go to `one.grader_runs`). An act of the agent's the harness
    saw (`agent_act`) is its FAIL, and no grader runs on it; else the task's graders, in
    order, each on the workspace as the agent left it (read through `one.at`, the descriptor
    held on it, when there is one) and its own view of the config root."""
    arm, settings, run, ws = one.arm, one.settings, one.run, one.ws
    if act is not None:  # the agent's own act: its FAIL, and no grader is run
        return [act]
    if run.blocked_reason or ws is None:
        return []
    ACTIVITY.stage("grading")  # then each grader's id; a judge's turns are said under it
    ctx = GraderContext(
        workspace=ws, workspace_fd=one.at, config_root=one.config,
        params=arm.grader_params, run=run,
        ledger=ledger_of(run.history) if one.ledger is None else one.ledger,
        socket_path=one.socket,
        cascade_id=one.cascade_id, mask=settings.redact.text, arm_id=arm.id,
        profile_set=arm.profile_set, sample=arm.sample, author_modules=one.modules,
        confinement=settings.confinement, config_roots=one.views,
        memory_limit=resources.Bounds.of(arm.task.resources, settings.memory_limit,
                                         settings.disk_limit).memory)
    verdicts = run_graders(arm.task.graders, ctx)
    one.grader_runs = ctx.grader_runs
    # a judge's sessions are the harness's own: never taken for the next agent's
    one.state.sessions.extend((sid, ws) for _, r in one.grader_runs for sid in r.session_ids)
    return verdicts


def traps(run: AgentRun, ws: Path | None, settings: ArmSettings, at: int | None = None,
          ) -> list[str]:
    """The traps the agent left in its workspace for what reads it (workspace.special_files),
    once its run is over; none looked for when its run was blocked. A tree past the walk's
    bound is the agent's use of resources (`run.exhausted`): never taken for a clean one."""
    if run.blocked_reason or ws is None:
        return []
    try:
        return workspace.special_files(ws, settings.lent, at)
    except workspace.WalkBound as exc:
        run.exhausted = run.exhausted or str(exc)
        return []


def replaced_workspace(ws: Path | None, arm_state: ArmState, keep: bool = True,
                       ) -> Verdict | None:
    """The agent's FAIL when its workspace's path no longer names the folder made for it
    (renamed, removed, a link or another folder in its place), found before anything reads
    it; what stands there is removed (a link, not what it leads to). The workspace's
    descriptor is released then, or with `keep` False; else kept in `arm_state.held`, for
    what reads the tree next to read it through."""
    held = arm_state.held.get(ws) if ws is not None else None
    if ws is None or held is None:
        return None
    try:
        found = workspace.replaced(ws, held)
        renamed = workspace.moved_to(ws, held) if found is not None else None
    finally:
        if not keep or found is not None:
            workspace.release(arm_state.held.pop(ws))
    if found is None:
        return None
    workspace.remove_tree(ws)
    if renamed is not None:  # the agent's tree under another name: nobody's workspace now
        workspace.remove_tree(renamed)
    return faults.WORKSPACE_REPLACED.failed(
        f"the agent's workspace was replaced: its path held {found}; nothing there was "
        f"read, and no grader was run", [found])


def agent_act(run: AgentRun, ws: Path | None, settings: ArmSettings,
              tampered: str | None = None, planted: list[str] | None = None) -> Verdict | None:
    """What the agent did that FAILS its arm before any grader, whatever a grader would say
    (a task's arm and a Python arm's alike): a resource it used up, what it did to its
    daemon, the checkout it changed (unconfined), a trap it left in its workspace
    (`planted`, found by `traps` when not given)."""
    planted = traps(run, ws, settings) if planted is None else planted  # (a bound: exhausted)
    if run.exhausted:  # graders are not run: its files may be gone, its processes were
        return faults.EXHAUSTED.failed(run.exhausted)
    if run.agent_fault:
        return faults.DAEMON_BROKEN.failed(run.agent_fault)
    if tampered:  # the agent's act, as far as the harness can tell: it alone ran then
        return faults.CHECKOUT_CHANGED.failed(tampered)
    if planted:  # a trap for the graders is the agent's own act, not a fault of ours
        return faults.TRAP.failed(
            f"the agent left {len(planted)} trap(s) for its graders in its workspace (a FIFO, "
            f"a device, or a link to one or out of the workspace), {planted[0]} first; "
            f"graders were not run on it", planted)
    return None


def budget_ceiling(arm: Arm, config: Path) -> dict | None:
    """The ceiling the arm's profile declares, from the config root the harness grades
    with; None for a driver arm, which binds no profile of its own."""
    task = arm.task
    return profile_ceiling(config, arm.profile_set, task.harness.profile) if (
        task.harness.kind != DRIVER and task.harness.profile) else None


def _checkout_hash(task: Task) -> str | None:
    """The task's manifest, fixture and config root as they are now (None: unreadable)."""
    try:
        return content_hash(task.manifest, task.fixture, task.config_root)
    except OSError:
        return None


def make_workspace(arm: Arm, settings: ArmSettings, arm_state: ArmState) -> Path:
    """The arm's fresh workspace, remembered so the run can remove it at its end.

    A folder already in its place that this run did not make, made since the run began, is
    an earlier agent's squat (arms share the workspaces' folder, and names are predictable):
    it is removed, not taken for a workspace this run must not reuse (W2)."""
    make = lambda: workspace.materialise(  # noqa: E731
        settings.workspace_root, arm.id, arm.task.fixture, arm.profile_set)
    try:  # open as the run made it, whatever an earlier agent did to it (chmod 000 ..)
        os.chmod(settings.workspace_root, 0o755)
    except OSError:
        pass
    try:
        ws = make()
    except workspace.WorkspaceError:
        squat = workspace.squatter(settings.workspace_root, arm.id, settings.started,
                                   arm_state.made)
        if squat is None:
            raise
        workspace.remove_tree(squat)
        ws = make()
    arm_state.made.append(ws)
    try:
        arm_state.held[ws] = workspace.hold(ws)
    except OSError as exc:
        raise workspace.WorkspaceError(f"fixture: the workspace {ws} could not be opened: "
                                       f"{exc.strerror}") from None
    return ws


def run_agent(one: ArmRun, pools: Pools, prompt: str | None = None,
              owned: Owned | None = None) -> AgentRun:
    """The arm's agent, run to its end on `one.socket` in `one.ws`; its pool's cascade id
    and reading on arrival go to `one`.

    `prompt` replaces the task's own (an arm written in Python passes its prompt here).
    `owned`: the daemon, when this run started it; what the agent left running below it is
    ended before this returns (engine/leftovers.py).
    """
    arm, settings, arm_state, socket, ws = one.arm, one.settings, one.state, one.socket, one.ws
    assert socket is not None and ws is not None
    task = arm.task
    run = AgentRun()
    # B1 / D1: the task pool's cascade id; else a fresh one for a driver, none for a session.
    one.cascade_id, pool_error = pools.pool_for(task)
    if pool_error:
        run.blocked_reason = pool_error
        return run
    if one.cascade_id:  # B2: immediately before the arm starts
        one.on_arrival = pools.pool_reading(one.cascade_id)
    elif task.harness.kind == DRIVER:
        one.cascade_id = f"jaato-eval-{settings.run_id}-{uuid.uuid4().hex[:8]}"
    cascade_id = one.cascade_id
    try:
        owned_root = owned_config(task, settings, arm_state)
        config = workspace.agent_config(owned_root, ws,
                                        session_files.left_out(task, owned_root))
    except workspace.WorkspaceError as exc:
        run.blocked_reason = str(exc)
        return run
    kept = [*arm_state.kept, *(folder for k in arm_state.kept
                           for folder in k.parent.glob(f".{k.name}-*-arm_state"))]
    with resources.guarded(resources.Bounds.of(task.resources, settings.memory_limit,
                                               settings.disk_limit),
                           owned.limits if owned is not None else None, settings.watched,
                           leave_out=kept,
                           stop=(lambda: _end_daemon(owned)) if owned is not None else None,
                           ) as guard, ended_after(owned) as leftovers:
        if task.harness.kind == DRIVER:
            ACTIVITY.phase("the driver is running")
            assert cascade_id is not None  # a driver's own, made above, when no pool's
            run = run_driver_arm(DriverArmSpec(
                socket_path=socket, workspace=ws, config_root=config, run=task.harness.run,
                params=dict(arm.params or {}), cascade_id=cascade_id, ceiling=settings.ceiling,
                env_passthrough=task.harness.env_passthrough,
                author_modules=owned_fixture(task, settings, arm_state), confinement=settings.confinement))
        else:
            said = prompt if prompt is not None else arm.prompt
            assert said is not None  # a session task must declare one (task/model.py)
            run = run_session_arm(SessionArmSpec(
                socket_path=socket, workspace=ws, config_root=config,
                profile=task.harness.profile, prompt=said, agent=task.input.agent,
                agent_params=dict(arm.agent_params or {}) if task.input.agent_params else None,
                cascade_id=cascade_id, ceiling=settings.ceiling))
        fault = agent_faults(one, run, owned, config, leftovers.watch)  # before the hunt
    if not fault and task.harness.kind != DRIVER and faults.session_ended_by_hand(
            run.termination_reason, run.stopped):
        fault = (f"the agent's session ended `{run.termination_reason}` and the harness did "
                 f"not stop it: a client on the daemon's socket did, which the agent's tools "
                 f"reach" + (f" ({run.blocked_reason})" if run.blocked_reason else ""))
    run.caveats.extend(leftovers.said)
    if leftovers.lost and not run.blocked_reason:
        run.blocked_reason = leftovers.lost
    if owned is not None and leftovers.watch is not None and leftovers.watch.daemon_alive():
        # Once more, now that no process of the agent's is left to open one: a session
        # opened meanwhile is stopped, and what its tools started is hunted again.
        late = _foreign(one, run, config, owned)
        if late:
            fault = fault or late
            again = end_new(leftovers.watch)
            run.caveats.extend(again.said)
    if (owned is not None and one.listed and not any(one.listed)
            and (leftovers.watch is None or leftovers.watch.daemon_alive())):
        # No listing answered a live daemon: a session of the agent's may be live, and would
        # act while the graders read. The daemon is ended, so none does; the agent's tools
        # reach the socket, so what kept the daemon from answering may be theirs
        # (faults.SESSIONS_UNLISTED). A daemon that died is the daemon's fault's to judge.
        _end_daemon(owned)
        fault = fault or (f"the daemon's sessions could not be listed after the agent's run "
                          f"({len(one.listed)} tries): a session of the agent's own would have "
                          f"gone on while the graders read; the daemon was ended instead")
    run.caveats.extend(guard.said)
    if guard.stopped:  # its daemon was ended by the guard, not by the agent
        fault = None
    exhausted = guard.exhausted()
    if exhausted or guard.short:  # the machine is cleared for the next arm
        if owned is not None:
            _end_daemon(owned)
        if guard.disk.over or guard.short:
            for added in guard.disk.added():
                workspace.remove_tree(added)
            run.caveats.append("the files the agent added were removed at once, its workspace "
                               "with them")
    if exhausted:  # the agent's own act: its FAIL, whatever else it made of the run
        run.exhausted, run.agent_fault, run.blocked_reason = exhausted, None, None
    elif guard.short:
        run.blocked_reason, run.agent_fault = guard.short, None
    elif fault:  # the agent's own act: its FAIL, whatever else it made of the run
        run.agent_fault, run.blocked_reason = fault, None
    arm_state.sessions.extend((sid, ws) for sid in run.session_ids)  # the clean-up's exact paths
    if (run.blocked_reason or "").startswith("CascadeExhaustedError"):
        run.blocked_reason = f"pool {cascade_id} of task {task.id!r} exhausted: {run.blocked_reason}"
    return run


def _end_daemon(owned: Owned) -> None:
    """Our daemon, broken by its agent: ended now, and its owner told, so that the next
    arm's `ensure` starts it afresh (a killed daemon can look alive for a while)."""
    ident = processes.Ident.of(owned.pid)
    if ident is not None:
        processes.signal_exact([ident], signal.SIGKILL)
    if owned.restart is not None:
        owned.restart()


RUNNER_LOST = "runner RPC closed"  # jaato's words for a runner that died under its session


def agent_faults(one: ArmRun, run: AgentRun, owned: Owned | None, config: Path,
                 watch: Watch | None = None) -> str | None:
    """What the agent did to the daemon it ran on (`one.socket`), on a daemon of the run's
    own: sessions of its own opened there (stopped now, before grading); and, in the sandbox,
    where only the agent's processes reach the daemon, its daemon, runner or runner template
    killed or stopped, or its socket removed (the daemon is then ended, so the next arm
    starts a fresh one). `config`: the config root its session was given."""
    # A session arm's session id is the harness's own. A driver arm's sessions are known by
    # records in the agent's workspace, which it can remove: its driver having run is the sign.
    driver = one.arm.task.harness.kind == DRIVER
    began = run.session_id or run.session_ids or (driver and run.duration_seconds is not None)
    if owned is None or not began:
        return None  # nothing of the agent's began: nothing of its ran to do anything
    state = (processes.stat(owned.pid) or (0, 0, "Z"))[2]
    confined = one.settings.sandbox != "none"
    if confined and state in ("Z", "T", "t"):
        _end_daemon(owned)
        return (f"the daemon was {'stopped' if state in 'Tt' else 'ended'} during the agent's "
                f"session, in a sandbox where only the agent's processes reach it"
                + (f" ({run.blocked_reason})" if run.blocked_reason else ""))
    gone = [s for s in (watch.stewards if watch else ()) if not s.alive()]
    if confined and gone:
        _end_daemon(owned)
        return (f"the daemon's runner template (pid {gone[0].pid}) ended during the agent's "
                f"session, in a sandbox where only the agent's processes reach it")
    assert one.socket is not None  # the agent ran on it
    if confined and not os.path.exists(one.socket):
        _end_daemon(owned)
        return ("the daemon's socket was removed during the agent's session, in a sandbox "
                "where only the agent's processes reach it")
    if confined and RUNNER_LOST in (run.blocked_reason or ""):
        return (f"the runner of the agent's session ended under it, in a sandbox where only "
                f"the agent's processes reach it ({run.blocked_reason})")
    return _foreign(one, run, config, owned)


def _foreign(one: ArmRun, run: AgentRun, config: Path, owned: Owned) -> str | None:
    """Sessions on the daemon the harness did not open, stopped: said as the agent's act.
    Whether the daemon's listing answered is appended to `one.listed`."""
    # The sessions the harness opened: a session arm's one (not every session whose files
    # are in the workspace: a session the agent opens there leaves them too), a driver's.
    driver = one.arm.task.harness.kind == DRIVER
    opened = set(run.session_ids) if driver else {run.session_id}
    known = {sid for sid, _ in one.state.sessions} | opened
    assert one.socket is not None and one.ws is not None  # the agent ran on them, in it
    foreign = end_foreign_sessions(one.socket, known, one.ws, config)
    one.listed.append(foreign.unknown is None)
    if foreign.unknown:
        run.caveats.append(f"the daemon's sessions could not be listed after the agent's run "
                           f"({foreign.unknown}): a session the agent opened would go on")
    if foreign.stopped:
        # Stopped, and the daemon with them: a stopped session's runner may go on running
        # its tools, and only the daemon's end reaches everything it started.
        _end_daemon(owned)
        return (f"the agent opened {len(foreign.stopped)} session(s) of its own on the daemon "
                f"({', '.join(foreign.stopped[:3])}); stopped before grading, and the daemon "
                f"with them")
    return None


def kept_out_of_sight(ws: Path, caveats: list[str]) -> Path:
    """A kept workspace, moved out of the agents' folder (workspace.AGENTS) so that no later
    agent reads it; left where it is, and said so, when it is not in that folder or cannot
    be moved."""
    if ws.parent.name != workspace.AGENTS:
        return ws
    try:
        return workspace.keep(ws)
    except OSError as exc:
        caveats.append(f"the kept workspace could not be moved out of the agents' folder "
                       f"({exc.strerror}): later agents can read it")
        return ws


def keeps(settings: ArmSettings, state: str) -> bool:
    return settings.keep_workspaces == "always" or (
        settings.keep_workspaces == "failed" and state in (FAIL, BLOCKED))


def arm_record(one: ArmRun, verdicts: list, caveats: list[str], *, discard: bool = True,
               snapshot: Snapshot | None = None, source: ArmRecord | None = None,
               ) -> ArmRecord:
    """Roll the verdicts up and build the arm's one record; keep or discard its workspace.

    The sessions graders opened (a judge's, `one.grader_runs`): their spend is the record's
    `judge_usage`, never the agent's `usage`. `snapshot`: what the arm kept for a regrade.
    `source`: the record a regrade graded again, whose agent's facts the new record
    carries (regrade.py)."""
    arm, settings, arm_state, run, ws = one.arm, one.settings, one.state, one.run, one.ws
    grader_runs, ceiling, task = one.grader_runs, one.ceiling, arm.task
    caveats = [*run.caveats, *caveats]  # what the engine did comes first
    if settings.sandbox == "none" and (run.session_id or run.session_ids):
        caveats.append(UNCONFINED)  # in every record whose agent ran: nothing confined it
    state, blocked_reason = roll_up(verdicts, run.blocked_reason)
    if run.error and not run.blocked_reason:
        blocked_reason = None  # S8: an unsigned arm carries `error`; its graders say the rest
    contaminated: object = None  # no agent run, nothing to check
    contamination_evidence: list = []
    nudges = None
    if source is not None:  # what the agent did was found when it ran: it stands
        verdicts = list(verdicts)
        caveats = [*source.notes, *caveats]
        contaminated = source.extra.get("contaminated")
        contamination_evidence = source.extra.get("contamination_evidence") or []
        if contaminated is True and verdicts:
            state, blocked_reason = contamination.apply(
                contamination.Finding(True, [str(e) for e in contamination_evidence]),
                task.contamination, state, blocked_reason, caveats, verdicts)
    elif ws is not None and run.session_id:
        verdicts = list(verdicts)
        finding, state, blocked_reason = contamination.assess(
            task, ws, ledger_of(run.history) if one.ledger is None else one.ledger, state,
            blocked_reason, caveats, verdicts)
        contaminated, contamination_evidence = finding.contaminated, finding.evidence
    if source is None:
        nudges = count_nudges(ws, run.session_id, run.completion_gap) if (
            ws is not None and run.session_id) else None
        if run.session_id and nudges is None:
            caveats.append("completion nudges unknown: the session's log has no DEBUG lines")
        if run.session_id and run.history is None and task.harness.kind != DRIVER:
            caveats.append("history absent: the daemon did not answer the history request")

    transcript = None
    if source is not None:
        transcript = keep_regraded_transcript(one, source)
    elif settings.transcripts and (run.session_id or grader_runs):  # before the workspace goes
        transcript = keep_transcript(one)
    kept = None
    if ws is not None and os.path.lexists(ws):  # (an agent past its disk limit: removed)
        if keeps(settings, state):
            kept = str(kept_out_of_sight(ws, caveats))
            arm_state.kept.append(Path(kept))
        elif discard:
            workspace.discard(ws)
    if ceiling is ...:
        ceiling = budget_ceiling(arm, arm_state.owned.get(Path(task.config_root).resolve(),
                                                         task.config_root))
    snapshot = snapshot or Snapshot(note=ENDED_EARLY if task.graders else PYTHON_ARM)
    extra = {"run_id": settings.run_id, "task_hash": task.content_hash,
             **({"sample_id": arm.sample_id} if arm.sample is not None else {}),
             "termination_reason": run.termination_reason,
             "contaminated": contaminated,
             "contamination_evidence": contamination_evidence,
             "workspace": kept, "finished_at": time.time(), "sandbox": settings.sandbox,
             "judge_usage": summed_usage(r.usage for _, r in grader_runs) if grader_runs
             else None, "transcript": transcript,
             "snapshot": snapshot.name, "snapshot_note": snapshot.note,
             **arm_sides(arm, arm_state)}
    if source is not None:
        extra.update(carried(source, settings))
    # The one choke point: the store, JUnit, the failure text and the reports all read
    # this record, so a secret a grader printed is masked before any of them sees it.
    return build_record(
        arm_id=arm.id, task_id=task.id, profile_set=arm.set_name, repeat=arm.repeat,
        state=state, blocked_reason=blocked_reason, verdicts=verdicts, run=run,
        notes=caveats, completion_nudges=nudges, budget_ceiling=ceiling,
        pool_limits=task.budget.limits() if task.budget else None,
        pool_on_arrival=one.on_arrival, extra=extra, mask=settings.redact)


def arm_sides(arm: Arm, arm_state: ArmState) -> dict[str, dict | None]:
    """The record's `agent_side` and `grader_side` (task/sides.py), from the config root
    the arm's session and graders were given. An arm written in Python has no graders of
    the task's to regrade it with: it has neither."""
    task = arm.task
    if not task.graders:
        return {"agent_side": None, "grader_side": None}
    config = arm_state.owned.get(Path(task.config_root).resolve(), task.config_root)
    return {"agent_side": sides.agent_side(arm, config),
            "grader_side": sides.grader_side(arm, config)}


# What a regraded record keeps of the record it graded again: the agent's run, as it was.
CARRIED = ("usage", "duration_seconds", "turns", "finish_reason", "payload_hash", "error",
           "session_id", "session_ids", "model", "provider", "upstream_provider",
           "native_finish_reason", "completion_nudges", "budget_ceiling", "pool_limits",
           "pool_on_arrival", "termination_reason", "sandbox", "agent_side")


def carried(source: ArmRecord, settings: ArmSettings) -> dict:
    """A regraded record's keys from the record it graded again, and where that was."""
    line = source.to_dict()
    regrade = settings.regrade
    before = source.regraded if isinstance(source.regraded, dict) else {}
    return {**{key: line.get(key) for key in CARRIED},
            # `agent_run_id`: where the agent ran, through a regrade of a regraded store
            "regraded": {"agent_run_id": before.get("agent_run_id") or source.run_id,
                         "run_id": source.run_id, "arm_id": source.arm_id,
                         "store": str(regrade.store) if regrade else None,
                         "finished_at": source.finished_at,
                         "task_hash": source.task_hash, "grader_side": source.grader_side,
                         "judge_usage": source.judge_usage}}


def keep_transcript(one: ArmRun) -> str:
    """Build, mask and compress the arm's transcript; hold it for the store's writer and
    return its file name (the record's `transcript`)."""
    arm, settings, ws = one.arm, one.settings, one.ws
    document = transcripts.build(
        arm_id=arm.id, task_id=arm.task.id, run_id=settings.run_id, run=one.run,
        driver=arm.task.harness.kind == DRIVER, grader_runs=one.grader_runs,
        session_files=(lambda sid: tracker_record(ws, sid)) if ws is not None else None)
    name = transcripts.file_name(arm.id, settings.run_id)
    one.state.pending_transcripts[arm.id] = (name, transcripts.encode(settings.redact(document)))
    return name


def keep_regraded_transcript(one: ArmRun, source: ArmRecord) -> str | None:
    """A regraded arm's transcript: the agent's sessions from the record it graded again,
    and the sessions this regrade's graders opened (a judge's)."""
    arm, settings, grader_runs = one.arm, one.settings, one.grader_runs
    if not settings.transcripts:
        return None
    store = settings.regrade.store if settings.regrade else None
    try:
        before = transcripts.read(store, source.transcript) if store else None
    except transcripts.TranscriptUnreadable:
        before = None
    if before is None and not grader_runs:
        return None
    document = transcripts.build(arm_id=arm.id, task_id=arm.task.id, run_id=settings.run_id,
                                 run=AgentRun(), driver=False, grader_runs=grader_runs)
    if before is not None:
        document["sessions"] = [s for s in before["sessions"] if isinstance(s, dict)
                                and s.get("role") != "judge"] + document["sessions"]
        document["cuts"] = [*(before.get("cuts") or []), *document["cuts"]]
    name = transcripts.file_name(arm.id, settings.run_id)
    one.state.pending_transcripts[arm.id] = (name, transcripts.encode(settings.redact(document)))
    return name


# -- snapshots (docs/regrading.md) ----------------------------------------------
PYTHON_ARM = "an arm written in Python is graded by its test, which runs its agent: not regraded"
ENDED_EARLY = "the arm ended before its graders ran"


def snapshot_cap(task: Task, settings: ArmSettings) -> int:
    return snapshots.max_bytes(task.snapshot.max_mb if task.snapshot else None,
                               settings.snapshot_max_mb)


def keep_snapshot(one: ArmRun, tampered: str | None, planted: list[str]) -> Snapshot:
    """R4: snapshot what the graders are about to grade, staged for the store's writer.
    Never the arm's failure: a snapshot that cannot be kept is a note."""
    arm, settings, run, ledger, ws = one.arm, one.settings, one.run, one.ledger, one.ws
    assert ws is not None and ledger is not None
    task = arm.task
    if not task.graders:
        return Snapshot(note=PYTHON_ARM)
    if not settings.snapshots:
        return Snapshot(note="snapshots were off (--no-jaato-snapshots)")
    cap = snapshot_cap(task, settings)
    if cap <= 0:
        return Snapshot(note="snapshots are off for this task (snapshot max_mb 0)")
    name = snapshots.file_name(arm.id, settings.run_id)
    sample = arm.sample
    facts = settings.redact({
        "format": snapshots.FORMAT, "arm_id": arm.id, "task_id": task.id,
        "run_id": settings.run_id, "run": dataclasses.asdict(run),
        "ledger": {"entries": list(ledger.entries), "faithful": ledger.faithful,
                   "reason": ledger.reason},
        "cascade_id": one.cascade_id, "tampered": tampered, "planted": list(planted),
        "params": dict(arm.grader_params), "profile_set": arm.profile_set,
        "sample": None if sample is None else {"id": sample.id, "fields": dict(sample.fields)},
        "agent_side": sides.agent_side(arm, one.config)})
    staging = settings.staging or Path(settings.workspace_root).parent / "snapshots"
    try:
        snapshots.take(ws, facts, staging / name, cap, one.at)
    except snapshots.LeftOut as exc:
        return Snapshot(note=f"{LEFT_OUT}{exc}", noted=True)
    except (OSError, ValueError, TypeError) as exc:  # never the arm's failure
        return Snapshot(note=f"snapshot not kept: {type(exc).__name__}: {exc}", noted=True)
    one.state.pending_snapshots[arm.id] = (name, staging / name, True)
    return Snapshot(name=name)


# The note of a snapshot the agent's own tree left out (snapshots.LeftOut: past the cap, a
# special file, too many entries), as against one the harness failed to write.
LEFT_OUT = "snapshot left out: "
