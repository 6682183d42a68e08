"""The scripted model server on its own: HTTP shapes, the script, faults, records, CLI.

No daemon here -- these hit the server with urllib, raw sockets and the openai client
(the same client the daemon's ``vllm`` provider uses).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest
import yaml

from pytest_jaato_eval.testing.model_server import (
    DEFAULT_MAX_MODEL_LEN,
    ScriptedModel,
    ToolCall,
    Turn,
    load_script,
    scripted_model_fixture,
    wire_tool_name,
)

MESSAGES = [{"role": "user", "content": "write hello.txt"}]


def client(model: ScriptedModel, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=model.base_url, api_key="unused", max_retries=retries, timeout=10)


def offered(*names: str) -> list[dict]:
    """Tools as jaato offers them: under hashed ids."""
    return [{"type": "function", "function": {"name": wire_tool_name(n), "description": n,
                                              "parameters": {"type": "object"}}} for n in names]


def stream(model: ScriptedModel, **kwargs):
    return client(model).chat.completions.create(
        model=model.model, messages=MESSAGES, stream=True,
        stream_options={"include_usage": True}, **kwargs)


def collect(chunks) -> tuple[str, list[dict], str | None, object]:
    """Reassemble a streamed reply the way the vllm provider does."""
    text, calls, finish, usage = [], {}, None, None
    for chunk in chunks:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
            for tc in choice.delta.tool_calls or []:
                acc = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                acc["id"] = tc.id or acc["id"]
                if tc.function and tc.function.name:
                    acc["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    acc["arguments"] += tc.function.arguments
            if choice.finish_reason:
                finish = choice.finish_reason
    return "".join(text), [calls[i] for i in sorted(calls)], finish, usage


def raw_post(model: ScriptedModel, body: dict) -> socket.socket:
    """Send a chat request on a bare socket (to control when the client hangs up)."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", model.port), timeout=5)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return sock


# ----------------------------------------------------------------- endpoints


def test_binds_loopback_only_on_an_ephemeral_port():
    with ScriptedModel([Turn.text("x")]) as model:
        assert model._server.server_address[0] == "127.0.0.1"
        assert model.port > 0
        assert model.url == f"http://127.0.0.1:{model.port}"
        assert model.base_url == model.url + "/v1"


def test_health_and_models_report_the_model_and_its_context_window():
    with ScriptedModel([Turn.text("x")], model="m-1", max_model_len=4096) as model:
        with urllib.request.urlopen(model.url + "/health") as resp:
            assert resp.status == 200
        with urllib.request.urlopen(model.base_url + "/models") as resp:
            data = json.load(resp)["data"]
        assert [(d["id"], d["max_model_len"]) for d in data] == [("m-1", 4096)]
        assert [m.id for m in client(model).models.list()] == ["m-1"]
        # Neither endpoint consumes a script position.
        assert model.turns_served == 0
        assert [(r.method, r.path, r.outcome) for r in model.requests] == [
            ("GET", "/health", "ok"), ("GET", "/v1/models", "ok"), ("GET", "/v1/models", "ok")]


def test_unknown_route_is_404_and_not_a_turn():
    with ScriptedModel([Turn.text("x")]) as model:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(model.url + "/v2/nothing")
        assert err.value.code == 404
        assert model.turns_served == 0
        assert model.requests[0].outcome == "not_found"


# ----------------------------------------------------------------- replies


def test_streamed_tool_call_uses_the_hashed_id_jaato_offered():
    turn = Turn.tool("writeNewFile", path="hello.txt", content="hi there, a longish body\n")
    with ScriptedModel([turn]) as model:
        text, calls, finish, usage = collect(stream(model, tools=offered("writeNewFile", "readFile")))
    assert text == ""
    assert finish == "tool_calls"
    assert len(calls) == 1
    assert calls[0]["id"] == "call_0_0"
    assert calls[0]["name"] == wire_tool_name("writeNewFile") == "t_f91c6032"
    assert json.loads(calls[0]["arguments"]) == {"path": "hello.txt", "content": "hi there, a longish body\n"}
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_tool_name_modes():
    def name_sent(mode: str, tools: list[dict] | None) -> str:
        with ScriptedModel([Turn.tool("signal_completion", answer="a")], tool_names=mode) as model:
            kwargs = {"tools": tools} if tools else {}
            return collect(stream(model, **kwargs))[1][0]["name"]

    assert name_sent("auto", None) == "signal_completion"  # not offered: as scripted
    assert name_sent("auto", offered("signal_completion")) == wire_tool_name("signal_completion")
    assert name_sent("real", offered("signal_completion")) == "signal_completion"
    assert name_sent("wire", None) == wire_tool_name("signal_completion")
    with pytest.raises(ValueError):
        ScriptedModel([Turn.text("x")], tool_names="hashed")


