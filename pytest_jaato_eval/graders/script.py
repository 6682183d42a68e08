"""The script grader (G2): a shell command in the arm's workspace, judged by its exit code.

It runs in the workspace (relative paths name what the agent left) with the
curated environment (contract.py): no credential unless the task names it, and
Python never importing from the working directory. Its output is read through a
bounded tail (output.py), whatever it prints.
"""
from __future__ import annotations

import os
import signal
import sys

from .. import faults
from ..contract import ParamCollision
from ..engine.sandbox import confined_path, machine_oom_kills, missing_command
from ..task.model import ScriptGrader
from ..verdict import Verdict
from ..workspace import WorkspaceError
from .context import GraderContext
from .output import TailReader, evidence as output_evidence, program_of, run_bounded



def grade_script(spec: ScriptGrader, ctx: GraderContext) -> Verdict:
    run, expect, timeout = spec.run, spec.expect_exit, spec.timeout
    claim = f"`{run or spec.file}` exits {expect}"
    truncated = ctx.truncation_reason
    if truncated and not ctx.run.unsigned:  # an unsigned arm's tree is real, so it is graded
        return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
    if not ctx.workspace.is_dir():
        return Verdict.blocked(spec.id, claim, f"workspace {ctx.workspace} is missing")
    try:
        env = ctx.contract_env(spec.env_passthrough)
    except ParamCollision as exc:
        return Verdict.blocked(spec.id, claim, str(exc))
    command = run if run else _file_command(spec.file, ctx.config_root, env)
    if command is None:
        return Verdict.blocked(spec.id, claim, f"{spec.file} is not a file under "
                               f"the config root {ctx.config_root}")
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else command
    # looked up before it runs, on the PATH it runs with: nothing of the agent's moves it
    path = confined_path(os.environ.get("PATH", os.defpath)) if ctx.confinement is not None \
        else env.get("PATH", os.defpath)
    missing = missing_command(command, path) if isinstance(command, str) else None
    oom_before = machine_oom_kills()
    try:
        with ctx.confined(argv, writable=[ctx.workspace]) as confined:
            done = run_bounded(confined.argv, timeout=timeout, cwd=ctx.workspace, env=env,
                               pass_fds=confined.pass_fds)
            ran = confined.ran()
            code = None if done.code is None else confined.returncode(done.code)
            oom = faults.oom_of(confined.oom_killed(), _oom_between(oom_before),
                                confined.limits is not None)
    except WorkspaceError as exc:
        return Verdict.blocked(spec.id, claim, str(exc))
    except OSError as exc:
        return Verdict.blocked(spec.id, claim, f"could not start: {exc}")
    out = done.out
    if code is None:
        agents = program_of(done.running, ctx.workspace)
        said = f"timed out after {timeout:g} s (timeout_seconds)"
        if faults.timed_out(agents).agents:
            return Verdict.failed(spec.id, claim, f"{said}, running {agents}, a file of the "
                                  f"workspace", _evidence(out, ctx))
        return Verdict.blocked(spec.id, claim, said, _evidence(out, ctx))
    evidence = _evidence(out, ctx)
    if not ran:
        return Verdict.blocked(spec.id, claim, f"its sandbox could not be set up "
                               f"(exit {code})", evidence)
    if code == expect:
        return Verdict.passed(spec.id, claim, f"exit {code}", evidence)
    if oom is not None and (code < 0 or (oom.agents and code == 128 + signal.SIGKILL)):
        said = f"killed by SIGKILL: {faults.oom_said(oom, ctx.memory_limit)}"
        if oom.agents:
            return Verdict.failed(spec.id, claim, said, evidence)
        return Verdict.blocked(spec.id, claim, said, evidence)
    could_not = faults.could_not_run(code, missing)
    if could_not is not None:
        fault, what = could_not
        if fault.agents:  # the author's own words all ran: a program they ran said it
            return Verdict.failed(spec.id, claim, f"exit {code} ({what}) from a program "
                                  f"its command ran in the workspace; every command it "
                                  f"names was found before it ran", evidence)
        return Verdict.blocked(spec.id, claim, f"exit {code} ({what}): `{missing}` is not "
                               f"on its sandbox's PATH; write `run` against "
                               f"\"$JAATO_EVAL_PYTHON\" or an absolute tool, not a PATH bet",
                               evidence)
    if code < 0:
        if confined.signalled is not None and not _oom_between(oom_before):
            # In a pid namespace of its own, nothing of the run's reaches it but its own
            # processes (the command, and what it ran: the agent's self-test) and the
            # kernel's faults: its exit, as a shell reports 128 + N. The OOM killer (the
            # machine's fault) and a kill by hand from outside stay BLOCKED; only the first
            # is seen.
            return Verdict.failed(spec.id, claim, f"killed by {_signame(-code)}, from inside "
                                  f"its sandbox: by its command or a program it ran (the "
                                  f"machine's OOM killer did not act)", evidence)
        return Verdict.blocked(spec.id, claim, f"killed by {_signame(-code)}", evidence)
    return Verdict.failed(spec.id, claim, f"exit {code}, expected {expect}", evidence)


def _evidence(out: TailReader, ctx: GraderContext) -> list[str]:
    return output_evidence(out.tail(), out.total, ctx.mask)


def _file_command(file: str, config_root, env: dict) -> list[str] | None:
    """`file:` names a script in the config root, where the agent cannot edit it: a .py
    runs with the plugin's interpreter ($JAATO_EVAL_PYTHON), anything else directly."""
    path = os.path.join(config_root, file)
    if not os.path.isfile(path):
        return None
    if file.endswith(".py"):
        return [env.get("JAATO_EVAL_PYTHON") or sys.executable, path]
    return [path]


def _oom_between(before: int | None) -> bool:
    """The machine's OOM killer acted since `before` (or whether it did is not known)."""
    after = machine_oom_kills()
    return before is None or after is None or after > before


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"

