"""The official ``google-genai`` SDK pointed at the fake provider: the Gemini Developer API
(``/v1beta/models/M:generateContent``, key in ``x-goog-api-key``) and Vertex AI
(``/v1beta1/projects/P/locations/L/publishers/google/models/M``, bearer token).

The SDK's parse of each replayed response (and of each replayed stream chunk) equals its parse of the recorded
body, for the synthesized cassettes and for real recordings (pydantic-ai's, under ``cassettes/recorded/``)
sent their own recorded requests; the path, not the body, asks for a stream; faults answer in Google's error
envelope, which the SDK raises as ``ClientError`` / ``ServerError`` with the recorded code and status.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials
from recordings import recorded
from server_support import bundled

from replaykit import cassette, contracts, routes
from replaykit.cassette import Interaction
from replaykit.server import FakeProvider, Fault

pytestmark = pytest.mark.both_lanes  # every response the same with the lane and without it

MODEL = "gemini-2.5-flash"
QUESTION = [{"role": "user", "parts": [{"text": "When was Python 3.13.0 released?"}]}]
SEARCH = types.GenerateContentConfig(tools=[types.Tool(google_search=types.GoogleSearch())])
LOCAL = {"sdk_http_response", "automatic_function_calling_history"}  # the SDK's own, not the wire's
RECORDED = [f"pydantic-ai__gemini_{name}.yaml" for name in (
    "web_search_tool", "web_search_tool_stream", "web_search_history_from_anthropic", "url_context",
    "url_context_stream", "vertex_provider")]


def _options(base_url: str | None = None) -> types.HttpOptions:
    return types.HttpOptions(base_url=base_url, retry_options=types.HttpRetryOptions(attempts=1))


def _client(fake: FakeProvider, vertex: bool = False) -> genai.Client:
    if vertex:
        return genai.Client(vertexai=True, project="replaykit-example", location="us-central1",
                            credentials=Credentials(token="test"),  # type: ignore[no-untyped-call]
                            http_options=_options(fake.base_url("vertex")))
    return genai.Client(api_key="test-key", http_options=_options(fake.base_url("gemini")))


def _dump(response: types.GenerateContentResponse) -> dict[str, Any]:
    return response.model_dump(mode="json", exclude_none=True, exclude=LOCAL)


def _parsed(body: Any) -> dict[str, Any]:
    """The SDK's parse of a recorded body (a GenerateContentResponse or a stream chunk)."""
    return _dump(types.GenerateContentResponse._from_response(response=body, kwargs={}))


def _recorded(relative: str) -> list[dict[str, Any]]:
    """The SDK's parse of the recorded response: one for a body, one per event for a stream."""
    return _parsed_response(cassette.load(bundled(relative)).interactions[0])


def _parsed_response(item: Interaction) -> list[dict[str, Any]]:
    response = item.response
    if response.is_stream:
        return [_parsed(event.json()) for event in response.events if event.data is not None]
    return [_parsed(response.json())]


@pytest.mark.parametrize(("relative", "vertex"), [("gemini/grounding.yaml", False),
                                                   ("gemini/url_context.yaml", False),
                                                   ("vertex/grounding.yaml", True)])
def test_generate_content_parses_as_the_recording(serve: Any, relative: str, vertex: bool) -> None:
    fake = serve(bundled(relative))
    client = _client(fake, vertex)  # held: a client dropped at once closes its connections
    got = client.models.generate_content(model=MODEL, contents=QUESTION, config=SEARCH)
    assert [_dump(got)] == _recorded(relative)
    assert fake.journal[0].route == ("vertex.generate" if vertex else "gemini.generate")


@pytest.mark.parametrize(("relative", "vertex"), [("gemini/grounding_stream.yaml", False),
                                                   ("gemini/url_context_stream.yaml", False),
                                                   ("vertex/grounding_stream.yaml", True)])
def test_each_streamed_chunk_parses_as_the_recorded_one(serve: Any, relative: str, vertex: bool) -> None:
    fake = serve(bundled(relative))
    client = _client(fake, vertex)
    chunks = client.models.generate_content_stream(model=MODEL, contents=QUESTION, config=SEARCH)
    got = [_dump(chunk) for chunk in chunks]
    assert got == _recorded(relative)
    assert got[-1]["candidates"][0]["grounding_metadata"]["grounding_supports"]
    assert fake.journal[0].stream and fake.journal[0].chunks == len(got) == 3