def test_narration_and_parallel_calls_in_one_turn():
    turn = Turn.tools(("readFile", {"path": "a"}), ToolCall("readFile", {"path": "b"})).with_text("Reading both.")
    with ScriptedModel([turn], chunk_chars=3) as model:
        text, calls, finish, _ = collect(stream(model))
    assert text == "Reading both."
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("call_0_0", "readFile", {"path": "a"}), ("call_0_1", "readFile", {"path": "b"})]
    assert finish == "tool_calls"


def test_unreadable_arguments_are_sent_verbatim():
    with ScriptedModel([Turn("reply", tool_calls=(ToolCall("writeNewFile", "{'path': oops"),))]) as model:
        calls = collect(stream(model))[1]
    assert calls[0]["arguments"] == "{'path': oops"


def test_text_turn_streams_prose_with_scripted_usage_and_cost():
    turn = Turn.text("All done: the file is written and checked.").with_usage(
        1200, 30, cached_tokens=1000, cost=0.0042)
    with ScriptedModel([turn], chunk_chars=5) as model:
        chunks = list(stream(model))
    text, calls, finish, usage = collect(chunks)
    assert text == "All done: the file is written and checked."
    assert calls == [] and finish == "stop"
    # Several content deltas, then the finish chunk, then the usage chunk (no choices).
    assert sum(bool(c.choices and c.choices[0].delta.content) for c in chunks) >= 8
    assert chunks[-1].choices == []
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (1200, 30, 1230)
    assert usage.prompt_tokens_details.cached_tokens == 1000
    assert usage.model_extra["cost"] == 0.0042


def test_usage_chunk_only_when_the_client_asks_for_it():
    with ScriptedModel([Turn.text("hi")]) as model:
        chunks = list(client(model).chat.completions.create(model=model.model, messages=MESSAGES, stream=True))
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_finish_reason_can_be_scripted():
    with ScriptedModel([Turn.text("cut o", finish_reason="length")]) as model:
        assert collect(stream(model))[2] == "length"


def test_default_usage_is_a_deterministic_estimate():
    with ScriptedModel([Turn.text("twelve chars")]) as model:
        first = collect(stream(model))[3]
        second = collect(stream(model))[3]
    assert (first.prompt_tokens, first.completion_tokens) == (second.prompt_tokens, second.completion_tokens)
    assert first.completion_tokens == 3  # ceil(12 / 4)
    assert first.prompt_tokens >= len(json.dumps(MESSAGES)) // 4


def test_non_streamed_request_gets_one_json_completion():
    turns = [Turn.tool("writeNewFile", path="a.txt", content="x").with_usage(10, 2), Turn.text("done")]
    with ScriptedModel(turns) as model:
        c = client(model)
        first = c.chat.completions.create(model=model.model, messages=MESSAGES, tools=offered("writeNewFile"))
        second = c.chat.completions.create(model=model.model, messages=MESSAGES)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    call = choice.message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_0_0", wire_tool_name("writeNewFile"), {"path": "a.txt", "content": "x"})
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (10, 2)
    assert second.choices[0].message.content == "done"
    assert second.choices[0].finish_reason == "stop"


def test_delay_answers_late_but_answers():
    with ScriptedModel([Turn.text("slow").after(0.4)]) as model:
        started = time.monotonic()
        assert collect(stream(model))[0] == "slow"
        assert time.monotonic() - started >= 0.4


# ----------------------------------------------------------------- the script


def test_each_chat_request_takes_the_next_turn_then_the_last_repeats():
    with ScriptedModel([Turn.text("one"), Turn.text("two")]) as model:
        answers = [collect(stream(model))[0] for _ in range(4)]
        assert answers == ["one", "two", "two", "two"]
        assert model.turns_served == 4 and model.exhausted
        assert [r.turn_index for r in model.chat_requests] == [0, 1, 2, 3]


