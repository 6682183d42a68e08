"""`daemon start|status|stop` (kept_daemon.py) without a daemon: the folder it trusts, and
what it says when none runs. tests/e2e/test_visibility_e2e.py runs a real one."""
from __future__ import annotations

import os

import pytest

from pytest_jaato_eval import kept_daemon
from pytest_jaato_eval.cli import main


def test_one_folder_per_project_for_this_user_alone(tmp_path):
    a, b = kept_daemon.default_dir(tmp_path / "a"), kept_daemon.default_dir(tmp_path / "b")
    assert a != b and a.parent == b.parent == kept_daemon.Path(f"/tmp/jaato-kept-{os.getuid()}")
    assert len(str(kept_daemon.socket_of(a))) < 100  # a unix socket path's limit


@pytest.mark.parametrize("make", ["open to others", "a link"])
def test_a_folder_somebody_else_could_have_placed_is_refused(tmp_path, make, capsys):
    parent = tmp_path / "kept"
    parent.mkdir(mode=0o700)
    folder = parent / "project"
    if make == "open to others":
        folder.mkdir()
        folder.chmod(0o755)
    else:
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    assert main(["daemon", "start", "--dir", str(folder)]) == 2
    assert "not a folder of this user's alone" in capsys.readouterr().err


def test_status_and_stop_with_none_running(tmp_path, capsys):
    folder = tmp_path / "k"
    assert main(["daemon", "status", "--dir", str(folder)]) == 1
    assert main(["daemon", "stop", "--dir", str(folder)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"no kept daemon in {folder}"] * 2
