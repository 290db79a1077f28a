"""Fixtures for the fake provider's tests: ``serve(...)`` starts a FakeProvider that is stopped afterwards.

A module marked ``both_lanes`` runs each test that serves twice: with the lane (the default) and without it
(``lane=False``: aiohttp writes every byte), the same assertions both ways."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from replaykit.server import FakeProvider

Serve = Callable[..., FakeProvider]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run the tests of a ``both_lanes`` module that use ``serve`` with the lane and without it."""
    if metafunc.definition.get_closest_marker("both_lanes") and "serve" in metafunc.fixturenames:
        metafunc.parametrize("lane", [True, False], ids=["lane", "aiohttp"])


@pytest.fixture
def lane() -> bool:
    """Whether ``serve`` starts its fake providers with the lane (unless a test says otherwise)."""
    return True


@pytest.fixture
def serve(lane: bool) -> Iterator[Serve]:
    """Start a fake provider with the given cassettes and options; it is stopped at teardown.

    Errors raised in the server thread fail the test at teardown unless the test consumed them.
    """
    started: list[FakeProvider] = []

    def start(*cassettes: Any, **options: Any) -> FakeProvider:
        fake = FakeProvider(list(cassettes), **{"lane": lane, **options}).start()
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.stop()
    for fake in started:
        fake.check_errors()
