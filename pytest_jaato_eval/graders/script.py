"""The script grader (G2): a shell command in the arm's workspace, judged by its exit code."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

from ..contract import ParamCollision, build_contract_env
from ..manifest import GraderSpec
from ..verdict import Verdict
from .context import GraderContext

EVIDENCE_LINES = 20


def _tail(text: str, n: int = EVIDENCE_LINES) -> list[str]:
    return text.splitlines()[-n:]


def grade_script(spec: GraderSpec, ctx: GraderContext) -> Verdict:
    run, expect = spec.options["run"], spec.options["expect_exit"]
    timeout = spec.options["timeout_seconds"]
    claim = f"`{run or spec.options.get('file')}` exits {expect}"
    truncated = ctx.truncation_reason
    if truncated and not ctx.unsigned:  # an unsigned arm's tree is real, so it is graded
        return Verdict.blocked(spec.id, claim, f"the arm's run was truncated: {truncated}")
    if not ctx.workspace.is_dir():
        return Verdict.blocked(spec.id, claim, f"workspace {ctx.workspace} is missing")
    try:
        env = build_contract_env(workspace=ctx.workspace, config_root=ctx.config_root,
                                 params=ctx.params, socket=ctx.socket_path,
                                 cascade_id=ctx.cascade_id)
    except ParamCollision as exc:
        return Verdict.blocked(spec.id, claim, str(exc))
    command = run if run else _file_command(spec.options["file"], ctx.config_root, env)
    if command is None:
        return Verdict.blocked(spec.id, claim, f"{spec.options['file']} is not a file under "
                               f"the config root {ctx.config_root}")
    # One file for stdout and stderr keeps their interleaving; no pipe can fill and stall.
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(command, shell=bool(run), cwd=ctx.workspace, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True)
        except OSError as exc:
            return Verdict.blocked(spec.id, claim, f"could not start: {exc}")
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out.seek(0)
            return Verdict.blocked(spec.id, claim, f"timed out after {timeout:g} s "
                                   f"(timeout_seconds)", _tail(out.read().decode(errors="replace")))
        out.seek(0)
        evidence = _tail(out.read().decode(errors="replace"))
    if code == expect:
        return Verdict.passed(spec.id, claim, f"exit {code}", evidence)
    if code in (126, 127):  # the shell could not run it: no signal about the agent
        what = "not executable" if code == 126 else "command not found"
        return Verdict.blocked(spec.id, claim, f"exit {code} ({what}); write `run` against "
                               f"\"$JAATO_EVAL_PYTHON\" or an absolute tool, not a PATH bet",
                               evidence)
    if code < 0:
        return Verdict.blocked(spec.id, claim, f"killed by {_signame(-code)}", evidence)
    return Verdict.failed(spec.id, claim, f"exit {code}, expected {expect}", evidence)


def _file_command(file: str, config_root, env: dict) -> list[str] | None:
    """`file:` names a script in the config root, where the agent cannot edit it: a .py
    runs with the plugin's interpreter ($JAATO_EVAL_PYTHON), anything else directly."""
    path = os.path.join(config_root, file)
    if not os.path.isfile(path):
        return None
    if file.endswith(".py"):
        return [env.get("JAATO_EVAL_PYTHON") or sys.executable, path]
    return [path]


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue
