"""Shared test configuration.

``pytester`` drives the plugin's own tests (tests/plugin/); ``wheel_venv`` is the checkout built as a wheel
and installed into a fresh venv, for the tests that run what a user installs (the package data, the README's
examples). Hypothesis runs derandomized in CI (``CI`` set), so a CI verdict is reproducible; local runs
explore new examples each time and keep failures in ``.hypothesis/``. Parsed cassettes are kept on disk in a
folder of the test session (``REPLAYKIT_CASSETTE_CACHE``), never in the venv's own.
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings
from wheel_support import Installed, install_wheel

pytest_plugins = ["pytester"]

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session", autouse=True)
def parsed_cassettes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The session's own folder of parsed cassettes (subprocesses inherit it)."""
    before = os.environ.get("REPLAYKIT_CASSETTE_CACHE")
    os.environ["REPLAYKIT_CASSETTE_CACHE"] = str(tmp_path_factory.mktemp("parsed-cassettes"))
    yield
    if before is None:
        os.environ.pop("REPLAYKIT_CASSETTE_CACHE", None)
    else:
        os.environ["REPLAYKIT_CASSETTE_CACHE"] = before


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A wheel of the checkout installed into a fresh venv (``tests/wheel_support.py``), once per process."""
    return install_wheel(tmp_path_factory.mktemp("wheel"))