def test_when_exhausted_names_the_fallback_turn():
    with ScriptedModel([Turn.text("one")], when_exhausted=Turn.fault(500, "script exhausted")) as model:
        assert collect(stream(model))[0] == "one"
        assert not model.exhausted
        with pytest.raises(openai.InternalServerError, match="script exhausted"):
            collect(stream(model))
        assert model.exhausted


def test_a_script_needs_a_turn():
    with pytest.raises(ValueError):
        ScriptedModel([])
    with ScriptedModel([], when_exhausted=Turn.text("only")) as model:
        assert collect(stream(model))[0] == "only"


def test_retries_consume_script_positions():
    # The openai client retries a 429 itself; the retry gets the next turn.
    with ScriptedModel([Turn.fault(429, retry_after=0), Turn.text("recovered")]) as model:
        reply = client(model, retries=2).chat.completions.create(model=model.model, messages=MESSAGES)
        assert reply.choices[0].message.content == "recovered"
        assert [r.outcome for r in model.chat_requests] == ["fault", "ok"]


def test_requests_are_recorded_for_assertions():
    with ScriptedModel([Turn.text("a"), Turn.text("b")]) as model:
        collect(stream(model, tools=offered("writeNewFile")))
        client(model).chat.completions.create(model=model.model, messages=MESSAGES + [
            {"role": "assistant", "content": "a"}, {"role": "user", "content": "again"}])
        first, second = model.wait_for_chat_requests(2, timeout=2)
    assert first.stream and not second.stream
    assert first.offers_tool("writeNewFile") and not first.offers_tool("readFile")
    assert first.tool_names == [wire_tool_name("writeNewFile")]
    assert [m["content"] for m in second.messages] == ["write hello.txt", "a", "again"]
    assert first.body["stream_options"] == {"include_usage": True}
    assert first.headers["content-type"] == "application/json"
    assert first.duration is not None and first.duration >= 0
    assert first.turn == Turn.text("a")


def test_wait_for_chat_requests_times_out():
    with ScriptedModel([Turn.text("a")]) as model:
        with pytest.raises(TimeoutError):
            model.wait_for_chat_requests(1, timeout=0.2)


# ----------------------------------------------------------------- faults


def test_fault_429_is_an_openai_rate_limit_error():
    with ScriptedModel([Turn.fault(429, "slow down")]) as model:
        with pytest.raises(openai.RateLimitError) as err:
            collect(stream(model))
    assert err.value.status_code == 429
    assert err.value.body["message"] == "slow down"
    assert model.chat_requests[0].outcome == "fault"


def test_fault_500_is_an_openai_internal_server_error():
    with ScriptedModel([Turn.fault(500)]) as model:
        with pytest.raises(openai.InternalServerError, match="scripted fault: HTTP 500"):
            collect(stream(model))


def test_fault_headers_steer_client_retries():
    with ScriptedModel([Turn.fault(429, retry_after=3, should_retry=False)]) as model:
        req = urllib.request.Request(model.base_url + "/chat/completions", method="POST",
                                     data=json.dumps({"messages": MESSAGES}).encode(),
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req)
        assert err.value.code == 429
        assert err.value.headers["Retry-After"] == "3"
        assert err.value.headers["x-should-retry"] == "false"
        assert json.load(err.value)["error"]["type"] == "rate_limit_error"
        # x-should-retry: false stops the openai client's own retries.
        with pytest.raises(openai.RateLimitError):
            client(model, retries=2).chat.completions.create(model=model.model, messages=MESSAGES)
        assert model.turns_served == 2


def test_fault_status_is_checked():
    with pytest.raises(ValueError):
        Turn.fault(200)


def test_hang_with_seconds_then_drops_the_connection():
    with ScriptedModel([Turn.hang(0.5)]) as model:
        started = time.monotonic()
        with pytest.raises(openai.APIConnectionError):
            collect(stream(model))
        assert 0.5 <= time.monotonic() - started < 5
        assert model.chat_requests[0].outcome == "hang:timeout"


def test_hang_ends_when_the_client_hangs_up():
    with ScriptedModel([Turn.hang()]) as model:
        sock = raw_post(model, {"messages": MESSAGES, "stream": True})
        (request,) = model.wait_for_chat_requests(1)
        time.sleep(0.2)
        assert request.outcome == "pending"
        sock.close()
        assert model.wait_for_outcome(request, timeout=3) == "hang:client_closed"


