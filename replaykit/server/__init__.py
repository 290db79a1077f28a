"""The loopback fake provider: recorded traffic served to any client, faults on demand, a journal.

Two wings behind one seam (:mod:`~replaykit.server.seam`): the provider wing decides every answer
(:mod:`~replaykit.server.provider`, catalogue, admin, exchange, matching, plan, faults, journal, verdicts,
envelopes, diff); the HTTP wing reads requests and writes answers (transport, lane, connections, streaming,
prepared bytes). ``FakeProvider(cassettes, ...)`` is the entry point; the guide and the reasoning are in
docs/architecture/server.md.
"""

from replaykit.routes import PROVIDERS, ROUTES, Route, base_urls
from replaykit.server.faults import Fault, load_faults
from replaykit.server.journal import Entry, Journal
from replaykit.server.matching import DEFAULT_VOLATILE, Matcher, Received
from replaykit.server.plan import Timing
from replaykit.server.provider import DUMMY_KEY, FakeProvider

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
