"""``replaykit redact``: --in-place, --out DIR and --check; written whole or not at all; exit codes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_redact import planted

from replaykit import cassette as cassettes
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main
from replaykit.redact import files, redact
from replaykit.verify import verify_file

KEY = planted()["anthropic"][0]


def _leaky(path: Path, key: str = KEY) -> Path:
    request = Request("POST", "https://api.anthropic.com/v1/messages",
                      {"x-api-key": [key], "content-type": ["application/json"]}, b'{"model": "m"}')
    response = Response(200, "OK", {"content-type": ["application/json"]}, b'{"id": "msg_1"}')
    cassettes.save(Cassette([Interaction(request, response)], Meta(origin="synthesized")), path)
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["redact", *argv])
    out, err = capsys.readouterr()
    assert err == "" or code == EXIT_USAGE
    assert KEY[6:-2] not in out + err
    return code, out


def test_in_place_scrubs_atomically_keeps_the_mode_and_leaves_a_fresh_fingerprint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    leak = _leaky(tmp_path / "leak.yaml")
    leak.chmod(0o600)
    code, out = _run(capsys, "--in-place", str(leak))
    assert code == EXIT_OK
    assert f"{leak}:6: secret: interactions[0].request.headers.x-api-key: Anthropic API key sk-a" in out
    assert f"redacted   {leak} (1 secret)" in out and out.endswith("1 cassette, 1 changed, 0 failed\n")
    assert KEY not in leak.read_text() and os.stat(leak).st_mode & 0o777 == 0o600
    left = [f for f in verify_file(leak).findings if f.code in ("secret", "fingerprint")]
    assert left == []  # and the fingerprint is that of the redacted traffic
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leak.yaml"]  # no temporary file left
    before = leak.read_bytes()
    again = f"clean      {leak}\n1 cassette, 0 changed, 0 failed\n"
    assert _run(capsys, "--in-place", str(leak)) == (EXIT_OK, again)
    assert leak.read_bytes() == before  # a clean file is not rewritten


def test_check_writes_nothing_and_exits_1_when_something_would_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    leak = _leaky(tmp_path / "leak.yaml")
    before = leak.read_bytes()
    code, out = _run(capsys, "--check", str(tmp_path))
    assert (code, leak.read_bytes()) == (EXIT_FINDINGS, before)
    assert f"would fix  {leak} (1 secret)" in out and out.endswith("1 cassette, 1 would change, 0 failed\n")
    main(["redact", "--in-place", str(leak)])
    assert _run(capsys, "--check", str(leak))[0] == EXIT_OK


def test_out_writes_every_cassette_under_dir_keeping_the_layout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "tapes"
    leak = _leaky(source / "anthropic" / "leak.yaml")
    cassettes.save(redact(cassettes.load(leak)), source / "clean.yaml")
    before = leak.read_bytes()
    code, out = _run(capsys, "--out", str(tmp_path / "out"), str(source))
    assert code == EXIT_OK and leak.read_bytes() == before  # the source is left alone
    written = tmp_path / "out" / "anthropic" / "leak.yaml"
    assert KEY not in written.read_text() and (tmp_path / "out" / "clean.yaml").is_file()
    assert f"redacted   {leak} -> {written} (1 secret)" in out
    assert f"clean      {source / 'clean.yaml'} (copied to {tmp_path / 'out' / 'clean.yaml'})" in out


def test_a_file_that_does_not_load_is_named_and_not_touched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\ninteractions: [\n")
    _leaky(tmp_path / "leak.yaml")
    code, out = _run(capsys, "--in-place", str(tmp_path))
    assert code == EXIT_FINDINGS and broken.read_text() == "version: 1\ninteractions: [\n"
    assert f"{broken}:3: invalid YAML" in out
    assert f"FAILED     {broken} (does not load: nothing written)" in out
    assert out.endswith("2 cassettes, 1 changed, 1 failed\n")  # the other file is still scrubbed


def test_a_secret_that_survives_scrubbing_refuses_the_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    leak = _leaky(tmp_path / "leak.yaml")
    before = leak.read_bytes()
    monkeypatch.setattr(files, "redact", lambda tape, rules=None: tape)  # a scrubber that misses the key
    code, out = _run(capsys, "--in-place", str(leak))
    assert code == EXIT_FINDINGS and leak.read_bytes() == before
    assert f"FAILED     {leak} (still holds request.headers.x-api-key sk-a" in out


@pytest.mark.parametrize("argv", [[], ["--in-place", "--check"], ["--out"], ["--in-place"]])
def test_a_mode_and_a_path_are_required(argv: list[str], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    paths = [] if argv == ["--in-place"] or argv == ["--out"] else [str(_leaky(tmp_path / "leak.yaml"))]
    assert main(["redact", *argv, *paths]) == EXIT_USAGE
    assert "replaykit redact" in capsys.readouterr().err


def test_a_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["redact", "--check", str(tmp_path / "nope.yaml")]) == EXIT_USAGE
    assert "nope.yaml: no such file or directory" in capsys.readouterr().err
