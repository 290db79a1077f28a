"""The docs site (``mkdocs.yml``, ``docs/``) builds with ``--strict``, and its generated parts
(``scripts/_docs.py``) hold what the code and the contracts hold. The examples of its pages run in
``tests/test_readme.py``."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import _docs

ROOT = Path(__file__).resolve().parents[1]
QUIET = os.environ | {"NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2, not a warning of ours


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300, env=QUIET, check=False)
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "replaykit serve" in cli and "--enforce-contracts" in cli  # the generated part is in the page


def test_a_broken_link_fails_the_build(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The site's own settings (strict, the link and anchor checks) turn a broken link into a failure."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the faults](reference/faults.md#no-such-place).\n")
    shutil.copytree(ROOT / "docs" / "reference", docs / "reference",
                    ignore=lambda folder, names: [name for name in names if name != "faults.md"])
    config = load_config(str(ROOT / "mkdocs.yml"), docs_dir=str(docs), site_dir=str(tmp_path / "site"),
                         nav=[{"Home": "index.md"}, {"Faults": "reference/faults.md"}])
    with caplog.at_level(logging.WARNING, logger="mkdocs"), pytest.raises(Abort):
        build(config)
    assert "no-such-place" in caplog.text


def test_a_marker_naming_no_part_fails() -> None:
    with pytest.raises(ValueError, match=r"docs/x.md: <!-- generated: clii --> names no part; use one of"):
        _docs.expand("# X\n\n<!-- generated: clii -->\n", "docs/x.md")


def test_every_marker_of_the_docs_names_a_part() -> None:
    named = {match["name"] for path in (ROOT / "docs").rglob("*.md")
             for match in _docs.MARKER.finditer(path.read_text(encoding="utf-8"))}
    assert named == set(_docs.GENERATED)  # each part is on a page, once named


# ---------------------------------------------------------------- the generated parts


def test_the_cli_reference_lists_every_command_and_option() -> None:
    """Every command and its options, those registered only when the command is chosen included."""
    import argparse

    from replaykit.cli import build_parser

    text = _docs.cli_reference()
    found = list(_docs.commands(build_parser()))
    assert len(found) >= 14
    for name, _, sub in found:
        assert f"## replaykit {name}\n" in text
        options = [option for action in sub._actions if not isinstance(action, argparse._HelpAction)
                   for option in action.option_strings]
        assert options and all(f"`{option}" in text for option in options), name
    assert "fault kinds and their keys" in text  # serve's epilog


def test_the_fault_catalogue_has_every_kind_and_its_keys() -> None:
    from replaykit.server import faults

    text = _docs.fault_catalogue()
    for kind in faults.KINDS:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{kind}` |"))
        keys = faults.keys_text(kind)
        assert all(f"`{key}`" in row for key in keys.split(", ") if keys), row


def test_a_fault_kind_without_a_description_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(_docs.WHAT, "stall")
    with pytest.raises(ValueError, match=r"fault kinds \['stall'\] undescribed"):
        _docs.fault_catalogue()


def test_the_scenario_reference_has_every_field_of_the_schema() -> None:
    schema = json.loads((ROOT / "contracts/replaykit/scenario.schema.json").read_text(encoding="utf-8"))
    text = _docs.scenario_reference()
    sections = {name: schema["$defs"][name] for name in ("step", "expectations", "reach", "expectedEstimate")}
    for name, part in [("scenario", schema), *sections.items()]:
        section = text.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        for field in part["properties"]:
            assert f"| `{field}`" in section, (name, field)
    assert "| `kind` (required) | `\"regression\"` or `\"contract\"`" in text
    assert "list of [step](#step)" in text


def test_a_cell_stays_one_cell() -> None:
    assert _docs.cell("a | b `x|y` <ms> *") == r"a \| b `x\|y` &lt;ms&gt; \*"
