"""Matching: ordered per route by default, matchers, strict body diffs, near misses, unused interactions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from server_support import (
    ANTHROPIC,
    CLOUDFLARE,
    OPENAI,
    anthropic_message,
    anthropic_request,
    bundled,
    cassette_of,
    json_interaction,
    message_cassette,
    stream_cassette,
    stream_request,
)

from replaykit import cassette, contracts
from replaykit.cassette import Request
from replaykit.errors import MatchError, UsageError
from replaykit.resources import data_dir
from replaykit.server import FakeProvider, Received
from replaykit.server.matching import Pool, Slot, is_named, slots_of


def _text(response: httpx.Response) -> str:
    return str(response.json()["content"][0]["text"])


def _post(fake: FakeProvider, body: Any = None, path: str = "/v1/messages") -> httpx.Response:
    return httpx.post(f"{fake.url}{path}", json=body if body is not None else anthropic_request())


def _openai(text: str) -> Any:
    return json_interaction(OPENAI, {"model": "gpt-5", "input": text}, {"id": text, "object": "response"})


def test_ordered_per_route(serve: Any) -> None:
    fake = serve(
        cassette_of(
            json_interaction(ANTHROPIC, anthropic_request("1"), anthropic_message("a1")),
            _openai("o1"),
            json_interaction(ANTHROPIC, anthropic_request("2"), anthropic_message("a2")),
            _openai("o2"),
        )
    )
    assert httpx.post(f"{fake.url}/v1/responses", json={}).json()["id"] == "o1"
    assert _text(_post(fake)) == "a1"
    assert _text(_post(fake)) == "a2"
    assert httpx.post(f"{fake.url}/v1/responses", json={}).json()["id"] == "o2"
    assert fake.unused() == []


def test_cassettes_are_queued_in_the_order_loaded(serve: Any) -> None:
    fake = serve(message_cassette("first"), message_cassette("second"))
    assert [_text(_post(fake)) for _ in range(2)] == ["first", "second"]
    assert [e.matched["cassette"] for e in fake.journal if e.matched] == ["<cassette 0>", "<cassette 1>"]


def test_an_exhausted_route_answers_in_the_provider_envelope(serve: Any) -> None:
    fake = serve(message_cassette("only"))
    _post(fake)
    client = anthropic.Anthropic(base_url=fake.url, api_key="dummy", max_retries=3)
    with client, pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(**anthropic_request())
    assert caught.value.body["error"]["type"] == "not_found_error"
    assert "already served" in caught.value.response.headers["x-replaykit-error"]
    assert contracts.validate("anthropic.error", caught.value.body) == []
    entry = fake.unmatched()[0]
    assert entry.verdict == "unmatched" and entry.near_misses[0]["failed"] == ["already served"]
    assert len(fake.journal) == 2  # x-should-retry: false, so the SDK did not retry


def test_a_route_with_nothing_recorded(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    response = httpx.post(f"{fake.url}/client/v4/accounts/x/ai/websearch", json={"query": "q"})
    assert response.status_code == 404
    assert response.json()["success"] is False  # the Cloudflare v4 envelope
    assert "no interaction is recorded on route cloudflare.websearch" in response.headers["x-replaykit-error"]
    other = httpx.get(f"{fake.url}/v1/models")
    assert other.status_code == 404 and other.json()["error"]["type"] == "invalid_request_error"


def test_an_unknown_path_recorded_in_a_cassette_is_served(serve: Any) -> None:
    item = json_interaction("https://api.openai.com/v1/models", None, {"data": []})
    item.request.method = "GET"
    fake = serve(cassette_of(item))
    assert httpx.get(f"{fake.url}/v1/models").json() == {"data": []}
    assert fake.journal[0].route == "GET /v1/models" and fake.journal[0].provider == "openai"


def test_body_matcher_picks_the_matching_interaction(serve: Any) -> None:
    fake = serve(message_cassette("a", "b", "c"), match_on=["body"])
    assert _text(_post(fake, anthropic_request("c"))) == "c"
    assert _text(_post(fake, anthropic_request("a"))) == "a"
    assert [u["index"] for u in fake.unused()] == [1]


def test_strict_reports_a_json_pointer_diff(serve: Any) -> None:
    fake = serve(message_cassette("a", "b"), strict=True)
    sent = anthropic_request("z")
    sent["max_tokens"] = 99
    sent["stream"] = False
    response = _post(fake, sent)
    assert response.status_code == 404
    entry = fake.unmatched()[0]
    assert [m["index"] for m in entry.near_misses] == [0, 1]
    assert entry.near_misses[0]["failed"] == ["body"]
    assert entry.near_misses[0]["diff"] == [  # the canonical views differ (stream: false is the default)
        {"pointer": "/max_tokens", "change": "changed", "received": 99, "recorded": 64},
        {"pointer": "/messages/0/content/0/text", "change": "changed", "received": "z", "recorded": "a"},
    ]
    with pytest.raises(MatchError, match=r"request 1 POST /v1/messages: .*near misses: <cassette 0>#0"):
        fake.check()


def test_near_misses_are_ranked_by_the_size_of_their_diff(serve: Any) -> None:
    fake = serve(message_cassette("a", "b", "c", "d"), strict=True)
    sent = {**anthropic_request("c"), "max_tokens": 99}
    assert _post(fake, sent).status_code == 404
    near = fake.unmatched()[0].near_misses
    assert [(m["index"], len(m["diff"])) for m in near] == [(2, 1), (0, 2), (1, 2)]  # nearest first, 3 shown


def test_strict_ignores_volatile_fields(serve: Any) -> None:
    recorded = {**anthropic_request("a"), "metadata": {"user_id": "u-1"}}
    fake = serve(
        cassette_of(json_interaction(ANTHROPIC, recorded, anthropic_message("a"))),
        strict=True,
        volatile=["/metadata/user_id", "/messages/*/cache_control"],
    )
    sent = {**anthropic_request("a"), "metadata": {"user_id": "u-2"}}
    sent["messages"][0]["cache_control"] = {"type": "ephemeral"}
    assert _post(fake, sent).status_code == 200
    assert fake.journal[0].diff == []


def test_default_volatile_fields(serve: Any) -> None:
    recorded = {**anthropic_request("a"), "metadata": {"user_id": "one"}}
    fake = serve(cassette_of(json_interaction(ANTHROPIC, recorded, anthropic_message("a"))), strict=True)
    assert _post(fake, {**anthropic_request("a"), "metadata": {"user_id": "two"}}).status_code == 200


def test_without_strict_the_diff_is_still_journaled(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    assert _post(fake, anthropic_request("different")).status_code == 200
    assert fake.journal[0].diff == [
        {"pointer": "/messages/0/content/0/text", "change": "changed", "received": "different",
         "recorded": "a"}
    ]


def test_model_matcher_reads_the_body_or_the_azure_deployment(serve: Any) -> None:
    azure = "https://x.openai.azure.com/openai/deployments/dep-b/responses?api-version=1"
    fake = serve(
        cassette_of(
            json_interaction(azure.replace("dep-b", "dep-a"), {"input": "q"}, {"id": "A"}),
            json_interaction(azure, {"input": "q"}, {"id": "B"}),
        ),
        match_on=["model"],
    )
    assert httpx.post(f"{fake.url}/openai/deployments/dep-b/responses", json={}).json()["id"] == "B"
    assert httpx.post(f"{fake.url}/openai/v1/responses", json={"model": "dep-a"}).json()["id"] == "A"


def test_query_path_and_method_matchers(serve: Any) -> None:
    uri = CLOUDFLARE + "?mode=a"
    fake = serve(
        cassette_of(
            json_interaction(uri, {"query": "q"}, {"n": 1}),
            json_interaction(uri.replace("mode=a", "mode=b"), {"query": "q"}, {"n": 2}),
        ),
        match_on=["method", "path", "query"],
    )
    base = f"{fake.url}/client/v4/accounts/0123456789abcdef0123456789abcdef/ai/websearch"
    assert httpx.post(base + "?mode=b", json={}).json() == {"n": 2}
    assert httpx.post(base + "/?mode=a", json={}).status_code == 404  # the path differs by its slash
    assert fake.unmatched()[0].near_misses[0]["failed"] == ["path"]
    assert httpx.post(base + "?mode=a", json={}).json() == {"n": 1}


def test_the_query_matcher_keeps_blank_values(serve: Any) -> None:
    """``?beta=`` is a parameter with an empty value, not no parameter: it matches itself and nothing else."""
    fake = serve(
        cassette_of(
            json_interaction(CLOUDFLARE, {"query": "q"}, {"n": 1}),
            json_interaction(CLOUDFLARE + "?beta=", {"query": "q"}, {"n": 2}),
        ),
        match_on=["query"],
    )
    base = f"{fake.url}/client/v4/accounts/0123456789abcdef0123456789abcdef/ai/websearch"
    assert httpx.post(base + "?beta=", json={}).json() == {"n": 2}  # passes over the one without it
    assert httpx.post(base, json={}).json() == {"n": 1}
    assert fake.unused() == []


def test_user_matcher(serve: Any) -> None:
    def same_user_text(received: Received, recorded: Request) -> bool:
        return bool(received.json["messages"][0]["content"] == recorded.json()["messages"][0]["content"])

    fake = serve(message_cassette("x", "y"), match_on=[same_user_text])
    assert _text(_post(fake, anthropic_request("y"))) == "y"
    _post(fake, anthropic_request("nope"))
    assert fake.unmatched()[0].near_misses[0]["failed"] == ["same_user_text"]


def test_unknown_matcher_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown matcher 'colour'"):
        FakeProvider(match_on=["colour"])


def test_repeat_serves_again_once_all_are_used(serve: Any) -> None:
    fake = serve(message_cassette("a", "b"), repeat=True)
    assert [_text(_post(fake)) for _ in range(5)] == ["a", "b", "a", "b", "a"]


def test_unused_and_check(serve: Any) -> None:
    fake = serve(message_cassette("a", "b"))
    _post(fake)
    assert [(u["index"], u["route"]) for u in fake.unused()] == [(1, "anthropic.messages")]
    fake.check()
    with pytest.raises(
        MatchError, match=r"interaction <cassette 0>#1 on anthropic.messages was never served"
    ):
        fake.check(unused=True)


def test_a_bundled_cloudflare_search_is_replayed_with_its_headers(serve: Any) -> None:
    path = bundled("cloudflare/search_ceramic.yaml")
    recorded = cassette.load(path).interactions[0]
    fake = serve(path)
    url = f"{fake.base_url('cloudflare')}/accounts/0123456789abcdef0123456789abcdef/ai/websearch/"
    response = httpx.post(url, json=recorded.request.json())
    assert response.json() == recorded.response.json()
    for name in ("cf-aig-request-id", "content-type"):
        if recorded.response.header(name):
            assert response.headers[name] == recorded.response.header(name)
    assert fake.journal[0].route == "cloudflare.websearch" and fake.journal[0].request_violations == []


def test_unused_since_loading_outlives_a_reset(serve: Any) -> None:
    fake = serve(message_cassette("a", "b"))
    _post(fake, anthropic_request("a"))
    fake.reset()
    assert [u["index"] for u in fake.unused()] == [0, 1]
    assert [u["index"] for u in fake.unused(session=True)] == [1]


# ---------------------------------------------------------------- streaming is a matcher


def test_a_stream_request_never_gets_a_json_recording_nor_the_reverse(serve: Any) -> None:
    fake = serve(message_cassette("json"), stream_cassette())  # the JSON recording comes first
    streamed = _post(fake, stream_request())
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert _text(_post(fake, anthropic_request())) == "json"
    assert [e.matched["index"] for e in fake.journal if e.matched] == [0, 0]
    assert [e.matched["cassette"] for e in fake.journal if e.matched] == ["<cassette 1>", "<cassette 0>"]


def test_a_stream_request_with_only_json_recorded_gets_a_404_that_says_why(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    response = _post(fake, stream_request("a"))
    assert response.status_code == 404
    header = response.headers["x-replaykit-error"]
    assert "passes the matchers (stream)" in header
    assert "nearest: <cassette 0>#0 (refused by: stream): /stream: only in the request sent: true" in header
    assert response.json()["error"]["message"].endswith(header)  # the SDK's exception text says it too


def test_a_json_request_never_gets_a_stream_recorded_without_stream_in_its_request(serve: Any) -> None:
    item = json_interaction(ANTHROPIC, anthropic_request(), {})
    item.response.headers["content-type"] = ["text/event-stream"]  # a stream whose request did not say so
    fake = serve(cassette_of(item))
    assert _post(fake, anthropic_request()).status_code == 404
    assert fake.unmatched()[0].near_misses[0]["failed"] == ["stream"]


# ---------------------------------------------------------------- which candidate answers


def test_body_matching_is_by_meaning_a_string_prompt_matches_it_recorded_as_blocks(serve: Any) -> None:
    blocks = {**anthropic_request("b"), "system": [{"type": "text", "text": "Be brief."}],
              "messages": [{"role": "user", "content": [{"type": "text", "text": "b"}]}]}
    recorded = cassette_of(json_interaction(ANTHROPIC, anthropic_request("a"), anthropic_message("a")),
                           json_interaction(ANTHROPIC, blocks, anthropic_message("b")))
    fake = serve(recorded, match_on=["body"])
    assert _text(_post(fake, {**anthropic_request("b"), "system": "Be brief."})) == "b"
    assert fake.journal[0].diff == []
    assert _post(fake, {**anthropic_request("a"), "system": "Other."}).status_code == 404  # a real difference


def test_an_interaction_whose_body_equals_the_request_comes_before_the_next_one(serve: Any) -> None:
    fake = serve(message_cassette("a", "b"))
    assert _text(_post(fake, anthropic_request("b"))) == "b"
    assert _text(_post(fake, anthropic_request("other"))) == "a"  # none equal: the next in order
    assert [bool(e.diff) for e in fake.journal] == [False, True]


def test_a_body_that_differs_from_the_recording_served_is_said_in_words(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    _post(fake, anthropic_request("other"))
    assert fake.journal[0].notes == [
        'the request body differs from the recording served: /messages/0/content/0/text: sent "other", '
        'recorded "a"'
    ]


def _bundled_folder(provider: str) -> Path:
    return data_dir("cassettes") / provider


def _recorded_request(name: str) -> dict[str, Any]:
    body = cassette.load(bundled(name)).interactions[0].request.json()
    assert isinstance(body, dict)
    return body


def test_a_folder_with_error_cassettes_answers_with_a_success(serve: Any) -> None:
    fake = serve(_bundled_folder("anthropic"))
    body = _recorded_request("anthropic/web_search.yaml")  # error_429 and error_529 record this body too
    with anthropic.Anthropic(base_url=fake.url, api_key="dummy", max_retries=0) as client:
        message = client.messages.create(**body)
    assert message.stop_reason == "end_turn"
    assert fake.journal[0].matched is not None
    assert fake.journal[0].matched["cassette"].endswith("anthropic/web_search.yaml")


def test_match_on_body_prefers_the_stream_that_succeeds_over_the_one_that_fails(serve: Any) -> None:
    fake = serve(_bundled_folder("anthropic"), match_on=["body"])
    body = _recorded_request("anthropic/web_search_stream.yaml")  # stream_error_overloaded's body too
    del body["stream"]
    with (anthropic.Anthropic(base_url=fake.url, api_key="dummy", max_retries=0) as client,
          client.messages.stream(**body) as stream):
        assert stream.get_final_message().stop_reason == "end_turn"
    assert fake.journal[0].matched is not None
    assert fake.journal[0].matched["cassette"].endswith("anthropic/web_search_stream.yaml")


def test_an_error_cassette_alone_is_served(serve: Any) -> None:
    fake = serve(bundled("anthropic/error_429_rate_limit.yaml"))
    assert _post(fake).status_code == 429


def test_within_a_cassette_the_recorded_order_holds(serve: Any) -> None:
    """A recorded retry: the 429 comes before the 200 that answered the same body."""
    refused = json_interaction(ANTHROPIC, anthropic_request("x"), {"type": "error"}, status=429)
    answered = json_interaction(ANTHROPIC, anthropic_request("x"), anthropic_message())
    fake = serve(cassette_of(refused, answered))
    assert [_post(fake, anthropic_request("x")).status_code for _ in range(2)] == [429, 200]


# ---------------------------------------------------------------- choosing with headers


def _choose(fake: FakeProvider, body: Any, **headers: str) -> httpx.Response:
    named = {f"x-replaykit-{name}": value for name, value in headers.items()}
    return httpx.post(f"{fake.url}/v1/messages", json=body, headers=named)


def test_headers_choose_the_cassette_and_the_interaction(serve: Any) -> None:
    names = ("web_search.yaml", "error_429_rate_limit.yaml", "web_search_follow_up.yaml")
    fake = serve(*(bundled(f"anthropic/{name}") for name in names))
    body = _recorded_request("anthropic/web_search.yaml")
    assert _choose(fake, body, cassette="error_429_rate_limit").status_code == 429
    follow_up = _choose(fake, body, cassette="anthropic/web_search_follow_up.yaml", interaction="1")
    assert follow_up.status_code == 200
    served = fake.journal[1]
    assert served.matched is not None and served.matched["index"] == 1
    assert served.notes[0] == ("chosen by x-replaykit-cassette: anthropic/web_search_follow_up.yaml, "
                               "x-replaykit-interaction: 1")
    assert not any(name.startswith("x-replaykit-") for entry in fake.journal for name in entry.headers)


def test_replaykit_headers_are_never_matched_against_recordings(serve: Any) -> None:
    seen: list[dict[str, str]] = []

    def spy(received: Received, recorded: Request) -> bool:
        seen.append(received.headers)
        return True

    fake = serve(message_cassette("a"), match_on=[spy])
    assert _choose(fake, anthropic_request("a"), cassette="<cassette 0>").status_code == 200
    assert seen and not any(name.startswith("x-replaykit-") for name in seen[0])


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"cassette": "nope"}, "x-replaykit-cassette: 'nope' names no cassette loaded on route "
                               "anthropic.messages (loaded there: <cassette 0>)"),
        ({"interaction": "first"}, "x-replaykit-interaction: 'first' is not an interaction index; send a "
                                   "0-based number"),
        ({"cassette": "<cassette 0>", "interaction": "5"}, "x-replaykit-interaction: no interaction 5 on "
                                                           "route anthropic.messages in <cassette 0>"),
    ],
)
def test_headers_that_choose_nothing_get_a_404_saying_so(
    serve: Any, headers: dict[str, str], reason: str
) -> None:
    fake = serve(message_cassette("a"))
    response = _choose(fake, anthropic_request("a"), **headers)
    assert response.status_code == 404 and reason in response.headers["x-replaykit-error"]
    assert fake.unmatched()[0].error == reason


def test_a_chosen_interaction_already_served_is_not_served_again(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    assert _choose(fake, anthropic_request("a"), interaction="0").status_code == 200
    again = _choose(fake, anthropic_request("a"), interaction="0")
    assert again.status_code == 404 and "already served" in again.headers["x-replaykit-error"]


@pytest.mark.parametrize(
    ("name", "named"),
    [("web_search", True), ("web_search.yaml", True), ("anthropic/web_search.yaml", True),
     ("anthropic/web_search", True), ("cassettes/anthropic/web_search.yaml", True), (" web_search ", True),
     ("search.yaml", False), ("web", False), ("openai/web_search", False), ("web_search.json", False)],
)
def test_a_cassette_is_named_by_its_file_name_or_a_path_ending_in_it(name: str, named: bool) -> None:
    assert is_named("cassettes/anthropic/web_search.yaml", name) is named


# ---------------------------------------------------------------- near misses reach every client


def test_a_404_names_the_nearest_interaction_and_where_its_body_differs(serve: Any) -> None:
    key = "sk" + "-ant-" + "api03-" + "Q" * 93 + "AA"  # a key-shaped value: masked wherever it is shown
    fake = serve(message_cassette("a", "b"), strict=True)
    sent = {**anthropic_request("b"), "max_tokens": 99, "service_tier": f"use {key}"}
    response = _post(fake, sent)
    header = response.headers["x-replaykit-error"]
    assert ("nearest: <cassette 0>#1 (refused by: body): /max_tokens: sent 99, recorded 64; /service_tier: "
            'only in the request sent: "use sk-a') in header
    assert key not in response.text and key not in header
    assert "sk-a...AA (108 chars)" in header  # one ASCII line
    assert "(refused by: body): /max_tokens: sent 99, recorded 64" in response.json()["error"]["message"]


def test_the_error_header_stays_one_bounded_line(serve: Any) -> None:
    fake = serve(message_cassette("a"), strict=True)
    sent = anthropic_request("line one\nline two " + "x" * 10_000)
    sent.update({f"extra{i}": "y\r\n" * 500 for i in range(20)})
    response = _post(fake, sent)
    header = response.headers["x-replaykit-error"]
    assert len(header) <= 500 and "\n" not in header and "\r" not in header
    assert "nearest: <cassette 0>#0 (refused by: body): /messages/0/content/0/text: sent " in header
    assert len(response.json()["error"]["message"]) < 1_000


# ---------------------------------------------------------------- the per-route queue (Pool with repeat)


def _received_on(route_uri: str, body: dict[str, Any]) -> Received:
    from replaykit.routes import classify_uri

    raw = json.dumps(body).encode()
    return Received.build("POST", httpx.URL(route_uri).path, {}, {}, raw, classify_uri("POST", route_uri))


def _expected(slots: list[Slot], repeat: bool) -> Slot | None:
    """The reference order, worked out from scratch: least taken first, then recorded order."""
    left = [slot for slot in slots if repeat or not slot.taken]
    return min(left, key=lambda slot: (slot.taken, slots.index(slot))) if left else None


@settings(max_examples=60, deadline=None)
@given(repeat=st.booleans(), size=st.integers(1, 6),
       steps=st.lists(st.tuples(st.sampled_from(["match", "release", "reset"]), st.integers(0, 5)),
                      max_size=40))
def test_the_route_queue_chooses_as_a_fresh_sort_would(repeat: bool, size: int,
                                                       steps: list[tuple[str, int]]) -> None:
    same = anthropic_request("same")
    items = [json_interaction(ANTHROPIC, same, anthropic_message(str(i))) for i in range(size)]
    other = [json_interaction(OPENAI, {"model": "gpt-5", "input": "x"}, {"id": "o"})]
    pool = Pool([*slots_of("a.yaml", items[: size // 2]), *slots_of("o.yaml", other),
                 *slots_of("b.yaml", items[size // 2:])], repeat=repeat)
    on_route = [slot for slot in pool.slots if slot.route.name == "anthropic.messages"]
    taken: list[Slot] = []
    for op, which in steps:
        if op == "match":
            expected = _expected(on_route, repeat)
            chosen = pool.match(_received_on(ANTHROPIC, same)).slot
            assert chosen is expected
            taken += [chosen] if chosen is not None else []
        elif op == "release" and taken:
            pool.release(taken.pop(which % len(taken)))
        elif op == "reset":
            pool.reset()
            taken.clear()