def test_hang_ends_when_the_server_stops():
    model = ScriptedModel([Turn.hang()]).start()
    sock = raw_post(model, {"messages": MESSAGES, "stream": True})
    try:
        (request,) = model.wait_for_chat_requests(1)
        started = time.monotonic()
        model.stop()
        assert time.monotonic() - started < 3
        assert request.outcome == "hang:server_stopped"
        assert sock.recv(1) == b""  # the client sees the connection close, no response
    finally:
        sock.close()


def test_malformed_garbage_line_breaks_the_client_parser():
    with ScriptedModel([Turn.malformed("garbage")]) as model:
        with pytest.raises(json.JSONDecodeError):
            collect(stream(model))
        assert model.chat_requests[0].outcome == "malformed"


def test_malformed_truncated_drops_mid_body():
    with ScriptedModel([Turn.malformed("truncated")]) as model:
        with pytest.raises(openai.APIConnectionError) as err:
            collect(stream(model))
    causes, exc = [], err.value
    while exc is not None:
        causes.append(str(exc))
        exc = exc.__cause__
    assert any("incomplete chunked read" in c for c in causes)


def test_malformed_unterminated_ends_cleanly_without_a_finish_reason():
    with ScriptedModel([Turn.malformed("unterminated")]) as model:
        text, calls, finish, usage = collect(stream(model))
    assert (text, calls, finish, usage) == ("partial ", [], None, None)


def test_malformed_mode_is_checked():
    with pytest.raises(ValueError):
        Turn.malformed("sideways")


# ----------------------------------------------------------------- lifecycle


def test_stop_closes_idle_keep_alive_connections():
    model = ScriptedModel([Turn.text("x")]).start()
    port = model.port
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    model.stop()
    assert sock.recv(1) == b""
    sock.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)


def test_fixture_factory_starts_and_stops_every_model():
    gen = scripted_model_fixture()
    start = next(gen)
    first = start([Turn.text("a")])
    second = start([Turn.text("b")], model="other")
    assert collect(stream(first))[0] == "a"
    assert collect(stream(second))[0] == "b"
    ports = [first.port, second.port]
    with pytest.raises(StopIteration):
        next(gen)
    for port in ports:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1)


def test_the_plugin_loads_no_server_until_a_model_is_asked_for():
    # The plugin declares the fixture in every pytest run; the server must not come with it.
    probe = "\n".join([
        "import sys",
        "import pytest, pytest_jaato_eval.plugin",
        "server = 'pytest_jaato_eval.testing.server'",
        "print(sorted(m for m in ('http.server', server) if m in sys.modules))",
        "from pytest_jaato_eval.testing.fixture import scripted_model_fixture",
        "from pytest_jaato_eval.testing.script import Turn",
        "gen = scripted_model_fixture()",
        "model = next(gen)([Turn.text('x')])",
        "print(server in sys.modules, model.url.startswith('http://127.0.0.1:'))",
        "gen.close()",
    ])
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "True True"]


# ----------------------------------------------------------------- profile and pricing


def test_profile_points_the_vllm_provider_here(tmp_path):
    with ScriptedModel([Turn.text("x")], model="scripted-7") as model:
        path = model.write_profile(tmp_path / "cfg", name="p1", plugins=["file_edit(preload)", "permission"],
                                   plugin_configs={"file_edit": {"x": 1}}, max_turns=3)
        profile = yaml.safe_load(path.read_text())
        assert path == tmp_path / "cfg" / "profiles" / "p1.yaml"
        assert profile["name"] == "p1"
        assert profile["provider"] == "vllm" and profile["model"] == "scripted-7"
        assert profile["plugin_configs"]["vllm"] == {"host": model.url}
        assert profile["plugin_configs"]["permission"] == {"policy": {"defaultPolicy": "allow"}}
        assert profile["plugin_configs"]["file_edit"] == {"x": 1}
        assert profile["completion_payload_schema"]["required"] == ["answer"]
        assert profile["runtime_limits"] == {"unload_grace_seconds": 0}
        assert profile["max_turns"] == 3
        bare = model.profile(plugins=[], completion_payload_schema=None, unload_grace_seconds=None)
        assert "permission" not in bare["plugin_configs"]
        assert "completion_payload_schema" not in bare and "runtime_limits" not in bare


