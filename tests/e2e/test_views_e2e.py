"""Every view of a real run tells one account of it, against a real daemon: the terminal,
pytest-html, the HTML report, JUnit, the step summary, `report` in each format and `show`;
`report` exits as the run did; the documented CI steps run clean; a slow arm shows it is
alive."""
from __future__ import annotations

import bisect
import csv
import html as htmllib
import io
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml
from jaato_project import REPO, SCHEMA

from pytest_jaato_eval.results import inference
from pytest_jaato_eval.results.account import account, noted_lines
from pytest_jaato_eval.results.pivot import Pivot, headline_row, render_pivot
from pytest_jaato_eval.testing.model_server import Turn

pytestmark = pytest.mark.daemon

STEADY = [{"kind": "script", "run": "grep -qx STEADY answer.txt"}]


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_jaato_eval", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def noted_rows(page: str) -> list[tuple[str, str, str]]:
    """The arms-that-did-not-pass table of an HTML page: (arm, outcome, why) per row."""
    table = re.search(r'<table class="[^"]*noted">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td></tr>",
                      table)
    return [tuple(htmllib.unescape(cell) for cell in row) for row in rows]


def mixed(project) -> None:
    """PASS, FAIL, BLOCKED in setup (preflight), BLOCKED at run time, and an xfail arm."""
    project.task("pass")
    project.task("fail", graders=STEADY)
    project.task("blocked-setup", extra={"harness": {"profile": "writer", "profile_set": "nope"}})
    project.task("blocked-run", graders=[{"kind": "script", "run": "no-such-command-jaato-eval"}])
    project.task("xfail", graders=STEADY, extra={"marks": [{"xfail": "known bug"}]})


