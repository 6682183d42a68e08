"""Transcripts (results/transcripts.py): built from what the engine observed, bounded with
every cut said, masked, compressed beside the store, read back only as a file name in the
store's folder, set aside with the store, copied by merge, shown by `show` and the report.

The histories here have the daemon's wire shape (what `request_history` answers, captured
from a real session); the end-to-end tests run the daemon itself.
"""
from __future__ import annotations

import gzip
import json

import pytest

from pytest_jaato_eval.engine.agent_run import AgentRun
from pytest_jaato_eval.redact import Redactor
from pytest_jaato_eval.report import html
from pytest_jaato_eval.results import transcripts
from pytest_jaato_eval.cli import main
from pytest_jaato_eval.results.store import Store
from pytest_jaato_eval.results.transcript_view import text_lines
from pytest_jaato_eval.testing.records import arm_record, write_store
from document_checks import parse

SECRET = "sk-live-0123456789abcdef"


def history(text="Write READY.", answer="done", result=None):
    return [
        {"role": "user", "parts": [{"type": "text", "text": text}]},
        {"role": "model", "model": "echo", "provider": "echo", "parts": [
            {"type": "function_call", "call_id": "c1", "name": "writeNewFile",
             "args": {"path": "answer.txt", "content": "READY\n"}}]},
        {"role": "tool", "parts": [{"type": "function_response", "call_id": "c1",
                                    "name": "writeNewFile", "is_error": False,
                                    "response": result if result is not None
                                    else {"success": True, "size": 6}}]},
        {"role": "model", "parts": [{"type": "text", "text": answer}]},
    ]


def agent_run(**kw) -> AgentRun:
    run = AgentRun(session_id="s-agent", session_ids=["s-agent"], model="echo", provider="echo",
                   payload={"answer": "42"}, history=history(**kw), duration_seconds=0.4,
                   turn_accounting=[{"turn": 0, "prompt": 10, "output": 5, "total": 15,
                                     "duration_seconds": 0.03,
                                     "function_calls": [{"name": "writeNewFile"}]}])
    run.usage.update(cost_usd=0.001, spend_total_tokens=15)
    return run


def judge_run() -> AgentRun:
    return AgentRun(session_id="s-judge", model="echo", provider="echo",
                    payload={"score": 0.2, "errors": ["answer.txt says READY, not 42"]},
                    history=[{"role": "user", "parts": [{"type": "text", "text": "Grade it"}]}])


def build(run=None, graders=(("judge:j", None),)):
    return transcripts.build(arm_id="t@echo#0", task_id="t", run_id="r1",
                             run=run or agent_run(), driver=False,
                             grader_runs=[(g, r or judge_run()) for g, r in graders])


def test_a_transcript_holds_each_sessions_story_and_reads_back():
    document = build()
    agent, judge = document["sessions"]
    assert (agent["role"], judge["role"], judge["grader_id"]) == ("agent", "judge", "judge:j")
    call = agent["messages"][1]["parts"][0]
    assert call["name"] == "writeNewFile" and call["args"]["path"] == "answer.txt"
    assert agent["messages"][2]["parts"][0]["result"] == {"success": True, "size": 6}
    assert agent["turns"][0]["total"] == 15 and agent["usage"]["cost_usd"] == 0.001
    assert document["cuts"] == []
    data = transcripts.encode(document)
    assert gzip.decompress(data) and transcripts.decode(data) == json.loads(
        json.dumps(document))
    text = "\n".join(text_lines(document))
    for said in ("user: Write READY.", "→ writeNewFile", '"path": "answer.txt"',
                 "← writeNewFile", '"size": 6', "agent: done", "turn 1: 10 prompt",
                 "judge (judge:j) session s-judge", "answer.txt says READY, not 42"):
        assert said in text, said


def test_every_cut_is_bounded_and_said():
    run = agent_run(answer="x" * 100_000, result={"out": "y" * 50_000})
    run.history += [{"role": "model", "parts": [{"type": "text", "text": f"m{i}"}]}
                    for i in range(transcripts.MESSAGES + 100)]
    document = build(run)
    agent = document["sessions"][0]
    cuts = document["cuts"]
    assert any("100,000 characters cut to 20,000" in c for c in cuts), cuts
    assert any("(result)" in c for c in cuts)
    assert any("messages of" in c and "cut after the first 50" in c for c in cuts)
    assert len(agent["messages"]) == transcripts.MESSAGES + 1  # the marker says where
    assert agent["messages"][transcripts.HEAD]["role"] == "cut"
    assert "cut to keep the transcript bounded:" in text_lines(document)