def test_host_less_profile_and_env_file(tmp_path):
    (tmp_path / ".env").write_text("JAATO_PROFILE_SET=scripted\nVLLM_HOST=http://stale:1\n")
    with ScriptedModel([Turn.text("x")]) as model:
        path = model.write_profile(tmp_path / "cfg", "writer", profile_set="scripted", host=False)
        assert path == tmp_path / "cfg" / "profiles" / "scripted" / "writer.yaml"
        assert yaml.safe_load(path.read_text())["plugin_configs"]["vllm"] == {}
        model.write_env(tmp_path, AI_RETRY_ATTEMPTS=1)
        assert (tmp_path / ".env").read_text().splitlines() == [
            "JAATO_PROFILE_SET=scripted", f"VLLM_HOST={model.url}", "AI_RETRY_ATTEMPTS=1"]
        assert model.env == {"VLLM_HOST": model.url}


def test_pricing_table_is_written_where_the_daemon_reads_it(tmp_path):
    with ScriptedModel([Turn.text("x")]) as model:
        path = model.write_pricing(tmp_path, input_per_token=1e-6, output_per_token=1e-5)
    assert path == tmp_path / ".jaato" / "pricing.json"
    assert json.loads(path.read_text()) == {
        "scripted": {"input_cost_per_token": 1e-6, "output_cost_per_token": 1e-5}}


# ----------------------------------------------------------------- script files


ALL_KINDS = [
    Turn.tool("writeNewFile", path="hello.txt", content="hi\n").with_usage(900, 40, cost=0.01),
    Turn.tools(("readFile", {"path": "a"}), ("readFile", {"path": "b"})).with_text("Reading."),
    Turn.text("prose", finish_reason="length"),
    Turn.fault(429, "slow", retry_after=2, should_retry=False),
    Turn.hang(3.5),
    Turn.hang(),
    Turn.malformed("truncated"),
    Turn.text("late").after(1.5),
]


def test_turns_round_trip_through_their_dict_form():
    for turn in ALL_KINDS:
        assert Turn.from_dict(json.loads(json.dumps(turn.to_dict()))) == turn


def test_turn_dict_form_rejects_ambiguity():
    with pytest.raises(ValueError):
        Turn.from_dict({"fault": 429, "hang": 3})
    with pytest.raises(ValueError):
        Turn.from_dict({"args": {}})


def test_load_script_json_and_yaml(tmp_path):
    as_json = tmp_path / "s.json"
    as_json.write_text(json.dumps([t.to_dict() for t in ALL_KINDS]))
    spec = load_script(as_json)
    assert spec.turns == tuple(ALL_KINDS)
    assert (spec.model, spec.max_model_len, spec.when_exhausted) == ("scripted", DEFAULT_MAX_MODEL_LEN, None)

    as_yaml = tmp_path / "s.yaml"
    as_yaml.write_text(
        "model: m2\n"
        "max_model_len: 8192\n"
        "when_exhausted: {fault: 500, message: out of script}\n"
        "turns:\n"
        "  - {tool: writeNewFile, args: {path: hello.txt, content: \"hi\\n\"}}\n"
        "  - tool: signal_completion\n"
        "    args: {answer: done}\n"
        "    usage: {prompt_tokens: 900, completion_tokens: 40}\n")
    spec = load_script(as_yaml)
    assert spec.model == "m2" and spec.max_model_len == 8192
    assert spec.when_exhausted == Turn.fault(500, "out of script")
    assert spec.turns == (Turn.tool("writeNewFile", path="hello.txt", content="hi\n"),
                          Turn.tool("signal_completion", answer="done").with_usage(900, 40))
    with ScriptedModel.from_file(as_yaml, max_model_len=100) as model:
        assert (model.model, model.max_model_len) == ("m2", 100)

    bad = tmp_path / "bad.yaml"
    bad.write_text("turns: nope\n")
    with pytest.raises(ValueError):
        load_script(bad)


def test_cli_serves_a_script_file_and_prints_its_url(tmp_path):
    script = tmp_path / "script.yaml"
    script.write_text("- {text: from the cli}\n")
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_jaato_eval.testing.model_server", "--script", str(script), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        reply = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=10) \
            .chat.completions.create(model="scripted", messages=MESSAGES)
        assert reply.choices[0].message.content == "from the cli"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "POST /v1/chat/completions turn=0:reply -> ok" in err
    assert "served 1 chat requests" in err
