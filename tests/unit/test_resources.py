"""An arm's bounded resources (engine/resources.py) and the cgroup that holds its sandbox
(engine/sandbox.Limits): sizes, the disk watch, what the agent used up, both cgroup
versions' files."""
from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest
import yaml

from pytest_jaato_eval.engine import resources
from pytest_jaato_eval.engine.resources import (Bounds, DiskWatch, Guard, parse_size,
                                                size_text)
from pytest_jaato_eval.engine.sandbox import PIDS_MAX, Limits
from pytest_jaato_eval.task.load import ManifestError, load_task


@pytest.mark.parametrize("value, size", [
    ("512M", 512 << 20), ("8G", 8 << 30), ("1.5GiB", 3 << 29), ("64 MB", 64 << 20),
    ("100k", 100 << 10), (4096, 4096), ("4096", 4096),
    ("0", None), (0, None), (-1, None), ("8 gigs", None), (True, None), (1.5, None), ("", None),
])
def test_a_size_is_bytes_or_a_number_with_a_binary_unit(value, size):
    assert parse_size(value) == size


def test_sizes_read_as_a_reader_sizes_them():
    assert [size_text(n) for n in (12, 300 << 10, 64 << 20, (3 << 29), 10 << 30)] == [
        "12 B", "300 KiB", "64 MiB", "1.5 GiB", "10 GiB"]


def manifest(tmp_path: Path, resources_: object) -> Path:
    (tmp_path / "fixture").mkdir(exist_ok=True)
    (tmp_path / ".jaato").mkdir(exist_ok=True)
    (tmp_path / "task.yaml").write_text(yaml.safe_dump({
        "id": "t", "environment": {"fixture": "fixture", "config_root": ".jaato"},
        "input": {"prompt": "p"}, "harness": {"profile": "w"},
        "graders": [{"kind": "script", "run": "true"}], "resources": resources_}))
    return tmp_path / "task.yaml"


def test_a_task_raises_its_own_limits_and_the_run_gives_the_rest(tmp_path):
    task = load_task(manifest(tmp_path, {"memory": "16G"}))
    assert Bounds.of(task.resources, resources.MEMORY, 3 << 30) == Bounds(16 << 30, 3 << 30)
    assert Bounds.of(None, 1 << 30, 2 << 30) == Bounds(1 << 30, 2 << 30)


@pytest.mark.parametrize("value, says", [
    ({"memory": "lots"}, "resources.memory: expected a size (bytes, or a number with K, M, G or "
                         "T: 512M, 8G, 1.5GiB), got str 'lots'"),
    ({"disk": 0}, "resources.disk: expected a size"),
    ({"cpu": 2}, "resources.cpu: unknown key; known keys: memory, disk"),
    ("8G", "resources: expected a mapping"),
])
def test_a_bad_resources_key_is_a_one_line_manifest_error(tmp_path, value, says):
    with pytest.raises(ManifestError) as info:
        load_task(manifest(tmp_path, value))
    assert says in str(info.value), str(info.value)


def test_the_disk_watch_stops_an_agent_past_its_limit_and_names_what_it_added(tmp_path):
    root, daemon = tmp_path / "workspaces", tmp_path / "daemon"
    (root / "ws").mkdir(parents=True)
    (root / "kept").mkdir()
    daemon.mkdir()
    (daemon / "daemon.log").write_text("started\n")
    stopped = threading.Event()
    watch = DiskWatch([root, daemon], 1 << 20, leave_out=[root / "kept"], stop=stopped.set)
    with watch.watching():
        (root / "kept" / "big").write_bytes(os.urandom(2 << 20))  # not the agent's to count
        for i in range(3):
            (root / "ws" / f"f{i}").write_bytes(os.urandom(1 << 20))
        (root / "stray").write_bytes(b"x" * 4096)
        stopped.wait(30)  # the watch's thread sees the file system grow (or the end looks)
    assert watch.over and "past its limit of 1 MiB" in watch.over and "jaato_disk_limit" in watch.over
    assert watch.stopped and stopped.is_set()
    assert sorted(p.name for p in watch.added()) == ["stray", "ws"]


def test_an_agent_within_its_limit_is_left_alone(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "big-but-sparse").write_bytes(b"")
    os.truncate(tmp_path / "ws" / "big-but-sparse", 10 << 30)  # allocates nothing
    watch = DiskWatch([tmp_path], 1 << 20, stop=lambda: pytest.fail("stopped"))
    with watch.watching():
        (tmp_path / "ws" / "small").write_text("x")
        time.sleep(2 * resources.POLL)
    assert watch.over is None and watch.short is None and not watch.stopped


class Counts:
    """A cgroup's counters, as the kernel would move them."""

    def __init__(self, oom: int = 0, refused: int = 0):
        self.oom, self.refused_ = oom, refused

    def oom_kills(self) -> int:
        return self.oom

    def refused(self) -> int:
        return self.refused_


