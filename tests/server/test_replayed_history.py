"""Real traffic newer than the SDKs' types, replayed: the body ``replay.project`` builds from each shape is
what ``serve --enforce-contracts`` accepts from the real SDK (a search through code execution, streamed or
not; a ``web_search_call`` without ``action``; an OpenAI-compatible provider's items under its profile)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from server_support import ANTHROPIC, OPENAI, anthropic_message, bundled, cassette_of, json_interaction

from replaykit import cassette
from replaykit.cassette import Cassette, Meta
from replaykit.errors import UsageError
from replaykit.replay import ProviderModel, project
from replaykit.server import FakeProvider
from replaykit.transcript import from_interaction, restore

Json = dict[str, Any]


def _history(path: str, target: ProviderModel) -> Json:
    """The request a harness sends after the recorded turn of ``path``: the turn replayed, then a question."""
    turn = from_interaction(cassette.load(bundled(path)).interactions[0], timestamp=2)
    transcript = restore({"version": 1, "messages": [
        {"role": "user", "content": "first question", "timestamp": 1}, turn,
        {"role": "user", "content": "and then?", "timestamp": 3}]})
    return project(transcript, target)


def _openai_answer() -> Json:
    answer: Json = cassette.load(bundled("openai/web_search.yaml")).interactions[0].response.json()
    return answer


def _served(fake: FakeProvider) -> Json:
    entry = fake.journal[-1].to_json()
    return {"status": entry["status"], "errors": [v for v in entry["request_violations"]
                                                  if v.get("severity") != "warning"]}


@pytest.mark.parametrize("path", ["anthropic/code_execution_search.yaml",
                                  "anthropic/code_execution_search_stream.yaml"])
def test_a_search_through_code_execution_replays_past_enforced_contracts(serve: Any, path: str) -> None:
    target = ProviderModel("anthropic", "anthropic-messages", "claude-sonnet-4-6", max_tokens=256)
    body = _history(path, target)
    assert [block["type"] for block in body["messages"][1]["content"]] == [
        "text", "server_tool_use", "server_tool_use", "web_search_tool_result", "code_execution_tool_result",
        "text"]
    fake = serve(cassette_of(json_interaction(ANTHROPIC, body, anthropic_message("done"))),
                 enforce_contracts=True)
    with anthropic.Anthropic(base_url=fake.base_url("anthropic"), api_key="x", max_retries=0) as client:
        reply = client.messages.create(**body)
    assert reply.content[0].type == "text" and reply.content[0].text == "done"
    assert _served(fake) == {"status": 200, "errors": []}


@pytest.mark.parametrize("path", ["openai/web_search_no_action.yaml",
                                  "openai/web_search_no_action_stream.yaml"])
def test_a_search_call_without_action_replays_past_enforced_contracts(serve: Any, path: str) -> None:
    body = _history(path, ProviderModel("openai", "openai-responses", "gpt-5"))
    calls = [item for item in body["input"] if item.get("type") == "web_search_call"]
    assert [("action" in call) for call in calls] == [False, False, True]
    fake = serve(cassette_of(json_interaction(OPENAI, body, _openai_answer())), enforce_contracts=True)
    with openai.OpenAI(base_url=fake.base_url("openai"), api_key="x", max_retries=0) as client:
        reply = client.responses.create(**body)
    assert reply.status == "completed"
    assert _served(fake) == {"status": 200, "errors": []}


def _compat(body: Json, profile: str | None) -> Cassette:
    tape = cassette_of(json_interaction(OPENAI, body, _openai_answer()))
    return replace(tape, meta=Meta(extra={"profile": profile} if profile else {}))


def test_an_openai_compatible_history_replays_under_its_profile_and_is_refused_strictly(serve: Any) -> None:
    target = ProviderModel("openai", "openai-responses", "grok-4")
    body = _history("openai/compatible_xai_web_search.yaml", target)
    assert body["input"][1]["id"].startswith("fc_") and "action" not in body["input"][1]
    lenient = serve(_compat(body, "openai-compatible"), enforce_contracts=True)
    with openai.OpenAI(base_url=lenient.base_url("openai"), api_key="x", max_retries=0) as client:
        assert client.responses.create(**body).status == "completed"
    entry = lenient.journal[-1].to_json()
    assert entry["status"] == 200
    assert {v["severity"] for v in entry["request_violations"]} == {"warning"}
    strict = serve(_compat(body, None), enforce_contracts=True)
    with openai.OpenAI(base_url=strict.base_url("openai"), api_key="x", max_retries=0) as client, \
            pytest.raises(openai.BadRequestError, match="'arguments' is not allowed here"):
        client.responses.create(**body)
    assert strict.settings.profile.name == "strict" and lenient.settings.profile.name == "openai-compatible"


X_SEARCH = Path(__file__).resolve().parents[1] / "data" / "contracts" / "xai_x_search_call.yaml"


def test_an_xai_x_search_call_is_served_and_replayed_under_its_profile_and_refused_strictly(
        serve: Any) -> None:
    tape = cassette.load(X_SEARCH)
    first, follow_up = (item.request.json() for item in tape.interactions)
    lenient = serve(tape, enforce_contracts=True)  # the cassette declares profile openai-compatible
    with openai.OpenAI(base_url=lenient.base_url("openai"), api_key="x", max_retries=0) as client:
        answer = client.responses.create(**first)
        assert [item.type for item in answer.output] == ["x_search_call", "message"]
        turn = from_interaction(tape.interactions[0], timestamp=2)
        transcript = restore({"version": 1, "messages": [{**follow_up["input"][0], "timestamp": 1}, turn,
                                                         {**follow_up["input"][3], "timestamp": 3}]})
        target = ProviderModel("openai", "openai-responses", first["model"])
        body = {**project(transcript, target), "tools": first["tools"]}
        assert body["input"][1] == follow_up["input"][1]  # the x_search_call item, replayed verbatim
        assert client.responses.create(**body).status == "completed"
    assert [e.status for e in lenient.journal] == [200, 200]
    assert {v["severity"] for e in lenient.journal for v in e.to_json()["request_violations"]} == {"warning"}
    strict = serve(replace(tape, meta=replace(tape.meta, extra={})), enforce_contracts=True)
    with openai.OpenAI(base_url=strict.base_url("openai"), api_key="x", max_retries=0) as client, \
            pytest.raises(openai.BadRequestError, match="is not one of"):
        client.responses.create(**body)


def test_cassettes_that_declare_different_profiles_need_an_explicit_one() -> None:
    strict, lenient = _compat({}, "strict"), _compat({}, "openai-compatible")
    with pytest.raises(UsageError, match=r"declare different contract profiles.*choose one with --profile"):
        FakeProvider([strict, lenient])
    assert FakeProvider([strict, lenient], profile="openai-compatible").settings.profile.name == \
        "openai-compatible"
    assert FakeProvider([cassette_of()]).settings.profile.name == "strict"