def test_the_whole_file_stays_under_its_bound():
    run = agent_run()
    run.history = [{"role": "model", "parts": [{"type": "text", "text": "z" * 19_000}]}
                   for _ in range(transcripts.MESSAGES)]
    document = build(run)
    assert len(json.dumps(document).encode()) <= transcripts.MAX_JSON_BYTES
    assert any("cut from the middle" in c for c in document["cuts"])
    assert len(transcripts.encode(document)) < transcripts.MAX_FILE_BYTES


def test_a_secret_the_agent_saw_is_masked_like_everything_else():
    redact = Redactor({"OPENAI_API_KEY": SECRET})
    document = redact(build(agent_run(text=f"my key is {SECRET}",
                                      result={"env": f"OPENAI_API_KEY={SECRET}"})))
    raw = gzip.decompress(transcripts.encode(document)).decode()
    assert SECRET not in raw and "***(OPENAI_API_KEY)" in raw


@pytest.mark.parametrize("name", ["../escape.json.gz", "/etc/passwd", "a/b.json.gz",
                                  "x.json", "", 7, ".hidden.json.gz"])
def test_a_record_names_a_file_in_the_folder_or_nothing_is_read(tmp_path, name):
    with pytest.raises(transcripts.TranscriptUnreadable):
        transcripts.read(tmp_path / "s.jsonl", name)


def test_a_file_that_unpacks_to_too_much_or_is_no_transcript_is_one_line(tmp_path):
    store = tmp_path / "s.jsonl"
    bomb = gzip.compress(b"0" * (5 * transcripts.MAX_JSON_BYTES))
    transcripts.write(store, "bomb.json.gz", bomb)
    with pytest.raises(transcripts.TranscriptUnreadable, match="unpacks to more than"):
        transcripts.read(store, "bomb.json.gz")
    transcripts.write(store, "other.json.gz", gzip.compress(b'{"x": 1}'))
    with pytest.raises(transcripts.TranscriptUnreadable, match="not a transcript"):
        transcripts.read(store, "other.json.gz")


def _stored(tmp_path, store, arm="t@echo#0", run_id="r1", state="FAIL"):
    name = transcripts.file_name(arm, run_id)
    transcripts.write(store, name, transcripts.encode(build()))
    return arm_record("t", "echo", 0, state, transcript=name, run_id=run_id,
                      evidence=["expected 42, got READY"])


def test_the_store_sets_its_transcripts_aside_with_it(tmp_path):
    store = tmp_path / "results.jsonl"
    write_store(store, [_stored(tmp_path, store, run_id="old")])
    s = Store(store, task_ids={"t"})  # the same tasks: kept as results.previous.jsonl
    s.append(_stored(tmp_path, tmp_path / "elsewhere.jsonl", run_id="new"))
    s.close()
    previous = tmp_path / "results.previous.jsonl"
    assert s.rotated_to == previous
    assert [p.name for p in transcripts.folder_of(previous).iterdir()] == [
        transcripts.file_name("t@echo#0", "old")]
    assert not transcripts.folder_of(store).exists()  # the new run's writer adds its own


def test_merge_copies_the_transcripts_of_the_records_that_count(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_store(a, [_stored(tmp_path, a, run_id="ra")])
    lost = arm_record("u", "echo", 0, "PASS", transcript="gone.json.gz")
    write_store(b, [lost])
    assert main(["merge", str(tmp_path / "m.jsonl"), str(a), str(b)]) == 0
    assert "1 record(s) name a transcript" in capsys.readouterr().err
    folder = transcripts.folder_of(tmp_path / "m.jsonl")
    assert [p.name for p in folder.iterdir()] == [transcripts.file_name("t@echo#0", "ra")]


def test_show_prints_an_arms_story_and_selects_like_k(tmp_path, capsys):
    store = tmp_path / "s.jsonl"
    write_store(store, [_stored(tmp_path, store),
                        arm_record("other", "echo", 0, "PASS")])
    assert main(["show", str(store), "-k", "t and FAIL"]) == 0
    out = capsys.readouterr().out
    story = out.index("→ writeNewFile"), out.index("agent: done"), out.index("verdicts:"), \
        out.index("expected 42, got READY")
    assert list(story) == sorted(story)  # prompt -> tool calls -> answer -> evidence
    assert "other@echo" not in out
    assert main(["show", str(store), "other@echo#0"]) == 0
    assert "transcript: no transcript was kept for this arm" in capsys.readouterr().out
    assert main(["show", str(store), "-k", "nothing"]) == 1
    assert main(["show", str(store), "-k", "t and ("]) == 2
    assert "error: -k 't and ('" in capsys.readouterr().err


def test_the_report_folds_each_transcript_beside_the_evidence(tmp_path):
    store = tmp_path / "s.jsonl"
    write_store(store, [_stored(tmp_path, store), arm_record("other", "echo", 0, "PASS")])
    from pytest_jaato_eval.results.pivot import Pivot
    page = html.render(Pivot.of_store(store), source=str(store))
    assert page.count('<details class="transcript">') == 1  # closed: no `open`
    assert "<details open" not in page and "<script" not in page.lower()
    assert '<details class="call"><summary>&rarr; writeNewFile</summary>' in page
    text = "".join(parse(page).text)
    assert text.index("expected 42, got READY") < text.index("transcript: 2 sessions")


PROBE = """<script>
const shown = el => el.checkVisibility();
const t = document.querySelector("details.transcript");
const call = t.querySelector("details.call pre");
const said = [t.open, shown(t.querySelector(".session")), shown(call)];
t.open = true;
said.push(shown(t.querySelector(".session")), shown(call));
t.querySelector("details.call").open = true;
said.push(shown(call), call.textContent.includes('"path": "answer.txt"'));
document.body.setAttribute("data-probe", JSON.stringify(said));
</script>"""


def test_in_a_real_browser_the_transcript_is_folded_until_opened(tmp_path):
    from document_checks import chromium
    store = tmp_path / "s.jsonl"
    write_store(store, [_stored(tmp_path, store)])
    from pytest_jaato_eval.results.pivot import Pivot
    page = html.render(Pivot.of_store(store), source=str(store))
    probe = tmp_path / "probe.html"  # the report itself has no script: the test adds one
    probe.write_text(page.replace("</body>", PROBE + "</body>"))
    result = chromium("--dump-dom", url=probe.as_uri())
    found = result.stdout.split('data-probe="', 1)[1].split('"', 1)[0].replace("&quot;", '"')
    # closed, nothing of it shown; opened: the session shows, its tool call still folded;
    # the call opened: its arguments show
    assert json.loads(found) == [False, False, False, True, False, True, True], found


def test_the_show_commands_in_the_docs_run_as_written(tmp_path):
    import os
    import re
    import shlex
    import subprocess
    import sys
    from pathlib import Path
    doc = (Path(__file__).parents[2] / "docs" / "reports.md").read_text()
    (block,) = [b for b in re.findall(r"^```bash\n(.*?)^```", doc, re.S | re.M)
                if "pytest_jaato_eval show results.jsonl" in b]
    store = tmp_path / "results.jsonl"
    name = transcripts.file_name("write-file@echo#1", "r1")
    transcripts.write(store, name, transcripts.encode(build()))
    write_store(store, [arm_record("write-file", "echo", 1, "FAIL", transcript=name)])
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    for line in block.strip().splitlines():
        assert shlex.split(line.split("  #")[0])[:3] == ["python", "-m", "pytest_jaato_eval"]
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PATH": path})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "write-file@echo#1: FAIL" in done.stdout and "→ writeNewFile" in done.stdout


def test_a_driver_arm_keeps_every_session_from_its_files_with_its_own_figures():
    saved = {"history": history(), "turn_accounting": [{"turn": 0, "total": 120}],
             "budget_usage": {"usd": 0.0008, "tokens": 240}, "end_reason": "natural"}
    run = AgentRun(session_id="d1", session_ids=["d1", "d2"], model="echo", provider="echo")
    run.usage.update(cost_usd=0.0016)  # the whole arm's: not either session's
    document = transcripts.build(arm_id="d@echo#0", task_id="d", run_id="r", run=run,
                                 driver=True, session_files={"d1": saved}.get)
    one, two = document["sessions"]
    assert (one["role"], one["session_id"], two["session_id"]) == ("driver", "d1", "d2")
    assert one["source"] == transcripts.FROM_FILE
    assert one["usage"] == {"cost_usd": 0.0008, "spend_total_tokens": 240}
    assert one["messages"][1]["parts"][0]["name"] == "writeNewFile"
    assert two["messages"] is None  # no file: said, not invented
    assert "no messages: this session's history was not received" in text_lines(document)[-1]


def test_setting_transcripts_aside_never_fails_the_store(tmp_path):
    store = tmp_path / "results.jsonl"
    write_store(store, [_stored(tmp_path, store, run_id="old")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "results.previous.transcripts").symlink_to(elsewhere)  # planted
    s = Store(store, task_ids={"t"})
    s.append(arm_record("t", "echo", 0, "PASS"))
    s.close()
    assert s.rotated_to == tmp_path / "results.previous.jsonl"
    moved = transcripts.folder_of(s.rotated_to)
    assert moved.is_dir() and not moved.is_symlink() and elsewhere.is_dir()
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
