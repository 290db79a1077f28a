"""``FakeProvider.when_received``: an action taken once the n-th request on a route has arrived, before it is
answered (the scenario runner's ``cancelOn`` sends SIGINT from it): not before, once, at once when it came
already, never once withdrawn. ``FakeProvider.settled``: every request received is in the journal, a held
one once its client has gone (the runner reads the journal of a cancelled run only then)."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import Serve

from replaykit.server import FakeProvider
from replaykit.server.faults import Fault

pytestmark = pytest.mark.both_lanes

ANSWERED = Fault("status", route="anthropic", status=503)  # every request answered at once, no recording
HELD = Fault("delay_headers", route="anthropic", nth=2, ms=60000)  # the second held a minute
WAIT = 30  # seconds: a bound on a hang, not a speed check


def post(fake: FakeProvider, read: float = WAIT) -> int:
    url = fake.base_url("anthropic") + "/v1/messages"
    try:
        return httpx.post(url, json={"model": "m"}, timeout=httpx.Timeout(WAIT, read=read)).status_code
    except httpx.ReadTimeout:
        return 0


class Calls:
    def __init__(self) -> None:
        self.count = 0
        self.done = threading.Event()

    def __call__(self) -> None:
        self.count += 1
        self.done.set()


@pytest.mark.parametrize("route", ["anthropic.messages", "*"])
def test_the_action_is_taken_once_when_the_nth_request_arrives_before_it_is_answered(
        serve: Serve, route: str) -> None:
    fake, calls = serve(faults=[ANSWERED, HELD]), Calls()
    fake.when_received(route, 2, calls)
    assert post(fake) == 503
    assert calls.count == 0
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(post, fake, 60)
        assert calls.done.wait(WAIT)  # taken while the second request is still held
        assert not held.done()
        assert post(fake) == 503  # a third request takes nothing again
        assert calls.count == 1
        fake.stop()  # ends the held request (its server waits a grace period for it)
    assert calls.count == 1


def test_an_action_for_a_request_that_came_already_is_taken_at_once(serve: Serve) -> None:
    fake, calls = serve(faults=[ANSWERED]), Calls()
    assert post(fake) == 503
    fake.when_received("anthropic", 1, calls)
    assert calls.count == 1


def test_another_route_or_a_withdrawn_action_takes_nothing(serve: Serve) -> None:
    fake, elsewhere, withdrawn = serve(faults=[ANSWERED]), Calls(), Calls()
    fake.when_received("openai", 1, elsewhere)
    fake.when_received("anthropic", 1, withdrawn)()
    assert post(fake) == 503
    assert elsewhere.count == withdrawn.count == 0


def test_settled_once_a_held_request_whose_client_left_is_journaled(serve: Serve) -> None:
    fake, arrived = serve(faults=[ANSWERED, Fault("delay_headers", route="anthropic", ms=60000)]), Calls()
    fake.when_received("anthropic", 1, arrived)
    body = b'{"model": "m"}'
    with socket.create_connection((fake.host, fake.port)) as client:
        client.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        assert arrived.done.wait(WAIT)
        assert not fake.settled(0) and fake.journal == []  # held: not journaled yet
    assert fake.settled(WAIT)  # the client has gone: journaled as soon as the server sees it
    [entry] = fake.journal
    assert entry.outcome == "client_closed"
