"""The scenario tests' fixture: the tiny target importable by the child processes."""

from __future__ import annotations

import pytest
from scenario_support import tiny_target_importable


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    tiny_target_importable(monkeypatch)
