"""Environment identity: what a qualification ran on, so that a later report can prove what changed.

:func:`environment` (interpreter, platform, key package versions), :func:`manifest` (the SHA-256 of every file
under some folders, keyed by forward-slash paths, the same in a checkout and a wheel), :func:`command_files`
(the files a target or estimator command names) and :func:`revision` (the git commit). Hashing is bounded by
:data:`MAX_FILES`; dot-folders, ``__pycache__`` and ``node_modules`` are left out. Called by
:mod:`replaykit.qualify`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from replaykit import DISTRIBUTION, __version__
from replaykit.errors import UsageError, located

__all__ = [
    "MAX_FILES",
    "SDKS",
    "command_files",
    "environment",
    "file_hash",
    "installed_version",
    "key",
    "key_packages",
    "manifest",
    "manifest_hash",
    "module_path",
    "revision",
]

MAX_FILES = 20_000
SDKS = ("anthropic", "openai")
_SKIPPED = {"__pycache__", "node_modules"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def key_packages() -> list[str]:
    """replaykit's own dependencies (not the extras') and the provider SDKs, sorted by name."""
    try:
        declared = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:  # a checkout on PYTHONPATH, never installed
        declared = []
    names = {match[0].lower() for spec in declared if "extra ==" not in spec and (match := _NAME.match(spec))}
    return sorted(names | set(SDKS))


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name``; None when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, object]:
    """``{python, platform, packages}`` (see the module docstring); replaykit is the version running."""
    packages: dict[str, str | None] = {name: installed_version(name) for name in key_packages()}
    packages["replaykit"] = __version__
    python = f"{platform.python_version()} {platform.python_implementation()}"
    return {"python": python, "platform": platform.platform(), "packages": dict(sorted(packages.items()))}


def file_hash(path: Path) -> str:
    """``sha256:<hex>`` of the file's bytes, read a piece at a time."""
    with open(path, "rb") as handle:
        return f"sha256:{hashlib.file_digest(handle, 'sha256').hexdigest()}"


def _files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.startswith("."))
        found += [Path(root, name) for name in sorted(names) if not name.endswith(".pyc")]
        if len(found) > MAX_FILES:
            raise UsageError(
                located(
                    folder,
                    None,
                    f"more than {MAX_FILES} files to hash",
                    "name a smaller folder (the code under test, not its dependencies)",
                )
            )
    return found


def _anchor(root: Path) -> Path:
    """What keys under ``root`` are relative to: a folder's parent, a file's folder's parent."""
    resolved = root.resolve()
    return resolved.parent if resolved.is_dir() else resolved.parent.parent


def key(path: Path, roots: Sequence[Path]) -> str:
    """``path``'s key in a manifest of ``roots``: from the anchor (:func:`_anchor`) of the first root whose
    folder holds it (``cassettes/anthropic/web_search.yaml``), else from the current folder, else its name."""
    full = path.resolve()
    for root in roots:
        folder = root.resolve() if root.is_dir() else root.resolve().parent
        if full == folder or folder in full.parents:
            return full.relative_to(_anchor(root)).as_posix()
    label = _label(full, Path.cwd())
    return label if label[:1] != "/" else full.name


def manifest(roots: Sequence[Path], also: Iterable[Path] = ()) -> dict[str, str]:
    """Every file under each of ``roots`` (a folder, or one file) and the files ``also`` names, each with its
    :func:`file_hash`, keyed by :func:`key`, sorted."""
    hashes: dict[str, str] = {}
    for root in roots:
        for path in _files(root) if root.is_dir() else [root]:
            hashes[key(path, roots)] = file_hash(path)
    for path in also:
        hashes.setdefault(key(path, roots), file_hash(path))
    return dict(sorted(hashes.items()))


def manifest_hash(files: dict[str, str]) -> str:
    """SHA-256 of a :func:`manifest`, one ``path hash`` line per file."""
    lines = "".join(f"{path} {digest}\n" for path, digest in files.items())
    return f"sha256:{hashlib.sha256(lines.encode('utf-8')).hexdigest()}"


def _tree_hash(folder: Path) -> str:
    """A folder's hash: :func:`manifest_hash` of its manifest."""
    return manifest_hash(manifest([folder]))


def _label(path: Path, here: Path) -> str:
    """``path`` relative to ``here`` when inside it, else absolute (forward slashes)."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(here.resolve()).as_posix() or "."
    except ValueError:
        return resolved.as_posix()


def module_path(module: str, search: Sequence[str]) -> Path | None:
    """The file or package folder of the dotted ``module``, looked for in ``search`` and then ``sys.path``
    (never imported); None when it is not found."""
    locations: list[str] | None = [*search, *sys.path]
    found: Path | None = None
    for part in module.split("."):
        if locations is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(part, locations)
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or []) or None
        found = Path(locations[0]) if locations else Path(spec.origin) if spec.origin else None
    return found


def command_files(
    argv: Sequence[str], here: Path | None = None, module: str | None = None, search: Sequence[str] = ()
) -> dict[str, str]:
    """The files and folders a command names inside ``here`` (default: the current folder), each with its
    hash (a folder: :func:`_tree_hash`), keyed by :func:`_label`; the command word itself only when written
    as a path. A Python module (``module``, as a ``python:module:function`` target or an ``--estimator
    module:function`` names it, or the word after ``-m``) counts by its file or folder, found as
    :func:`module_path` finds it."""
    here = Path.cwd() if here is None else here
    paths: list[Path] = []
    modules = [module] if module is not None else []
    for index, word in enumerate(argv):
        if index > 0 and argv[index - 1] == "-m":
            modules.append(word)
            continue
        path = Path(word) if os.path.isabs(word) else here / word
        named = index > 0 or "/" in word
        if named and not word.startswith("-") and path.exists() and _label(path, here)[:1] != "/":
            paths.append(path)
    for name in modules:
        found = module_path(name, [str(here), *search])
        if found is not None and _label(found, here)[:1] != "/":
            paths.append(found)
    return {_label(path, here): _tree_hash(path) if path.is_dir() else file_hash(path) for path in paths}


@functools.cache
def revision(here: Path | None = None) -> str | None:
    """The git commit of ``here`` (default: the current folder), ``+dirty`` when files differ from it;
    None outside a git work tree or without git."""
    where = str(Path.cwd() if here is None else here)
    try:
        head = subprocess.run(
            ["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head