def test_every_view_of_one_mixed_run_agrees(project):
    mixed(project)
    root = project.root
    summary = root / "step-summary.md"
    project.monkeypatch.setenv("COLUMNS", "80")
    project.monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project.monkeypatch.delenv("CI", raising=False)
    result = project.run("tasks", f"--junitxml={root / 'j.xml'}", f"--html={root / 'ph.html'}",
                         f"--jaato-html={root / 'o.html'}")
    out = result.stdout.str()
    assert result.ret == 1, out
    assert result.parseoutcomes() == {"failed": 1, "passed": 1, "xfailed": 1, "blocked": 2}

    # The truth, read from the store by the one account every view is made from.
    acc = account(Pivot.of_store(project.store))
    truth = [(n.arm_id, n.outcome, n.why) for n in acc.noted]
    assert [(a, o) for a, o, _ in truth] == [
        ("fail@echo#0", "FAIL"), ("blocked-run@echo#0", "BLOCKED"),
        ("blocked-setup@nope#0", "BLOCKED"), ("xfail@echo#0", "XFAIL")]
    why = {a: w for a, _, w in truth}
    assert why["fail@echo#0"] == "script:grep -qx STEADY answer.txt: exit 1, expected 0"
    assert why["blocked-setup@nope#0"].startswith("profile set 'nope' not found")

    # The terminal: the pivot is the store's, fitted to 80 columns, every line within them.
    lines = result.stdout.lines
    start = lines.index(next(line for line in lines if "jaato-eval pivot" in line)) + 1
    stop = next(i for i, line in enumerate(lines) if line.startswith("store: "))
    pivot_lines = lines[start:stop - 1]
    assert pivot_lines == render_pivot(acc.cells, width=80)
    assert all(len(line) <= 80 for line in pivot_lines)
    # Each non-PASS line says why, in pytest's own words.
    result.stdout.fnmatch_lines([
        "FAILED tasks/fail/task.yaml::fail[[]echo-r0[]] - script:grep -qx STEADY*"])
    for arm_id, outcome, reason in truth:
        if outcome == "BLOCKED":
            task, pset = arm_id.split("#")[0].split("@")
            assert f"BLOCKED tasks/{task}/task.yaml::{task}[{pset}-r0] - {reason}" in out
    records = {r["arm_id"]: r for r in project.records()}
    for arm_id, record in records.items():  # one labelled duration, as the record has it
        assert f"{arm_id}  arm {record['arm_seconds']:.1f} s" in out, arm_id

    # pytest-html: the same list in its summary (the preflight-BLOCKED arm too), and a
    # BLOCKED arm's log in words, not a (path, line, reason) tuple.
    page = (root / "ph.html").read_text()
    assert noted_rows(page) == truth
    assert "No arm was blocked" not in page
    blob = json.loads(htmllib.unescape(re.search(r'data-jsonblob="([^"]*)"', page).group(1)))
    logs = {node: htmllib.unescape(e["log"]) for node, entries in blob["tests"].items()
            for e in entries if "blocked-setup" in node}
    (log,) = logs.values()
    assert log.startswith("BLOCKED: profile set 'nope' not found") and "('" not in log

    # The HTML report and the step summary: the same list.
    report_page = (root / "o.html").read_text()
    assert noted_rows(report_page) == truth
    # a preflight-BLOCKED arm's evidence says why (it has no grader to); the columns explained
    evidence = report_page[report_page.index('id="task-blocked-setup"'):]
    evidence = evidence[evidence.index("<h3>Evidence</h3>"):evidence.index("</section>")]
    assert "<b>blocked</b>: profile set &#39;nope&#39; not found" in evidence
    assert "nudges n/2: completion reminders jaato sent the agent" in report_page
    text = summary.read_text()
    # each profile set's headline over the sweep: the terminal's (in its pivot lines), in
    # pytest-html's summary, the HTML report and the step summary alike
    (head,) = [h for h in inference.headlines(acc.cells) if h.profile_set == "echo"]
    ci = headline_row(head)["95% CI"]
    for view in (page, report_page):
        sweep = view[view.index("Profile sets over the sweep"):]
        assert f'<td class="num">{ci}</td>' in sweep[:sweep.index("</table>")]
    assert f" {ci} |" in text.split("**Profile sets over the sweep")[1].split("**Arms")[0]
    md = [tuple(cell.strip().replace("\\", "") for cell in row.split("|")[1:4])
          for row in text.split("**Arms that did not pass**")[1].splitlines()
          if row.startswith("| ") and not row.startswith(("| arm ", "| --- "))]
    assert md == truth

    # JUnit: BLOCKED stays a skip, with a location pytest would write, and the arm's time.
    suite = ElementTree.parse(root / "j.xml").getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped"), suite.get("errors")) == ("1", "3", "0")
    xml = (root / "j.xml").read_text()
    assert "task.yaml:0:" not in xml and "task.yaml:1: BLOCKED: profile set 'nope'" in xml
    for case in suite.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        record = records[props["jaato_arm_id"]]
        assert props["jaato_arm_seconds"] == f"{record['arm_seconds']:.3f}"

    # `report`, in every format, from the store: the same list, and the run's exit status.
    text_report = cli("report", project.store)
    assert text_report.returncode == result.ret
    listed = text_report.stdout.split("arms that did not pass")[1]
    assert ("arms that did not pass" + listed).splitlines() == noted_lines(acc)
    as_json = cli("report", project.store, "--format", "json")
    assert as_json.returncode == result.ret
    assert [(n["arm_id"], n["outcome"], n["why"])
            for n in json.loads(as_json.stdout)["not_passed"]["listed"]] == truth
    as_csv = cli("report", project.store, "--format", "csv")
    assert as_csv.returncode == result.ret
    counts = [(row["task"], row["pass"], row["fail"], row["blocked"])
              for row in csv.DictReader(io.StringIO(as_csv.stdout)) if row["scope"] == "cell"]
    assert counts == [(c.task_id, str(c.passed), str(c.failed), str(c.blocked))
                      for c in acc.cells]
    # `show`: the same two durations, labelled.
    shown = cli("show", project.store, "fail@echo#0").stdout
    fail = records["fail@echo#0"]
    assert (f"arm {fail['arm_seconds']:.1f} s · session {fail['duration_seconds']:.1f} s"
            in shown)

    # -v keeps pytest's status words where tools parse them, and JUnit can go red.
    verbose = project.run("tasks", "-v", "-k", "fail and not xfail or blocked-setup",
                          "--jaato-junit-blocked=error", f"--junitxml={root / 'j2.xml'}")
    assert verbose.ret == 1
    verbose.stdout.fnmatch_lines([
        "tasks/fail/task.yaml::fail[[]echo-r0[]] FAILED (arm *",
        "FAILED tasks/fail/task.yaml::fail[[]echo-r0[]] - script:grep -qx STEADY*"])
    suite = ElementTree.parse(root / "j2.xml").getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped"), suite.get("errors")) == ("1", "0", "1")
    error = next(case.find("error") for case in suite.iter("testcase")
                 if case.find("error") is not None)
    assert error.get("message").startswith("BLOCKED: profile set 'nope' not found")


