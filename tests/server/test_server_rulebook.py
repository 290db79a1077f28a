"""The rulebook through a real SDK: against ``enforce_contracts``, each rule's failing example raises the
SDK's own error class with the provider's real message, status and type, and its passing example is
served; the journal names the rule. One server for every rule (requests match on method and path, replayed
again)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from server_support import (
    ANTHROPIC,
    CLOUDFLARE,
    OPENAI,
    anthropic_message,
    anthropic_request,
    cassette_of,
    json_interaction,
)

from replaykit import contracts
from replaykit.contracts import RuleSpec
from replaykit.server import FakeProvider

SPECS = list(contracts.default().rulebook().specs.values())
RESPONSE = {"id": "resp_01", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5",
            "output": [], "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}
SEARCH = {"items": [], "metadata": {"query": "replaykit", "requestId": "r1", "latencyMs": 1}}
ERRORS = {400: (anthropic.BadRequestError, openai.BadRequestError),
          404: (anthropic.NotFoundError, openai.NotFoundError)}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    provider = FakeProvider([cassette_of(
        json_interaction(ANTHROPIC, anthropic_request(), anthropic_message("ok")),
        json_interaction(OPENAI, {"model": "gpt-5", "input": "hi"}, RESPONSE),
        json_interaction(CLOUDFLARE + "/", {"query": "replaykit", "options": {"gateway": {"id": "default"}}},
                         SEARCH),
    )], enforce_contracts=True, match_on=("method", "path"), repeat=True).start()
    yield provider
    provider.stop()
    provider.check_errors()


def _send(fake: FakeProvider, spec: RuleSpec, body: dict[str, Any]) -> Any:
    """``body`` sent as its provider's SDK sends it (Cloudflare: plain HTTP); the parsed answer."""
    if spec.contract == "anthropic.request":
        with anthropic.Anthropic(base_url=fake.url, api_key="dummy", max_retries=0) as client:
            return client.messages.create(**body)
    if spec.contract == "openai.request":
        with openai.OpenAI(base_url=fake.base_url("openai"), api_key="dummy", max_retries=0) as client:
            return client.responses.create(**body)
    account = "0123456789abcdef0123456789abcdef"
    answer = httpx.post(f"{fake.base_url('cloudflare')}/accounts/{account}/ai/websearch/", json=body)
    return answer


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.id)
def test_each_rule_is_refused_as_the_provider_refuses_it(fake: FakeProvider, spec: RuleSpec) -> None:
    expected = contracts.refusal(spec, spec.examples["fails"])
    before = len(fake.journal)
    if spec.contract == "cloudflare.request":
        answer = _send(fake, spec, spec.examples["fails"])
        assert answer.status_code == expected.status
        assert answer.json()["errors"][0] == {"code": 7000, "message": expected.message}
    else:
        sdk = 0 if spec.contract == "anthropic.request" else 1
        with pytest.raises(ERRORS[expected.status][sdk]) as caught:
            _send(fake, spec, spec.examples["fails"])
        error = caught.value.body["error"] if sdk == 0 else caught.value.body
        assert (error["type"], error["message"]) == (expected.type, expected.message)
        assert caught.value.response.headers["x-replaykit-error"].startswith(f"contract rule {spec.id} at ")
    entry = fake.journal[before]
    assert entry.verdict == "invalid"
    assert spec.id in {row.get("rule") for row in entry.request_violations}


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.id)
def test_each_rule_lets_its_passing_example_through(fake: FakeProvider, spec: RuleSpec) -> None:
    before = len(fake.journal)
    answer = _send(fake, spec, spec.examples["passes"])
    assert getattr(answer, "status_code", 200) == 200
    entry = fake.journal[before]
    assert (entry.verdict, entry.request_violations) == ("served", [])
