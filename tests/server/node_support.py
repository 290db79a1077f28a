"""Node packages for the tests that drive the fake provider from Node: installed from npm once, into a cache
folder in the repository (``.cache/node-sdks/``, ignored by git).

:func:`installed` gives the official SDKs at versions that run on Node 20 (``openai`` 7.x and later want
Node >= 22, their ``engines``, so the pins stay on 6.x until the machines that run the tests have Node 22).
:func:`installed_project` gives a Node project of the repository (a folder with ``package.json`` and
``package-lock.json``, such as ``examples/targets/ai-sdk``) installed with ``npm ci`` at its lockfile, linked
as that folder's ``node_modules``; a project that wants Node 22 pins the ``node`` package in its
devDependencies and :func:`node_of` finds that binary. A test using either is skipped, saying why, only when
Node is missing or npm cannot reach its registry; any other install failure fails it with npm's own words.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

PINS = {"@anthropic-ai/sdk": "1.16.0", "openai": "6.30.1", "@google/genai": "2.32.0"}
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "node-sdks"
CLIENT = Path(__file__).resolve().parents[1] / "fixtures" / "sdk_client.cjs"
INSTALL_TIMEOUT = 600


def _folder() -> Path:
    return CACHE / "_".join(f"{name.replace('/', '+')}@{version}" for name, version in sorted(PINS.items()))


def _complete(folder: Path) -> bool:
    """True when ``folder`` holds every pinned package at its version."""
    for name, version in PINS.items():
        manifest = folder / "node_modules" / name / "package.json"
        if not manifest.is_file():
            return False
        if json.loads(manifest.read_text(encoding="utf-8")).get("version") != version:
            return False
    return True


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold a lock beside ``folder``: xdist workers install one at a time, the others then reuse it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _npm(args: list[str], cwd: Path, timeout: float = INSTALL_TIMEOUT) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the Node tests install their packages with it")
    return subprocess.run([npm, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def _reachable(cwd: Path, what: str) -> None:
    """Skip, saying why, when npm cannot reach its registry (asked once, without npm's minutes of retries)."""
    try:
        ping = _npm(["ping", "--fetch-retries=0", "--fetch-timeout=20000"], cwd, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm cannot reach its registry to install {what}: no answer in 60 s")
    if ping.returncode != 0:
        why = " ".join(ping.stderr.split())[:200]
        pytest.skip(f"npm cannot reach its registry to install {what}: {why}")


def _install(folder: Path, files: dict[str, str], args: list[str]) -> None:
    """``npm ARGS`` in a new folder holding ``files``, renamed to ``folder`` once complete."""
    _reachable(folder.parent, folder.name)
    work = Path(tempfile.mkdtemp(prefix="install-", dir=folder.parent))
    for name, text in files.items():
        (work / name).write_text(text, encoding="utf-8")
    done = _npm([*args, "--no-audit", "--no-fund"], work)
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        pytest.fail(f"npm {' '.join(args)} in {folder.name} failed:\n{done.stderr}")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(work, folder)


def installed() -> Path:
    """The ``node_modules`` folder holding the pinned SDKs, installed on first use."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    folder = _folder()
    with _locked(folder):
        if not _complete(folder):
            manifest = {"name": "replaykit-node-sdk-tests", "private": True, "dependencies": PINS}
            args = ["install", "--ignore-scripts", "--omit=peer"]
            _install(folder, {"package.json": json.dumps(manifest)}, args)
    return folder / "node_modules"


def installed_project(project: Path) -> Path:
    """``project``'s ``node_modules``: ``npm ci`` at its lockfile into ``.cache/node-sdks/NAME@HASH`` (the
    hash of its package.json and lockfile: a changed pin installs anew), linked as ``project/node_modules``.
    """
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    names = ("package.json", "package-lock.json")
    files = {name: (project / name).read_text(encoding="utf-8") for name in names}
    digest = hashlib.sha256("\0".join(files.values()).encode()).hexdigest()[:12]
    folder = CACHE / f"{json.loads(files['package.json'])['name']}@{digest}"
    with _locked(folder):
        if not (folder / "node_modules").is_dir():
            _install(folder, files, ["ci"])  # scripts run: the `node` package's preinstall fetches its binary
        link = project / "node_modules"
        if not link.is_symlink() or link.resolve() != (folder / "node_modules").resolve():
            if link.is_symlink():
                link.unlink()
            link.symlink_to(folder / "node_modules", target_is_directory=True)
    return project / "node_modules"


def node_of(modules: Path) -> str:
    """The Node binary a project runs on: the ``node`` package it pins, else the one on the PATH."""
    pinned = modules / "node" / "bin" / "node"
    return str(pinned) if pinned.is_file() else str(shutil.which("node"))


def run_client(modules: Path, steps: list[dict[str, Any]], env: dict[str, str] | None = None) -> list[Any]:
    """Run ``steps`` with ``tests/fixtures/sdk_client.cjs`` (see there) and return what each one gave."""
    environment = {**os.environ, **(env or {}), "NODE_PATH": str(modules)}
    done = subprocess.run(["node", str(CLIENT)], input=json.dumps(steps), capture_output=True, text=True,
                          timeout=120, check=False, env=environment)
    assert done.returncode == 0, done.stderr
    results: list[Any] = json.loads(done.stdout)
    return results
