"""The plugin's tests run inner pytest sessions with ``pytester`` (in-process where possible)."""

from __future__ import annotations

import httpcore2  # noqa: F401 - see below
import pytest

import replaykit.record.proxy  # noqa: F401 - see below

# pytester's in-process runs drop every module first imported inside them. httpx2 imports httpcore2
# lazily, on the first request: imported inside an inner run, it would be imported again afterwards and
# the outer tests' SDK clients would no longer recognise its exception classes. Import it once, here.
# Likewise the recording proxy, which the plugin imports when a test records: the package would keep the
# first run's proxy module while the next run imports its recorder again (whose settings then no longer
# pickle).

INI = """\
[pytest]
addopts = --strict-markers -p no:cacheprovider
filterwarnings = error
"""

INNER_CONFTEST = '''
import json
import urllib.request

import pytest

from replaykit import cassette


def recorded_body(path, index=0):
    """The JSON body of a recorded request."""
    return cassette.load(path).interactions[index].request.json()


def post(url, body):
    """POST ``body`` as JSON with the standard library; returns (status, parsed body)."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


@pytest.fixture
def client(replaykit):
    """The anthropic SDK pointed at the fake provider, without retries."""
    import anthropic

    with anthropic.Anthropic(base_url=replaykit.base_url("anthropic"), api_key="dummy", max_retries=0) as sdk:
        yield sdk
'''


@pytest.fixture
def rk(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory: a strict ini and the inner tests' helpers (``recorded_body``, ``post``)."""
    pytester.makefile(".ini", pytest=INI)
    pytester.makeconftest(INNER_CONFTEST)
    return pytester