def test_the_path_not_the_body_chooses_the_stream(serve: Any) -> None:
    fake = serve(bundled("gemini/grounding_stream.yaml"), bundled("gemini/grounding.yaml"))
    client = _client(fake)
    plain = client.models.generate_content(model=MODEL, contents=QUESTION, config=SEARCH)
    streamed = list(client.models.generate_content_stream(model=MODEL, contents=QUESTION, config=SEARCH))
    assert [_dump(plain)] == _recorded("gemini/grounding.yaml")
    assert [_dump(chunk) for chunk in streamed] == _recorded("gemini/grounding_stream.yaml")
    assert [entry.matched["cassette"].endswith(name) for entry, name in  # type: ignore[index]
            zip(fake.journal, ("grounding.yaml", "grounding_stream.yaml"), strict=True)] == [True, True]


def test_the_model_in_the_path_is_matched(serve: Any) -> None:
    fake = serve(bundled("gemini/grounding.yaml"), match_on=["model"])
    client = _client(fake)
    with pytest.raises(errors.ClientError) as raised:
        client.models.generate_content(model="gemini-2.5-pro", contents=QUESTION, config=SEARCH)
    assert raised.value.code == 404 and raised.value.status == "NOT_FOUND"
    got = client.models.generate_content(model=MODEL, contents=QUESTION, config=SEARCH)
    assert [_dump(got)] == _recorded("gemini/grounding.yaml")


@pytest.mark.parametrize(("relative", "kind", "code", "status"), [
    ("gemini/error_429_resource_exhausted.yaml", errors.ClientError, 429, "RESOURCE_EXHAUSTED"),
    ("gemini/error_503_unavailable.yaml", errors.ServerError, 503, "UNAVAILABLE"),
])
def test_recorded_errors_raise_the_sdk_error(serve: Any, relative: str, kind: type[errors.APIError],
                                             code: int, status: str) -> None:
    fake = serve(bundled(relative))
    client = _client(fake)
    with pytest.raises(kind) as raised:
        client.models.generate_content(model=MODEL, contents=QUESTION, config=SEARCH)
    assert (raised.value.code, raised.value.status) == (code, status)


@pytest.mark.parametrize(("status", "kind", "name"), [(429, errors.ClientError, "RESOURCE_EXHAUSTED"),
                                                      (503, errors.ServerError, "UNAVAILABLE"),
                                                      (500, errors.ServerError, "INTERNAL"),
                                                      (400, errors.ClientError, "INVALID_ARGUMENT")])
def test_status_faults_answer_in_googles_envelope(serve: Any, status: int, kind: type[errors.APIError],
                                                  name: str) -> None:
    fake = serve(bundled("gemini/grounding.yaml"), faults=[Fault("status", status=status)])
    client = _client(fake)
    with pytest.raises(kind) as raised:
        client.models.generate_content(model=MODEL, contents=QUESTION, config=SEARCH)
    assert (raised.value.code, raised.value.status) == (status, name)


def test_a_mid_stream_error_is_raised_after_the_chunks_before_it(serve: Any) -> None:
    fault = Fault("error_event", after=1, error_type="UNAVAILABLE", message="The model is overloaded.")
    fake = serve(bundled("gemini/grounding_stream.yaml"), faults=[fault])
    got: list[Any] = []
    client = _client(fake)
    with pytest.raises(errors.ServerError) as raised:
        got.extend(client.models.generate_content_stream(model=MODEL, contents=QUESTION, config=SEARCH))
    assert raised.value.status == "UNAVAILABLE" and len(got) == 1
    assert fake.journal[0].faults[0]["applied"]


