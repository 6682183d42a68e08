"""Clean-up that never raises: a process at its thread limit, a folder that will not go."""
from __future__ import annotations

import json

from pytest_jaato_eval import sweep, workspace
from pytest_jaato_eval.pytest_layer import worker


class _NoThreads:
    """What `threading` gives a process at its limit: a thread object whose start fails."""

    Lock = workspace.threading.Lock

    class Thread:
        def __init__(self, *args, **kwargs):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")


def test_a_bin_without_a_thread_removes_the_workspace_itself_and_empties_cleanly(tmp_path,
                                                                                  monkeypatch):
    ws = tmp_path / "ws"
    (ws / "deep").mkdir(parents=True)
    (ws / "deep" / "f.txt").write_text("x")
    (tmp_path / ".ws-abc-state").mkdir()  # the daemon's state folder beside it goes too
    bin_ = workspace.Bin()
    monkeypatch.setattr(workspace, "threading", _NoThreads)
    bin_.put(ws)  # no RuntimeError: removed here and now
    assert not ws.exists() and not (tmp_path / ".ws-abc-state").exists()
    assert bin_.empty(1.0) is True  # nothing to join: never "cannot join thread"


def test_a_bin_with_its_thread_removes_in_the_background(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    bin_ = workspace.Bin()
    bin_.put(ws)
    assert bin_.empty(30.0) is True and not ws.exists()


def _owner_gone(run_dir):
    """The owner file as a later run finds it: its process is gone (another start time)."""
    body = json.loads((run_dir / sweep.OWNER_FILE).read_text())
    body["started"] = 1.0
    (run_dir / sweep.OWNER_FILE).write_text(json.dumps(body))


def test_what_the_run_could_not_remove_is_named_and_the_next_run_removes_it(tmp_path,
                                                                            capsys):
    root = tmp_path / "tmp"
    run_dir = root / "jaato-eval-abc"
    kept, stuck = run_dir / "workspaces" / "kept@echo#0", run_dir / "workspaces" / "stuck@echo#0"
    for ws in (kept, stuck):
        (ws / "sub").mkdir(parents=True)
        (ws / "sub" / "f").write_text("x")
    (run_dir / "daemon").mkdir()
    beside_kept = run_dir / "workspaces" / f".{kept.name}-config-state"
    beside_kept.mkdir()
    worker._left_for_later(run_dir, "run-abc", {kept})
    err = capsys.readouterr().err
    assert f"jaato-eval: could not remove {run_dir / 'daemon'}" in err and str(stuck) in err
    assert "a later run removes it" in err and str(kept) not in err and "config-state" not in err
    assert (run_dir / worker.DISCARDED / stuck.name / "sub" / "f").exists()
    assert (run_dir / sweep.OWNER_FILE).exists()
    _owner_gone(run_dir)
    assert sweep.sweep_dead_runs(root) == [run_dir]
    # The user's kept workspace stays; the leftovers are gone.
    assert (kept / "sub" / "f").exists() and beside_kept.is_dir()
    assert not (run_dir / worker.DISCARDED).exists() and not (run_dir / "daemon").exists()


def test_a_run_folder_left_empty_is_not_named(tmp_path, capsys):
    run_dir = tmp_path / "jaato-eval-x"
    (run_dir / "workspaces" / "kept").mkdir(parents=True)
    worker._left_for_later(run_dir, "run-x", {run_dir / "workspaces" / "kept"})
    assert capsys.readouterr().err == ""
    assert not (run_dir / sweep.OWNER_FILE).exists()  # kept workspaces stay the user's


def test_finish_goes_on_past_a_step_that_raises(monkeypatch, capsys):
    calls = []

    class W(worker.Worker):
        def __init__(self):  # only what finish() touches
            pass

        def _stop_daemon(self):
            calls.append("daemon")
            raise RuntimeError("can't start new thread")

        def _remove_workspaces(self):
            calls.append("workspaces")
            raise OSError("no file handles")

        def _end_trees(self):
            calls.append("trees")

        def _remove_run_dir(self):
            calls.append("run dir")

    W().finish()
    assert calls == ["daemon", "workspaces", "trees", "run dir"]
    err = capsys.readouterr().err
    assert "jaato-eval: stopping the daemon failed: RuntimeError: can't start new thread" in err
    assert "jaato-eval: removing workspaces failed: OSError: no file handles" in err
