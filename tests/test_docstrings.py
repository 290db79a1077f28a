"""Module docstrings say what the module owns and its seam in at most 8 lines; the reasoning is in
docs/architecture/. Lines are counted as ``scripts/house_figures`` counts them.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "replaykit"
LIMIT = 8


def _length(path: Path) -> int:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    return 0 if doc is None else len(doc.strip("\n").splitlines())


def test_module_docstrings_are_at_most_eight_lines() -> None:
    over = sorted(f"{path.relative_to(PACKAGE.parent)}: {length} lines"
                  for path in PACKAGE.rglob("*.py") if (length := _length(path)) > LIMIT)
    assert not over, (f"module docstrings over {LIMIT} lines (keep what the module owns and its seam; "
                      f"move the reasoning to docs/architecture/):\n" + "\n".join(over))
