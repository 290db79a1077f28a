"""The README's Python examples run, in order, in one namespace, from the repository root."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_readme_opens_with_the_two_commands() -> None:
    head = README.read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "./scripts/demo" in head and "./scripts/test" in head


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 5


def test_the_readme_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(README.parent)
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(BLOCKS, start=1):
        code = compile(block, f"README.md python block {number}", "exec")
        exec(code, namespace)
