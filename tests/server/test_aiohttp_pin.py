"""aiohttp is pinned because :class:`~replaykit.server.connections.Connection` reads its internals: the
installed version is one the pin allows and the internals are there; an unknown version fails here, with
what to do, before any request is served wrong."""

from __future__ import annotations

import asyncio
import re
import tomllib
from pathlib import Path

import aiohttp
from aiohttp import web

from replaykit.server.connections import AIOHTTP_KNOWN, Connection, Limits, Server

ROOT = Path(__file__).resolve().parents[2]
INTERNALS = ("_messages", "_waiter", "_current_request", "_manager", "_force_close")


def _minor(version: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def test_the_installed_aiohttp_is_one_whose_internals_are_known() -> None:
    low, high = AIOHTTP_KNOWN
    assert low <= _minor(aiohttp.__version__) <= high, (
        f"aiohttp {aiohttp.__version__} is not one replaykit.server.connections was checked against "
        f"({low[0]}.{low[1]} to {high[0]}.{high[1]}): check that Connection's reads of aiohttp's internals "
        f"({', '.join(INTERNALS)}) still hold, then widen AIOHTTP_KNOWN and the bound in pyproject.toml")


def test_the_pin_in_pyproject_is_the_known_range() -> None:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (aiohttp_pin,) = [item for item in requires if item.startswith("aiohttp")]
    low, high = AIOHTTP_KNOWN
    assert aiohttp_pin == f"aiohttp>={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}"


async def _connection() -> Connection:
    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    return Server(handler, limits=Limits(), on_malformed=lambda request, message: web.Response()).connection()


def test_the_internals_read_are_there() -> None:
    connection = asyncio.run(_connection())
    missing = [name for name in INTERNALS if not hasattr(connection, name)]
    assert missing == [], f"aiohttp {aiohttp.__version__}'s RequestHandler lacks {missing}"