def test_report_exits_as_the_run_that_wrote_the_store(project):
    project.task("xfail", graders=STEADY, extra={"marks": [{"xfail": "known bug"}]})
    project.task("blocked-setup", extra={"harness": {"profile": "writer", "profile_set": "nope"}})
    project.write("tasks/broken/task.yaml", "id: broken\nenvironment: [not, a, mapping]\n")
    # Only an xfail arm, failing as expected: the run exits 0, and so does `report`.
    only_xfail = project.run("tasks/xfail")
    assert only_xfail.ret == 0
    assert cli("report", project.store).returncode == 0
    # A broken manifest run past, and only BLOCKED arms: no arm failed, so not 1.
    store = project.root / "continued.jsonl"
    continued = project.run("tasks/broken", "tasks/blocked-setup",
                            "--continue-on-collection-errors", f"--jaato-out={store}")
    assert continued.ret == 2, continued.stdout.str()
    assert cli("report", store).returncode == 2
    # Stopped by the broken manifest: the hint is to fix it, not to --resume.
    stopped = project.run("tasks/broken", "tasks/blocked-setup",
                          f"--jaato-out={project.root / 'stopped.jsonl'}")
    assert stopped.ret == 2
    stopped.stdout.fnmatch_lines(["1 arm did not run: pytest stopped at the collection errors "
                                  "above; fix them, or run the rest with "
                                  "--continue-on-collection-errors"])
    assert "--resume" not in stopped.stdout.str()


def workflow_steps() -> dict[str, list[dict]]:
    """The GitHub workflow of docs/running.md, as written: its jobs' steps."""
    text = (REPO / "docs" / "running.md").read_text()
    (block,) = [b for b in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)
                if b.startswith("# .github/workflows/")]
    flow = yaml.safe_load(block)
    return {"env": flow["env"], **{name: job["steps"] for name, job in flow["jobs"].items()}}


@pytest.mark.slow
def test_the_documented_ci_steps_print_no_error_on_a_healthy_sweep(project):
    """Each `run:` step of the shard and merge jobs, run by bash as GitHub runs it. The
    sweep is offline here: SWEEP names the project's echo tasks on the suite's daemon in
    place of the recipe's `--profile-set=openrouter -n 2`; every command is as written."""
    for task in ("write-file", "config-file", "judged-file"):
        project.task(task)
    steps = workflow_steps()
    summary = project.root / "summary.md"
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "SHARDS": str(steps["env"]["SHARDS"]), "SWEEP": "tasks/",
           "GITHUB_STEP_SUMMARY": str(summary), "TMPDIR": str(project.tmp),
           "PYTEST_ADDOPTS": f"-p no:cacheprovider -p no:xdist -p no:html -p no:hypothesispytest "
                             f"--jaato-socket={project.daemon.socket_path}"}
    env.pop("CI", None)

    def run(step: dict, **values: str) -> subprocess.CompletedProcess:
        script = step["run"]
        for key, value in values.items():
            script = script.replace("${{ matrix.%s }}" % key, value)
        assert "${{" not in script, script
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                              cwd=project.root, env=env, capture_output=True, text=True,
                              timeout=900)

    said = []
    shard_job = [s for s in steps["shard"] if "run" in s and "pip install" not in s["run"]]
    for shard in range(1, int(steps["env"]["SHARDS"]) + 1):
        for step in shard_job:
            done = run(step, shard=str(shard))
            assert done.returncode == 0, (step, done.stdout, done.stderr)
            said.append(done.stdout + done.stderr)
    for step in [s for s in steps["merge"] if "run" in s and "pip install" not in s["run"]]:
        done = run(step)
        assert done.returncode == 0, (step, done.stdout, done.stderr)  # the gate: all passed
        said.append(done.stdout + done.stderr)
    # And a resume that finds nothing to run, without --co: no alarm either.
    again = run({"run": "pytest $SWEEP --resume --jaato-out=merged.jsonl || test $? -eq 5"})
    assert again.returncode == 0, again.stdout
    said.append(again.stdout + again.stderr)
    for text in said:  # no `error:` line, no tamper alarm, no traceback
        assert not re.search(r"(^|\s)error:", text, re.I | re.M), text
        assert "somebody else" not in text and "Traceback" not in text, text
    merged = [json.loads(line) for line in (project.root / "merged.jsonl").read_text().splitlines()]
    assert sorted(r["arm_id"] for r in merged) == ["config-file@echo#0", "judged-file@echo#0",
                                                   "write-file@echo#0"]
    assert "### jaato-eval pivot" in summary.read_text()
    assert (project.root / "report.html").is_file()


