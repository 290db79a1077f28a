"""The official ``openai`` SDK's Chat Completions (``OpenAI``, ``AzureOpenAI``, and OpenAI's client pointed at
OpenAI-compatible hosts) against the fake provider.

For every Chat Completions cassette, plain and streamed: the SDK's parse of the replay equals its parse of the
recording (the recorded bytes served to the SDK by a mock transport), chunk for chunk on a stream, with
``web_search_options`` sent as ``chat.completions.create`` takes it; a chat fault answers in OpenAI's error
envelope and the SDK raises its own exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import openai
import pytest
from openai.types.chat.completion_create_params import CompletionCreateParamsBase
from recordings import recorded
from server_support import bundled

from replaykit import cassette
from replaykit.cassette import Interaction
from replaykit.server import FakeProvider, Fault

pytestmark = pytest.mark.both_lanes  # every response the same with the lane and without it

Json = dict[str, Any]
PARAMS = {*CompletionCreateParamsBase.__required_keys__, *CompletionCreateParamsBase.__optional_keys__,
          "stream"}
CHAT = [
    "openai/chat_web_search.yaml", "openai/chat_web_search_stream.yaml", "azure/chat_web_search.yaml",
    "openai/compatible_perplexity_sonar.yaml", "openai/compatible_perplexity_sonar_stream.yaml",
    "openai/compatible_openrouter_web.yaml", "openai/compatible_openrouter_web_stream.yaml",
]
RECORDED = ["pydantic-ai__openai_chat_web_search_tool.yaml",
            "pydantic-ai__openai_chat_web_search_user_location.yaml",
            "pydantic-ai__openrouter_web_search_annotations.yaml",
            "pydantic-ai__openrouter_web_search_annotations_stream.yaml",
            "pydantic-ai__openrouter_web_search_tool_usage.yaml",
            "pydantic-ai__openrouter_web_search_tool_usage_stream.yaml"]


def _client(item: Interaction, origin: str, http: httpx.Client | None = None) -> openai.OpenAI:
    """The client a user points at the recorded host (its path prefix kept), here at ``origin``."""
    parts = urlsplit(item.request.uri)
    if "/deployments/" in parts.path:
        return openai.AzureOpenAI(api_key="dummy", azure_endpoint=origin, max_retries=0, http_client=http,
                                  api_version=parse_qs(parts.query)["api-version"][0],
                                  azure_deployment=parts.path.split("/")[3])
    prefix = parts.path.rsplit("/chat/completions", 1)[0]
    return openai.OpenAI(api_key="dummy", base_url=origin + prefix, max_retries=0, http_client=http)


def _call(client: openai.OpenAI, item: Interaction) -> Any:
    """``chat.completions.create`` with the recorded body (another provider's own keys as ``extra_body``):
    the completion, or every chunk of a stream, as the SDK parsed them."""
    body = item.request.json()
    extra = {key: body.pop(key) for key in list(body) if key not in PARAMS}
    with client:
        got = client.chat.completions.create(**body, extra_body=extra or None)
        if body.get("stream"):
            return [chunk.to_dict(warnings=False) for chunk in got]
        return got.to_dict(warnings=False)


def _recording_parsed(item: Interaction) -> Any:
    """The SDK's parse of the recording itself: its bytes served by a mock transport."""
    def answer(request: httpx.Request) -> httpx.Response:
        headers = [(k, v[0]) for k, v in item.response.headers.items() if k.lower() != "content-length"]
        return httpx.Response(item.response.status, headers=headers, content=item.response.body)
    with httpx.Client(transport=httpx.MockTransport(answer)) as http:
        return _call(_client(item, "https://recorded.invalid", http), item)


def _cases() -> list[Path]:
    return [bundled(name) for name in CHAT] + [recorded(name) for name in RECORDED]


@pytest.mark.parametrize("path", _cases(), ids=lambda path: path.name)
def test_the_sdk_parses_the_replay_as_it_parses_the_recording(serve: Any, path: Path) -> None:
    item = cassette.load(path).interactions[0]
    fake = serve(path)
    assert _call(_client(item, fake.url), item) == _recording_parsed(item)
    assert [entry.route for entry in fake.journal] == [
        "azure.chat" if "/deployments/" in item.request.uri else "openai.chat"]
    found = [*fake.journal[0].request_violations, *fake.journal[0].response_violations]
    errors = [v for v in found if v.get("severity") != "warning"]
    assert errors == []  # [DONE], Perplexity's chat.completion.done, OpenRouter's server tool: never an error
    assert [v for v in fake.journal[0].request_violations if v["pointer"] != "/tools/0/type"] == []


def test_a_streamed_search_replays_event_by_event_with_its_annotations(serve: Any) -> None:
    path = bundled("openai/chat_web_search_stream.yaml")
    item = cassette.load(path).interactions[0]
    chunks = _call(_client(item, serve(path).url), item)
    deltas = [choice["delta"] for chunk in chunks for choice in chunk["choices"]]
    notes = [a for delta in deltas for a in delta.get("annotations", [])]
    plain = cassette.load(bundled("openai/chat_web_search.yaml")).interactions[0].response.json()
    assert notes == plain["choices"][0]["message"]["annotations"] != []
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == plain["usage"]


def test_a_chat_request_is_served_by_its_body_stream_flag(serve: Any) -> None:
    plain, stream = bundled("openai/chat_web_search.yaml"), bundled("openai/chat_web_search_stream.yaml")
    fake = serve(plain, stream)
    item = cassette.load(stream).interactions[0]
    body = item.request.json()
    sent = httpx.post(f"{fake.url}/v1/chat/completions", json=body)
    assert sent.headers["content-type"].startswith("text/event-stream")
    assert sent.text.rstrip().endswith("data: [DONE]")
    again = httpx.post(f"{fake.url}/v1/chat/completions", json={k: v for k, v in body.items()
                                                                if k not in ("stream", "stream_options")})
    assert again.headers["content-type"].startswith("application/json")
    assert again.json()["object"] == "chat.completion"


def test_a_chat_fault_answers_in_openais_envelope(serve: Any) -> None:
    path = bundled("openai/chat_web_search.yaml")
    item = cassette.load(path).interactions[0]
    fake: FakeProvider = serve(path, faults=[Fault(kind="status", status=429)])
    with pytest.raises(openai.RateLimitError) as raised:
        _call(_client(item, fake.url), item)
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "rate_limit_exceeded"


def test_the_recorded_error_raises_the_sdks_exception(serve: Any) -> None:
    path = recorded("pydantic-ai__openai_chat_web_search_not_supported.yaml")
    item = cassette.load(path).interactions[0]
    with pytest.raises(openai.BadRequestError) as raised:
        _call(_client(item, serve(path).url), item)
    assert raised.value.param == "web_search_options"


def test_a_mid_stream_error_is_openais_error_line_and_the_sdk_raises_it(serve: Any) -> None:
    path = bundled("openai/chat_web_search_stream.yaml")
    item = cassette.load(path).interactions[0]
    fake = serve(path, faults=[Fault(kind="error_event", after=2, message="overloaded")])
    with pytest.raises(openai.APIError, match="overloaded"):
        _call(_client(item, fake.url), item)
    raw = httpx.post(f"{fake.url}/v1/chat/completions", json=item.request.json()).text
    assert raw.count("data: ") == 3 and raw.rstrip().endswith('"param": null, "code": null}}')
    assert "event:" not in raw
