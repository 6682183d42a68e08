"""Who caused what went wrong in an arm: the agent, whose act FAILS it, or the environment,
which BLOCKS it (docs/security.md, "BLOCKED only on evidence").

An arm is BLOCKED only on evidence that the agent did not cause its fault: a BLOCKED keeps
the arm out of the pass rate, so anything a losing agent can bring about itself must not
give one. Each fault below names the evidence the harness gathers for it and its outcome:
the agent's act (a FAIL, under the verdict it names) or the environment's (BLOCKED).
Every site that decides between the two asks this table (`FAULTS`), which
tests/unit/test_fault_table.py walks.
"""
from __future__ import annotations

import errno
from dataclasses import dataclass

from .verdict import Verdict

# The outcome of a fault the agent did not cause.
ENVIRONMENT = "BLOCKED"
# The verdict of a fault a grader meets in the agent's files: the grader's own (its id).
GRADER = "<the grader's own>"


@dataclass(frozen=True)
class Fault:
    name: str
    evidence: str    # what the harness sees before it names this fault
    outcome: str     # ENVIRONMENT, GRADER, or the verdict an act of the agent's FAILS under
    claim: str = ""  # what that verdict claims of an honest agent

    @property
    def agents(self) -> bool:
        return self.outcome != ENVIRONMENT

    @property
    def act(self) -> bool:
        """Judged before (and instead of) any grader: a verdict of its own."""
        return self.outcome not in (ENVIRONMENT, GRADER)

    def failed(self, detail: str, evidence=()) -> Verdict:
        """The FAIL an act of the agent's is recorded as, before any grader."""
        assert self.act, self.name
        return Verdict.failed(self.outcome, self.claim, detail, evidence)

    def graded(self, grader_id: str, claim: str, detail: str, evidence=()) -> Verdict:
        """A grader's verdict on this fault: BLOCKED when the environment's, else a FAIL
        (under the grader's own id, or the act's verdict)."""
        if self.outcome == ENVIRONMENT:
            return Verdict.blocked(grader_id, claim, detail, evidence)
        if self.outcome == GRADER:
            return Verdict.failed(grader_id, claim, detail, evidence)
        return self.failed(detail, evidence)


EXHAUSTED = Fault(
    "exhausted", "the agent's own cgroup counted a refused fork or an OOM kill, or what it "
    "added to the folders it may write passed its disk bound (its limit, or what was free at "
    "its start less what the run keeps, whichever is less), or its workspace holds more "
    "entries than the trap walk looks at, or (a driver arm) more session records than the "
    "harness reads, or one longer than it reads",
    "resources", "the agent stays within its memory, disk and pids limits and the harness's "
    "bounds on its workspace")
DAEMON_BROKEN = Fault(
    "daemon broken", "in the sandbox, the daemon, a runner or the runner template found "
    "stopped or gone, or the socket removed, after the agent's session began",
    "sandbox", "the agent leaves its daemon running")
SESSION_ENDED = Fault(
    "session ended by hand", "the agent's session ended `operator_request`, `stopped` or "
    "`cancelled`, or the daemon no longer lists it (`deleted`: asked when it says so, and "
    "at the ceiling), and the harness sent no session.stop for it",
    "sandbox", "the agent leaves its daemon running")
SESSIONS_UNLISTED = Fault(
    "sessions unlisted", "on a daemon of the run's own, no listing of its sessions after the "
    "agent's run answered (the agent's tools reach its socket, and can keep it from "
    "answering): a session of the agent's could act while the graders read, so the daemon "
    "is ended instead",
    "sandbox", "the agent leaves its daemon running")
CHECKOUT_CHANGED = Fault(
    "checkout changed", "unconfined: the task's manifest, fixture or config root hash "
    "differently after the agent's run than before it",
    "checkout", "the task's files are left as they were")
TRAP = Fault(
    "trap", "a FIFO, a device, or a link to one or out of the workspace, found in the "
    "workspace after the run",
    "workspace", "the agent leaves regular files, folders and links")
