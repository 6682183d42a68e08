"""Runs one processor's validate(payload, context) in a process of its own.

Started by processor.py as `python -I -B processor_child.py INPUT RESULT`: isolated
mode keeps the working directory, PYTHONPATH and the user site off sys.path, so
only the processor file itself (from the config root) and installed packages are
importable. Standard library only: this file is run by path, not imported.

Whatever the processor does - SystemExit, KeyboardInterrupt, any exception at
import or in validate(), a return that is no list - ends as one JSON result
naming the outcome. A process that writes no result (killed, os._exit, a
timeout) is judged by the parent from its exit.
"""
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

MAX_ERRORS = 50
ERROR_CHARS = 2000


class UnfaithfulLedger(Exception):
    """context.tool_calls read from a ledger that cannot be trusted."""


class Context:
    """What the in-process GraderContext offered, as plain values, under our names and
    under the names jaato-eval's GraderContext gives them (docs/tasks.md lists both)."""

    def __init__(self, data):
        ledger = data.pop("ledger")
        self._faithful = ledger["faithful"]
        self._ledger_reason = ledger["reason"]
        self._entries = ledger["entries"]
        self.refused_ledger = None
        verdicts = data.pop("verdicts")
        for key, value in data.items():
            setattr(self, key, value)
        self.workspace = self.workspace_path = Path(self.workspace)
        self.config_root = Path(self.config_root)
        self.agent_params = self.params
        self.termination_error_type = self.error_type or ""
        self.missing_sign_off = self.unsigned
        self.verdicts = [SimpleNamespace(**v) for v in verdicts]
        self.ledger = SimpleNamespace(entries=self._entries if self._faithful else [],
                                      faithful=self._faithful, reason=self._ledger_reason)

    @property
    def tool_calls(self):
        if not self._faithful:
            self.refused_ledger = self._ledger_reason or "no history was received"
            raise UnfaithfulLedger(self.refused_ledger)
        return self._entries


def _text(exc):
    try:
        return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
    except BaseException:  # noqa: BLE001 - a __str__ that raises still names its type
        return type(exc).__name__


def _run(data):
    script = data.pop("script")
    name = data.pop("module_name")
    context = Context(data.pop("context"))
    try:
        spec = importlib.util.spec_from_file_location(name, script)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
        return {"outcome": "import", "error": _text(exc)}
    validate = getattr(module, "validate", None)
    if not callable(validate):
        return {"outcome": "no_validate"}
    try:
        errors = validate(data["payload"], context)
    except BaseException as exc:  # noqa: BLE001
        if context.refused_ledger is not None:
            return {"outcome": "unfaithful", "error": context.refused_ledger[:ERROR_CHARS]}
        return {"outcome": "raised", "error": _text(exc)}
    if not isinstance(errors, list):
        return {"outcome": "not_a_list", "type": type(errors).__name__}
    shown = []
    for e in errors[:MAX_ERRORS]:
        try:
            shown.append(str(e)[:ERROR_CHARS])
        except BaseException as exc:  # noqa: BLE001
            shown.append(f"<an error whose str() raised {type(exc).__name__}>")
    return {"outcome": "errors", "errors": shown, "count": len(errors)}


def main():
    with open(sys.argv[1], encoding="utf-8") as fh:
        data = json.load(fh)
    result = _run(data)
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a processor may have closed or replaced it
            pass
    os._exit(0)  # no atexit handler or lingering thread of the processor's holds us


if __name__ == "__main__":
    main()
