"""Shared test configuration.

``pytester`` drives the plugin's own tests (tests/plugin/); ``wheel_venv`` is the checkout built as a wheel
and installed into a fresh venv, for the tests that run what a user installs (the package data, the README's
examples). Hypothesis runs derandomized in CI (``CI`` set), so a CI verdict is reproducible; local runs
explore new examples each time and keep failures in ``.hypothesis/``.
"""

import os

import pytest
from hypothesis import settings
from wheel_support import Installed, install_wheel

pytest_plugins = ["pytester"]

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A wheel of the checkout installed into a fresh venv (``tests/wheel_support.py``), once per process."""
    return install_wheel(tmp_path_factory.mktemp("wheel"))
