"""Contract verdicts in the journal, and ``enforce_contracts``: an invalid request gets the provider's 400."""

from __future__ import annotations

import copy
import json
import secrets
from typing import Any

import anthropic
import httpx
import pytest
from server_support import ANTHROPIC, anthropic_request, cassette_of, json_interaction, message_cassette

from replaykit import contracts
from replaykit.contracts import interaction_check as interactions
from replaykit.routes import ROUTES, classify
from replaykit.server import verdicts
from replaykit.server.matching import Received

BOTH_DOMAIN_LISTS = {
    **anthropic_request(),
    "tools": [
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "allowed_domains": ["a.com"],
            "blocked_domains": ["b.com"],
        }
    ],
}


def test_violations_are_journaled_but_change_nothing_by_default(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    response = httpx.post(f"{fake.url}/v1/messages", json=BOTH_DOMAIN_LISTS)
    assert response.status_code == 200
    entry = fake.journal[0]
    assert entry.verdict == "served"
    assert [(v["pointer"], v["keyword"]) for v in entry.request_violations] == [
        ("/tools/0/blocked_domains", "x-rules")
    ]
    assert entry.response_violations == []


def test_enforce_contracts_answers_an_invalid_request_with_400(serve: Any) -> None:
    fake = serve(message_cassette("a"), enforce_contracts=True)
    with anthropic.Anthropic(base_url=fake.url, api_key="dummy", max_retries=2) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(**BOTH_DOMAIN_LISTS)
        assert caught.value.body["error"]["type"] == "invalid_request_error"
        assert "(replaykit rule anthropic.one_domain_list; the provider's exact wording is not public)" in \
            caught.value.body["error"]["message"]
        assert contracts.validate("anthropic.error", caught.value.body) == []
        assert client.messages.create(**anthropic_request()).content[0].text == "a"  # not used up
    assert [e.verdict for e in fake.journal] == ["invalid", "served"]


def test_a_key_in_an_enum_field_is_never_answered_or_journaled_whole(serve: Any) -> None:
    key = secrets.token_hex(16)  # an Azure key: no shape the scanner knows
    fake = serve(message_cassette("a"), enforce_contracts=True)
    body = {**anthropic_request(), "messages": [{"role": key, "content": "hi"}]}
    response = httpx.post(f"{fake.url}/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == \
        f"/messages/0/role: '{key[:4]}…{key[-2:]}' (32 chars) is not one of user, assistant, system"
    assert key not in response.text and key not in str(response.headers)
    assert key not in json.dumps(fake.journal[0].request_violations)


def test_a_missing_body_is_a_request_violation(serve: Any) -> None:
    fake = serve(message_cassette("a"), enforce_contracts=True)
    response = httpx.post(f"{fake.url}/v1/messages")
    assert response.status_code == 400
    assert fake.journal[0].request_violations[0]["keyword"] == "json"


def test_paths_without_contracts_are_not_checked(serve: Any) -> None:
    item = json_interaction("https://api.openai.com/v1/models", None, {"data": []})
    item.request.method = "GET"
    fake = serve(cassette_of(item), enforce_contracts=True)
    assert httpx.get(f"{fake.url}/v1/models").status_code == 200
    assert fake.journal[0].request_violations == fake.journal[0].response_violations == []


def test_response_violations_of_a_broken_recording(serve: Any) -> None:
    fake = serve(cassette_of(json_interaction(ANTHROPIC, anthropic_request(), {"id": "msg_1"})))
    httpx.post(f"{fake.url}/v1/messages", json=anthropic_request())
    pointers = {v["pointer"] for v in fake.journal[0].response_violations}
    assert {"/type", "/content"} <= pointers


def test_error_envelopes_served_by_replaykit_are_checked_too(serve: Any) -> None:
    fake = serve(message_cassette("a"), faults=["status=529,nth=1"])
    httpx.post(f"{fake.url}/v1/messages", json=anthropic_request())
    httpx.post(f"{fake.url}/v1/messages", json=anthropic_request())
    httpx.post(f"{fake.url}/v1/messages", json=anthropic_request())  # unmatched: a 404 envelope
    assert [e.response_violations for e in fake.journal] == [[], [], []]


def test_a_huge_response_is_not_checked_and_the_journal_says_so(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdicts, "CHECK_LIMIT", 10)
    fake = serve(cassette_of(json_interaction(ANTHROPIC, anthropic_request(), {"id": "msg_1"})))
    httpx.post(f"{fake.url}/v1/messages", json=anthropic_request())
    entry = fake.journal[0]
    assert entry.response_violations == []
    assert entry.notes == [
        "response contracts not checked: the body has 15 bytes, over the 10 byte limit; "
        "run `replaykit verify` on the cassette"
    ]


# ---------------------------------------------------------------- request verdicts are cached


def _received(body: Any, path: str = "/v1/messages") -> Received:
    raw = json.dumps(body).encode()
    return Received.build("POST", path, {}, {}, raw, classify("POST", path))


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The contract kinds validated from now on, with an empty verdict cache."""
    calls: list[str] = []
    real = contracts.validate

    def counted(kind: str, value: Any, profile: Any = None) -> list[contracts.Violation]:
        calls.append(kind)
        return real(kind, value, profile)

    monkeypatch.setattr(interactions, "validate", counted)  # where check_body finds it
    monkeypatch.setattr(verdicts, "_VERDICTS", verdicts._Verdicts())
    return calls


def test_a_body_sent_again_is_not_validated_again(validations: list[str]) -> None:
    first = verdicts.request_violations(_received(BOTH_DOMAIN_LISTS))
    again = verdicts.request_violations(_received(BOTH_DOMAIN_LISTS))
    assert again == first and [v["keyword"] for v in first] == ["x-rules"]
    assert validations == ["anthropic.request"]
    verdicts.request_violations(_received(anthropic_request("other")))
    assert validations == ["anthropic.request"] * 2


def test_a_cached_verdict_is_shared_and_cannot_be_changed(validations: list[str]) -> None:
    first = verdicts.request_violations(_received(BOTH_DOMAIN_LISTS))
    with pytest.raises(TypeError, match="cannot be changed"):
        first[0]["message"] = "changed by the caller"
    with pytest.raises(TypeError):
        first[0].update(message="changed")
    first.append({"pointer": "/added"})
    again = verdicts.request_violations(_received(BOTH_DOMAIN_LISTS))
    assert len(again) == 1 and again[0]["message"] != "changed by the caller"
    assert again[0] is first[0]  # by reference: one verdict held once, however many entries share it
    copied = copy.deepcopy(again[0])
    copied["message"] = "a copy is the caller's own"
    assert type(copied) is dict and again[0]["message"] != copied["message"]
    assert json.loads(json.dumps(again)) == [dict(again[0])]


def test_the_same_body_on_another_route_has_its_own_verdict(validations: list[str]) -> None:
    on_messages = verdicts.request_violations(_received(BOTH_DOMAIN_LISTS))
    on_responses = verdicts.request_violations(_received(BOTH_DOMAIN_LISTS, "/v1/responses"))
    assert validations == ["anthropic.request", "openai.request"]
    assert on_responses != on_messages


def test_the_cache_keeps_the_most_recently_used(
    validations: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdicts, "REQUEST_CACHE", 2)
    for text in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" comes
        verdicts.request_violations(_received(anthropic_request(text)))
    assert len(validations) == 3
    verdicts.request_violations(_received(anthropic_request("a")))
    assert len(validations) == 3
    verdicts.request_violations(_received(anthropic_request("b")))
    assert len(validations) == 4


# One bad body per contract family, sent to every spelling a client may use for each route.
BAD = {"anthropic": {"model": 7, "max_tokens": "x", "messages": "hi"}, "openai": {"model": 7, "input": 3},
       "cloudflare": {"query": "", "limit": 99},
       "gemini": {"contents": [{"role": "bot", "parts": [{"text": "hi"}]}], "tools": [{"google_search": 3}]}}
SPELLINGS = {
    "anthropic.messages": ["/v1/messages", "/v1/messages/", "/v1/messages?beta=true",
                           "/v1/messages/?beta=true"],
    "anthropic.count_tokens": ["/v1/messages/count_tokens", "/v1/messages/count_tokens/"],
    "openai.responses": ["/v1/responses", "/v1/responses/"],
    "azure.responses": ["/openai/v1/responses", "/openai/v1/responses/",
                        "/openai/responses?api-version=2025-04-01", "/openai/deployments/gpt-5/responses",
                        "/openai/deployments/gpt-5/responses/"],
    "cloudflare.websearch": ["/client/v4/accounts/abc/ai/websearch", "/client/v4/accounts/abc/ai/websearch/"],
    "openai.chat": ["/v1/chat/completions", "/v1/chat/completions/", "/api/v1/chat/completions",
                    "/chat/completions"],
    "azure.chat": ["/openai/v1/chat/completions", "/openai/deployments/gpt-4o/chat/completions",
                   "/openai/deployments/gpt-4o/chat/completions?api-version=2025-04-01"],
    "gemini.generate": ["/v1beta/models/gemini-2.5-flash:generateContent",
                        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                        "/v1beta/models/gemini-2.5-flash:generateContent?key=k",
                        "/v1/models/gemini-2.5-pro:generateContent",
                        "/v1alpha/models/gemini-2.5-flash:streamGenerateContent?alt=sse"],
    "vertex.generate": ["/v1beta1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash"
                        ":generateContent",
                        "/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash"
                        ":streamGenerateContent?alt=sse",
                        "/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent"],
}


def test_every_spelling_of_every_route_is_checked_against_the_same_contract(serve: Any) -> None:
    assert set(SPELLINGS) == {route.name for route in ROUTES}
    fake = serve()
    for route in ROUTES:
        assert route.contracts is not None
        body = BAD[route.contracts.request.partition(".")[0]]
        expected = [(v.pointer, v.keyword) for v in contracts.validate(route.contracts.request, body)]
        assert len(expected) >= 2, route.name
        for path in SPELLINGS[route.name]:
            httpx.post(f"{fake.url}{path}", json=body)
            entry = fake.journal[-1]
            assert entry.route == route.name, path
            assert [(v["pointer"], v["keyword"]) for v in entry.request_violations] == expected, path


def _key() -> str:
    return "sk" + "-ant-api03-" + "Zq7" * 31 + "AA"  # assembled: never written whole in this file


@pytest.mark.parametrize("enforce", [True, False])
def test_a_key_in_an_invalid_request_is_never_echoed_whole(serve: Any, enforce: bool) -> None:
    key = _key()
    fake = serve(message_cassette("a"), enforce_contracts=enforce)
    body = {**anthropic_request(), key: 1, "max_tokens": key,
            "messages": [{"role": key, "content": "hi"}], "metadata": {"user_id": key}}
    response = httpx.post(f"{fake.url}/v1/messages?k={key}", json=body)
    assert response.status_code == (400 if enforce else 200)
    sent = response.text + json.dumps(dict(response.headers))
    assert len(fake.journal[0].request_violations) >= 2  # each quotes the key, masked
    shown = sent + json.dumps(fake.journal[0].request_violations)
    assert all(key[cut:cut + 12] not in shown for cut in range(len(key) - 12)), shown
    assert "sk-a" in shown


def test_a_key_in_an_unmatched_request_is_never_echoed_whole(serve: Any) -> None:
    key = _key()
    fake = serve(message_cassette("a"), match_on=["model"])
    body = {**anthropic_request(model=key), "metadata": {"user_id": key}}
    response = httpx.post(f"{fake.url}/v1/messages", json=body)
    assert response.status_code == 404
    shown = response.text + json.dumps(dict(response.headers)) + json.dumps(fake.journal[0].near_misses)
    assert all(key[cut:cut + 12] not in shown for cut in range(len(key) - 12)), shown
    received = {d["pointer"]: d.get("received") for d in fake.journal[0].near_misses[0]["diff"]}
    assert received["/model"] == "sk-a…AA (108 chars)"  # a string: masked in place
    assert received["/metadata"] == '{"user_id": "sk-a…AA (108 chars)"}'  # holding one: its masked JSON
