"""replaykit.verify: parse errors with their line, secrets, SSE framing, the CHECKS seam, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recordings import RECORDED
from test_redact import _in_text, planted

from replaykit import contracts, verify
from replaykit.cassette import Cassette
from replaykit.errors import UsageError
from replaykit.findings import Finding
from replaykit.redact import SECRET_KINDS
from replaykit.resources import data_dir
from replaykit.verify import (
    CHECKS,
    check_contracts,
    check_fingerprint,
    check_secrets,
    check_sse_framing,
    verify_file,
    verify_paths,
)

DATA = Path(__file__).resolve().parent / "data" / "verify"
CLEAN = ("clean_stream.yaml", "cr_only_stream.yaml", "done_stream.yaml")  # contract-valid: every check passes
UNCOVERED = ("other_stream.yaml",)  # legal framing on a route no contract covers
LOCAL = (check_secrets, check_sse_framing, check_fingerprint)  # every check but the contract check


def _kinds(name: str) -> list[tuple[str, str]]:
    return [(f.code, f.place) for f in verify_file(DATA / name).findings]


@pytest.mark.parametrize("name", CLEAN)
def test_well_formed_cassettes_have_no_findings(name: str) -> None:
    result = verify_file(DATA / name)
    assert result.findings == [] and result.ok
    assert result.interactions == 1 and (result.fingerprint or "").startswith("sha256:")


@pytest.mark.parametrize("name", UNCOVERED)
def test_well_formed_streams_on_uncovered_routes_have_no_local_findings(name: str) -> None:
    result = verify_file(DATA / name, checks=LOCAL)
    assert result.findings == [] and result.ok
    assert result.interactions == 1 and (result.fingerprint or "").startswith("sha256:")


@pytest.mark.parametrize("name", UNCOVERED)
def test_a_route_no_contract_covers_is_one_warning_that_does_not_fail(name: str) -> None:
    result = verify_file(DATA / name)
    assert [(f.code, f.place, f.severity) for f in result.findings] == [
        ("contract", "interactions[0]", "warning")]
    assert "no contract covers" in result.findings[0].message and result.ok


def test_the_contract_check_runs_by_default() -> None:
    assert check_contracts in CHECKS
    findings = verify_file(DATA / "contract_violation.yaml").findings
    assert [(f.code, f.place, f.severity) for f in findings] == [
        ("contract", "interactions[0]", "error"), ("contract", "interactions[0]:events[0]", "error")]
    assert verify_file(DATA / "contract_violation.yaml", checks=LOCAL).findings == []


@pytest.mark.parametrize(("name", "place", "words"), [
    ("malformed.yaml", "6", "invalid YAML"),
    ("wrong_version.yaml", "2", "unsupported cassette version 2"),
    ("missing_keys.yaml", "3", "response"),
    ("not_utf8.yaml", "5", "not UTF-8 (byte 0xe9)"),
])
def test_parse_errors_are_one_finding_with_their_line(name: str, place: str, words: str) -> None:
    result = verify_file(DATA / name)
    (finding,) = result.findings
    assert (finding.code, finding.place, finding.file) == ("parse", place, str(DATA / name))
    assert words in finding.message
    assert not result.ok and result.interactions == 0 and result.fingerprint is None


@pytest.mark.parametrize(("name", "message"), [
    ("unterminated_stream.yaml", "interactions[0].response.body/events[2]: the last event lacks its"),
    ("empty_stream.yaml", "interactions[0].response.body: a text/event-stream body with no events"),
    ("non_json_stream.yaml", "interactions[0].response.body/events[2]: data is not JSON (11 characters)"),
])
def test_sse_framing_problems(name: str, message: str) -> None:
    (finding,) = verify_file(DATA / name).findings
    assert (finding.code, finding.place, finding.severity) == ("sse-framing", "4", "error")
    assert finding.message.startswith(message)


def test_a_gemini_stream_holds_json_in_every_event() -> None:
    text = (data_dir("cassettes") / "gemini" / "grounding_stream.yaml").read_text()
    text = text.replace('data: {', 'data: x{', 1).replace("provider: gemini", "provider: other", 1)
    (finding,) = check_sse_framing(Path("g.yaml"), _loads(text))
    assert finding.message.startswith("interactions[0].response.body/events[0]: data is not JSON")


def test_a_comment_only_stream_has_no_events() -> None:
    text = (DATA / "empty_stream.yaml").read_text().replace('string: ""', 'string: ": ping\\n\\n"')
    loaded = _loads(text)
    assert [f.message.split(":")[0] for f in check_sse_framing(Path("s.yaml"), loaded)] == [
        "interactions[0].response.body"]


def _loads(text: str) -> Cassette:
    from replaykit.cassette import loads

    return loads(text, "s.yaml")


def test_provider_from_metadata_decides_that_data_must_be_json() -> None:
    text = (DATA / "other_stream.yaml").read_text()
    assert check_sse_framing(Path("s.yaml"), _loads(text)) == []
    marked = text.replace("version: 1\n", "version: 1\nreplaykit: {provider: openai}\n")
    assert len(check_sse_framing(Path("s.yaml"), _loads(marked))) == 2


def test_a_stale_fingerprint_is_a_warning_that_does_not_fail() -> None:
    result = verify_file(DATA / "stale_fingerprint.yaml")
    assert [(f.code, f.severity) for f in result.findings] == [("fingerprint", "warning")]
    assert result.ok


def test_a_fresh_fingerprint_is_not_reported(tmp_path: Path) -> None:
    from replaykit.cassette import load, save

    target = tmp_path / "saved.yaml"
    save(load(DATA / "stale_fingerprint.yaml"), target)
    assert check_fingerprint(target, load(target)) == []


def _with_secret(tmp_path: Path, kind: str, key: str) -> Path:
    """clean_stream.yaml with ``key`` planted in the request's user message (still contract-valid)."""
    shown = _in_text(kind, key)
    text = (DATA / "clean_stream.yaml").read_text()
    planted_text = json.dumps(f"my key is {shown}")[1:-1].replace("'", "''")  # inside a '...' YAML scalar
    target = tmp_path / f"{kind}.yaml"
    target.write_text(text.replace('"content":"hi"', f'"content":"{planted_text}"', 1))
    return target


