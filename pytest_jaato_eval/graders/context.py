"""What every grader is handed about the arm it grades (G1)."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..contract import build_contract_env
from ..engine.agent_run import AgentRun
from ..engine.sandbox import Confinement, Limits, Wrapped
from ..verdict import Verdict
from ..workspace import as_left
from .ledger import Ledger


def truncation_reason(termination_reason: str | None, payload: Any,
                      finish_reason: str | None) -> str | None:
    """G1: why an arm's run did not reach its end, or None when it did.

    The termination outranks a payload, a payload outranks finish_reason: a
    schema-driven arm ends inside a tool_use turn and is complete.
    """
    if termination_reason == "budget_exhausted":
        return "stopped at its budget ceiling"
    if termination_reason == "error":
        return "ended in a session error"
    if payload is not None or finish_reason == "stop":
        return None
    if finish_reason == "tool_use":
        return "ended mid-tool-loop"
    return f"finish_reason={finish_reason!r}"


@dataclass
class GraderContext:
    workspace: Path
    config_root: Path
    params: Mapping[str, Any]
    run: AgentRun = field(default_factory=AgentRun)  # what the engine observed of the agent
    ledger: Ledger = field(default_factory=lambda: Ledger(reason="no history was received"))
    socket_path: str | None = None
    cascade_id: str | None = None
    verdicts: list[Verdict] = field(default_factory=list)  # the graders before this one
    mask: Callable[[str], str] | None = None  # masks credentials before output is cut
    arm_id: str | None = None
    profile_set: str | None = None  # the set the arm ran under (the harness wrote it)
    sample: Any = None  # the arm's sample (samples.Sample): the dataset row it ran on
    author_modules: Path | None = None  # the harness's copy of the fixture (contract.py)
    # (grader id, run) of each session a grader opened (a judge's): the arm's judge bill
    # and the judge's part of its transcript.
    grader_runs: list[tuple[str, AgentRun]] = field(default_factory=list)
    confinement: Confinement | None = None  # the agent's sandbox, when it has one
    # Each grader's own view of the config root, by its place in the manifest (arm.py's
    # grader_configs): without the files the other graders name. Empty: `config_root`.
    config_roots: tuple[Path, ...] = ()
    # The bound a grader's process is held to in a memory cgroup of its own (the agent's):
    # an OOM kill there is met reading the agent's files (faults.OOM_OWN). None: no cgroup.
    memory_limit: int | None = None
    # The descriptor held on the workspace as made (workspace.hold): a grader's copy is read
    # through it, never through the path the agent could have replaced. None: the path.
    workspace_fd: int | None = None

    def for_grader(self, index: int) -> "GraderContext":
        """The context grader `index` is handed: its own view of the config root (the lists
        of verdicts and sessions stay the arm's)."""
        if index >= len(self.config_roots):
            return self
        return dataclasses.replace(self, config_root=self.config_roots[index])

    @contextlib.contextmanager
    def confined(self, argv: list[str], *, writable: Sequence[Path] = (),
                 readable: Sequence[Path] = ()) -> Iterator[Wrapped]:
        """A grader's process `argv` as it must run: on the workspace as the agent left it
        (workspace.as_left: a fresh copy at its path for this process alone; none needed
        where the sandbox shows it the workspace read-only), in the agent's sandbox when the
        agent had one, seeing only its own files (its view of the config root, the author's
        modules, the daemon's folder) and writing only `writable`. Raises WorkspaceError
        when the workspace cannot be copied for it."""
        read_only = self.confinement is not None and self.workspace not in writable
        limits = self._memory_cgroup()
        try:
            with contextlib.nullcontext(self.workspace) if read_only else as_left(
                    self.workspace, self.workspace_fd):
                if self.confinement is None:
                    yield Wrapped(tuple(argv)).in_cgroup(limits)
                    return
                mine = [p for p in (self.config_root, self.author_modules) if p is not None]
                if self.socket_path:
                    mine.append(Path(self.socket_path).parent)
                with self.confinement.command(argv, writable=writable,
                                              readable=[*mine, *readable],
                                              lend=False) as wrapped:
                    yield wrapped.in_cgroup(limits)
        finally:
            if limits is not None:
                limits.remove()

    def _memory_cgroup(self) -> Limits | None:
        """A memory cgroup of the grader's own, bounded by `memory_limit`, or None where none
        can be made (the machine-wide counter then judges an OOM kill)."""
        if not self.memory_limit:
            return None
        limits = Limits.make(f"jaato-eval-{os.getpid()}-grader-{uuid.uuid4().hex[:8]}")
        if limits is not None and (not limits.memory or limits.set_memory(self.memory_limit)):
            limits.remove()
            return None
        return limits

    def contract_env(self, passthrough=(), per_key: bool = True) -> dict[str, str]:
        """The contract's environment for a grader's process, with what its spec passes
        through (raises ParamCollision when two params map to one variable; per_key=False:
        only JAATO_EVAL_PARAMS carries them)."""
        return build_contract_env(workspace=self.workspace, config_root=self.config_root,
                                  params=self.params, socket=self.socket_path,
                                  cascade_id=self.cascade_id, passthrough=passthrough,
                                  sample=self.sample, author_modules=self.author_modules,
                                  per_key=per_key)

    @property
    def truncation_reason(self) -> str | None:
        run = self.run
        return truncation_reason(run.termination_reason, run.payload, run.finish_reason)

    @property
    def tool_calls(self):
        """The ledger's entries; reading them on an unfaithful ledger is refused (G3)."""
        if not self.ledger.faithful:
            raise UnfaithfulLedger(self.ledger.reason)
        return self.ledger.entries


class UnfaithfulLedger(Exception):
    """A processor read context.tool_calls from a ledger that cannot be trusted."""