def test_what_the_agent_used_up_is_named_with_where_to_raise_it(tmp_path):
    counts = Counts(oom=2, refused=5)
    guard = Guard(Bounds(1 << 30, 1 << 30), counts, DiskWatch([tmp_path], 1 << 30),  # type: ignore[arg-type]
                  oom_kills=2, refused=5)
    assert guard.exhausted() is None
    counts.refused_ = 9
    assert guard.exhausted() == (f"pids: the agent's processes filled their sandbox's limit of "
                                 f"{PIDS_MAX} tasks (4 fork(s) refused)")
    counts.oom = 3
    assert guard.exhausted() == (
        "memory: the agent's processes reached their sandbox's limit of 1 GiB and the kernel "
        "ended 1 of them (raise it with `resources:` in task.yaml or the ini key "
        "jaato_memory_limit)")


def cgroup_files(folder: Path, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("__", ".")).write_text(text)
    return folder


def test_a_v1_memory_limit_keeps_memory_and_swap_in_the_kernels_order(tmp_path):
    mem = cgroup_files(tmp_path / "memory", memory__limit_in_bytes="9223372036854771712\n",
                       memory__memsw__limit_in_bytes="9223372036854771712\n",
                       memory__oom_control="oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    limits = Limits({"memory": mem})
    assert limits.set_memory(1 << 30) is None
    assert (mem / "memory.limit_in_bytes").read_text() == f"{1 << 30}\n"
    assert (mem / "memory.memsw.limit_in_bytes").read_text() == f"{1 << 30}\n"
    assert limits.oom_kills() == 3 and limits.refused() == 0


def test_a_v2_cgroup_goes_beside_this_process_where_its_parent_hands_controllers_down(tmp_path):
    fs = tmp_path / "cgroup"
    cgroup_files(fs, cgroup__controllers="cpu memory pids\n", cgroup__subtree_control="",
                 cgroup__procs="")
    cgroup_files(fs / "user.slice", cgroup__subtree_control="memory pids\n", cgroup__procs="")
    cgroup_files(fs / "user.slice" / "me.scope", cgroup__procs="1234\n")
    own = "0::/user.slice/me.scope\n"
    assert resources_place(fs, own) == fs / "user.slice"
    cgroup_files(fs / "user.slice", cgroup__subtree_control="cpu\n")
    assert resources_place(fs, own) is None  # nothing it may bound is handed down
    group = cgroup_files(fs / "user.slice" / "jaato-eval-1-x", memory__max="max\n",
                         memory__events="low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n",
                         pids__events="max 2\n")
    limits = Limits({"memory": group, "pids": group}, v2=True)
    assert limits.set_memory(512 << 20) is None
    assert (group / "memory.max").read_text() == f"{512 << 20}\n"
    assert limits.oom_kills() == 1 and limits.refused() == 2


def resources_place(fs: Path, own: str):
    from pytest_jaato_eval.engine.sandbox import _v2_place
    return _v2_place(fs, own)


def test_a_real_cgroup_is_made_bounded_and_removed():
    limits = Limits.make(f"jaato-eval-{os.getpid()}-unit")
    if limits is None:
        pytest.skip("no cgroup this run may write here (not root, nothing delegated)")
    try:
        if limits.memory:
            assert limits.set_memory(1 << 30) is None
        assert limits.oom_kills() == 0 and limits.refused() == 0
    finally:
        limits.remove()
    assert not any(f.exists() for f in limits.folders.values())


DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def doc_block(kind: str) -> str:
    """The `kind` block of docs/tasks.md's "Resources" section, as a reader copies it."""
    section = DOC.read_text().split("## Resources", 1)[1].split("\n## ", 1)[0]
    return re.search(rf"```{kind}\n(.*?)```", section, re.S)[1]


def test_the_documented_task_key_and_ini_keys_raise_the_limits(tmp_path, pytester):
    task = load_task(manifest(tmp_path, yaml.safe_load(doc_block("yaml"))["resources"]))
    assert Bounds.of(task.resources, resources.MEMORY, resources.DISK) == Bounds(16 << 30, 40 << 30)
    from pytest_jaato_eval.pytest_layer.options import UsageError, read_settings
    pytester.makefile(".ini", pytest=doc_block("ini"))
    settings = read_settings(pytester.parseconfig())
    assert (settings.memory_limit, settings.disk_limit) == (16 << 30, 40 << 30)
    pytester.makefile(".ini", pytest="[pytest]\njaato_disk_limit = ten gigs\n")
    with pytest.raises(UsageError) as info:
        read_settings(pytester.parseconfig())
    assert str(info.value) == ("ini jaato_disk_limit: expected a size (bytes, or a number with "
                               "K, M, G or T: 512M, 8G, 1.5GiB), got 'ten gigs'")


def test_the_ini_declares_the_smallest_difference_worth_finding(pytester):
    from pytest_jaato_eval.pytest_layer.options import UsageError, read_settings
    assert read_settings(pytester.parseconfig()).detect is None   # inference's 10 points
    pytester.makefile(".ini", pytest="[pytest]\njaato_detect = 5\n")
    assert read_settings(pytester.parseconfig()).detect == 0.05
    pytester.makefile(".ini", pytest="[pytest]\njaato_detect = five\n")
    with pytest.raises(UsageError) as info:
        read_settings(pytester.parseconfig())
    assert str(info.value) == ("ini jaato_detect: expected percentage points above 0 and up to "
                               "100, got 'five'")
