"""A pytest plugin for bench_concurrency.py --phases: where an arm's seconds go.

Loaded into OUR runs only (`-p phase_timing`, PYTHONPATH=bench/). It wraps the two
daemon calls every session arm makes and appends one JSON line per call to the file
named by JAATO_BENCH_PHASES:

  create_session  the daemon binds a runner slot and boots the session
  complete        the prompt to the signed answer: model turns + the daemon's turn work

Not part of the plugin and never loaded by the test suite.
"""
from __future__ import annotations

import functools
import json
import os
import time


def _timed(owner, name: str, phase: str, path: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def timed(*args, **kwargs):
        start = time.time()
        try:
            return await original(*args, **kwargs)
        finally:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"pid": os.getpid(), "phase": phase, "start": start,
                                      "end": time.time()}) + "\n")

    setattr(owner, name, timed)


def pytest_configure(config):
    path = os.environ.get("JAATO_BENCH_PHASES")
    if not path:
        return
    from jaato_sdk.client.convenience import Session
    from jaato_sdk.client.ipc import IPCClient

    _timed(IPCClient, "create_session", "create_session", path)
    _timed(Session, "complete", "complete", path)