WORKSPACE_REPLACED = Fault(
    "workspace replaced", "after the agent's run, with its leftovers ended, the workspace's "
    "path no longer names the folder made for it (its device and inode, held by a "
    "descriptor since it was made)",
    "workspace", "the agent leaves its workspace where it was made, as that folder")
TOOL_MISSING = Fault(
    "the grader's own tool missing", "a command word the author wrote (the first word of "
    "each simple command of `run`, or `harness.run`) is not found on the sandbox's PATH, "
    "looked up before it runs; or the author's `file:` is not in the config root",
    ENVIRONMENT)
PROGRAM_EXIT = Fault(
    "exit 126/127 of what the agent can change", "exit 126 or 127 when every command word "
    "the author wrote was found: what could not run was named by a program it ran, which "
    "runs in the agent's workspace", GRADER)
PROGRAM_TIMEOUT = Fault(
    "timeout in what the agent can change", "at the timeout, a process of the grader's "
    "tree runs a program, or names a script argument, that is a file of the workspace",
    GRADER)
AUTHOR_TIMEOUT = Fault(
    "timeout of the author's command", "at the timeout, no process of the grader's tree "
    "runs or names a file of the workspace", ENVIRONMENT)
SIGNAL_INSIDE = Fault(
    "signal from inside the sandbox", "the grader's first process saw the command die of "
    "a signal in a pid namespace of its own, and the OOM killer did not act while it ran",
    GRADER)
SIGNAL_OUTSIDE = Fault(
    "signal from outside", "a signal's death unconfined, or while the OOM killer acted "
    "outside the grader's own memory cgroup", ENVIRONMENT)
OOM_OWN = Fault(
    "OOM kill in the grader's own cgroup", "the grader's own memory cgroup counted an OOM "
    "kill while it read the agent's files", GRADER)
OOM_MACHINE = Fault(
    "OOM kill on the machine", "no memory cgroup of the grader's own could be made and the "
    "machine-wide `oom_kill` counter rose while it ran (the record says so)", ENVIRONMENT)
DISK_SHORT = Fault(
    "the machine's disk short", "the file system ran short while what the agent added "
    "stayed within a bound it could still have used", ENVIRONMENT)
CEILING = Fault(
    "the arm ceiling", "the agent's session outlasted the arm ceiling (a slow model and a "
    "stalling agent look alike)", ENVIRONMENT)
RUN_INCOMPLETE = Fault(
    "the agent's run incomplete", "the agent's session never signed off or ended truncated "
    "(its budget ceiling, a session error, mid-tool-loop), and no one but the harness or "
    "the daemon ended it (a session ended by hand is SESSION_ENDED, judged first)",
    ENVIRONMENT)
GATE_NOT_PASSED = Fault(
    "a gate not passed", "a grader a judge is gated on was not run or did not PASS (its FAIL "
    "already FAILS the arm)", ENVIRONMENT)
HARNESS_COPY = Fault(
    "the harness's own copy", "no daemon socket for the judge, or its copy of the harness's "
    "config root (never the agent's) could not be made", ENVIRONMENT)
VIEW_BOUND = Fault(
    "the judge's view bound", "the workspace holds more files, folders or bytes than the "
    "judge's view takes (judge.VIEW_FILES, judge.VIEW_BYTES)", GRADER)
VIEW_UNREADABLE = Fault(
    "the agent's files unreadable", "the judge's view could not be made for an error only a "
    "file of the workspace gives its reader (closed to its owner, a name or a tree the "
    "kernel refuses: `AGENTS_ERRNOS`)", GRADER)
VIEW_FAILED = Fault(
    "the judge's view not made", "the judge's view could not be made for any other error "
    "(the disk full, an I/O error, no descriptor left)", ENVIRONMENT)
JUDGE_CANNOT = Fault(
    "the judge cannot grade", "the judge's session was blocked, or its answer has no payload, "
    "names `errors`, a confidence off its range or under needs_human_below, or no score on "
    "its scale (jaato-eval's reading; the judge reads the agent's words, so an agent that "
    "talks it into `errors` is not told apart)", ENVIRONMENT)

