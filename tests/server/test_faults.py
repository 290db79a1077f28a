"""Every fault kind, observed from a client; and the three ways of declaring faults (Python, CLI, file)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from server_support import (
    CLOUDFLARE,
    OPENAI,
    cassette_of,
    json_interaction,
    message_cassette,
    stream_cassette,
    stream_request,
)

from replaykit import contracts, sse
from replaykit.errors import UsageError
from replaykit.server import FakeProvider, Fault, Timing, load_faults
from replaykit.server.faults import apply_all
from replaykit.server.plan import plan_for

STREAM_EVENTS = 8  # stream_cassette(text_deltas=3)


def _stream(fake: FakeProvider, timeout: float = 5.0) -> tuple[list[bytes], Exception | None]:
    chunks: list[bytes] = []
    try:
        with (
            httpx.Client(timeout=timeout) as client,
            client.stream("POST", f"{fake.url}/v1/messages", json=stream_request()) as resp,
        ):
            for chunk in resp.iter_raw():
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        return chunks, exc
    return chunks, None


def _types(chunks: list[bytes]) -> list[str]:
    return [event.type for chunk in chunks for event in sse.parse(chunk)]


# ---------------------------------------------------------------- status faults


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (400, "invalid_request_error", anthropic.BadRequestError),
        (401, "authentication_error", anthropic.AuthenticationError),
        (429, "rate_limit_error", anthropic.RateLimitError),
        (500, "api_error", anthropic.InternalServerError),
        (503, "api_error", anthropic.InternalServerError),
        (529, "overloaded_error", anthropic.InternalServerError),
    ],
)
def test_status_fault_in_the_anthropic_envelope(serve: Any, status: int, kind: str, error: type) -> None:
    fake = serve(message_cassette("a"), faults=[Fault("status", status=status)])
    client = anthropic.Anthropic(base_url=fake.url, api_key="dummy", max_retries=0)
    with client, pytest.raises(error) as caught:
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "a"}])
    assert caught.value.status_code == status
    assert caught.value.body["error"]["type"] == kind
    assert caught.value.request_id == caught.value.body["request_id"]
    assert contracts.validate("anthropic.error", caught.value.body) == []
    assert fake.unused() != []  # a status fault leaves the interaction for the retry


def test_429_carries_retry_after_headers(serve: Any) -> None:
    fake = serve(
        message_cassette("a"), faults=["status=429,nth=1,retry_after=2,retry_after_ms=5,should_retry=false"]
    )
    response = httpx.post(f"{fake.url}/v1/messages")
    assert response.status_code == 429
    assert (response.headers["retry-after"], response.headers["retry-after-ms"]) == ("2", "5")
    assert response.headers["x-should-retry"] == "false"
    assert httpx.post(f"{fake.url}/v1/messages").status_code == 200


def test_a_status_fault_answers_a_stream_request_with_a_body(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["status=529"])
    response = httpx.post(f"{fake.url}/v1/messages", json=stream_request())
    assert response.status_code == 529 and response.headers["content-length"] == str(len(response.content))
    assert [(entry.status, entry.stream) for entry in fake.journal] == [(529, False)]


@pytest.mark.parametrize(("status", "shape"), [(400, "v4"), (401, "v4"), (429, "gateway"), (503, "gateway")])
def test_status_fault_in_the_cloudflare_envelope(serve: Any, status: int, shape: str) -> None:
    item = json_interaction(
        CLOUDFLARE,
        {"query": "q", "options": {"gateway": {"id": "g"}}},
        {"items": [], "metadata": {"query": "q", "requestId": "r", "latencyMs": 1}},
    )
    fake = serve(cassette_of(item), faults=[Fault("status", route="cloudflare", status=status)])
    response = httpx.post(f"{fake.url}/client/v4/accounts/abc/ai/websearch/", json={})
    body = response.json()
    assert response.status_code == status
    assert ("success" in body) == (shape == "v4") and ("ok" in body) == (shape == "gateway")
    assert response.headers["cf-aig-request-id"]
    assert contracts.validate("cloudflare.error", body) == []


def test_status_fault_in_the_openai_envelope(serve: Any) -> None:
    item = json_interaction(OPENAI, {"model": "gpt-5", "input": "q"}, {})
    fake = serve(cassette_of(item), faults=["route=openai,status=500"])
    response = httpx.post(f"{fake.url}/v1/responses", json={})
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"
    assert response.headers["x-request-id"].startswith("req_")
    assert contracts.validate("openai.error", response.json()) == []


# ---------------------------------------------------------------- selection


def test_nth_and_times_select_consecutive_requests_on_their_route(serve: Any) -> None:
    fake = serve(
        message_cassette("a", "b", "c", "d"), faults=["route=anthropic.messages,nth=2,times=2,status=503"]
    )
    statuses = [httpx.post(f"{fake.url}/v1/messages").status_code for _ in range(4)]
    assert statuses == [200, 503, 503, 200]
    assert [e.matched["index"] if e.matched else None for e in fake.journal] == [0, None, None, 1]


def test_a_fault_on_another_route_does_not_apply(serve: Any) -> None:
    fake = serve(message_cassette("a"), faults=["route=openai,status=500"])
    assert httpx.post(f"{fake.url}/v1/messages").status_code == 200


def test_a_fault_without_nth_applies_to_every_request(serve: Any) -> None:
    fake = serve(message_cassette("a"), faults=["status=500"])
    assert [httpx.post(f"{fake.url}/v1/messages").status_code for _ in range(3)] == [500, 500, 500]


# ---------------------------------------------------------------- timing faults


def test_delay_before_headers(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=delay_headers,ms=150"])
    with httpx.Client() as client:
        start = time.perf_counter()
        with client.stream("POST", f"{fake.url}/v1/messages", json=stream_request()) as response:
            waited = time.perf_counter() - start
            assert response.status_code == 200
            response.read()
    assert waited >= 0.14
    assert fake.journal[0].verdict == "served" and fake.unused() == []


def test_delay_before_each_event(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=delay_events,ms=40"])
    url = f"{fake.url}/v1/messages"
    with httpx.Client() as client, client.stream("POST", url, json=stream_request()) as response:
        start = time.perf_counter()
        chunks = list(response.iter_raw())
        elapsed = time.perf_counter() - start
    assert len(chunks) == STREAM_EVENTS
    assert elapsed >= 0.04 * (STREAM_EVENTS - 1)


def test_stall_after_event_n_until_the_client_gives_up(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=stall,after=3"])
    chunks, error = _stream(fake, timeout=0.3)
    assert isinstance(error, httpx.ReadTimeout)
    assert len(chunks) == 3
    assert (fake.journal[0].outcome, fake.journal[0].chunks) == ("hung", 3)


def test_stall_for_a_while_then_resume(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=stall,after=2,ms=300"])
    times: list[float] = []
    url = f"{fake.url}/v1/messages"
    with httpx.Client() as client, client.stream("POST", url, json=stream_request()) as response:
        start = time.perf_counter()
        times = [time.perf_counter() - start for _ in response.iter_raw()]
    assert len(times) == STREAM_EVENTS
    assert times[2] - times[1] >= 0.15  # half the stall: a busy client may read event 1 late
    assert fake.unused() == []  # delivered whole, only late


# ---------------------------------------------------------------- content faults


def test_disconnect_after_event_n(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=disconnect,after=4,nth=1"])
    chunks, error = _stream(fake)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert len(chunks) == 4
    again, error = _stream(fake)  # the faulted request did not use up the interaction
    assert error is None and len(again) == STREAM_EVENTS
    assert [e.matched["index"] for e in fake.journal if e.matched] == [0, 0]


def test_disconnect_in_a_non_stream_body(serve: Any) -> None:
    fake = serve(message_cassette("a" * 200), faults=["kind=disconnect,after=0"])
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(f"{fake.url}/v1/messages")


def test_error_event_after_event_n(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=error_event,after=2"])
    chunks, error = _stream(fake)
    assert error is None
    assert _types(chunks) == ["message_start", "content_block_start", "error"]
    data = sse.parse(chunks[-1])[0].json()
    assert data["error"]["type"] == "overloaded_error"
    assert contracts.validate("anthropic.stream_event", data) == []


def test_corrupt_event_n(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=corrupt_event,event=3"])
    chunks, _ = _stream(fake)
    events = [sse.parse(chunk)[0] for chunk in chunks]
    assert len(events) == STREAM_EVENTS
    with pytest.raises(ValueError):
        events[2].json()
    assert all(isinstance(e.json(), dict) for i, e in enumerate(events) if i != 2)
    assert any(v["event"] == 2 for v in fake.journal[0].response_violations)


def test_corrupt_event_past_the_end_is_journaled_as_not_applied(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=corrupt_event,event=99"])
    chunks, _ = _stream(fake)
    assert len(chunks) == STREAM_EVENTS
    assert fake.journal[0].faults[0]["applied"] is False
    assert fake.journal[0].notes == [f"not applied: the stream has {STREAM_EVENTS} events, not 99"]


def test_drop_terminal_event(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=drop_terminal"])
    chunks, error = _stream(fake)
    assert error is None
    assert _types(chunks)[-1] == "message_delta" and "message_stop" not in _types(chunks)


def test_drop_terminal_in_openai_stream(serve: Any) -> None:
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1"}},
        {"type": "response.completed", "sequence_number": 1, "response": {"id": "resp_1"}},
    ]
    raw = b"".join(sse.encode(json.dumps(e), event=e["type"]).raw for e in events)
    item = json_interaction(OPENAI, {"model": "m", "input": "q"}, {})
    item.response.headers["content-type"] = ["text/event-stream"]
    item.response.body = raw
    fake = serve(cassette_of(item), faults=["kind=drop_terminal"])
    url = f"{fake.url}/v1/responses"
    with httpx.Client() as client, client.stream("POST", url, json={"stream": True}) as response:
        got = list(response.iter_raw())
    assert _types(got) == ["response.created"]


def test_truncate_a_non_stream_body(serve: Any) -> None:
    fake = serve(message_cassette("hello"), faults=["kind=truncate,at=20"])
    response = httpx.post(f"{fake.url}/v1/messages")
    assert response.status_code == 200 and len(response.content) == 20
    with pytest.raises(ValueError):
        response.json()
    assert fake.journal[0].response_violations[0]["keyword"] == "json"


def test_stream_faults_do_not_apply_to_a_json_body(serve: Any) -> None:
    fake = serve(message_cassette("a"), faults=["kind=drop_terminal"])
    assert httpx.post(f"{fake.url}/v1/messages").json()["content"][0]["text"] == "a"
    assert fake.journal[0].faults == [{"kind": "drop_terminal", "applied": False}]


def test_faults_combine(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=corrupt_event,event=2", "kind=disconnect,after=3"])
    chunks, error = _stream(fake)
    assert isinstance(error, httpx.RemoteProtocolError) and len(chunks) == 3
    with pytest.raises(ValueError):
        sse.parse(chunks[1])[0].json()


def test_apply_all_goes_in_order_and_only_the_status_answered_applies() -> None:
    """Content changes before cuts; a ``status`` fault is applied only as the one the plan serves."""
    plan = plan_for(stream_cassette().interactions[0].response, Timing(), "anthropic")
    served, other = Fault.parse("status=500"), Fault.parse("status=503")
    cut, corrupt = Fault.parse("kind=disconnect,after=3"), Fault.parse("kind=corrupt_event,event=3")
    faults = [cut, other, corrupt, served]
    applied = [(fault.kind, ok) for fault, ok in apply_all(plan, faults, answered=served)]
    assert applied == [("corrupt_event", True), ("disconnect", True), ("status", False), ("status", True)]
    assert plan.notes == ["event 3 corrupted", "disconnected after event 3"]


# ---------------------------------------------------------------- declaring faults


def test_parse_the_cli_syntax() -> None:
    fault = Fault.parse("route=anthropic,nth=1,status=429,retry_after=0")
    assert fault == Fault("status", route="anthropic", nth=1, status=429, retry_after=0.0)
    assert Fault.parse("kind=stall, after=3, ms=none") == Fault("stall", after=3)
    assert Fault.parse("kind=error_event,after=1,as_failed=yes").as_failed is True
    assert fault.to_json() == {
        "kind": "status",
        "route": "anthropic",
        "nth": 1,
        "status": 429,
        "retry_after": 0.0,
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("status=299", "must be an HTTP error status"),
        ("kind=explode", "kind='explode' must be one of"),
        ("kind=stall", "needs after="),
        ("kind=stall,after=-1", "must be a finite number >= 0"),
        ("status=500,nth=0", "must be a whole number >= 1"),
        ("status=500,after=3", "after= does not apply to a status fault"),
        ("status=500,route=antropic", "route='antropic' is not a provider or route"),
        ("status=500,colour=red", "unknown key 'colour'"),
        ("status=abc", "status='abc' must be a number"),
        ("kind=error_event,after=1,as_failed=maybe", "must be true or false"),
        ("status", "is not key=value"),
    ],
)
def test_bad_specs_are_usage_errors(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        Fault.parse(spec)
    assert spec in str(caught.value)


def test_load_a_faults_file(tmp_path: Path) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text(
        "- {kind: status, route: anthropic, nth: 1, status: 429, retry_after_ms: 1}\n"
        "- {kind: disconnect, after: 5}\n",
        encoding="utf-8",
    )
    assert load_faults(path) == [
        Fault("status", route="anthropic", nth=1, status=429, retry_after_ms=1),
        Fault("disconnect", after=5),
    ]
    json_path = tmp_path / "faults.json"
    json_path.write_text(json.dumps({"faults": [{"kind": "drop_terminal"}]}), encoding="utf-8")
    assert load_faults(json_path) == [Fault("drop_terminal")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: status", "must hold a list of fault objects"),
        ("- [1, 2]", ":/0: a fault must be an object"),
        ("- {kind: status, status: 429}\n- {kind: stall}", ":/1: a stall fault needs after="),
        ("- {kind: status, status: 429, colour: red}", ":/0/colour: unknown key 'colour'"),
        ("- {kind: status\n", ":2: invalid YAML/JSON"),
    ],
)
def test_bad_faults_files_name_the_file_and_place(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=message) as caught:
        load_faults(path)
    assert str(caught.value).startswith(str(path))


def test_missing_faults_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read faults file"):
        load_faults(tmp_path / "absent.yaml")


def test_inject_takes_specs_mappings_and_faults(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    fake.inject("status=500,nth=1")
    fake.inject({"kind": "status", "status": 503, "nth": 2})
    fake.inject(Fault("status", status=504, nth=3))
    assert [f.status for f in fake.faults] == [500, 503, 504]
    assert [httpx.post(f"{fake.url}/v1/messages").status_code for _ in range(4)] == [500, 503, 504, 200]


SPECS = [
    "status=429,route=anthropic,nth=1,times=2,retry_after=0,retry_after_ms=1,should_retry=true,message=m,"
    "error_type=rate_limit_error,code=c",
    "kind=delay_headers,ms=5",
    "kind=delay_events,ms=5,route=openai.responses",
    "kind=stall,after=3,ms=100",
    "kind=disconnect,after=0",
    "kind=error_event,after=1,as_failed=true,message=x,error_type=y",
    "kind=corrupt_event,event=2",
    "kind=drop_terminal,route=*",
    "kind=truncate,at=10",
    "status=500,route=GET /v1/models",
]


@pytest.mark.parametrize("spec", SPECS)
def test_every_fault_is_a_valid_scenario_fault(spec: str) -> None:
    scenario = {"faults": [Fault.parse(spec).to_json()]}
    assert [
        v for v in contracts.validate("replaykit.scenario", scenario) if v.pointer.startswith("/faults")
    ] == []


def test_the_scenario_contract_refuses_what_fault_refuses() -> None:
    for bad in ({"kind": "stall"}, {"kind": "status", "status": 429, "after": 1}, {"kind": "explode"}):
        with pytest.raises(UsageError):
            Fault.from_dict(bad)
        found = contracts.validate("replaykit.scenario", {"faults": [bad]})
        assert [v for v in found if v.pointer.startswith("/faults")] != [], bad


def test_a_status_fault_can_be_slow_and_only_one_status_answers(serve: Any) -> None:
    fake = serve(
        message_cassette("a"), faults=["status=503,nth=1", "status=429,nth=1", "kind=delay_headers,ms=120"]
    )
    start = time.perf_counter()
    response = httpx.post(f"{fake.url}/v1/messages")
    assert time.perf_counter() - start >= 0.11
    assert response.status_code == 503
    faults = fake.journal[0].faults
    assert [(f["kind"], f.get("status"), f["applied"]) for f in faults] == [
        ("delay_headers", None, True),
        ("status", 503, True),
        ("status", 429, False),
    ]


@pytest.mark.parametrize(("raw", "message"), [
    ({"kind": "status", "status": "429"}, "must be an HTTP error status"),
    ({"kind": "status", "status": 429, "retry_after": float("nan")}, "must be a finite number"),
    ({"kind": "stall", "after": 1, "ms": float("inf")}, "must be a finite number"),
])
def test_a_fault_with_a_value_of_the_wrong_kind_is_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Fault.from_dict(raw)


def test_a_malformed_faults_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text("[{kind: status,\n", encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_faults(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_huge_integer_in_a_fault_is_a_number_not_a_crash() -> None:
    assert Fault.from_dict({"kind": "stall", "after": 1, "ms": 10**400}).ms == 10**400


@pytest.mark.parametrize(
    ("body", "place", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "faults: ", "nested too deep"),
        (b"[1]", "faults:/0: ", "a fault must be an object with a kind, not 1"),
        (b"{}", "faults: ", "a fault needs a kind"),
        (b'{"kind": "status", "status": 429, "colour": "red"}', "faults:/colour: ", "unknown key 'colour'"),
        (b'[{"kind": "status", "status": 429}, {"kind": "status", "status": 99}]', "faults:/1/status: ",
         "status=99 must be an HTTP error status"),
        (b"not json", "faults: ", "the body is not JSON"),
        (b"3", "faults: ", "a fault object or a list of them"),
    ],
)
def test_bad_faults_posted_to_the_admin_endpoint_name_the_place_and_the_fix(
    serve: Any, caplog: pytest.LogCaptureFixture, body: bytes, place: str, message: str
) -> None:
    fake = serve(message_cassette("a"))
    answer = httpx.post(f"{fake.url}/__replaykit/faults", content=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error.startswith(f"POST /__replaykit/{place}") and message in error
    assert fake.faults == [] and [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_faults_file_names_the_pointer_of_the_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"faults": [{"kind": "drop_terminal"}, {"kind": "stall", "after": -1}]}),
                    encoding="utf-8")
    with pytest.raises(UsageError, match=r"faults\.json:/faults/1/after: after=-1 must be a finite number"):
        load_faults(path)