@pytest.mark.parametrize("vertex", [False, True])
def test_the_sdk_reads_the_base_url_variables(serve: Any, monkeypatch: pytest.MonkeyPatch,
                                              vertex: bool) -> None:
    relative = "vertex/grounding.yaml" if vertex else "gemini/grounding.yaml"
    fake = serve(bundled(relative))
    name = "GOOGLE_VERTEX_BASE_URL" if vertex else "GOOGLE_GEMINI_BASE_URL"
    monkeypatch.setenv(name, fake.base_url("vertex" if vertex else "gemini"))
    client = genai.Client(vertexai=True, project="replaykit-example", location="us-central1",
                          credentials=Credentials(token="test")) if vertex else \
        genai.Client(api_key="test-key")  # type: ignore[no-untyped-call]
    got = client.models.generate_content(model=MODEL, contents=QUESTION, config=SEARCH)
    assert [_dump(got)] == _recorded(relative)


def test_a_key_in_the_query_or_the_header_is_never_journaled(serve: Any) -> None:
    key = "AI" + "za" + "Sy" + "Q7x" * 11  # assembled: never written whole in this file
    fake = serve(bundled("gemini/grounding.yaml"), bundled("gemini/url_context.yaml"))
    path = f"/v1beta/models/{MODEL}:generateContent"
    body = {"contents": QUESTION}
    assert httpx.post(f"{fake.url}{path}?key={key}", json=body).status_code == 200
    assert httpx.post(f"{fake.url}{path}", json=body, headers={"x-goog-api-key": key}).status_code == 200
    shown = repr([(entry.query, entry.headers) for entry in fake.journal])
    assert key not in shown and "REDACTED" in shown
    assert fake.journal[0].query["key"] == ["REDACTED"]


def test_the_query_matcher_leaves_the_key_out(serve: Any, tmp_path: Any) -> None:
    recording = cassette.load(bundled("gemini/grounding.yaml"))
    request = recording.interactions[0].request
    request.uri += "?key=REDACTED"  # as a redacted recording of a ?key= request holds it
    path = tmp_path / "keyed.yaml"
    path.write_text(cassette.dumps(recording), encoding="utf-8")
    fake = serve(path, match_on=["query"], repeat=True)
    url = f"{fake.url}/v1beta/models/{MODEL}:generateContent"
    key = "AI" + "za" + "Sy" + "Q7x" * 11
    assert httpx.post(f"{url}?key={key}", json={"contents": QUESTION}).status_code == 200
    assert httpx.post(url, json={"contents": QUESTION}).status_code == 200
    assert httpx.post(f"{url}?key={key}&alt=json", json={"contents": QUESTION}).status_code == 404


def _recorded_call(fake: FakeProvider, item: Interaction) -> list[dict[str, Any]]:
    """The SDK call a recorded request is (its model, contents, systemInstruction, tools and
    generationConfig), made against the fake provider: the response, or every chunk of a stream, as the SDK
    parsed them."""
    body, path = item.request.json(), urlsplit(item.request.uri).path
    config = {**body.get("generationConfig", {}),
              **{key: body[key] for key in ("systemInstruction", "tools") if key in body}}
    model = routes.model_of(body, path)
    if "/projects/" in path:  # the recorded project and location, as the user's client had them
        client = genai.Client(vertexai=True, project=path.split("/")[3], location=path.split("/")[5],
                              credentials=Credentials(token="test"),  # type: ignore[no-untyped-call]
                              http_options=_options(fake.base_url("vertex")))
    else:
        client = _client(fake)
    if ":stream" in path:
        return [_dump(chunk) for chunk in client.models.generate_content_stream(
            model=model, contents=body["contents"], config=config)]
    return [_dump(client.models.generate_content(model=model, contents=body["contents"], config=config))]


@pytest.mark.parametrize("name", RECORDED)
def test_real_recordings_parse_as_recorded(serve: Any, name: str) -> None:
    turns = [i for i in cassette.load(recorded(name)).interactions
             if routes.classify_uri(i.request.method, i.request.uri).api == "gemini-generate"]
    fake = serve(recorded(name))
    for number, item in enumerate(turns):
        assert _recorded_call(fake, item) == _parsed_response(item)
        entry = fake.journal[number]
        assert entry.route == ("vertex.generate" if "/projects/" in item.request.uri else "gemini.generate")
        assert (entry.stream, entry.request_violations, entry.response_violations) == (
            item.response.is_stream, [], [])
        assert contracts.validate("replaykit.journal-entry", entry.to_json()) == []
