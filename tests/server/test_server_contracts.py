"""Contract verdicts in the journal, and ``enforce_contracts``: an invalid request gets the provider's 400."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest
from server_support import ANTHROPIC, anthropic_request, cassette_of, json_interaction, message_cassette

from replaykit import contracts
from replaykit.server import verdicts

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
        assert caught.value.body["error"]["message"].startswith("/tools/0/blocked_domains: ")
        assert contracts.validate("anthropic.error", caught.value.body) == []
        assert client.messages.create(**anthropic_request()).content[0].text == "a"  # not used up
    assert [e.verdict for e in fake.journal] == ["invalid", "served"]


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
