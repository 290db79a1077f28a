"""replaykit's pytest plugin (entry point ``pytest11``): cheap to import, does nothing unless asked."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "replaykit(cassettes=[...], faults=[...], strict=False, allow_unused=False): replay cassettes"
    )
