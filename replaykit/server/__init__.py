"""The loopback fake provider: recorded traffic served to any client, faults on demand, a journal.

Point an application, in any language, at it instead of the real API::

    from replaykit.server import FakeProvider, Fault

    with FakeProvider(["cassettes/anthropic/web_search.yaml"]) as fake:
        client = anthropic.Anthropic(base_url=fake.base_url("anthropic"), api_key="x")
        fake.inject(Fault.parse("route=anthropic,nth=1,status=429,retry_after_ms=1"))
        message = client.messages.create(...)          # one 429, the SDK retries, gets the recording
        assert [e.status for e in fake.journal] == [429, 200]

``FakeProvider(cassettes=(), *, host="127.0.0.1", port=0, timing="fast", strict=False,
enforce_contracts=False, allow_remote=False, match_on=(), volatile=DEFAULT_VOLATILE, repeat=False,
faults=(), profile=None, journal_file=None, journal_bodies="head", journal_window=10_000, header_timeout=60,
body_timeout=60, max_connections=256, body_deadline=300, max_body=256 MiB, watch=None)`` runs a server in a
background thread with its own event loop, on loopback and a free port by default (a non-loopback ``host`` is
refused unless ``allow_remote``): a plain request whose answer is known whole is answered by replaykit's own
protocol (the lane, :mod:`~replaykit.server.lane`), every other one by aiohttp, in the same bytes.
It is a context manager; ``start()`` / ``stop()`` do the same by hand. A cassette whose compressed body
decodes past ``max_body`` bytes, or whose YAML aliases expand like a bomb, is refused when loaded.

Connections (:mod:`~replaykit.server.connections`): a client must send a request's headers within
``header_timeout`` seconds of connecting or of its previous response (an idle keep-alive connection is closed
after as long), and may pause its body at most ``body_timeout`` seconds and must send it whole within
``body_deadline`` seconds of its headers (then 408, journaled ``timeout`` with which limit closed it); beyond
``max_connections`` open connections a new one gets a 503 and is closed at once. A malformed request (bad
request line, header, length or chunked framing) gets a 400 and one journal entry (``malformed``), nothing
logged. A client that half-closes after its request still gets its response; one that closes while the
server holds its response back (a delay, a stall) is journaled when it leaves.

Routes (one server serves every provider): Anthropic ``POST /v1/messages`` and
``/v1/messages/count_tokens``; OpenAI ``POST /v1/responses``; Azure ``POST /openai/v1/responses``,
``/openai/responses`` and ``/openai/deployments/{name}/responses``; Cloudflare
``POST /client/v4/accounts/{id}/ai/websearch[/]``. A recorded interaction on any other path is served on
that exact path. ``base_url(provider)`` / ``base_urls()`` give what each SDK takes as its base URL
(``anthropic``: the origin; ``openai``: ``/v1``; ``azure``: ``/openai/v1``; ``cloudflare``: ``/client/v4``),
and ``env()`` the environment variables of the target protocol (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``,
``REPLAYKIT_AZURE_BASE_URL``, ``AZURE_OPENAI_ENDPOINT``, ``REPLAYKIT_WEBSEARCH_BASE_URL`` and dummy keys).

What is served (:mod:`~replaykit.server.matching`): a request that asks for a stream (``"stream": true``)
only ever gets an interaction recorded for one, and one that does not never does (the ``stream`` matcher,
always in force). Among the interactions on its route not yet served, a request gets the first whose body
equals its own (volatile fields ignored), else the next in order (the n-th request on a route gets the n-th
interaction recorded on it); interactions of an error cassette (every response an HTTP error, or a stream
that ends in an error event) come last, so a folder holding error cassettes answers with a success, while the
recorded order within a cassette always holds. ``match_on`` adds matchers (``method``, ``path``, ``query``,
``body``, ``model`` or any callable ``(received, recorded_request) -> bool``); ``strict=True`` requires the
canonical JSON body to equal the recording, ``volatile`` JSON pointers ignored. ``repeat=True`` serves
interactions again once all are used. A client chooses explicitly with two request headers of replaykit's own,
never matched against recordings nor journaled as the request's headers: ``x-replaykit-cassette: NAME`` (a
cassette's file name, with or without its suffix, or a path ending in it) and ``x-replaykit-interaction: N``
(0-based). An interaction whose body differs from the request is journaled with the ``diff`` and a note in
words. An unmatched request gets a 404 in the provider's own error envelope whose message, and its one-line
``x-replaykit-error`` header (at most 500 ASCII characters), name the nearest interaction and the first places
its body differs, secrets masked (``nearest: a.yaml#0 (refused by: body): /model: sent "x", recorded "y"``);
its journal entry lists the near misses.

What is loaded: ``load(cassettes, add=False)`` replaces the cassettes (paths, folders, or
:class:`~replaykit.cassette.Cassette` objects; ``add=True`` loads them after the others), a name not found
where you are being looked up among the bundled cassettes, as ``replaykit serve`` does
(:func:`~replaykit.resources.find_cassette`: ``FakeProvider(["anthropic/web_search.yaml"])`` works from any
folder); ``unload(names=())``
unloads those named as ``x-replaykit-cassette`` names them (all without names), ``stub(interaction)`` adds
one interaction to the cassette ``<stubs>``, ``cassettes()`` lists what is loaded; all safe while serving.

How it is served (:mod:`~replaykit.server.streaming`): SSE one HTTP chunk per recorded event (a client that
keeps up, such as httpx ``iter_raw()``, reads one chunk per event), at ``timing`` ``fast``, ``recorded`` (the
cassette's ``event_offsets_ms``) or ``fixed:<ms>``; other bodies with their recorded headers minus framing and
encoding ones (bodies are held decoded; the server frames them). In ``fast`` timing, when no fault makes
the stream wait, the chunks go to the socket together, in writes of at most one client read (64 KiB) that
end at chunk boundaries, the headers with the first and the final chunk with the last: a response up to
64 KiB is one write. Otherwise, and in ``recorded`` and ``fixed`` timing, each event is written and sent on
its own, at its time: no client waits for bytes the server already has.

Faults (:mod:`~replaykit.server.faults`): ``inject(fault)`` takes a :class:`Fault`, a ``--fault`` spec string
or a mapping; ``faults`` lists them; see that module for the kinds.

Contracts: every request and response is checked against its route's contracts and the verdicts are
journaled; ``enforce_contracts=True`` answers a request that breaks its contract with the provider's 400.
``profile`` (``strict`` or ``openai-compatible``, see :mod:`replaykit.contracts`; default: the profile the
cassettes declare, else strict) turns the rules it relaxes into warnings, which never refuse a request.

What happened (:mod:`~replaykit.server.journal`): ``journal`` (a list of :class:`Entry`, thread-safe; the
contract verdict of a request body is cached, so a body sent again is not validated again;
``Entry.summary()`` puts one on a line), ``unmatched()`` (entries no interaction answered), ``unused()``
(interactions never delivered whole since the last reset; ``unused(session=True)``: since they were loaded),
``write_journal(path)`` (a JSON Lines snapshot, atomic), ``reset()`` (journal, counters and faults).
``watch`` is called, in the server thread, with each entry once its response is over (``replaykit serve``
prints and counts them; what it raises is re-raised like the server's own errors). ``journal_file`` is the
journal as an append-only JSON Lines log, emptied at ``start()``, with each entry written and flushed when its
request is done (a crash loses at most the requests in flight; temporary files of an atomic write killed
halfway are removed at start). An entry keeps the first 64 KiB of a request body, with the length and SHA-256
of the whole (``journal_bodies="full"``: every byte); matching sees the whole body. The journal in memory is
the last ``journal_window`` entries (``journal_dropped`` counts those that left it; the file has them all).

Over HTTP, the admin API (:mod:`~replaykit.server.admin`, never journaled): ``GET /__replaykit/journal``,
``GET /__replaykit/unused``, ``POST /__replaykit/reset``, ``POST /__replaykit/faults``,
``GET | POST | DELETE /__replaykit/cassettes`` (list, load, unload) and ``POST /__replaykit/interactions`` (a
stub). A bad body gets a 400 naming the JSON pointer of the bad value and the fix; a path under
``/__replaykit/`` that is no endpoint gets replaykit's own JSON 404. Exceptions raised while serving are
stored and re-raised in the caller's thread by ``check_errors()`` and when the ``with`` block ends;
``check(unused=False)`` also raises :class:`~replaykit.errors.MatchError` for unmatched requests, with their
near misses.
"""

from replaykit.routes import PROVIDERS, ROUTES, Route, base_urls
from replaykit.server.faults import Fault, load_faults
from replaykit.server.journal import Entry, Journal
from replaykit.server.matching import DEFAULT_VOLATILE, Matcher, Received
from replaykit.server.plan import Timing
from replaykit.server.runner import DUMMY_KEY, FakeProvider

__all__ = [
    "DEFAULT_VOLATILE",
    "DUMMY_KEY",
    "PROVIDERS",
    "ROUTES",
    "Entry",
    "FakeProvider",
    "Fault",
    "Journal",
    "Matcher",
    "Received",
    "Route",
    "Timing",
    "base_urls",
    "load_faults",
]
