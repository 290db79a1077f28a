"""The one seam between the server's wings, in the spirit of httpx's ``BaseTransport.handle_request``.

The HTTP wing (transport, lane, connections, streaming, prepared bytes) reads a :class:`Request` and asks the
provider wing, through the :class:`Provider` it was given, for an :class:`Exchange`: a :class:`Plan` to
deliver, a :class:`Progress` to advance, ``close()`` at the end. Calls go down only: the HTTP wing imports
nothing of the provider wing above this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from replaykit import sse
from replaykit.server.prepared import Batch, Whole

__all__ = ["ADMIN_PREFIX", "End", "Exchange", "Outcome", "Plan", "Progress", "Provider", "Request",
           "Unreadable", "is_admin"]

ADMIN_PREFIX = "/__replaykit"
End = Literal["eof", "disconnect", "hang"]
Outcome = Literal["pending", "complete", "disconnected", "hung", "client_closed"]


def is_admin(path: str) -> bool:
    """True for a path of the admin API (under :data:`ADMIN_PREFIX`)."""
    return path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")


class Unreadable(Exception):
    """A request whose body could not be read: answered ``status`` and journaled with ``verdict``."""

    def __init__(self, status: int, verdict: str, message: str) -> None:
        super().__init__(message)
        self.status, self.verdict = status, verdict


@dataclass(frozen=True, slots=True)
class Request:
    """A request as it came off the wire: header names lower-cased (a repeated one joined with ``, ``),
    ``query`` the raw query string, ``started`` :func:`time.perf_counter` at its arrival; ``unreadable``:
    why its body could not be read (the body is then empty)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    started: float
    remote: str | None = None
    unreadable: Unreadable | None = None


@dataclass(slots=True)
class Plan:
    """A response as it will be written; ``due`` holds each chunk's offset in seconds from the first.

    ``batch``: a stream whose chunks may be gathered into fewer writes; ``framed``: the chunks already in
    batches (an unchanged replay); ``whole``: the whole response as one prepared write, or None.
    """

    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes | memoryview]
    stream: bool
    due: list[float] = field(default_factory=list)
    head_delay: float = 0.0
    length: int | None = None
    end: End = "eof"
    events: list[sse.Event] = field(default_factory=list, repr=False)
    provider: str | None = None
    notes: list[str] = field(default_factory=list)
    altered: bool = False
    batch: bool = False
    framed: list[Batch] | None = None
    whole: Whole | None = None

    @property
    def timed(self) -> bool:
        """True when some chunk must wait."""
        return any(self.due)

    @property
    def complete(self) -> bool:
        """True when the plan delivers the whole recorded response (only delays were applied)."""
        return not self.altered and self.end == "eof"


@dataclass(slots=True)
class Progress:
    """How far delivery got: chunks written and the outcome. ``on_settle`` is called once, when the outcome
    is known but *before* the last bytes leave: a client with its whole response finds it journaled."""

    chunks: int = 0
    outcome: Outcome = "pending"
    on_settle: Callable[[Progress], None] | None = None

    def settle(self, outcome: Outcome) -> None:
        """Set the outcome and call ``on_settle`` (the first time only)."""
        self.outcome = outcome
        callback, self.on_settle = self.on_settle, None
        if callback is not None:
            callback(self)


class Exchange(Protocol):
    """One request being answered: deliver ``plan``, advance ``progress``, then ``close()`` (or
    ``abandon()`` when the client left before delivery began)."""

    @property
    def plan(self) -> Plan:
        """What is to be sent."""

    @property
    def progress(self) -> Progress:
        """How far delivery got."""

    def close(self) -> None:
        """The end of delivery: journal the outcome."""

    def abandon(self) -> None:
        """End it undelivered: its client left first."""


class Provider(Protocol):
    """What the HTTP wing asks of the provider wing."""

    def handle_request(self, request: Request) -> Exchange:
        """Begin answering a provider request (journaled from now on; ``request.unreadable``: refuse it)."""

    async def handle_admin(self, request: Request) -> Plan:
        """Answer a request of the admin API (never journaled)."""
