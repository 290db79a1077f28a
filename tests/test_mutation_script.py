"""``scripts/mutation``'s choices: which tests mirror a module, and the narrowed mutmut table."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _mutation


@pytest.mark.parametrize(("module", "tests"), [
    ("replaykit/sse.py", ["tests/test_sse.py"]),
    ("replaykit/server/diff.py", ["tests/server/test_diff.py"]),
    ("replaykit/redact/shapes.py", ["tests/test_redact.py", "tests/test_redact_long.py",
                                    "tests/test_redact_matrix.py"]),  # the package's
    ("replaykit/scenario/expect.py", ["tests/scenario/test_scenario_expect.py"]),  # named with its package
])
def test_the_tests_that_mirror_a_module(module: str, tests: list[str]) -> None:
    assert _mutation.mirrored_tests(module) == tests


def test_every_configured_module_exists_and_has_tests() -> None:
    for name in _mutation.settings()["only_mutate"]:  # type: ignore[attr-defined]
        assert _mutation.mirrored_tests(_mutation.module_path(name))


def test_the_table_is_narrowed_to_one_module() -> None:
    text = (_mutation.ROOT / "pyproject.toml").read_text()
    table = {"only_mutate": ["replaykit/sse.py"], "pytest_add_cli_args_test_selection": ["tests/test_sse.py"]}
    assert tomllib.loads(_mutation.narrowed(text, table))["tool"]["mutmut"] == table


def test_a_module_that_does_not_exist_is_named() -> None:
    with pytest.raises(SystemExit, match="'nope' is not a module of replaykit"):
        _mutation.module_path("nope")
