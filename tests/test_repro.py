"""replaykit.repro: each input form detected, bad input refused with its place, the first failure pinpointed,
keys scrubbed (or nothing written), the folder policy, and the scenarios it writes replaying the bundled
bad transcripts' defects: failing on the matching mutant, passing on the reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from recordings import recorded
from test_redact import planted

from replaykit import cassette, contracts
from replaykit.errors import LocalRequestError, UsageError
from replaykit.repro import KeyLeft, bundle, reproduce
from replaykit.repro import diagnosis as diagnosis_module
from replaykit.repro import reported as reported_module
from replaykit.repro.bundle import CASSETTE, FILES, SCENARIO, SUMMARY, TRANSCRIPT
from replaykit.repro.diagnosis import diagnose
from replaykit.repro.failing import failing_request
from replaykit.repro.reported import read
from replaykit.resources import data_dir
from replaykit.scenario import DEFAULT_TARGET, Target, load, run_scenario
from replaykit.verify import verify_file

JSON = dict[str, Any]
BUNDLED = data_dir("scenarios") / "transcripts"
QUESTION = "When was Python 3.13 released?"
SEARCH_CALL = {"type": "server_tool_use", "id": "srvtoolu_01abc", "name": "web_search",
               "input": {"query": "python 3.13 release"}}
SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01abc", "content": [
    {"type": "web_search_result", "url": "https://www.python.org/downloads/release/python-3130/",
     "title": "Python 3.13.0", "encrypted_content": "EqOpaque", "page_age": None}]}
ANTHROPIC_MESSAGES = [{"role": "user", "content": QUESTION},
                      {"role": "assistant", "content": [SEARCH_CALL, SEARCH_RESULT,
                                                        {"type": "text", "text": "October 7, 2024."}]},
                      {"role": "user", "content": "And 3.14?"}]
OPENAI_INPUT = [{"role": "user", "content": QUESTION},
                {"id": "ws_1", "type": "web_search_call", "status": "completed",
                 "action": {"type": "search", "query": "python 3.13 release"}},
                {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "October 7, 2024.", "annotations": []}]}]
CHAT_MESSAGES = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": QUESTION},
                 {"role": "assistant", "content": "October 7, 2024.", "tool_calls": [
                     {"id": "call_1", "type": "function",
                      "function": {"name": "lookup", "arguments": '{"q": "3.13"}'}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "released 2024-10-07"}]
GEMINI_CONTENTS = [{"role": "user", "parts": [{"text": QUESTION}]},
                   {"role": "model", "parts": [{"text": "October 7, 2024."}]},
                   {"role": "user", "parts": [{"text": "And 3.14?"}]}]


def _file(tmp_path: Path, name: str, doc: object) -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def _jsonl(tmp_path: Path, name: str, lines: list[object]) -> Path:
    return _file(tmp_path, name, "\n".join(json.dumps(line) for line in lines) + "\n")


# ---------------------------------------------------------------- each form detected

FORMS: list[tuple[str, object, str, str]] = [
    ("neutral.json", json.loads((BUNDLED / "midstream-disconnect.json").read_text()), "neutral transcript",
     ""),
    ("body.json", {"model": "claude-sonnet-4-6", "max_tokens": 100, "messages": ANTHROPIC_MESSAGES},
     "Anthropic Messages request body", "anthropic"),
    ("messages.json", ANTHROPIC_MESSAGES, "Anthropic messages array", "anthropic"),
    ("responses.json", {"model": "gpt-5", "input": OPENAI_INPUT}, "OpenAI Responses request body", "openai"),
    ("input.json", OPENAI_INPUT, "OpenAI Responses input array", "openai"),
    ("chat.json", {"model": "gpt-4o", "messages": CHAT_MESSAGES}, "Chat Completions request body", "openai"),
    ("search.json", {"model": "gpt-4o-search-preview", "web_search_options": {},
                     "messages": [{"role": "user", "content": QUESTION}]},
     "Chat Completions request body", "openai"),
    ("chat-array.json", CHAT_MESSAGES[1:], "Chat Completions messages array", "openai"),
    ("gemini.json", {"contents": GEMINI_CONTENTS, "tools": [{"googleSearch": {}}]},
     "Gemini generateContent request body", "gemini"),
    ("contents.json", GEMINI_CONTENTS, "Gemini contents array", "gemini"),
]


@pytest.mark.parametrize(("name", "doc", "form", "provider"), FORMS, ids=[row[0] for row in FORMS])
def test_each_form_is_detected(tmp_path: Path, name: str, doc: object, form: str, provider: str) -> None:
    found = read(_file(tmp_path, name, doc))
    assert found.form == form
    assert found.provider == (provider or None)
    assert contracts.validate("replaykit.transcript", found.transcript) == []


def test_a_jsonl_log_of_messages_envelopes_or_request_bodies_is_detected(tmp_path: Path) -> None:
    plain = read(_jsonl(tmp_path, "plain.jsonl", ANTHROPIC_MESSAGES))
    wrapped = read(_jsonl(tmp_path, "wrapped.jsonl", [{"type": m["role"], "message": m, "uuid": str(n)}
                                                      for n, m in enumerate(ANTHROPIC_MESSAGES)]))
    openai = read(_jsonl(tmp_path, "openai.jsonl", OPENAI_INPUT))
    bodies = read(_jsonl(tmp_path, "bodies.jsonl", [{"model": "m", "messages": ANTHROPIC_MESSAGES[:1]},
                                                    {"model": "m", "messages": ANTHROPIC_MESSAGES}]))
    assert plain.form == wrapped.form == "JSONL session log: Anthropic messages array"
    assert plain.transcript == wrapped.transcript
    assert openai.form == "JSONL session log: OpenAI Responses input array"
    assert bodies.form == "JSONL log, its last line: Anthropic Messages request body"
    assert len(bodies.transcript["messages"]) == len(plain.transcript["messages"]) == 3


def test_plain_text_messages_fit_both_apis_and_say_which_was_chosen(tmp_path: Path) -> None:
    found = read(_file(tmp_path, "plain.json", [{"role": "user", "content": "hi"}]))
    assert found.form == "Anthropic messages array (plain text messages: read as Anthropic Messages)"


# ---------------------------------------------------------------- a pydantic-ai message history

HISTORIES = Path(__file__).parent / "data" / "repro"


def test_a_pydantic_ai_history_with_anthropic_web_search_keeps_its_search_blocks_raw() -> None:
    found = read(HISTORIES / "pydantic-ai-anthropic-web-search.json")
    assert found.form == "pydantic-ai message history"
    assert contracts.validate("replaykit.transcript", found.transcript) == []
    user, answer = found.transcript["messages"]
    assert user["content"] == "What is the weather in San Francisco today?"
    assert (answer["provider"], answer["model"], answer["stopReason"]) == \
        ("anthropic", "claude-sonnet-4-20250514", "stop")
    assert answer["usage"] == {"input": 8984, "output": 520, "cacheRead": 0, "cacheWrite": 0,
                               "totalTokens": 9504}
    thinking, call, result, *texts = answer["content"]
    assert thinking["type"] == "thinking" and thinking["signature"].startswith("Et0E")
    assert call["raw"] == {"type": "server_tool_use", "id": "srvtoolu_01EoSNE7k4dUJyGatASCV5qs",
                           "name": "web_search", "input": {"query": "San Francisco weather today"}}
    assert (result["phase"], result["raw"]["type"], len(result["raw"]["content"])) == \
        ("result", "web_search_tool_result", 10)
    assert result["raw"]["content"][0]["encrypted_content"]  # the block as received, replayable verbatim
    cited = [text for text in texts if "citations" in text]
    assert cited and cited[0]["citations"][0]["type"] == "web_search_result_location"
    assert found.transcript["tools"] == [{"type": "hostedSearch"}]


def test_a_pydantic_ai_history_with_openai_web_search_is_its_responses_items() -> None:
    found = read(HISTORIES / "pydantic-ai-openai-web-search.json")
    assert contracts.validate("replaykit.transcript", found.transcript) == []
    assert found.transcript["system"] == "You are a helpful assistant."  # the request's instructions
    answer = found.transcript["messages"][1]
    assert answer["usage"] == {"input": 851, "output": 577, "cacheRead": 8448, "cacheWrite": 0,
                               "totalTokens": 9876}  # pydantic-ai's input_tokens include the cache reads
    kinds = [(block["type"], block.get("raw", {}).get("type")) for block in answer["content"]]
    assert kinds == [("thinking", "reasoning"), ("hostedSearch", "web_search_call"),
                     ("thinking", "reasoning"), ("text", None)]
    assert answer["content"][1]["raw"] == {
        "id": "ws_028829e50fbcad090068c9c8306aec8195ae9451d32175ed69", "type": "web_search_call",
        "status": "completed", "action": {"type": "search", "query": "weather: San Francisco, CA"}}


def test_another_providers_search_parts_are_display_only_and_unknown_parts_are_named(tmp_path: Path) -> None:
    history = json.loads((HISTORIES / "pydantic-ai-anthropic-web-search.json").read_text())
    history[1]["provider_name"] = "google-gla"
    history[1]["parts"].append({"part_kind": "file", "content": {"kind": "binary", "data": ""}})
    found = read(_file(tmp_path, "gemini.json", history))
    assert found.form == "pydantic-ai message history (left out, no neutral form: /1/parts/22 (file))"
    searches = [b for b in found.transcript["messages"][1]["content"] if b["type"] == "hostedSearch"]
    assert [(block["phase"], "raw" in block) for block in searches] == [("call", False), ("result", False)]
    assert searches[1]["results"][0]["url"].startswith("https://www.accuweather.com/")
    assert contracts.validate("replaykit.transcript", found.transcript) == []


# ---------------------------------------------------------------- a cassette


def _tape(tmp_path: Path, statuses: list[int]) -> Path:
    """A recorded cassette (pydantic-ai's pause_turn web search) with its responses' statuses set."""
    tape = cassette.load(recorded("pydantic-ai__anthropic_pause_turn_web_search.yaml"))
    for item, status in zip(tape.interactions, statuses, strict=True):
        item.response.status = status
    path = tmp_path / "tape.yaml"
    path.write_text(cassette.dumps(tape), encoding="utf-8")
    return path


def test_a_cassette_gives_its_last_request_answered_with_an_error_else_its_last(tmp_path: Path) -> None:
    failed = read(_tape(tmp_path, [529, 200]))
    assert failed.form == ("cassette, interaction 0 of 2 (the last whose response is an error: HTTP 529): "
                           "Anthropic Messages request body")
    assert [m["role"] for m in failed.transcript["messages"]] == ["user"]
    fine = read(_tape(tmp_path, [200, 200]))
    assert fine.form.startswith("cassette, interaction 1 of 2 (the last request: no response is an error)")
    assert [m["role"] for m in fine.transcript["messages"]] == ["user", "assistant"]
    assert fine.model == "claude-sonnet-4-5" and fine.provider == "anthropic"
    assert contracts.validate("replaykit.transcript", fine.transcript) == []


# ---------------------------------------------------------------- bad input


BAD: list[tuple[str, str, str]] = [
    ("broken.json", '{"messages": [\n  {"role": "user",}\n]}', r"broken\.json:2:\d+: not JSON: "),
    ("scalar.json", "42", r"scalar\.json:/: a JSON number: not a transcript; give a neutral transcript"),
    ("other.json", '{"hello": 1}', r"other\.json:/: an object without messages or input: not a transcript"),
    ("role.json", '{"messages": [{"role": "robot", "content": "x"}]}',
     r"role\.json:/messages/0/role: role 'robot': an Anthropic message is user or assistant; read as: "),
    ("tool.json", '{"messages": [{"role": "tool", "content": "x"}]}',
     r"tool\.json:/messages/0/tool_call_id: a tool message names the call it answers in tool_call_id; read "
     r"as: Chat Completions request body"),
    ("log.jsonl", '{"role": "user", "content": "a"}\n{"role": "user", "content": "b"\n',
     r"log\.jsonl:line 2: not JSON: "),
    ("kinds.jsonl", '{"role": "user", "content": "a"}\n[1]\n',
     r"kinds\.jsonl:line 2: neither a message"),
    ("block.jsonl", '{"role": "user", "content": "a"}\n{"role": "user", "content": [{"type": "document"}]}\n',
     r"block\.jsonl:line 2 /content/0/type: a user block of type 'document' has no neutral form"),
    ("deep.json", "[" * 300 + "]" * 300, r"deep\.json: JSON nested deeper than 128 levels"),
    ("letters.json", "hello, this is no JSON", r"letters\.json: not JSON: it starts with a letter; give"),
    ("history.json", '[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": [{"kind": '
     '"audio-url", "url": "https://x.test/a.mp3"}]}]}]',
     r"history\.json:/0/parts/0/content/0: a user-prompt item of kind 'audio-url' has no neutral form"),
    ("tape.yaml", "interactions:\n- request: {method: POST, uri: 'https://api.anthropic.com/v1/messages'\n",
     r"tape\.yaml:\d+: "),
    ("nomodel.yaml", "version: 1\ninteractions:\n- request: {method: POST, uri: "
     "'https://api.anthropic.com/v1/messages/count_tokens', headers: {}, body: '{}'}\n"
     "  response: {status: {code: 200, message: OK}, headers: {}, body: {string: '{}'}}\n",
     r"nomodel\.yaml: a cassette without a model request \(Anthropic Messages, OpenAI Responses, Chat "
     r"Completions, Gemini generateContent\)"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD, ids=[row[0] for row in BAD])
def test_bad_input_is_one_usage_error_naming_the_file_and_the_place(tmp_path: Path, name: str, text: str,
                                                                     message: str) -> None:
    with pytest.raises(UsageError, match=message) as refused:
        read(_file(tmp_path, name, text))
    assert "not JSON: not JSON" not in str(refused.value) and len(str(refused.value).splitlines()) == 1


def test_input_is_bounded_in_size_and_must_be_utf8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reported_module, "MAX_INPUT", 64)
    with pytest.raises(UsageError, match=r"big\.json: 1,000 bytes: more than"):
        read(_file(tmp_path, "big.json", " " * 1000))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"messages": [{"role": "user", "content": "caf\xe9"}]}')
    with pytest.raises(UsageError, match=r"latin\.json:byte 46: not UTF-8"):
        read(latin)
    with pytest.raises(UsageError, match=r"missing\.json: no such file"):
        read(tmp_path / "missing.json")


# ---------------------------------------------------------------- the first failure


def test_a_contract_violation_is_pinpointed_by_its_pointer() -> None:
    found = diagnose(json.loads((BUNDLED / "invalid-search-container.json").read_text()), "x.json")
    assert found.failure is not None
    assert (found.failure.kind, found.failure.pointer) == ("contract violation", "/messages/1/content")
    assert found.failure.message.startswith("expected array, got an object")
    assert found.body is None


def test_a_projection_error_is_pinpointed(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(transcript: object, target: object) -> None:
        raise LocalRequestError("no such block", phase="validation", pointer="/messages/0/content/0")

    monkeypatch.setattr(diagnosis_module, "projection", refuse)
    found = diagnose(json.loads((BUNDLED / "midstream-disconnect.json").read_text()), "x.json")
    assert str(found.failure) == "projection error at /messages/0/content/0: no such block"


def test_an_estimator_exception_without_a_place_is_pinned_to_the_first_message_that_makes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = diagnosis_module.estimate

    def assumes_name(transcript: JSON, target: Any) -> Any:  # the defect of estimator-assumes-name
        for message in transcript["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                assert block["type"] == "text" or block["name"]
        return real(transcript, target)

    monkeypatch.setattr(diagnosis_module, "estimate", assumes_name)
    found = diagnose(json.loads((BUNDLED / "example-nameless-search-block.json").read_text()), "x.json")
    assert found.failure is not None
    assert (found.failure.kind, found.failure.pointer) == ("estimator exception", "/messages/1")
    assert found.failure.message.startswith("KeyError: ")


def test_a_valid_transcript_gives_the_request_and_the_estimate() -> None:
    found = diagnose(json.loads((BUNDLED / "example-nameless-search-block.json").read_text()), "x.json")
    assert found.failure is None
    assert found.tokens == 10056  # the anchor's 10,051 + the follow-up prompt
    assert found.body is not None
    assert found.body["messages"][-1] == {"role": "user", "content": "Please continue."}


# ---------------------------------------------------------------- what is written


def test_the_folder_holds_a_valid_scenario_the_transcript_and_a_synthesized_cassette(tmp_path: Path) -> None:
    done = reproduce(BUNDLED / "code-execution-search-replay.json", tmp_path / "out")
    out = tmp_path / "out"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == sorted(FILES)
    scenario = load(out / SCENARIO)  # valid by contracts/replaykit/scenario.schema.json, paths resolved
    assert scenario.transcript == json.loads((BUNDLED / "code-execution-search-replay.json").read_text())
    tape = cassette.load(out / CASSETTE)
    plain, streamed = tape.interactions
    assert tape.meta.origin == "synthesized" and streamed.response.is_stream and not plain.response.is_stream
    assert {**plain.request.json(), "stream": True} == streamed.request.json()  # twins: the same but stream
    assert verify_file(out / CASSETTE).ok
    assert plain.request.json()["messages"] == done.diagnosis.body["messages"]  # type: ignore
    summary = json.loads((out / SUMMARY).read_text())
    assert summary["firstFailure"] is None and summary["estimate"] == done.diagnosis.tokens


def test_a_planted_key_never_reaches_the_written_files(tmp_path: Path) -> None:
    keys = [planted()["anthropic"][0], planted()["openai"][0]]
    messages = [{"role": "user", "content": f"my key is {keys[0]}, use it"},
                {"role": "assistant", "content": [{"type": "text", "text": f"noted: {keys[1]}"}]},
                {"role": "user", "content": [{"type": "text", "text": "api_key: " + keys[0]}]}]
    body = {"model": "claude-sonnet-4-6", "messages": messages, "metadata": {"api_key": keys[1]}}
    done = reproduce(_file(tmp_path, "leaky.json", body), tmp_path / "out")
    written = b"".join(path.read_bytes() for path in (tmp_path / "out").rglob("*") if path.is_file())
    assert written and not any(key.encode() in written or key[8:40].encode() in written for key in keys)
    fields = {finding.field for finding in done.reported.redacted}
    assert fields >= {"/messages/0/content", "/metadata/api_key"}
    assert all(key not in finding.excerpt for finding in done.reported.redacted for key in keys)
    assert b"REDACTED" in (tmp_path / "out" / TRANSCRIPT).read_bytes()


def test_a_key_that_survives_redaction_stops_every_write(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    key = planted()["anthropic"][0]
    monkeypatch.setattr(reported_module, "redact_document", lambda doc, file: (doc, []))  # a broken scrub
    with pytest.raises(KeyLeft) as refused:
        reproduce(_file(tmp_path, "leaky.json", [{"role": "user", "content": key}]), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert key not in str(refused.value) and "survived redaction" in str(refused.value)
    assert {finding.file for finding in refused.value.findings} >= {TRANSCRIPT, CASSETTE}


def test_a_folder_holding_other_files_is_refused_an_earlier_repro_output_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.md").write_text("mine")
    refused = r"busy: not empty and not an earlier repro output \(holds notes\.md\)"
    with pytest.raises(UsageError, match=refused):
        reproduce(BUNDLED / "retry-529.json", tmp_path / "busy")
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["notes.md"]
    first = reproduce(BUNDLED / "retry-529.json", tmp_path / "out")
    again = reproduce(BUNDLED / "invalid-search-container.json", tmp_path / "out")
    assert (first.folder, again.folder) == ("new", "an earlier repro output")
    assert load(tmp_path / "out" / SCENARIO).name == "repro-invalid-search-container"
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="exists and is not a folder"):
        reproduce(BUNDLED / "retry-529.json", tmp_path / "file")


# ---------------------------------------------------------------- a cassette's failing request

_ERROR_EVENT = b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error"}}\n\n'


def _exchange(uri: str, status: int = 200, body: bytes = b"{}", kind: str = "application/json",
              model: str | None = "m") -> cassette.Interaction:
    request = json.dumps({"model": model, "messages": []} if model else {"contents": []}).encode()
    return cassette.Interaction(cassette.Request("POST", uri, {}, request),
                                cassette.Response(status, "", {"content-type": [kind]}, body))


ANTHROPIC_URI = "https://api.anthropic.com/v1/messages"


@pytest.mark.parametrize(("statuses", "index", "why"), [
    ((400, 200), 0, "the last whose response is an error: HTTP 400"),
    ((401, 400, 200), 1, "the last whose response is an error: HTTP 400"),
    ((200, 399), 1, "the last request: no response is an error"),
])
def test_the_failing_request_is_the_last_answered_with_an_error_status(statuses: tuple[int, ...], index: int,
                                                                       why: str) -> None:
    chosen = failing_request(cassette.Cassette([_exchange(ANTHROPIC_URI, status) for status in statuses]))
    assert chosen is not None and (chosen.index, chosen.why) == (index, why)


def test_a_stream_ending_in_an_error_event_fails_and_only_a_stream_does() -> None:
    stream = "text/event-stream"
    failed = _exchange(ANTHROPIC_URI, body=b"event: ping\ndata: {}\n\n" + _ERROR_EVENT, kind=stream)
    fine = _exchange(ANTHROPIC_URI, body=b"event: message_stop\ndata: {}\n\n", kind=stream)
    not_a_stream = _exchange(ANTHROPIC_URI, body=_ERROR_EVENT)
    chosen = failing_request(cassette.Cassette([failed, fine, not_a_stream]))
    assert chosen is not None and (chosen.index, chosen.why) == (
        0, "the last whose response is an error: a stream that ends in an error event")


def test_the_failing_request_names_its_provider_api_and_model_from_the_body_or_the_path() -> None:
    gemini = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    chat = "https://api.openai.com/v1/chat/completions"
    found = [failing_request(cassette.Cassette([_exchange(uri, model=model)]))
             for uri, model in ((gemini, None), (chat, "gpt-4o"))]
    assert [(f.provider, f.api, f.model) for f in found if f is not None] == [
        ("gemini", "gemini-generate", "gemini-2.5-flash"), ("openai", "openai-chat", "gpt-4o")]


# ---------------------------------------------------------------- every model wire

#: A cassette of each model wire but Anthropic's and OpenAI Responses' (those have their own tests), and the
#: provider and API its repro scenario targets.
WIRES = [("gemini/grounding.yaml", "gemini", "gemini-generate"),
         ("gemini/error_429_resource_exhausted.yaml", "gemini", "gemini-generate"),
         ("vertex/grounding_stream.yaml", "vertex", "gemini-generate"),
         ("openai/chat_web_search.yaml", "openai", "openai-chat"),
         ("azure/chat_web_search.yaml", "azure", "openai-chat"),
         ("openai/compatible_perplexity_sonar_stream.yaml", "openai", "openai-chat"),
         *((f"recorded/pydantic-ai__gemini_{name}.yaml", "gemini", "gemini-generate") for name in (
             "web_search_tool", "web_search_tool_stream", "web_search_history_from_anthropic", "url_context",
             "url_context_stream")),
         ("recorded/pydantic-ai__gemini_vertex_provider.yaml", "vertex", "gemini-generate"),
         *((f"recorded/pydantic-ai__openrouter_web_search_{name}.yaml", "openai", "openai-chat") for name in (
             "annotations", "annotations_stream", "tool_usage", "tool_usage_stream"))]


@pytest.mark.parametrize(("name", "provider", "api"), WIRES, ids=[row[0] for row in WIRES])
def test_a_cassette_of_each_wire_reproduces_on_its_own_provider_and_api(tmp_path: Path, name: str,
                                                                         provider: str, api: str) -> None:
    done = reproduce(data_dir("cassettes") / name, tmp_path / "out")
    assert (done.diagnosis.target.provider, done.diagnosis.target.api) == (provider, api)
    scenario, target = load(tmp_path / "out" / SCENARIO), Target.parse(DEFAULT_TARGET)
    assert scenario.doc["steps"][0].get("api") == (api if api == "openai-chat" else None)
    assert run_scenario(scenario, target).passed, run_scenario(scenario, target).failure_text()
    leaked = run_scenario(scenario, target, mutant="internal-fields-leak")
    assert not leaked.passed and "neverReaches" in leaked.failure_text()


def test_the_band_counts_a_gemini_body_as_it_counts_the_same_history_on_anthropic(tmp_path: Path) -> None:
    history = recorded("pydantic-ai__gemini_web_search_history_from_anthropic.yaml")  # 27 model text parts
    gemini = reproduce(history, tmp_path / "gemini").diagnosis
    transcript = json.loads((tmp_path / "gemini" / TRANSCRIPT).read_text())
    anthropic = diagnose(transcript, "history.json", "anthropic", "claude-sonnet-4-6")
    assert gemini.band is not None and anthropic.band is not None
    assert gemini.band.low >= 0.8 * anthropic.band.low and gemini.band.high >= 0.8 * anthropic.band.high
    assert "0 tokens" not in gemini.band.why  # Gemini's contents and systemInstruction are counted


def test_a_multi_turn_chat_body_keeps_its_tool_calls_in_the_scenario(tmp_path: Path) -> None:
    body = {"model": "gpt-4o", "messages": CHAT_MESSAGES, "tools": [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]}
    reproduce(_file(tmp_path, "chat.json", body), tmp_path / "out")
    expected = load(tmp_path / "out" / SCENARIO).expectations
    assert {"request": 1, "pointer": "/messages/*/tool_calls/*/id", "equals": "call_1"} in expected["reaches"]
    assert {"pointer": "/messages/*/timestamp"} in expected["neverReaches"]


def test_a_gemini_function_call_with_an_id_is_checked_by_it(tmp_path: Path) -> None:
    call = {"id": "fc_1", "name": "lookup", "args": {"q": "3.13"}}
    contents = [GEMINI_CONTENTS[0], {"role": "model", "parts": [{"functionCall": call}]},
                {"role": "user", "parts": [{"functionResponse": {"id": "fc_1", "name": "lookup",
                                                                 "response": {"output": "2024-10-07"}}}]}]
    reproduce(_file(tmp_path, "gemini.json", {"contents": contents}), tmp_path / "out")
    expected = load(tmp_path / "out" / SCENARIO).expectations
    assert expected["reaches"] == [{"request": 1, "pointer": "/contents/*/parts/*/functionCall/id",
                                    "equals": "fc_1"}]
    assert {"pointer": "/contents/*/timestamp"} in expected["neverReaches"]


# ---------------------------------------------------------------- the bundled bad transcripts, replayed

#: Each bundled transcript that carries a defect's trigger, and the mutants of the reference that defect is.
MATCHING: dict[str, tuple[str, ...]] = {
    "example-nameless-search-block": ("estimator-assumes-name", "timestamp-refresh-invalidates-usage",
                                      "usage-double-count", "search-dropped-on-replay"),
    "invalid-search-container": ("accept-corrupt-container",),
    "display-only-search-record": ("reject-display-only",),
    "code-execution-search-replay": ("opaque-block-dropped",),
    "cjk-near-budget": ("no-cjk-correction",),
    "midstream-disconnect": ("reject-nameless-legacy", "internal-fields-leak"),
    "nameless-search-block-after-anchor": ("estimator-assumes-name", "search-dropped-on-replay"),
    "nameless-search-block-no-anchor": ("estimator-assumes-name", "search-dropped-on-replay",
                                        "search-not-estimated"),
    # replayed to Gemini, which takes no grounding back: the anchor covers it, the nameless blocks do not
    "gemini-grounding-estimated": ("estimator-assumes-name", "timestamp-refresh-invalidates-usage"),
}
#: The others' defects are in the traffic their scenarios inject (a 529, a 400, a stall), not the transcript.
FAULT_ONLY = {"retry-529", "no-retry-400", "stall-idle-timeout", "search-instruction-change"}


def test_every_bundled_transcript_is_either_bad_or_fault_only() -> None:
    assert {path.stem for path in BUNDLED.glob("*.json")} == set(MATCHING) | FAULT_ONLY


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MATCHING))
def test_a_bundled_bad_transcript_fails_on_its_mutant_and_passes_on_the_reference(tmp_path: Path,
                                                                                 name: str) -> None:
    reproduce(BUNDLED / f"{name}.json", tmp_path / name)
    scenario, target = load(tmp_path / name / SCENARIO), Target.parse(DEFAULT_TARGET)
    reference = run_scenario(scenario, target)
    assert reference.passed, reference.failure_text()
    for mutant in MATCHING[name]:
        assert not run_scenario(scenario, target, mutant=mutant).passed, f"{mutant} survives {name}"


def test_with_no_anchor_the_band_proves_that_search_content_is_counted(tmp_path: Path) -> None:
    transcript = json.loads((BUNDLED / "nameless-search-block-no-anchor.json").read_text())
    prose = "The free-threaded build of CPython lets threads run Python code in parallel. " * 50
    transcript["messages"][0]["content"] = [{"type": "text", "text": prose}]  # the search: a third of it
    reproduce(_file(tmp_path, "long.json", transcript), tmp_path / "out")
    scenario, target = load(tmp_path / "out" / SCENARIO), Target.parse(DEFAULT_TARGET)
    assert "Leaving the hosted search blocks out gives 1,379" in scenario.doc["description"]
    assert scenario.expectations["estimates"] == [{"step": 0, "min": 1828, "max": 8160}]
    assert run_scenario(scenario, target).passed
    assert not run_scenario(scenario, target, mutant="search-not-estimated").passed


def test_the_scenario_names_what_a_correct_harness_sends(tmp_path: Path) -> None:
    reproduce(BUNDLED / "example-nameless-search-block.json", tmp_path / "out")
    expected = yaml.safe_load((tmp_path / "out" / SCENARIO).read_text())["expectations"]
    assert expected["estimates"] == [{"step": 0, "min": 9864, "max": 10577}]  # the anchor's 9,864 to 10,051+
    assert {"request": 1, "pointer": "/messages/*/content/*/tool_use_id",
            "equals": "srvtoolu_019GzQboCgE9wgfMG1dDQuKH"} in expected["reaches"]
    assert {"pointer": "/systemHistory"} in expected["neverReaches"]


def test_each_reaches_check_is_written_as_the_canonical_view_holds_it(tmp_path: Path) -> None:
    future = {"type": "future_block", "note": None, "value": "kept", "cache_control": {"type": "ephemeral"}}
    messages = [{"role": "user", "content": QUESTION},
                {"role": "assistant", "content": [SEARCH_CALL, SEARCH_RESULT, future]}]
    done = reproduce(_file(tmp_path, "future.json", {"model": "claude-sonnet-4-6", "messages": messages}),
                     tmp_path / "a")
    assert (done.diagnosis.failure.kind, done.diagnosis.failure.pointer) == (  # type: ignore[union-attr]
        "request violation", "/messages/1/content/2/type")  # a type the contracts do not know yet
    sent = bundle.Diagnosis(done.diagnosis.target, None, done.diagnosis.body)  # were it known: replayed
    reaches = bundle._expectations(sent)["reaches"]
    assert {"request": 1, "pointer": "/messages/*/content/*", "equals": {"type": "future_block",
                                                                         "value": "kept"}} in reaches
    calls = [{"role": "user", "content": QUESTION},
             {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_1", "output": "found"}]
    reproduce(_file(tmp_path, "calls.json", {"model": "gpt-5", "input": calls}), tmp_path / "o")
    reaches = yaml.safe_load((tmp_path / "o" / SCENARIO).read_text())["expectations"]["reaches"]
    assert reaches == [{"request": 1, "pointer": "/input/*/call_id", "equals": "call_1"}]  # id: optional


def test_a_new_folder_appears_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []

    def full_disk(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    monkeypatch.setattr(bundle, "write_atomic", full_disk)
    with pytest.raises(UsageError, match=r"out: cannot be written: No space left on device"):
        reproduce(BUNDLED / "retry-529.json", tmp_path / "out")
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # neither the folder nor its staging copy


def test_keys_in_a_jsonl_log_are_reported_by_line(tmp_path: Path) -> None:
    key = planted()["anthropic"][0]
    found = read(_jsonl(tmp_path, "log.jsonl", [{"role": "user", "content": "hi"},
                                                {"role": "user", "content": f"key {key}"}]))
    assert [(finding.field, finding.kind) for finding in found.redacted] == [("line 2 /content", "anthropic")]
    assert key not in json.dumps(found.transcript)


def test_a_request_without_an_assistant_turn_targets_its_own_provider_and_model(tmp_path: Path) -> None:
    done = reproduce(_file(tmp_path, "ask.json", {"model": "gpt-5-mini", "input": "hi"}), tmp_path / "out")
    assert (done.diagnosis.target.provider, done.diagnosis.target.model) == ("openai", "gpt-5-mini")
    assert cassette.load(tmp_path / "out" / CASSETTE).interactions[0].request.uri.endswith("/v1/responses")
    assert diagnose({"version": 1, "messages": []}, "x").target.model == "claude-sonnet-4-6"
