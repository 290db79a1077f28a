"""Error provenance end to end: a reference harness step, the real SDK clients and the loopback fake provider.

The harness step restores a stored transcript (validation), estimates it (estimation), projects the request
(preparation), sends it with the ``anthropic`` or ``openai`` async client (SDK retries off) and retries by
the taxonomy of :mod:`replaykit.provenance`. Every failure leaves the step wrapped in a generic
``StepError``, as real harnesses do; the outcome is written by classifying that wrapper. The journal then
shows what reached the provider.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest

from replaykit import contracts, replay, server
from replaykit import transcript as transcript_module
from replaykit.assertions import (
    assert_no_provider_request,
    assert_provenance,
    assert_requests,
    assert_retries,
    describe_journal,
    journal_entries,
    outcome_fields,
)
from replaykit.errors import LocalRequestError, UsageError
from replaykit.provenance import ErrorInfo, classify, outcome_json
from replaykit.resources import data_dir

Json = dict[str, Any]
NOW = 1_764_662_420_000
CASSETTES = [data_dir("cassettes") / "anthropic" / "web_search.yaml",
             data_dir("cassettes") / "openai" / "web_search.yaml"]
ROUTES = {"anthropic": "anthropic.messages", "openai": "openai.responses"}
STORED: Json = {
    "version": 1, "system": "You are a research assistant.", "tools": [],
    "messages": [
        {"role": "user", "content": "What changed in the Web Search API this week?",
         "timestamp": NOW - 20_000},
        {"role": "assistant", "provider": "anthropic", "api": "anthropic-messages",
         "model": "claude-sonnet-4-5", "stopReason": "stop", "timestamp": NOW - 15_000,
         "usage": {"input": 2050, "output": 310, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2360},
         "content": [
             {"type": "hostedSearch", "phase": "result", "provider": "anthropic", "api": "anthropic-messages",
              "toolUseId": "srvtoolu_01", "results": [{"url": "https://example.com/changelog",
                                                       "title": "Changelog", "pageAge": None}]},
             {"type": "text", "text": "It gained a linkup provider."}]},
    ]}


# ---------------------------------------------------------------- the reference harness step


class StepError(RuntimeError):
    """The generic error a harness wraps every failed step in (provenance must survive it)."""


def careful_estimate(transcript: Json) -> int:
    """ceil(chars / 4) over the whole stored conversation: never looks for fields a block may lack."""
    return math.ceil(len(json.dumps(transcript["messages"], ensure_ascii=False)) / 4)


def naive_estimate(transcript: Json) -> int:
    """The defect of the seed report: every non-text assistant block is taken for a tool call."""
    chars = 0
    for message in transcript["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            chars += len(block["text"]) if block["type"] == "text" else len(block["name"])
    return math.ceil(chars / 4)


@dataclass(frozen=True)
class Step:
    """One turn to run: the new prompt and where it goes."""

    provider: str
    model: str
    prompt: str = "And what about the docs?"


@dataclass
class Harness:
    """A small, correct harness: local checks first, then the request, retried by the taxonomy."""

    fake: Any
    estimator: Callable[[Json], int] = careful_estimate
    attempts: int = 3
    timeout: float = 5.0
    window: int = 200_000
    failures: list[ErrorInfo] = field(default_factory=list)
    transcript: Json | None = None
    estimates: list[Json] = field(default_factory=list)

    async def run(self, data: object, step: Step) -> Json:
        """The target's top level: the step's outcome (target-outcome contract), whatever happened."""
        try:
            final = await self.step(data, step)
            return {"status": "ok", "transcript": final, "persistWrites": 0, "estimates": self.estimates}
        except (Exception, asyncio.CancelledError) as exc:
            return {**outcome_json(exc), "transcript": self.transcript, "persistWrites": 0,
                    "estimates": self.estimates}

    async def step(self, data: object, step: Step) -> Json:
        """Validate, estimate, prepare (all local), then send with retries; the new transcript."""
        try:
            self.transcript = dict(transcript_module.restore(data))
            self.estimates.append({"step": 0, "tokens": self._estimate(self.transcript)})
            prompt = {"role": "user", "content": step.prompt, "timestamp": NOW}
            asked = {**self.transcript, "messages": [*self.transcript["messages"], prompt]}
            body = self._prepare(asked, step)
        except LocalRequestError as exc:
            raise StepError("the step failed before any request was made") from exc
        answer = await self._send_with_retries(step, body)
        return {**asked, "messages": [*asked["messages"], answer]}

    def _estimate(self, restored: Json) -> int:
        try:
            tokens = self.estimator(restored)
        except Exception as exc:
            message = f"the estimator failed ({type(exc).__name__})"
            raise LocalRequestError(message, phase="estimation") from exc
        if not 0 <= tokens <= self.window:
            message = f"{tokens} tokens do not fit the {self.window} window"
            raise LocalRequestError(message, phase="estimation")
        return tokens

    def _prepare(self, asked: Json, step: Step) -> Json:
        try:
            api = replay.PROVIDERS.get(step.provider, "unknown")
            max_tokens = 1024 if step.provider == "anthropic" else None
            target = replay.ProviderModel(step.provider, api, step.model, max_tokens)
        except UsageError as exc:
            raise LocalRequestError(str(exc), phase="preparation", pointer="/steps/0/provider") from exc
        return dict(replay.project(asked, target))

    async def _send_with_retries(self, step: Step, body: Json) -> Json:
        for attempt in range(1, self.attempts + 1):
            try:
                return await self._send(step, body)
            except asyncio.CancelledError as exc:
                raise StepError("the step was cancelled") from exc
            except Exception as exc:
                info = classify(exc)
                self.failures.append(info)
                if not info.retryable or attempt == self.attempts:
                    raise StepError(f"the step failed after {attempt} attempt(s)") from exc
        raise AssertionError("unreachable: attempts must be >= 1")

    async def _send(self, step: Step, body: Json) -> Json:
        options = {"api_key": "dummy", "max_retries": 0, "timeout": self.timeout,
                   "base_url": self.fake.base_url(step.provider)}
        if step.provider == "anthropic":
            async with anthropic.AsyncAnthropic(**options) as client:
                message = await client.messages.create(**body)
            return dict(transcript_module.from_anthropic(message.to_dict(), timestamp=NOW + 1))
        async with openai.AsyncOpenAI(**options) as client:
            response = await client.responses.create(**body)
        return dict(transcript_module.from_openai(response.to_dict(), timestamp=NOW + 1))


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def shared_fake() -> Iterator[Any]:
    with server.FakeProvider(CASSETTES, repeat=True) as fake:
        yield fake


@pytest.fixture
def fake(shared_fake: Any) -> Iterator[Any]:
    shared_fake.reset()
    yield shared_fake
    shared_fake.check_errors()


def _valid(outcome: Json) -> Json:
    """``outcome`` after checking it against contracts/replaykit/target-outcome.schema.json."""
    assert contracts.validate("replaykit.target-outcome", outcome) == []
    return outcome


def _run(fake: Any, data: object, step: Step, **options: Any) -> tuple[Json, Harness]:
    harness = Harness(fake, **options)
    return _valid(asyncio.run(harness.run(data, step))), harness


def _fault(provider: str, **fields: Any) -> Any:
    return server.Fault(route=ROUTES[provider], nth=1, **fields)


PROVIDERS = [Step("anthropic", "claude-sonnet-4-5"), Step("openai", "gpt-5")]


# ---------------------------------------------------------------- the local phases are terminal


def _broken_container() -> Json:
    data = copy.deepcopy(STORED)
    data["messages"][1]["content"] = {"type": "text", "text": "not a list"}
    return data


LOCAL_CASES = {
    "validation": (_broken_container, {}, None),
    "estimation": (lambda: copy.deepcopy(STORED), {"estimator": naive_estimate}, None),
    "preparation": (lambda: copy.deepcopy(STORED), {}, "mistral"),
}


@pytest.mark.parametrize("step", PROVIDERS, ids=lambda s: s.provider)
@pytest.mark.parametrize("phase", list(LOCAL_CASES))
def test_each_local_phase_is_terminal_with_no_provider_request(fake: Any, phase: str, step: Step) -> None:
    make, options, provider = LOCAL_CASES[phase]
    outcome, harness = _run(fake, make(), Step(provider or step.provider, step.model), **options)
    assert_provenance(outcome, outcome="error", code="LOCAL_REQUEST_ERROR", phase=phase, provenance="local",
                      retryable=False)
    assert harness.failures == []
    assert_no_provider_request(fake.journal)


def test_the_local_error_message_is_safe_and_points_at_the_fault(fake: Any) -> None:
    key = "sk-" + "ant-api03-" + "k3Y" * 16
    data = _broken_container()
    data["messages"][1]["content"]["text"] = key
    outcome, _ = _run(fake, data, PROVIDERS[0])
    assert "/messages/1/content" in outcome["error"]["message"]
    assert key[:16] not in json.dumps(outcome)


def test_the_careful_estimator_passes_where_the_naive_one_failed(fake: Any) -> None:
    outcome, _ = _run(fake, copy.deepcopy(STORED), PROVIDERS[0])
    assert outcome["status"] == "ok" and outcome["estimates"][0]["tokens"] > 0
    assert_requests(fake.journal, 1, route="anthropic.messages")


# ---------------------------------------------------------------- provider and transport errors


@pytest.mark.parametrize(("provider", "status"), [("anthropic", 429), ("anthropic", 503), ("anthropic", 529),
                                                  ("openai", 429), ("openai", 503)])
def test_transient_statuses_are_retried_before_giving_up(fake: Any, provider: str, status: int) -> None:
    fake.inject(_fault(provider, kind="status", status=status, retry_after=0))
    step = next(s for s in PROVIDERS if s.provider == provider)
    outcome, harness = _run(fake, copy.deepcopy(STORED), step)
    assert outcome["status"] == "ok"
    assert [(f.code, f.status, f.retryable) for f in harness.failures] == [("PROVIDER_ERROR", status, True)]
    assert_retries(fake.journal, ROUTES[provider], 1)


@pytest.mark.parametrize(("provider", "status"), [("anthropic", 429), ("openai", 503)])
def test_a_persisting_transient_error_gives_up_after_the_last_attempt(fake: Any, provider: str,
                                                                      status: int) -> None:
    fake.inject(_fault(provider, kind="status", status=status, retry_after=0, times=3))
    step = next(s for s in PROVIDERS if s.provider == provider)
    outcome, _ = _run(fake, copy.deepcopy(STORED), step, attempts=3)
    assert_provenance(outcome, outcome="error", code="PROVIDER_ERROR", provenance="provider", status=status,
                      retryable=True)
    assert_retries(fake.journal, ROUTES[provider], 2)


@pytest.mark.parametrize("step", PROVIDERS, ids=lambda s: s.provider)
@pytest.mark.parametrize("status", [400, 401])
def test_a_client_error_is_not_retried(fake: Any, step: Step, status: int) -> None:
    fake.inject(_fault(step.provider, kind="status", status=status))
    outcome, _ = _run(fake, copy.deepcopy(STORED), step)
    assert_provenance(outcome, outcome="error", code="PROVIDER_ERROR", status=status, retryable=False)
    assert_retries(fake.journal, ROUTES[step.provider], 0)


def test_x_should_retry_false_stops_the_retry(fake: Any) -> None:
    fake.inject(_fault("anthropic", kind="status", status=503, should_retry=False))
    outcome, _ = _run(fake, copy.deepcopy(STORED), PROVIDERS[0])
    assert_provenance(outcome, outcome="error", status=503, retryable=False)
    assert_retries(fake.journal, "anthropic.messages", 0)


@pytest.mark.parametrize("step", PROVIDERS, ids=lambda s: s.provider)
def test_a_dropped_connection_is_a_transport_error_and_retried(fake: Any, step: Step) -> None:
    fake.inject(_fault(step.provider, kind="disconnect", after=0))
    outcome, harness = _run(fake, copy.deepcopy(STORED), step)
    assert outcome["status"] == "ok"
    assert [(f.code, f.provenance, f.retryable) for f in harness.failures] == [
        ("TRANSPORT_ERROR", "transport", True)]
    assert_retries(fake.journal, ROUTES[step.provider], 1)


def test_a_client_deadline_is_deadline_exceeded(fake: Any) -> None:
    fake.inject(_fault("anthropic", kind="delay_headers", ms=1500, times=2))
    outcome, harness = _run(fake, copy.deepcopy(STORED), PROVIDERS[0], attempts=2, timeout=0.3)
    assert_provenance(outcome, outcome="error", code="DEADLINE_EXCEEDED", provenance="deadline",
                      retryable=True)
    assert len(harness.failures) == 2
    _wait_for_entries(fake, 2)
    assert_retries(fake.journal, "anthropic.messages", 1)


# ---------------------------------------------------------------- cancellation


def _wait_for_entries(fake: Any, count: int, seconds: float = 10.0) -> None:
    """The journal records a request once it is answered; a cancelled one is recorded when the server sees
    the client go."""
    async def wait() -> None:
        for _ in range(int(seconds / 0.02)):
            if len(fake.journal) >= count:
                return
            await asyncio.sleep(0.02)
    asyncio.run(wait())


@pytest.mark.parametrize("step", PROVIDERS, ids=lambda s: s.provider)
def test_a_cancelled_request_is_aborted_not_an_error_and_not_retried(fake: Any, step: Step) -> None:
    fake.inject(_fault(step.provider, kind="delay_headers", ms=3000))
    harness = Harness(fake)

    async def main() -> Json:
        task = asyncio.ensure_future(harness.run(copy.deepcopy(STORED), step))
        await asyncio.sleep(0.4)
        task.cancel()
        return await task

    outcome = _valid(asyncio.run(main()))
    assert_provenance(outcome, outcome="aborted", code="CANCELLED", provenance="cancelled", retryable=False)
    assert harness.failures == []
    _wait_for_entries(fake, 1)
    assert_requests(fake.journal, 1, route=ROUTES[step.provider])


def test_the_wrapped_cancellation_keeps_its_provenance() -> None:
    try:
        try:
            raise asyncio.CancelledError()
        except asyncio.CancelledError as exc:
            raise StepError("subagent stopped") from exc
    except StepError as wrapped:
        assert outcome_json(wrapped)["status"] == "aborted"


def test_a_local_error_wrapped_in_a_generic_exception_keeps_its_provenance() -> None:
    async def main() -> BaseException:
        try:
            await Harness(fake=None).step(_broken_container(), PROVIDERS[0])
        except StepError as exc:
            return exc
        raise AssertionError("the step did not fail")

    wrapped = asyncio.run(main())
    assert isinstance(wrapped.__cause__, LocalRequestError)
    assert_provenance(wrapped, code="LOCAL_REQUEST_ERROR", phase="validation", provenance="local")


def test_provider_details_are_admitted_by_the_outcome_contract(fake: Any) -> None:
    fake.inject(_fault("anthropic", kind="status", status=400))
    harness = Harness(fake)
    outcome = asyncio.run(harness.run(copy.deepcopy(STORED), PROVIDERS[0]))
    assert outcome["error"]["status"] == 400 and outcome["error"]["providerType"]
    _valid(outcome)


# ---------------------------------------------------------------- the assertion helpers themselves


def _entry(seq: int, status: int, route: str = "anthropic.messages", **extra: Any) -> Json:
    return {"seq": seq, "method": "POST", "path": "/v1/messages", "route": route,
            "provider": route.split(".")[0], "status": status, "faults": [], "outcome": "complete", **extra}


def test_assert_no_provider_request_lists_what_was_sent() -> None:
    assert_no_provider_request([])
    journal = [_entry(1, 429, faults=[{"kind": "status", "status": 429}]), _entry(2, 200)]
    with pytest.raises(AssertionError) as caught:
        assert_no_provider_request(journal)
    assert str(caught.value) == ("expected no provider request, the journal holds 2:\n"
                                 "  #1 POST /v1/messages -> 429 [anthropic.messages] faults: status=429\n"
                                 "  #2 POST /v1/messages -> 200 [anthropic.messages]")


def test_assert_retries_counts_per_route() -> None:
    journal = [_entry(1, 503), _entry(2, 200), _entry(3, 200, route="openai.responses")]
    assert_retries(journal, "anthropic.messages", 1)
    assert_retries(journal, "anthropic", 1)
    assert_retries(journal, "openai.responses", 0)
    expected = r"expected exactly 2 retries on anthropic.messages \(3 requests\), found 1 retries:\n  #1 POST"
    with pytest.raises(AssertionError, match=expected):
        assert_retries(journal, "anthropic.messages", 2)
    with pytest.raises(AssertionError, match=r"expected exactly 0 retries on anthropic .*found 1 retries"):
        assert_retries(journal, "anthropic", 0)
    with pytest.raises(AssertionError, match="found no request at all"):
        assert_retries(journal, "cloudflare.websearch", 0)
    with pytest.raises(ValueError, match="must not be negative"):
        assert_retries(journal, "anthropic", -1)


def test_assert_requests_and_describe() -> None:
    journal = [_entry(1, 200, outcome="client_closed")]
    assert_requests(journal, 1)
    assert describe_journal([]) == "  (no requests)"
    assert "client_closed" in describe_journal(journal)
    with pytest.raises(AssertionError, match="expected 0 provider request"):
        assert_requests(journal, 0, route="anthropic.messages")
    with pytest.raises(TypeError, match="not a journal"):
        journal_entries({"seq": 1})


def test_assert_provenance_reports_each_wrong_field() -> None:
    error = {"code": "PROVIDER_ERROR", "provenance": "provider", "retryable": True, "message": "m",
             "status": 429}
    outcome = {"status": "error", "error": error}
    assert_provenance(outcome, {"code": "PROVIDER_ERROR"}, status=429, outcome="error")
    assert outcome_fields(outcome)["outcome"] == "error" and outcome_fields(outcome)["status"] == 429
    with pytest.raises(AssertionError) as caught:
        assert_provenance(outcome, provenance="local", phase="validation", code="PROVIDER_ERROR")
    assert str(caught.value).splitlines()[:3] == [
        "the outcome's provenance is not what was expected:",
        "  provenance: expected 'local', got 'provider'",
        "  phase: expected 'validation', got None"]
    assert_provenance(classify(asyncio.CancelledError()), outcome="aborted")
    assert_provenance(asyncio.CancelledError(), provenance="cancelled")
    with pytest.raises(ValueError, match="at least one"):
        assert_provenance(outcome)


def test_a_real_journal_entry_is_read(fake: Any) -> None:
    _run(fake, copy.deepcopy(STORED), PROVIDERS[1])
    [entry] = journal_entries(fake.journal)
    assert (entry["route"], entry["status"]) == ("openai.responses", 200)
    assert "[openai.responses]" in describe_journal(fake.journal)