FAULTS: tuple[Fault, ...] = (
    EXHAUSTED, DAEMON_BROKEN, SESSION_ENDED, SESSIONS_UNLISTED, CHECKOUT_CHANGED, TRAP,
    WORKSPACE_REPLACED, TOOL_MISSING, PROGRAM_EXIT, PROGRAM_TIMEOUT, AUTHOR_TIMEOUT,
    SIGNAL_INSIDE, SIGNAL_OUTSIDE, OOM_OWN, OOM_MACHINE, DISK_SHORT, CEILING, RUN_INCOMPLETE,
    GATE_NOT_PASSED, HARNESS_COPY, VIEW_BOUND, VIEW_UNREADABLE, VIEW_FAILED, JUDGE_CANNOT)

# The verdicts an act of the agent's is recorded under, each once, in the table's order.
AGENT_ACTS: tuple[str, ...] = tuple(dict.fromkeys(f.outcome for f in FAULTS if f.act))

# How a session ends when someone stops, cancels or deletes it over the daemon's socket.
ENDED_BY_HAND = ("operator_request", "stopped", "cancelled", "canceled", "deleted")


def session_ended_by_hand(termination_reason: str | None, stopped_by_harness: bool) -> bool:
    """SESSION_ENDED: the session ended as only a client's verb ends one, and the harness
    sent none: the agent's tools reach the daemon's socket, so it was the agent."""
    return not stopped_by_harness and (termination_reason or "").lower() in ENDED_BY_HAND


def could_not_run(code: int, missing: str | None) -> tuple[Fault, str] | None:
    """An exit of 126 (not executable) or 127 (not found): TOOL_MISSING when a command
    word the author wrote was not found before the run (`missing`), else PROGRAM_EXIT; with
    what the exit means. None for any other exit."""
    if code not in (126, 127):
        return None
    what = "not executable" if code == 126 else "command not found"
    return (TOOL_MISSING if missing else PROGRAM_EXIT), what


def timed_out(agents_program: str | None) -> Fault:
    """PROGRAM_TIMEOUT when a process of the tree ran a file of the workspace at the
    timeout (`agents_program` names it), else AUTHOR_TIMEOUT."""
    return PROGRAM_TIMEOUT if agents_program else AUTHOR_TIMEOUT


def oom_of(own_kills: int, machine_rose: bool, has_cgroup: bool) -> Fault | None:
    """Who an OOM kill of a grader's process is charged to: OOM_OWN when its own memory
    cgroup counted one (it was reading the agent's files); OOM_MACHINE when it has no cgroup
    and the machine-wide counter rose; None when no OOM killer acted on it."""
    if own_kills > 0:
        return OOM_OWN
    if not has_cgroup and machine_rose:
        return OOM_MACHINE
    return None


def oom_said(fault: Fault, limit: int | None) -> str:
    """What a record says of an OOM kill, the evidence named."""
    if fault is OOM_OWN:
        return (f"the OOM killer ended it in its own memory cgroup (bound: {limit} bytes, the "
                f"agent's), while it read the agent's files")
    return ("the machine's OOM killer acted while it ran (no memory cgroup of its own could "
            "be made here: judged by the machine-wide oom_kill counter)")


# The errors reading a tree gives only for what its owner made of it: a file or folder closed
# to its owner, a name, a path or a chain of links the kernel refuses.
AGENTS_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ELOOP, errno.ENAMETOOLONG,
                           errno.ENOTDIR, errno.EISDIR, errno.EFBIG, errno.EOVERFLOW})


def view_fault(exc: OSError) -> Fault:
    """Who a failure to copy the agent's files for a grader is charged to: VIEW_UNREADABLE
    when the error is one only the tree's shape gives, else VIEW_FAILED."""
    return VIEW_UNREADABLE if exc.errno in AGENTS_ERRNOS else VIEW_FAILED
