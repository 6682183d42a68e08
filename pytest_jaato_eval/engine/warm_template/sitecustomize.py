"""Warms jaato's runner template: Python's `site` loads this file at the start of every Python
process of a daemon the plugin starts (engine/daemon.py puts this folder first on the daemon's
PYTHONPATH). It acts only in jaato's runner template, the process each session's runner is
forked from.

jaato's template imports its plugins but not what a session's bootstrap needs (the session
and client modules, every model provider, the MCP types, jsonschema), so each runner forked
from it imported those again: about 1.7 s of CPU per runner, several runners per daemon.
Imported here once, every runner inherits them. A module that is missing or fails to import
is left to the runner, as before: this changes how fast a runner starts, never what it does.

Before each fork the template's heap is frozen (`gc.freeze`, as Python's documentation advises
for a process that forks workers): a runner's garbage collections and its exit no longer walk,
and so copy, the objects it inherited.

It also takes this folder off PYTHONPATH for everything the template starts (the runners and
the agent's tools), and runs the `sitecustomize` it shadows, if there is one.
"""
import gc
import importlib
import importlib.machinery
import importlib.util
import os
import pkgutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# What an echo session's runner imported after the fork, by the modules that pull it in.
SESSION_MODULES = (
    "jaato_server.shared.jaato_client",
    "jaato_server.server.runner.session",
    "jaato_server.server.runner.slot_plugins",
    "jaato_server.server.runner.tool_executor",
    "jaato_server.server.runner.cli_runner",
    "jaato_server.server.runner.echo_tool",
    "jaato_server.shared.lifecycle_tools",
    "jaato_server.shared.event_bus_tools",
    "jaato_server.shared.mcp_context_manager",
    "jaato_server.shared.completion_schema_loader",
    "jaato_server.shared.rewind",
    "jaato_server.shared.repo_guidance",
    "jaato_server.shared.ai_disclosure",
    "jaato_server.shared.enrichment_notice",
    "jaato_server.shared.jaato_self_shadowing",
    "jaato_server.shared.tag_coherence",
    "jaato_server.shared.plugins.permission.runner_rpc_channel",
    "jaato_server.shared.plugins.session.serializer",
    "jaato_server.shared.plugins.subagent.entry_handler",
    "jaato_server.shared.plugins.references.entry_handler",
    "jaato_server.shared.plugins.notebook.backends.subprocess_kernel",
    "mcp.types",
    "jsonschema",
)
# The runner loads every model provider to find the profile's: `<provider>.provider` each.
PROVIDERS = "jaato_server.shared.plugins.model_provider"


def _chain() -> None:
    """Run the `sitecustomize` later on the path that this one hides: ours only adds."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _leave_path() -> None:
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
               if p and os.path.abspath(p) != HERE]
    if entries:
        os.environ["PYTHONPATH"] = os.pathsep.join(entries)
    else:
        os.environ.pop("PYTHONPATH", None)


def _import(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - the runner imports it itself, as it did before
        pass


def _warm() -> None:
    for name in SESSION_MODULES:
        _import(name)
    try:
        providers = importlib.import_module(PROVIDERS)
    except Exception:  # noqa: BLE001
        return
    for found in pkgutil.iter_modules(providers.__path__, PROVIDERS + "."):
        if found.ispkg and not found.name.rsplit(".", 1)[1].startswith("test"):
            _import(found.name + ".provider")


TEMPLATE_PID = os.getpid()  # in the template: the process that registers the hook


def _freeze_before_fork() -> None:
    # What the template holds at a fork, the runner inherits and never frees: frozen, the
    # runner's collections skip it (no copy-on-write of the whole heap) and so does its exit.
    # A runner inherits this hook too; its own forks freeze nothing, or what its sessions
    # made would never be collected.
    if os.getpid() == TEMPLATE_PID:
        gc.freeze()


if "--template-mode" in sys.argv[1:]:
    _leave_path()
    _warm()
    os.register_at_fork(before=_freeze_before_fork)
_chain()
