"""Hostile cassettes: each bomb is refused with a clear error, in bounded time and memory, by the library,
``replaykit verify`` and ``replaykit serve``; a closed output pipe ends the CLI quietly.

Memory is bounded with tracemalloc (Python allocations, which is where an expanded alias or a decoded body
would live); time is bounded only by the suite's own timeout: these machines are shared and noisy.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import brotli  # type: ignore[import-untyped]
import pytest

from replaykit import cassette, jsondoc
from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_PIPE, EXIT_USAGE, main
from replaykit.errors import CassetteError
from replaykit.record.capture import checked
from replaykit.transcript import ConversionError, from_interaction

BOMB = 64 << 20  # bytes a compressed bomb below expands to; the tests run with max_body far below it
LIMIT = 1 << 20


def _cassette(body: str, headers: str = "{content-type: [application/json]}", extra: str = "") -> str:
    return (f"version: 1\n{extra}interactions:\n- request:\n    method: POST\n"
            "    uri: https://api.anthropic.com/v1/messages\n    headers: {}\n    body: '{}'\n"
            "  response:\n    status: {code: 200, message: OK}\n"
            f"    headers: {headers}\n    body: {body}\n")


def _binary(data: bytes) -> str:
    return "{string: !!binary '" + base64.b64encode(data).decode() + "'}"


def _zeros(pack: Callable[[bytes], bytes]) -> bytes:
    """``BOMB`` zero bytes, packed."""
    return pack(bytes(BOMB))


def _laughs(levels: int = 9) -> str:
    """A "billion laughs" block: 9 ** ``levels`` values from ``levels`` short lines."""
    lines = ["x-anchors:", "  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _unbrotli_bomb() -> bytes:
    return brotli.compress(bytes(BOMB), quality=1)  # type: ignore[no-any-return]


ENCODED = {
    "gzip": lambda: _zeros(lambda data: gzip.compress(data, 1)),
    "gzip, gzip": lambda: _zeros(lambda data: gzip.compress(gzip.compress(data, 1), 1)),
    "deflate": lambda: _zeros(lambda data: zlib.compress(data, 1)),
    "br": _unbrotli_bomb,
}


@pytest.fixture
def peak() -> Iterator[Callable[[], int]]:
    """The peak of Python allocations (bytes) since the test started."""
    tracemalloc.start()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("encoding", sorted(ENCODED))
def test_a_decompression_bomb_is_refused_without_being_held(encoding: str, peak: Callable[[], int]) -> None:
    packed = ENCODED[encoding]()
    text = _cassette(_binary(packed), f"{{content-encoding: ['{encoding}']}}")
    tracemalloc.reset_peak()  # making the bomb held it whole; reading it must not
    refused = (rf"<string>:\d+: interactions\[0\]\.response\.body decodes \(\w+\) to more than {LIMIT} "
               r"bytes \(a decompression bomb\?\); raise the limit \(--max-body")
    with pytest.raises(CassetteError, match=refused):
        cassette.loads(text, max_body=LIMIT)
    assert peak() < len(text) * 4 + 4 * LIMIT  # never the 64 MiB it expands to


def test_a_body_under_the_limit_decodes_and_the_limit_is_part_of_the_cache_key() -> None:
    text = _cassette(_binary(gzip.compress(b"x" * 4096)), "{content-encoding: [gzip]}")
    assert cassette.loads(text, max_body=4096).interactions[0].response.body == b"x" * 4096
    with pytest.raises(CassetteError, match="more than 4095 bytes"):
        cassette.loads(text, max_body=4095)  # a parse under a higher limit is not reused


def test_a_billion_laughs_is_refused_before_it_expands(peak: Callable[[], int]) -> None:
    text = _cassette("{string: '{}'}", extra=_laughs())
    refused = (r"<string>:12: x-anchors\.a9: its YAML aliases expand to 4,412,961,524 values from 21 "
               r"written; write the values out .* \(an alias bomb\?\)")
    with pytest.raises(CassetteError, match=refused):
        cassette.loads(text)
    assert peak() < 4 << 20


def test_a_billion_laughs_in_a_parsed_body_is_refused() -> None:
    laughs = _laughs().replace("x-anchors:\n", "").replace("\n  ", "\n      ")
    body = "\n    parsed_body:\n      " + laughs.strip() + "\n"
    text = _cassette("{string: '{}'}").replace("    body: {string: '{}'}\n", body)
    place = r"<string>:22: interactions\[0\]\.response\.parsed_body\.a9: its YAML aliases"
    with pytest.raises(CassetteError, match=place):
        cassette.loads(text)


def test_an_alias_used_a_few_times_is_fine() -> None:
    shared = "x-shared: &h {content-type: [application/json]}\n"
    text = _cassette("{string: '{}'}", headers="*h", extra=shared)
    assert cassette.loads(text).interactions[0].response.headers == {"content-type": ["application/json"]}


def test_an_alias_that_contains_itself_is_refused() -> None:
    text = _cassette("{string: '{}'}", extra="x-loop: &loop [1, *loop]\n")
    with pytest.raises(CassetteError, match="a YAML alias refers to the mapping or list it is in"):
        cassette.loads(text)


def test_json_nested_past_the_limit_is_text_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(jsondoc.TooDeep):
        jsondoc.loads(deep)
    with pytest.raises(jsondoc.TooDeep):
        jsondoc.loads("[" * (jsondoc.MAX_DEPTH + 1) + "]" * (jsondoc.MAX_DEPTH + 1))
    assert jsondoc.loads("[" * jsondoc.MAX_DEPTH + "]" * jsondoc.MAX_DEPTH) is not None
    wide = json.dumps([[1]] * 1000)  # many brackets, shallow: parsed
    assert len(jsondoc.loads(wide)) == 1000
    loaded = cassette.loads(_cassette("{string: '" + deep + "'}"))
    assert loaded.interactions[0].response.json() is None


DEEP_DATA = {"array": "[" * 100_000 + "]" * 100_000, "object": '{"a":' * 100_000 + "1" + "}" * 100_000}


def _deep_stream(folder: Path, data: str) -> Path:
    """A stream whose one event's data nests far past the limit (no ``event:`` line: ``show`` reads its type
    from the data)."""
    path = folder / "deep_event.yaml"
    path.write_text(_cassette(json.dumps({"string": f"data: {data}\n\n"}),
                              "{content-type: [text/event-stream]}"))
    return path


@pytest.mark.parametrize("shape", sorted(DEEP_DATA))
def test_a_stream_event_nested_past_the_limit_is_a_finding(shape: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _deep_stream(tmp_path, DEEP_DATA[shape])
    assert main(["verify", str(path)]) == EXIT_FINDINGS
    out = capsys.readouterr().out
    place = f"{path}:3: sse-framing: interactions[0].response.body/events[0]"
    assert f"{place}: data: JSON nested deeper than 128 levels; no provider streams such JSON" in out
    assert "interactions[0]:events[0]: contract" not in out  # one defect, one finding
    assert main(["show", str(path)]) == EXIT_OK
    assert "  events (1): message\n" in capsys.readouterr().out  # a type it cannot read


def test_a_stream_event_nested_past_the_limit_is_a_contract_violation_when_recorded(tmp_path: Path) -> None:
    [item] = cassette.load(_deep_stream(tmp_path, DEEP_DATA["array"])).interactions
    deep = [(v.keyword, v.message, v.event) for v in checked(item).violations if v.event is not None]
    assert deep == [("json", "data: JSON nested deeper than 128 levels", 0)]
    with pytest.raises(ConversionError, match=r"stream event 0: .* JSON nested deeper than 128 levels"):
        from_interaction(item, timestamp=1)


def test_a_stream_event_nested_past_the_limit_ends_verify_and_show_cleanly(tmp_path: Path) -> None:
    path = _deep_stream(tmp_path, DEEP_DATA["object"])
    for command, code in (("verify", EXIT_FINDINGS), ("show", EXIT_OK)):
        done = subprocess.run([sys.executable, "-m", "replaykit", command, str(path)], capture_output=True,
                              text=True, timeout=120, check=False)
        assert (done.returncode, done.stderr) == (code, "")


def _bombs(folder: Path) -> dict[str, Path]:
    files = {
        "gzip": _cassette(_binary(ENCODED["gzip"]()), "{content-encoding: [gzip]}"),
        "laughs": _cassette("{string: '{}'}", extra=_laughs()),
        "deep": _cassette("{string: '" + "[" * 50_000 + "]" * 50_000 + "'}"),
    }
    for name, text in files.items():
        (folder / f"{name}.yaml").write_text(text)
    return {name: folder / f"{name}.yaml" for name in files}


def test_verify_reports_each_bomb_as_a_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bombs = _bombs(tmp_path)
    assert main(["verify", "--max-body", "1M", *map(str, bombs.values())]) == EXIT_FINDINGS
    out = capsys.readouterr().out
    body = "interactions[0].response.body"
    assert f"{bombs['gzip']}:11: parse: {body} decodes (gzip) to more than 1048576" in out
    laughs = "x-anchors.a9: its YAML aliases expand to 4,412,961,524 values"
    assert f"{bombs['laughs']}:12: parse: {laughs}" in out
    assert f"{bombs['deep']}:interactions[0]: contract: response / the response body is empty, not JSON, " \
           "or nested deeper than 128 levels" in out


def test_a_fifo_is_a_usage_error_for_verify_and_serve(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # nobody writes: opening it to read would block forever
    assert main(["verify", str(fifo)]) == EXIT_USAGE
    refused = "pipe.yaml: not a regular file (a FIFO, a device or a socket); name a cassette"
    assert refused in capsys.readouterr().err
    assert main(["serve", str(fifo)]) == EXIT_USAGE
    assert "pipe.yaml: not a regular file" in capsys.readouterr().err


def test_serve_refuses_a_bomb_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bombs = _bombs(tmp_path)
    assert main(["serve", str(bombs["laughs"])]) == EXIT_USAGE
    assert "an alias bomb" in capsys.readouterr().err
    assert main(["serve", "--max-body", "1M", str(bombs["gzip"])]) == EXIT_USAGE
    assert "decodes (gzip) to more than 1048576 bytes" in capsys.readouterr().err


def test_a_closed_output_pipe_ends_quietly(tmp_path: Path) -> None:
    source = next(Path(__file__).parents[1].glob("cassettes/anthropic/*.yaml"))
    for number in range(200):  # a report longer than a pipe's buffer
        (tmp_path / f"c{number}.yaml").write_bytes(source.read_bytes())
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line, as with `| head -0`
    try:
        done = subprocess.run([sys.executable, "-m", "replaykit", "verify", str(tmp_path)], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (EXIT_PIPE, "")