@pytest.mark.parametrize("kind", sorted(set(SECRET_KINDS) - {"cloudflare_account"}))  # that one: URIs only
def test_secrets_of_every_kind_are_findings_with_field_and_mask(tmp_path: Path, kind: str) -> None:
    key = planted()[kind][0]
    path = _with_secret(tmp_path, kind, key)
    result = verify_file(path)
    assert [(f.code, f.place) for f in result.findings] == [("secret", "5")]
    message = result.findings[0].message
    assert message.startswith("interactions[0].request.body/messages/0/content: ")
    assert key not in message and key not in json.dumps(result.to_json())
    assert not result.ok


def test_a_secret_outside_the_traffic_is_found_in_the_raw_text(tmp_path: Path) -> None:
    key = planted()["aws"][0]
    target = tmp_path / "c.yaml"
    text = (DATA / "clean_stream.yaml").read_text()
    target.write_text(text.replace("provider: anthropic}", f"provider: anthropic}}\n# recorded by {key}"))
    (finding,) = check_secrets(target, _loads(target.read_text()))
    assert (finding.place, finding.code) == ("4", "secret")
    assert finding.message.startswith("AWS access key id AK")


def test_a_secret_in_a_file_that_does_not_parse_is_still_reported(tmp_path: Path) -> None:
    key = planted()["github"][0]
    target = tmp_path / "broken.yaml"
    target.write_text(f"version: 1\ninteractions: [\n# {key}\n")
    assert [f.code for f in verify_file(target).findings] == ["parse", "secret"]


def test_a_secret_reported_in_the_traffic_is_not_reported_twice(tmp_path: Path) -> None:
    path = _with_secret(tmp_path, "anthropic", planted()["anthropic"][0])
    assert len(verify_file(path).findings) == 1


def test_checks_is_the_seam_for_more_checks(tmp_path: Path) -> None:
    seen: list[tuple[Path, int]] = []

    def count_interactions(path: Path, cassette: Cassette) -> list[Finding]:
        seen.append((path, len(cassette.interactions)))
        return [Finding("error", "contract", "a violation", str(path), "1")]

    report = verify_paths([DATA / "clean_stream.yaml"], checks=(*CHECKS, count_interactions))
    assert seen == [(DATA / "clean_stream.yaml", 1)]
    assert [f.code for f in report.findings] == ["contract"] and not report.ok
    assert check_secrets in CHECKS and check_sse_framing in CHECKS


def test_folders_are_searched_and_the_report_counts(tmp_path: Path) -> None:
    for name in ("clean_stream.yaml", "unterminated_stream.yaml"):
        (tmp_path / "nested").mkdir(exist_ok=True)
        (tmp_path / "nested" / name).write_bytes((DATA / name).read_bytes())
    (tmp_path / "notes.txt").write_text("not a cassette")
    report = verify_paths([tmp_path])
    assert [Path(r.path).name for r in report.files] == ["clean_stream.yaml", "unterminated_stream.yaml"]
    summary = report.summary()
    assert summary == {"files": 2, "interactions": 2, "findings": 1, "errors": 1, "warnings": 0,
                       "expected": 0, "by_code": {"sse-framing": 1}, "ok": False}


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or directory"):
        verify_paths([DATA / "clean_stream.yaml", tmp_path / "nope.yaml"])


def test_a_folder_without_cassettes_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(UsageError, match="no cassettes"):
        verify_paths([tmp_path])


