"""A pytest plugin for bench_concurrency.py --phases: where each arm's seconds go.

Loaded into OUR runs only (`-p phase_timing`, PYTHONPATH=bench/), in the controller and in
every xdist worker. It appends one JSON line per event to the file named by
JAATO_BENCH_PHASES:

  arm             one item's whole protocol on its worker (setup, call, teardown, reports)
  create_session  the daemon binds a runner slot and boots the session
  complete        the prompt to the signed answer: model turns + the daemon's turn work

Each daemon call carries the node id of the arm it ran for (a worker runs one arm at a
time), so an arm's own time and the daemon's share of it come from the same arm.

Not part of the plugin and never loaded by the test suite.
"""
from __future__ import annotations

import functools
import json
import os
import time

import pytest

PATH = os.environ.get("JAATO_BENCH_PHASES")
_current: dict[str, str | None] = {"arm": None}


def _write(phase: str, start: float, arm: str | None) -> None:
    with open(PATH, "a", encoding="utf-8") as out:  # one short line per write: O_APPEND keeps it whole
        out.write(json.dumps({"pid": os.getpid(), "phase": phase, "arm": arm, "start": start,
                              "end": time.time()}) + "\n")


def _timed(owner, name: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def timed(*args, **kwargs):
        start, arm = time.time(), _current["arm"]
        try:
            return await original(*args, **kwargs)
        finally:
            _write(name, start, arm)

    setattr(owner, name, timed)


def pytest_configure(config):
    if not PATH:
        return
    from jaato_sdk.client.convenience import Session
    from jaato_sdk.client.ipc import IPCClient

    _timed(IPCClient, "create_session")
    _timed(Session, "complete")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not PATH:
        return (yield)
    start = time.time()
    _current["arm"] = item.nodeid
    try:
        return (yield)
    finally:
        _current["arm"] = None
        _write("arm", start, item.nodeid)
