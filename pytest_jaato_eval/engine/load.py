"""How busy the machine is, said where jaato's own time bounds fired.

jaato bounds its own waits (a runner's bootstrap, 35 s; its daemon loop's answers,
`DaemonLoopTimeout`): on a machine loaded past its cores they fire for the load, not for
the model or the task. A reason that names one of them says the load, so the user
retries on a quieter machine instead of blaming the model.
"""
from __future__ import annotations

import os

# jaato's words for its own bounds that a starved host trips.
LOAD_BOUNDS = ("RunnerBootstrapFailed", "DaemonLoopTimeout", "SessionInitializationError")


def machine_load() -> tuple[float, int] | None:
    """(the 1-minute load average, the cores this process may use), or None when unknown."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return load, cores


def overload_note(reason: str | None, load: tuple[float, int] | None = None) -> str:
    """`; the machine was overloaded (load average 7.9 on 2 cores): ...` when `reason` is
    one of jaato's own time bounds and the load is past the cores; else ``."""
    if not reason or not any(bound in reason for bound in LOAD_BOUNDS):
        return ""
    load = load if load is not None else machine_load()
    if load is None:
        return ""
    average, cores = load
    if average <= cores:
        return f" (load average {average:.1f} on {cores} cores)"
    return (f"; the machine was overloaded (load average {average:.1f} on {cores} cores): "
            f"jaato's own time bound fired, not the model; run again when it is quieter, "
            f"or with fewer -n workers")
