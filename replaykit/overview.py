"""What a cassette holds at a glance: the rows of ``replaykit cassettes`` and the pages of ``replaykit show``.

:func:`summarize` says what a cassette file is: provider, routes, streamed or not, origin and description
(its ``replaykit: description``, see :class:`~replaykit.cassette.Meta`). :func:`exchanges` says what each
interaction expects and answers: method, path, route, the request body with every secret scrubbed by
:func:`replaykit.redact.redact` first (a key is never shown), whether the response streams, its status and
the types of its events. Both only read the cassette: nothing is served, nothing is validated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from replaykit import jsondoc, redact
from replaykit.cassette import Cassette, Interaction, Response
from replaykit.jsondoc import JSON
from replaykit.routes import classify_uri
from replaykit.sse import event_type

__all__ = ["BodyKind", "Exchange", "Summary", "exchanges", "summarize"]

BodyKind = Literal["json", "text", "binary", "none"]


@dataclass(frozen=True, slots=True)
class Summary:
    """One cassette in a line: ``stream`` is True, False, or None when some responses stream and some not."""

    name: str
    provider: str | None
    routes: tuple[str, ...]
    stream: bool | None
    origin: str | None
    description: str | None
    interactions: int

    def to_json(self) -> JSON:
        """The summary as a JSON object."""
        return {"cassette": self.name, "provider": self.provider, "routes": list(self.routes),
                "stream": self.stream, "origin": self.origin, "description": self.description,
                "interactions": self.interactions}


@dataclass(frozen=True, slots=True)
class Exchange:
    """One interaction as a client sees it; ``body`` is the redacted request body (parsed when ``body_kind``
    is ``json``, text when ``text``, ``None`` otherwise); ``events`` the stream's event types, in order."""

    index: int
    line: int | None
    method: str
    path: str
    route: str
    body_kind: BodyKind
    body: object
    body_bytes: int
    stream: bool
    status: int
    content_type: str | None
    events: tuple[str, ...]

    def to_json(self) -> JSON:
        """The exchange as a JSON object."""
        request = {"method": self.method, "path": self.path, "route": self.route, "body_kind": self.body_kind,
                   "body": self.body, "body_bytes": self.body_bytes}
        response = {"status": self.status, "content_type": self.content_type, "stream": self.stream,
                    "events": list(self.events)}
        return {"index": self.index, "line": self.line, "request": request, "response": response}


def summarize(tape: Cassette, name: str) -> Summary:
    """What ``tape`` (listed as ``name``) holds."""
    items = tape.interactions
    routes = tuple(dict.fromkeys(classify_uri(i.request.method, i.request.uri).name for i in items))
    streams = {item.response.is_stream for item in items}
    provider = tape.meta.provider or next(filter(None, (_provider(item) for item in items)), None)
    return Summary(name, provider, routes, streams.pop() if len(streams) == 1 else None, tape.meta.origin,
                   tape.meta.description, len(items))


def _provider(item: Interaction) -> str | None:
    return classify_uri(item.request.method, item.request.uri).provider


def exchanges(tape: Cassette) -> list[Exchange]:
    """Every interaction of ``tape``, secrets scrubbed."""
    return [_exchange(index, item) for index, item in enumerate(redact.redact(tape).interactions)]


def _exchange(index: int, item: Interaction) -> Exchange:
    request, response = item.request, item.response
    parts = urlsplit(request.uri)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    kind, body = _body(request.body)
    size = len(request.body or b"")
    events = tuple(event_type(event) for event in response.events if event.data is not None)
    route = classify_uri(request.method, request.uri).name
    return Exchange(index, item.line, request.method.upper(), path, route, kind, body, size,
                    response.is_stream, response.status, _content_type(response), events)


def _body(raw: bytes | None) -> tuple[BodyKind, object]:
    if not raw:
        return "none", None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "binary", None
    try:
        return "json", jsondoc.loads(text)
    except ValueError:
        return "text", text


def _content_type(response: Response) -> str | None:
    value = response.header("content-type")
    return value.split(";", 1)[0].strip() if value else None
