"""The ``kill`` fault at the fake provider: a stream held after exactly its event N (sent one by one), a
non-stream body never sent, a tool call held at its announcement only where a kill names it; each kill point
recorded for the scenario runner."""

from __future__ import annotations

import httpx
import pytest
from conftest import Serve

from replaykit import sse
from replaykit.errors import UsageError
from replaykit.resources import find_cassette
from replaykit.server import FakeProvider
from replaykit.server.faults import Fault

STREAM = str(find_cassette("anthropic/web_search_stream.yaml"))
BODY = {"model": "claude-sonnet-4-6", "max_tokens": 1024, "stream": True,
        "messages": [{"role": "user", "content": "When did Python 3.13 come out?"}]}


def _events(fake: FakeProvider, read_for: float) -> list[str]:
    """The SSE event types received before the stream ended or went silent for ``read_for`` seconds."""
    parser, types = sse.Parser(), []
    url = fake.base_url("anthropic") + "/v1/messages"
    try:
        with httpx.stream("POST", url, json=BODY, timeout=httpx.Timeout(5, read=read_for)) as response:
            for chunk in response.iter_raw():
                types += [event.event or "" for event in parser.feed(chunk) if event.dispatched]
    except httpx.ReadTimeout:
        pass
    return types


@pytest.mark.parametrize("after", [0, 1, 4])
def test_a_kill_holds_the_stream_after_exactly_event_n(serve: Serve, after: int) -> None:
    whole = _events(serve(STREAM), 5)
    fake = serve(STREAM, faults=[Fault("kill", route="anthropic", nth=1, after=after)])
    got = _events(fake, 0.5)
    assert got == whole[:after] and len(whole) > after + 2
    (entry,) = fake.journal
    assert entry.outcome == "hung" and entry.chunks == after
    assert entry.faults == [{"kind": "kill", "route": "anthropic", "nth": 1, "after": after, "applied": True}]
    assert fake.kill_points() == [{"seq": 1, "route": "anthropic.messages", "events": after}]


def test_a_kill_on_a_later_response_leaves_the_first_whole(serve: Serve) -> None:
    fake = serve(STREAM, STREAM, faults=[Fault("kill", route="anthropic", nth=2, after=2)])
    assert _events(fake, 5)[-1] == "message_stop"
    assert fake.kill_points() == []
    assert len(_events(fake, 0.5)) == 2
    assert [point["seq"] for point in fake.kill_points()] == [2]


def test_a_tool_call_is_held_only_where_a_kill_names_it(serve: Serve) -> None:
    fake = serve(STREAM, faults=[Fault("kill", tool="read", nth=2)])
    post = lambda name: httpx.post(fake.tool_hook, json={"name": name, "id": "toolu_1"}, timeout=0.5)  # noqa: E731
    assert post("read").json() == {"held": False}
    assert post("web_search").json() == {"held": False}
    with pytest.raises(httpx.ReadTimeout):
        post("read")
    assert fake.kill_points() == [{"tool": "read", "id": "toolu_1", "nth": 2}]
    assert fake.journal == []  # announcements are not provider traffic
    bad = httpx.post(fake.tool_hook, json={"id": "x"}, timeout=2)
    assert bad.status_code == 400 and "/name" in bad.json()["error"]


def test_kill_fault_keys() -> None:
    assert Fault.parse("kind=kill,tool=web_search").to_json() == {"kind": "kill", "tool": "web_search"}
    with pytest.raises(UsageError, match="tool= does not apply to a stall fault"):
        Fault.parse("kind=stall,after=1,tool=read")
    with pytest.raises(UsageError, match="tool='' must be a tool's name"):
        Fault.from_dict({"kind": "kill", "tool": ""})
    assert not Fault("kill", tool="read").selects("anthropic.messages", "anthropic", 1)
