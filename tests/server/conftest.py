"""Fixtures for the fake provider's tests: ``serve(...)`` starts a FakeProvider that is stopped afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from replaykit.server import FakeProvider

Serve = Callable[..., FakeProvider]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start a fake provider with the given cassettes and options; it is stopped at teardown.

    Errors raised in the server thread fail the test at teardown unless the test consumed them.
    """
    started: list[FakeProvider] = []

    def start(*cassettes: Any, **options: Any) -> FakeProvider:
        fake = FakeProvider(list(cassettes), **options).start()
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.stop()
    for fake in started:
        fake.check_errors()
