"""Shared test configuration.

``pytester`` drives the plugin's own tests (tests/plugin/). Hypothesis runs derandomized in CI (``CI`` set),
so a CI verdict is reproducible; local runs explore new examples each time and keep failures in
``.hypothesis/``.
"""

import os

from hypothesis import settings

pytest_plugins = ["pytester"]

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
