"""``replaykit.resources``: the bundled folders, and the one lookup of a cassette a user names."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.errors import UsageError
from replaykit.resources import data_dir, find_cassette

NAME = "anthropic/web_search_stream.yaml"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current folder with no cassettes in it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_path_that_exists_is_taken_as_given(elsewhere: Path) -> None:
    (elsewhere / "anthropic").mkdir()
    (elsewhere / NAME).write_text("version: 1\ninteractions: []\n", encoding="utf-8")
    assert find_cassette(NAME) == Path(NAME)


def test_a_name_not_found_here_is_a_bundled_cassette(elsewhere: Path) -> None:
    assert find_cassette(NAME) == data_dir("cassettes") / NAME
    assert find_cassette("anthropic") == data_dir("cassettes") / "anthropic"  # a folder too


def test_a_leading_cassettes_folder_names_the_bundled_folder(elsewhere: Path) -> None:
    assert find_cassette(f"cassettes/{NAME}") == data_dir("cassettes") / NAME
    assert find_cassette("cassettes/") == data_dir("cassettes")


def test_base_is_searched_before_the_bundled_cassettes(tmp_path: Path) -> None:
    (tmp_path / "anthropic").mkdir()
    (tmp_path / NAME).write_text("version: 1\ninteractions: []\n", encoding="utf-8")
    assert find_cassette(NAME, tmp_path) == tmp_path / NAME
    other = "openai/web_search.yaml"
    assert find_cassette(other, tmp_path) == data_dir("cassettes") / other


def test_a_missing_cassette_names_every_place_looked_in_and_the_fix(elsewhere: Path) -> None:
    with pytest.raises(UsageError) as info:
        find_cassette("anthropic/absent.yaml")
    bundled = data_dir("cassettes") / "anthropic/absent.yaml"
    assert str(info.value) == (f"anthropic/absent.yaml: no such cassette file or folder (looked in: "
                               f"anthropic/absent.yaml, {bundled}); name a cassette file or folder, or a "
                               "bundled one (`replaykit cassettes` lists them)")


def test_an_absolute_path_is_never_looked_up_elsewhere(elsewhere: Path) -> None:
    with pytest.raises(UsageError, match=r"\(looked in: /nowhere/anthropic/web_search.yaml\)"):
        find_cassette("/nowhere/anthropic/web_search.yaml")
