"""End-to-end fixtures: one real private jaato daemon for the session (stopped at the
end), and a throwaway project of tasks to run against it (jaato_project.py)."""
from __future__ import annotations

import os
import shutil

import pytest
from jaato_project import Project, short_tmpdir

from pytest_jaato_eval.engine.daemon import PrivateDaemon


# Every project's TMPDIR. The suite's daemon is not the runs' own: it may write a session's
# trackers into a workspace after the test removed its folder, making the folder again
# (docs/running.md); once the daemon has stopped, nothing can, so they go then.
_PROJECT_TMPS: list = []


@pytest.fixture(scope="session")
def daemon():
    """One real daemon for the whole suite, on a private socket, stopped at the end."""
    base = short_tmpdir("jtd-")
    tmp = base / "tmp"
    tmp.mkdir()
    # One provider attempt: a scripted 429 fails in seconds, not after jaato's ~20 s of retries.
    d = PrivateDaemon(base / "d", env={**os.environ, "TMPDIR": str(tmp), "AI_RETRY_ATTEMPTS": "1"})
    d.ensure()
    yield d
    d.stop()
    shutil.rmtree(base, ignore_errors=True)
    for folder in _PROJECT_TMPS:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def project(pytester, daemon, monkeypatch):
    p = Project(pytester, daemon, monkeypatch)
    _PROJECT_TMPS.append(p.tmp)
    yield p
    shutil.rmtree(p.tmp, ignore_errors=True)
