"""End-to-end fixtures: one real private jaato daemon for the session (stopped at the
end), and a throwaway project of tasks to run against it (jaato_project.py)."""
from __future__ import annotations

import os
import shutil

import jaato_sdk.client.ipc  # noqa: F401 - see below
import jinja2.sandbox  # noqa: F401
import msgspec  # noqa: F401
import pytest
from jaato_project import Project, short_tmpdir

import pytest_jaato_eval.pytest_layer.arms_found  # noqa: F401
import pytest_jaato_eval.pytest_layer.pytest_html  # noqa: F401
from pytest_jaato_eval.engine.daemon import PrivateDaemon

# What the plugin imports only once a run has arms (its lazy registration, the SDK, the
# store reader, the report writers), imported here, once per worker. A run in process
# (jaato_project.in_process) would otherwise import it inside pytester's snapshot of
# sys.modules, which drops what a test imported at its end, native extensions among them
# (weasyprint's pango binding, msgspec), for a later test to import afresh: a worker
# segfaulted in libc after such runs, and this keeps each loaded once.
try:
    import weasyprint  # noqa: F401 - optional: the PDF report
except (ImportError, OSError):
    pass


# Every project's TMPDIR. The suite's daemon is not the runs' own: it may write a session's
# trackers into a workspace after the test removed its folder, making the folder again
# (docs/running.md); once the daemon has stopped, nothing can, so they go then.
_PROJECT_TMPS: list = []


@pytest.fixture(scope="session")
def daemon():
    """One real daemon for the whole suite, on a private socket, stopped at the end."""
    base = short_tmpdir("jtd-")
    tmp, home = base / "tmp", base / "home"
    tmp.mkdir()
    home.mkdir()
    # One provider attempt: a scripted 429 fails in seconds, not after jaato's ~20 s of retries.
    # A HOME of its own: jaato rewrites ~/.jaato/session_workspace_index.json whole on every
    # session, and the user's grows with every session ever run on the machine (the plugin's
    # own daemons in the runs get pytester's HOME, one per test).
    d = PrivateDaemon(base / "d", env={**os.environ, "TMPDIR": str(tmp), "HOME": str(home),
                                       "AI_RETRY_ATTEMPTS": "1"})
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
