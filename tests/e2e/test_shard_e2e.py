"""--jaato-shard against real daemons: three shards run at once as three machines would
(each its own pytest process, private daemon and temporary folders), merged into one
store whose pivot is the unsharded run's; and how the option composes with -k,
--profile-set and --resume, and a shard left with nothing to run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_jaato_eval.cli import main
from pytest_jaato_eval.results.pivot import build_cells
from jaato_project import HANG, short_tmpdir, unused_plugins

FAILING = [{"kind": "script", "run": "grep -qx NOPE answer.txt"}]


def sweep(project) -> None:
    """12 arms: a pooled task (4 repeats on a pool that lasts 3 arms), and five others."""
    # echo reports 10 + 5 tokens per provider call, two calls per arm: 30 tokens an arm.
    project.task("pooled", repeats=4, extra={"budget": {"tokens": 65}})
    project.task("alpha", repeats=2)
    project.task("beta", repeats=2, graders=FAILING)
    project.task("gamma", repeats=2)
    project.task("delta")
    project.task("epsilon")


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pivot_rows(store: Path, capsys) -> list[str]:
    capsys.readouterr()
    assert main(["report", "--exit-zero", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]  # the first line names the store
    return lines[: lines.index("")] if "" in lines else lines  # the table, not the reasons


@pytest.mark.slow
def test_three_concurrent_shards_merge_into_the_unsharded_run(project, capsys):
    sweep(project)
    root = project.root
    procs, stores, tmps = [], [], []
    try:
        for i in (1, 2, 3):
            tmp = short_tmpdir(f"jts{i}-")  # this "machine's" TMPDIR: its daemon and workspaces
            tmps.append(tmp)
            stores.append(root / f"shard-{i}.jsonl")
            argv = [sys.executable, "-m", "pytest", "tasks", "-p", "no:cacheprovider",
                    *unused_plugins(["-n"] if i == 1 else []),
                    f"--jaato-shard={i}/3", f"--jaato-out={stores[-1]}"]
            if i == 1:  # composes with -n: this shard spreads its arms over two workers
                argv += ["-n", "2"]
            procs.append(subprocess.Popen(argv, cwd=root, env={**os.environ, "TMPDIR": str(tmp)},
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
        outs = [p.communicate(timeout=HANG)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for tmp in tmps:  # every shard cleaned up after itself: no run folder left
        assert not list(tmp.glob("jaato-eval-*")), tmp
        shutil.rmtree(tmp, ignore_errors=True)

    per_shard = [read(s) if s.exists() else [] for s in stores]
    for i, (out, recs, proc) in enumerate(zip(outs, per_shard, procs), 1):
        assert recs and proc.returncode in (0, 1, 2), out
        # xdist's controller counts what its workers kept ("2 workers [4 items]"); it does
        # not show what they deselected.
        assert (f"/ {12 - len(recs)} deselected" if i > 1 else f"[{len(recs)} items]") in out, out
    arm_ids = [r["arm_id"] for recs in per_shard for r in recs]
    assert len(arm_ids) == len(set(arm_ids)) == 12  # every arm exactly once
    pooled = [i for i, recs in enumerate(per_shard) if any(r["task_id"] == "pooled" for r in recs)]
    assert len(pooled) == 1  # the pool's arms in one shard, on one daemon
    assert [r["state"] for r in sorted(per_shard[pooled[0]], key=lambda r: r["arm_id"])
            if r["task_id"] == "pooled"] == ["PASS", "PASS", "PASS", "BLOCKED"]
    assert len({r["run_id"] for recs in per_shard for r in recs}) == 3  # three separate runs

    merged = root / "merged.jsonl"
    assert main(["merge", str(merged), *map(str, stores)]) == 0
    assert main(["validate", str(merged)]) == 0
    # --resume reads the merged store as one run's: nothing of the sweep is missing.
    complete = project.run("tasks", "--co", "--resume", f"--jaato-out={merged}")
    assert complete.ret == pytest.ExitCode.NO_TESTS_COLLECTED, complete.stdout.str()
    complete.assert_outcomes(deselected=12)

    unsharded = project.run("tasks")  # one machine, the suite's daemon: the reference
    single = project.records()
    assert len(single) == 12, unsharded.stdout.str()
    assert {r["arm_id"]: r["state"] for r in read(merged)} == \
           {r["arm_id"]: r["state"] for r in single}
    counts = lambda recs: {(c.task_id, c.profile_set): (c.passed, c.failed, c.blocked)  # noqa: E731
                           for c in build_cells(recs)}
    assert counts(read(merged)) == counts(single)
    assert pivot_rows(merged, capsys) == pivot_rows(project.store, capsys)


def arm_id(name: str) -> str:
    """`one[echo-r1]` (an item's name) -> `one@echo#1` (its arm id)."""
    task, params = name.rstrip("]").split("[")
    profile_set, repeat = params.rsplit("-r", 1)
    return f"{task}@{profile_set}#{repeat}"


def test_a_shard_composes_with_k_profile_sets_and_resume(project):
    for name in ("one", "two", "three", "four"):
        project.task(name, repeats=2)
    sets = "--profile-set=echo,other"  # 4 tasks x 2 sets x 2 repeats = 16 arms

    def collected(*args):
        result = project.run("tasks", "--co", "-q", sets, *args)
        result.stdout.fnmatch_lines(["*/16 tests collected (* deselected)*"])  # of all 16
        return {line.split("::")[-1] for line in result.stdout.lines if "::" in line}

    shards = [collected(f"--jaato-shard={i}/2") for i in (1, 2)]
    everything = shards[0] | shards[1]
    assert len(everything) == 16 and not shards[0] & shards[1]
    assert [len(s) for s in shards] == [8, 8]  # 2 tasks of 4 arms each
    for shard in shards:  # a task's arms, every set and repeat, in one shard
        tasks = {name.split("[")[0] for name in shard}
        assert {a for a in everything if a.split("[")[0] in tasks} == shard
    # -k applies within the shard: the same split, then the keyword.
    assert collected("--jaato-shard=1/2", "-k", "other") == {a for a in shards[0] if "[other-" in a}
    # --resume deselects the stored arms within the shard; a shard with nothing left exits
    # as `report` on its store does (R3): 0, every stored arm passed.
    project.store.write_text("".join(
        json.dumps({"arm_id": arm_id(a), "task_id": a.split("[")[0], "state": "PASS"}) + "\n"
        for a in shards[0]))
    resumed = project.run("tasks", sets, "--jaato-shard=1/2", "--resume")
    assert resumed.ret == 0, resumed.stdout.str()
    resumed.assert_outcomes(deselected=16)


def test_a_shard_with_no_arm_exits_as_pytest_does_with_nothing_selected(project):
    project.task("only")
    result = project.run("tasks", "--jaato-shard=2/2")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.assert_outcomes(deselected=1)
    assert not project.store.exists() and not project.run_dirs()  # nothing started, nothing written


def test_a_conftests_tryfirst_deselection_comes_after_the_split(project):
    """A conftest that deselects per machine, tryfirst: every machine still splits the
    same collection, so what it drops is dropped from its own shard only."""
    for name in ("one", "two", "three", "four", "five", "six"):
        project.task(name)

    def shard_items(i: int) -> set[str]:
        result = project.run("tasks", "--co", "-q", f"--jaato-shard={i}/2")
        return {line.split("::", 1)[1] for line in result.outlines if "task.yaml::" in line}

    plain = [shard_items(1), shard_items(2)]
    assert plain[0] | plain[1] and not plain[0] & plain[1]
    dropped = sorted(plain[0])[0]
    project.write("conftest.py", f"""
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_modifyitems(config, items):
            items[:] = [i for i in items if i.name != {dropped!r}]
        """)
    assert shard_items(1) == plain[0] - {dropped}
    assert shard_items(2) == plain[1]