def test_no_paths_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        verify_paths([])


def test_every_real_recording_verifies_clean() -> None:
    report = verify_paths([RECORDED])
    assert [f for f in report.findings if f.severity != "warning"] == []
    # warnings only where a recording's profile relaxes an OpenAI-only rule (OpenRouter's gen- ids, tools)
    assert {f.note for f in report.findings} == {"relaxed by the cassette's profile"}
    assert {Path(f.file).name.startswith("pydantic-ai__openrouter_") for f in report.findings} == {True}
    assert len(report.files) == 20 and report.summary()["interactions"] == 27


def test_a_request_body_that_is_not_json_is_a_contract_error() -> None:
    text = (DATA / "clean_stream.yaml").read_text()
    start = text.index("    body: '{")
    broken = text[:start] + "    body: 'model=claude stream=true'\n" + text[text.index("\n", start) + 1:]
    findings = check_contracts(Path("s.yaml"), _loads(broken))
    assert [(f.place, f.severity) for f in findings if f.message.startswith(
        "request / the request body is empty, not JSON")] == [("interactions[0]", "error")]


_BLOCK = '{\\"type\\":\\"content_block_start\\",\\"index\\":0,\\"content_block\\":%s}'
_DELTA = '{\\"type\\":\\"content_block_delta\\",\\"index\\":0,\\"delta\\":%s}'
_TEXT_BLOCK = _BLOCK % '{\\"type\\":\\"text\\",\\"text\\":\\"\\"}'


@pytest.mark.parametrize(("field", "data"), [
    ("content_block", _BLOCK % '\\"text\\"'),
    ("content_block", _BLOCK % "[1]"),
    ("delta", _TEXT_BLOCK + "\\n\\nevent: content_block_delta\\ndata: " + _DELTA % '\\"x\\"'),
    ("delta", _TEXT_BLOCK + "\\n\\nevent: content_block_delta\\ndata: " + _DELTA % "[1]"),
])
def test_a_non_object_block_or_delta_is_a_violation_not_a_crash(field: str, data: str) -> None:
    ping = 'event: ping\\ndata: {\\"type\\": \\"ping\\"}'
    text = (DATA / "clean_stream.yaml").read_text()
    assert ping in text
    (item,) = _loads(text.replace(ping, f"event: content_block_start\\ndata: {data}")).interactions
    assert any(v.pointer.startswith(f"/{field}") for v in contracts.check_interaction(item))


def test_non_json_event_data_never_quotes_a_key(tmp_path: Path) -> None:
    key = planted()["anthropic"][0]
    target = tmp_path / "k.yaml"
    text = (DATA / "non_json_stream.yaml").read_text()
    target.write_text(text.replace("hello there", key))
    result = verify_file(target)
    lines = [str(f) for f in result.findings] + [json.dumps(result.to_json())]
    assert "data is not JSON (108 characters)" in "\n".join(lines)
    assert not any(key[:12] in line for line in lines)


def test_two_distinct_keys_of_one_kind_are_two_findings(tmp_path: Path) -> None:
    first, second = planted(1)["anthropic"][0], planted(2)["anthropic"][0]
    target = tmp_path / "two.yaml"
    text = (DATA / "clean_stream.yaml").read_text().replace("x-api-key: [REDACTED]", f"x-api-key: [{first}]")
    target.write_text(text.replace("provider: anthropic}", f"provider: anthropic}}\n# old key {second}"))
    findings = check_secrets(target, _loads(target.read_text()))
    assert [(f.place, f.code) for f in findings] == [("6", "secret"), ("4", "secret")]


def test_shared_yaml_aliases_are_scanned_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replaykit.redact import cassette_walk as walk

    searched: list[str] = []
    real = walk.find
    monkeypatch.setattr(walk, "find", lambda text: searched.append(text) or real(text))
    levels = ["a0: &a0 [x, y, z, w, v, u, t, s, r]"]
    levels += [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 6)]
    anchors = "\n".join(levels)
    text = (DATA / "clean_stream.yaml").read_text().replace("interactions:", f"{anchors}\ninteractions:")
    walk.scan(_loads(text))
    assert len(searched) < 200  # 9 ** 6 strings when every alias is walked again
    target = tmp_path / "laughs.yaml"
    target.write_text(text)
    assert [f.code for f in verify_file(target, checks=LOCAL).findings] == []


def test_the_raw_text_is_read_a_piece_at_a_time_as_if_whole(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify, "_READ", 3)  # characters, and bad bytes, cut across reads
    raw = "café — 😀 ok\n".encode() + b"\xff\xc3(\xe2\x82" + "fin é".encode() + b"\xf0\x9f"
    path = tmp_path / "mixed.yaml"
    path.write_bytes(raw)
    assert verify._read_text(path) == raw.decode("utf-8", errors="replace")
