"""``replaykit.record.options``: the record modes (vcrpy's names too) and the upstreams, checked."""

from __future__ import annotations

import pytest

from replaykit.errors import UsageError
from replaykit.record.options import record_mode, upstreams
from replaykit.routes import provider_of


@pytest.mark.parametrize(("given", "mode"), [("once", "once"), ("new", "new"), ("new_episodes", "new"),
                                             ("all", "all"), ("rewrite", "all"), (" None ", "none")])
def test_the_modes_and_vcrpy_names(given: str, mode: str) -> None:
    assert record_mode(given, "--mode") == mode


def test_a_bad_mode_names_its_source() -> None:
    with pytest.raises(UsageError, match=r"^REPLAYKIT_RECORD_MODE='sometimes' must be one of once, new \(or "
                                         r"new_episodes\), all, none$"):
        record_mode("sometimes", "REPLAYKIT_RECORD_MODE")


def test_upstreams_are_provider_url_pairs() -> None:
    given = ["anthropic=http://127.0.0.1:8000/", "openai=https://a.example, cloudflare=https://c.example",
             "anthropic=https://b.example"]
    assert upstreams(given, "--x") == {"anthropic": "https://b.example", "openai": "https://a.example",
                                       "cloudflare": "https://c.example"}


@pytest.mark.parametrize(("pair", "message"), [
    ("cohere=https://x.example", r"--x 'cohere=https://x.example' must be PROVIDER=URL, PROVIDER one of "
                                 r"anthropic, openai, azure, gemini, vertex, cloudflare"),
    ("anthropic", r"--x 'anthropic' must be PROVIDER=URL"),
    ("anthropic=api.anthropic.com", r"--x anthropic= 'api.anthropic.com' must be an http\(s\) URL"),
])
def test_a_bad_upstream_is_named(pair: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        upstreams([pair], "--x")


def test_the_provider_of_recorded_requests() -> None:
    anthropic, cloudflare = ("POST", "https://x/v1/messages"), ("POST", "https://x/client/v4/accounts/a/ai/websearch")
    assert provider_of([anthropic, anthropic]) == "anthropic"
    assert provider_of([anthropic, cloudflare]) == "mixed"
    assert provider_of([("GET", "http://127.0.0.1:1/health")]) is None
