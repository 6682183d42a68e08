"""A scripted, OpenAI-compatible model server for driving jaato's ``vllm`` provider.

A real agent run needs a model; a test of the harness needs a model whose every turn
is known in advance.  :class:`ScriptedModel` is that model: a tiny HTTP server on
``127.0.0.1`` (an ephemeral port, standard library only) that answers the three
endpoints jaato's ``vllm`` provider calls --

* ``GET /health``                 -> 200 (the provider's liveness probe at session start)
* ``GET /v1/models``              -> one model, with ``max_model_len`` (the provider
  reads its context window from it and fails the session without one)
* ``POST /v1/chat/completions``   -> the next turn of the script, streamed as SSE when
  the request says ``stream: true`` (the daemon always does), else one JSON body

-- and answers each chat request with the next :class:`Turn` of a script::

    from pytest_jaato_eval.testing.model_server import ScriptedModel, Turn

    with ScriptedModel([
        Turn.tool("writeNewFile", path="hello.txt", content="hi\\n"),
        Turn.tool("signal_completion", answer="wrote hello.txt").with_usage(900, 40),
    ]) as model:
        model.write_profile(config_root)          # profiles/scripted.yaml -> model.url
        ...drive a jaato session...
        assert len(model.chat_requests) == 2

One script position is consumed per chat request, retries included: the daemon and the
openai client both retry failed calls, so ``[Turn.fault(429), Turn.text("ok")]`` is a
transient rate limit that the retry absorbs, while ``[Turn.fault(429)]`` is a rate limit
that never lifts.  When the script runs out the server repeats its LAST turn (so a lone
fault keeps failing every retry and a final ``signal_completion`` stays benign), unless
``when_exhausted=`` names another turn.  ``/health`` and ``/v1/models`` never consume turns.

Faults (see ``docs/scripted-model.md`` for what the daemon does with each):

* ``Turn.fault(status)``  an HTTP error with an OpenAI-shaped error body (429, 500, ...);
* ``Turn.hang(seconds)``  hold the request open without a byte of response until the
  client hangs up, the server stops, or ``seconds`` pass -- then drop the connection;
* ``Turn.malformed(mode)`` a 200 stream that breaks: ``"garbage"`` (a non-JSON ``data:``
  line), ``"truncated"`` (half a JSON chunk, then the connection drops mid-body), or
  ``"unterminated"`` (valid chunks, then a clean end with no ``finish_reason``).

A task's profile can stay static: leave ``plugin_configs.vllm.host`` out
(``profile(host=False)``) and :meth:`ScriptedModel.write_env` puts ``VLLM_HOST`` in the
arm workspace's ``.env``, which the daemon loads into the session's environment.

Tool names: jaato offers tools to the model under hashed ids (``t_<8 hex>``, the first
eight hex digits of the name's SHA-256).  The daemon maps an id back to its name, and
passes an unknown name through unchanged, so either spelling works.  By default
(``tool_names="auto"``) the server answers with the hashed id whenever the request
offered it -- what a real model would do -- and with the name as scripted otherwise.

Cost: the ``vllm`` provider reads only ``prompt_tokens`` / ``completion_tokens`` /
``prompt_tokens_details.cached_tokens`` from a usage chunk; it never reads a cost field.
``Usage.cost`` is still sent (as ``usage.cost``, OpenRouter's spelling) for clients that
do, but jaato prices a ``vllm`` turn only from a pricing table: see :meth:`ScriptedModel.write_pricing`.

A pytest fixture: :func:`scripted_model_fixture` is a plain generator, meant to be
registered by the plugin as ``pytest.fixture(scripted_model_fixture, name="scripted_model")``.

Standalone: ``python -m pytest_jaato_eval.testing.model_server --script FILE --port 0``
loads a JSON or YAML script (format in :meth:`Turn.from_dict` / :func:`load_script`),
prints the server URL on stdout and serves until interrupted.

This module is the public face (import everything from here) and the command line; the
work is done by one module per job: ``script`` (turns and script files), ``server``
(:class:`ScriptedModel`), ``handler`` (the HTTP endpoints), ``recorded`` (what was seen),
``profiles`` (the jaato profile, ``.env`` and pricing files) and ``fixture`` (the pytest
fixture's body, cheap to import).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from .fixture import scripted_model_fixture
from .profiles import DEFAULT_COMPLETION_SCHEMA
from .recorded import RecordedRequest
from .script import (
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_MODEL,
    MALFORMED_MODES,
    TOOL_NAME_MODES,
    ScriptSpec,
    ToolCall,
    Turn,
    Usage,
    load_script,
    wire_tool_name,
)
from .server import ScriptedModel

__all__ = [
    "DEFAULT_COMPLETION_SCHEMA",
    "DEFAULT_MAX_MODEL_LEN",
    "DEFAULT_MODEL",
    "MALFORMED_MODES",
    "RecordedRequest",
    "ScriptSpec",
    "ScriptedModel",
    "ToolCall",
    "Turn",
    "Usage",
    "load_script",
    "main",
    "scripted_model_fixture",
    "wire_tool_name",
]



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_jaato_eval.testing.model_server",
        description="Serve a scripted OpenAI-compatible model on 127.0.0.1 for jaato's vllm provider.")
    parser.add_argument("--script", required=True, help="JSON or YAML script file")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = ephemeral)")
    parser.add_argument("--model", help="model id (overrides the script's)")
    parser.add_argument("--max-model-len", type=int, help="context window (overrides the script's)")
    parser.add_argument("--tool-names", choices=TOOL_NAME_MODES, default="auto")
    parser.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    args = parser.parse_args(argv)

    overrides: dict[str, Any] = {"port": args.port, "tool_names": args.tool_names}
    if args.model:
        overrides["model"] = args.model
    if args.max_model_len:
        overrides["max_model_len"] = args.max_model_len
    if not args.quiet:
        overrides["log"] = lambda line: print(line, file=sys.stderr, flush=True)
    model = ScriptedModel.from_file(args.script, **overrides)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with model:
        print(model.url, flush=True)
        while not stop.wait(0.5):
            pass
    print(f"served {model.turns_served} chat requests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
