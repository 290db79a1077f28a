"""What a recording is asked for, checked: the record mode and the upstream URLs.

The modes are vcrpy's (https://vcrpy.readthedocs.io/en/latest/usage.html#record-modes): ``once``, ``new``
(vcrpy's ``new_episodes``), ``all`` (pytest-recording's ``rewrite`` too) and ``none``; ``replaykit record``
and the pytest plugin read the same environment variable, :data:`MODE_ENV`. An upstream is an http(s) URL
with a host and no query; :func:`upstreams` reads ``PROVIDER=URL`` pairs. Cheap to import (the pytest
plugin reads its options with it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from replaykit.errors import UsageError
from replaykit.routes import PROVIDERS

__all__ = ["ALIASES", "MODES", "MODE_ENV", "record_mode", "upstream_url", "upstreams"]

MODES = ("once", "new", "all", "none")
ALIASES = {"new_episodes": "new", "rewrite": "all"}  # vcrpy's name of new; pytest-recording's of all
MODE_ENV = "REPLAYKIT_RECORD_MODE"
_SPLIT = re.compile(r"[\s,]+")


def record_mode(value: str, source: str) -> str:
    """``value`` as one of :data:`MODES` (an alias becomes its mode); ``source`` names it in the error."""
    word = value.strip().lower()
    mode = ALIASES.get(word, word)
    if mode not in MODES:
        raise UsageError(f"{source}={value!r} must be one of once, new (or new_episodes), all, none")
    return mode


def upstream_url(url: str, source: str = "--upstream") -> str:
    """``url`` checked: http(s), a host, no query or fragment; without its trailing slash."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(f"{source} {url!r} must be an http(s) URL with a host and no query, e.g. "
                         "https://api.anthropic.com")
    return url.rstrip("/")


def upstreams(pairs: Iterable[str], source: str) -> dict[str, str]:
    """``PROVIDER=URL`` pairs (each item may hold several, apart by spaces or commas) as ``{provider: url}``;
    a later pair for a provider replaces an earlier one."""
    found: dict[str, str] = {}
    for pair in (word for item in pairs for word in _SPLIT.split(item) if word):
        provider, _, url = pair.partition("=")
        if provider not in PROVIDERS or not url:
            raise UsageError(f"{source} {pair!r} must be PROVIDER=URL, PROVIDER one of "
                             f"{', '.join(PROVIDERS)}, e.g. anthropic=https://api.anthropic.com")
        found[provider] = upstream_url(url, f"{source} {provider}=")
    return found