def test_a_slow_arm_shows_it_is_alive(project, scripted_model):
    # A model slow on purpose: each reply waits, as a slow provider's would.
    model = scripted_model([
        Turn.tool("writeNewFile", path="answer.txt", content="READY\n").after(4),
        Turn.tool("signal_completion", answer="done").after(4)])
    path = project.task("slow")
    model.write_profile(path.parent / ".jaato", "slowpoke", profile_set="echo",
                        completion_payload_schema=SCHEMA)
    path.write_text(path.read_text().replace("profile: writer", "profile: slowpoke"))
    # Its own process, its output a pipe as a CI log's is: heartbeat lines, past pytest's
    # capture, read as they arrive.
    ret, chunks = project.piped("tasks", "--jaato-heartbeat=1")
    out = b"".join(chunks).decode()
    assert ret == 0, out
    # Each heartbeat arrived whole, its newline with it, before any of the arm's line: the
    # last one too, with no next line to end it.
    whole = b"".join(chunks)
    ends = list(itertools.accumulate(len(c) for c in chunks))

    def chunk_of(offset: int) -> int:
        return bisect.bisect_right(ends, offset)

    passed = whole.index(b"PASS    slow@echo#0")
    last_beat_ends = whole.index(b"\n", whole.rindex(b"still running", 0, passed))
    assert chunk_of(last_beat_ends) < chunk_of(passed), chunks
    beats = re.findall(r"^jaato-eval: still running: slow@echo#0: (\d+) s, (.*)$", out, re.M)
    assert beats, out
    phases = {phase for _, phase in beats}
    assert all(re.fullmatch(r"setting up|waiting for the private daemon|"
                            r"opening the session( \(try \d\))?|turn \d+"
                            r"(, tool \w+)?|grading \S.*", p) for p in phases), phases
    assert any(p.startswith("turn") for p in phases), phases  # it said where the agent was
    # Each heartbeat on a line of its own; the arm's own line still comes whole after them.
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        "tasks/slow/task.yaml*", "jaato-eval: still running: *", "  PASS    slow@echo#0  arm * s*"])
    assert out.count("tasks/slow/task.yaml") == 1  # the file is named once


def test_an_arms_teardown_error_is_a_line_of_its_own(project):
    project.task("write-file")
    project.write("tasks/conftest.py", """
        import pytest

        @pytest.fixture(autouse=True)
        def breaks_on_the_way_out():
            yield
            raise RuntimeError("the project's fixture broke in teardown")
    """)
    result = project.run("tasks")
    assert result.ret == 1  # pytest's: an error in teardown
    result.stdout.fnmatch_lines([
        "  PASS    write-file@echo#0  arm * s*",
        "  ERROR   write-file@echo#0  teardown: RuntimeError: the project's fi*"])
