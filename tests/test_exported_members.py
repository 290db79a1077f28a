"""The package root's ``__all__`` is complete, and ``import replaykit`` stays cheap."""

from __future__ import annotations

import subprocess
import sys

import replaykit


def test_all_lists_every_public_name_at_the_root() -> None:
    public = {name for name in dir(replaykit) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(replaykit, name)).__name__ == "module"}
    assert set(replaykit.__all__) - {"__version__"} == public - modules


def test_every_exported_name_has_a_docstring() -> None:
    names = [name for name in replaykit.__all__ if name != "__version__"]
    missing = [name for name in names if not getattr(replaykit, name).__doc__]
    assert missing == []


def test_importing_the_root_does_not_load_the_server_or_hypothesis() -> None:
    code = "import sys, replaykit; print(sorted(m for m in ('aiohttp', 'hypothesis') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_root_export_shadows_a_submodule() -> None:
    import pkgutil

    submodules = {info.name for info in pkgutil.iter_modules(replaykit.__path__)}
    assert submodules & set(replaykit.__all__) == set()


def test_the_old_name_of_provider_model_still_imports_with_a_deprecation_warning() -> None:
    import pytest

    from replaykit import replay

    with pytest.warns(DeprecationWarning, match=r"^replaykit\.Target is deprecated: use replaykit\.Provider"):
        assert replaykit.Target is replay.ProviderModel
    with pytest.warns(DeprecationWarning, match=r"replay\.Target is deprecated: use replaykit\.replay\.Prov"):
        assert replay.Target is replay.ProviderModel
    assert "Target" not in replaykit.__all__ and "Target" not in replay.__all__
