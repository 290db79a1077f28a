"""``replaykit show`` and ``replaykit cassettes``: what cassettes expect and answer, read from the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_redact import planted

from replaykit import cassette
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.cli import EXIT_OK, EXIT_USAGE, main
from replaykit.resources import data_dir

BUNDLED = data_dir("cassettes")
STREAM = "anthropic/web_search_stream.yaml"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_prints_the_request_and_what_the_stream_answers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "show", str(BUNDLED / STREAM))
    lines = out.splitlines()
    assert code == EXIT_OK
    assert lines[0] == f"{BUNDLED / STREAM}: synthesized, anthropic, 1 interaction"
    assert lines[1].startswith("  Streaming twin of anthropic/web_search.yaml")
    assert "interactions[0] (line 16): POST /v1/messages  route anthropic.messages" in lines
    body = out.split("  request body:\n", 1)[1].split("\n  response:", 1)[0]
    assert json.loads(body) == cassette.load(BUNDLED / STREAM).interactions[0].request.json()
    assert "  response: 200, stream" in lines
    head = "  events (43): message_start, content_block_start, ping, content_block_delta ×2"
    assert any(line.startswith(head) and line.endswith("message_delta, message_stop") for line in lines)


def test_show_one_interaction_long_strings_shortened_unless_full(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(BUNDLED / "anthropic/web_search_follow_up.yaml")
    code, out, _ = _run(capsys, "show", path, "--interaction", "1")
    assert code == EXIT_OK and "interactions[0]" not in out and "interactions[1] (line " in out
    assert '"encrypted_content": "Es' in out and "… (1284 characters)" in out
    code, full, _ = _run(capsys, "show", path, "--interaction", "1", "--full")
    assert "characters)" not in full and len(full) > len(out) + 1000


def test_show_json_is_whole(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "show", str(BUNDLED / "anthropic/web_search_follow_up.yaml"), "--json")
    doc = json.loads(out)
    assert code == EXIT_OK and doc["provider"] == "anthropic" and doc["stream"] is False
    assert [item["index"] for item in doc["interactions"]] == [0, 1]
    first = doc["interactions"][1]["request"]
    assert first["method"] == "POST" and first["path"] == "/v1/messages" and first["body_kind"] == "json"
    assert "characters)" not in out
    assert doc["interactions"][0]["response"] == {"status": 200, "content_type": "application/json",
                                                  "stream": False, "events": []}


def test_show_never_prints_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = planted()["anthropic"][0]
    body = json.dumps({"model": "m", "system": f"use {key}", "client_secret": "s3cr3t-value-123456"})
    request = Request("POST", "https://api.anthropic.com/v1/messages",
                      {"x-api-key": [key], "content-type": ["application/json"]}, body.encode())
    response = Response(200, "OK", {"content-type": ["application/json"]}, b'{"id": "msg_1"}')
    leak = tmp_path / "leak.yaml"
    cassette.save(Cassette([Interaction(request, response)], Meta(origin="recorded")), leak)
    for argv in ([], ["--json"], ["--full"]):
        code, out, err = _run(capsys, "show", str(leak), *argv)
        assert code == EXIT_OK and key[6:-2] not in out + err and "s3cr3t" not in out
        assert '"model": "m"' in out


@pytest.mark.parametrize(("argv", "words"), [
    (["{stream}", "--interaction", "1"], "--interaction 1: the cassette has 1 interaction; give 0"),
    (["{follow}", "--interaction", "-1"], "--interaction -1: the cassette has 2 interactions; give 0 to 1"),
    (["{folder}"], "not a cassette file; name one file"),
    (["{broken}"], "invalid YAML"),
    (["absent.yaml"], "absent.yaml: no such cassette file or folder"),
])
def test_show_usage_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                        words: str) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\ninteractions: [\n", encoding="utf-8")
    values = {"stream": BUNDLED / STREAM, "follow": BUNDLED / "anthropic/web_search_follow_up.yaml",
              "folder": tmp_path, "broken": broken}
    code, out, err = _run(capsys, "show", *(arg.format(**values) for arg in argv))
    assert code == EXIT_USAGE and out == "" and err.count("\n") == 1 and words in err


def test_cassettes_lists_every_bundled_file_from_its_own_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "cassettes")
    lines = out.splitlines()
    files = cassette.iter_paths([BUNDLED])
    assert code == EXIT_OK and len(lines) == 1 + len(files) + 1
    assert lines[0].split() == ["cassette", "provider", "route", "stream", "origin", "description"]
    row = next(line for line in lines if line.startswith(STREAM + " "))
    assert row.split()[1:5] == ["anthropic", "anthropic.messages", "yes", "synthesized"]
    assert row.endswith("  Streaming twin of anthropic/web_search.yaml: input_json_delta for the query, "
                        "results whole in conte…")  # the first sentence, cut at 100 characters
    recorded = sum(path.parent.name == "recorded" for path in files)  # counted: the set grows
    synthesized = len(files) - recorded
    summary = f"{len(files)} cassettes ({synthesized} synthesized, {recorded} recorded) in {BUNDLED}"
    assert recorded >= 7 and lines[-1].startswith(summary)


def test_cassettes_json_carries_each_files_whole_description(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "cassettes", "--json")
    doc = json.loads(out)
    assert code == EXIT_OK and doc["folders"] == [str(BUNDLED)]
    for entry in doc["cassettes"]:
        tape = cassette.load(BUNDLED / entry["cassette"])
        assert entry["description"] == tape.meta.description and entry["origin"] == tape.meta.origin
    by_name = {entry["cassette"]: entry for entry in doc["cassettes"]}
    assert by_name["openai/web_search_stream.yaml"]["routes"] == ["openai.responses"]
    assert by_name["cloudflare/search_exa.yaml"]["stream"] is False


def test_cassettes_lists_a_folder_of_ones_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = Request("POST", "https://api.openai.com/v1/responses", {}, b"{}")
    mine = Cassette([Interaction(request, Response(200))], Meta(origin="recorded", description="Mine. More."))
    cassette.save(mine, tmp_path / "sub" / "mine.yaml")
    (tmp_path / "broken.yaml").write_text("version: 1\ninteractions: [\n", encoding="utf-8")
    code, out, _ = _run(capsys, "cassettes", str(tmp_path))
    lines = out.splitlines()
    assert code == EXIT_OK
    assert lines[1].startswith("broken.yaml ") and "does not load (3: invalid YAML" in lines[1]
    assert lines[2].split() == ["sub/mine.yaml", "openai", "openai.responses", "no", "recorded", "Mine"]
    assert lines[3] == (f"2 cassettes (0 synthesized, 1 recorded) in {tmp_path}; `replaykit show NAME` "
                        "prints what one expects and answers")
