"""``replaykit verify``: every bad input is one clear line, never a traceback; exit codes; ``--json``."""

from __future__ import annotations

import base64
import json
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from recordings import RECORDED
from test_redact import planted

from replaykit import cassette
from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main

DATA = Path(__file__).resolve().parent / "data" / "verify"
CONSOLE = Path(sys.executable).parent / "replaykit"
BAD = {
    "malformed.yaml": ":6: parse: invalid YAML: ",
    "wrong_version.yaml": ":2: parse: unsupported cassette version 2; replaykit reads vcrpy version 1",
    "missing_keys.yaml": ":3: parse: ",
    "not_utf8.yaml": ":5: parse: not UTF-8 (byte 0xe9); save the file as UTF-8",
    "unterminated_stream.yaml": ":4: sse-framing: interactions[0].response.body/events[2]: the last event",
    "empty_stream.yaml": ":4: sse-framing: interactions[0].response.body: a text/event-stream body with no",
    "non_json_stream.yaml": ":4: sse-framing: interactions[0].response.body/events[2]: data is not JSON",
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_input_is_one_finding_line_and_exit_1(capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = str(DATA / name)
    code, out, err = _run(capsys, path)
    assert code == EXIT_FINDINGS and err == ""
    finding_lines = [line for line in out.splitlines() if line.startswith(path + ":")]
    assert len(finding_lines) == 1
    assert finding_lines[0].startswith(path + BAD[name])
    assert out.rstrip().endswith("1 finding: FAILED")
    assert "Traceback" not in out


def test_a_clean_file_exits_0_with_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(DATA / "clean_stream.yaml"), str(DATA / "cr_only_stream.yaml"))
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0].split() == ["result", "interactions", "origin", "fingerprint", "file"]
    assert lines[1].split()[:3] == ["OK", "1", "synthesized"]
    assert lines[1].endswith("clean_stream.yaml") and lines[2].split()[2] == "-"
    assert lines[-1] == "2 cassettes, 2 interactions, 0 findings: OK"


def test_a_contract_violation_is_a_finding_with_its_place_part_and_pointer(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = str(DATA / "contract_violation.yaml")
    code, out, err = _run(capsys, path)
    assert code == EXIT_FINDINGS and err == ""
    assert [line for line in out.splitlines() if line.startswith(path + ":")] == [
        f"{path}:interactions[0]: contract: request /max_tokens expected 'integer', got string '64'",
        f"{path}:interactions[0]:events[0]: contract: response /message/role 'user' must be 'assistant'",
    ]
    assert out.rstrip().endswith("1 cassette, 1 interaction, 2 findings: FAILED")


@pytest.mark.parametrize("key", [secrets.token_hex(16), secrets.token_urlsafe(30),
                                 base64.b64encode(secrets.token_bytes(30)).decode(),
                                 f"svc-deploy:{secrets.token_urlsafe(12)}"],
                         ids=["azure", "cloudflare", "aws-secret", "basic"])
def test_a_key_of_no_shape_in_checked_fields_is_never_printed_whole(
        tmp_path: Path, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = (DATA / "contract_violation.yaml").read_text(encoding="utf-8")
    path = tmp_path / "keyed.yaml"  # the key as max_tokens (type), a role (enum) and the event's role (const)
    path.write_text(text.replace('\\"role\\":\\"user\\"', f'\\"role\\":\\"{key}\\"')
                    .replace('"max_tokens":"64"', f'"max_tokens":"{key}"')
                    .replace('"role":"user"', f'"role":"{key}"'), encoding="utf-8")
    code, out, _ = _run(capsys, str(path))
    assert code == EXIT_FINDINGS and out.count(f"'{key[:4]}…{key[-2:]}' ({len(key)} chars)") == 3
    assert key not in out and key[4:-2] not in out


def test_warnings_alone_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(DATA / "stale_fingerprint.yaml"))
    assert code == EXIT_OK
    assert "fingerprint: stored fingerprint" in out and "(warning)" in out
    assert out.splitlines()[-1] == "1 cassette, 1 interaction, 1 finding (0 errors, 1 warning): OK"


@pytest.mark.parametrize(("argv", "words"), [
    (["{missing}"], "no such cassette file or folder"),
    (["{empty}"], "no cassettes (*.yaml, *.yml) in this directory"),
    ([], "the following arguments are required: PATH"),
])
def test_usage_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           argv: list[str], words: str) -> None:
    (tmp_path / "empty").mkdir()
    paths = [a.format(missing=tmp_path / "nope.yaml", empty=tmp_path / "empty") for a in argv]
    code, out, err = _run(capsys, *paths)
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and words in err
    assert err.startswith(("replaykit: error: ", "replaykit verify: error: "))


def test_json_output_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    key = planted()["anthropic"][0]
    leaky = tmp_path / "leaky.yaml"
    leaky.write_text((DATA / "clean_stream.yaml").read_text().replace("[REDACTED]", f"[{key}]"))
    code, out, _ = _run(capsys, "--json", str(DATA / "clean_stream.yaml"), str(DATA / "malformed.yaml"),
                        str(leaky))
    assert code == EXIT_FINDINGS
    doc = json.loads(out)
    assert set(doc) == {"files", "summary"}
    clean, broken, leaked = doc["files"]
    assert set(clean) == {"path", "interactions", "fingerprint", "origin", "provider", "ok", "findings"}
    assert (clean["ok"], clean["interactions"], clean["findings"]) == (True, 1, [])
    assert (clean["origin"], clean["provider"]) == ("synthesized", "anthropic")
    assert clean["fingerprint"].startswith("sha256:") and len(clean["fingerprint"]) == 71
    assert (broken["ok"], broken["interactions"], broken["fingerprint"]) == (False, 0, None)
    assert [f["code"] for f in broken["findings"]] == ["parse"]
    (finding,) = leaked["findings"]
    assert set(finding) == {"file", "place", "code", "message", "severity", "fix", "note"}
    assert (finding["code"], finding["place"], finding["severity"]) == ("secret", "5", "error")
    assert "interactions[0].request.headers.x-api-key: Anthropic API key sk-a…" in finding["message"]
    assert key not in out
    assert doc["summary"] == {"files": 3, "interactions": 2, "findings": 2, "errors": 2, "warnings": 0,
                              "expected": 0, "by_code": {"parse": 1, "secret": 1}, "ok": False}


def test_the_demo_command_passes_on_the_real_recordings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(RECORDED))
    files = sorted(RECORDED.glob("*.yaml"))
    interactions = sum(len(cassette.load(path).interactions) for path in files)
    assert code == EXIT_OK and len(files) >= 20
    # the warnings: the openai-compatible profile's relaxed rules on the OpenRouter recordings (ids, tools)
    assert re.fullmatch(rf"{len(files)} cassettes, {interactions} interactions, (\d+) findings \(0 errors, "
                        r"\1 warnings\): OK", out.splitlines()[-1])


@pytest.mark.slow
def test_the_console_script_never_prints_a_traceback(tmp_path: Path) -> None:
    bad = [str(DATA / name) for name in sorted(BAD)]
    proc = subprocess.run([str(CONSOLE), "verify", *bad], capture_output=True, text=True, check=False)
    assert proc.returncode == EXIT_FINDINGS and proc.stderr == ""
    assert "Traceback" not in proc.stdout
    assert f"{len(bad)} cassettes, " in proc.stdout
    missing = subprocess.run([str(CONSOLE), "verify", str(tmp_path / "nope")], capture_output=True, text=True,
                             check=False)
    assert missing.returncode == EXIT_USAGE and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr


COMPAT = Path(__file__).resolve().parents[1] / "cassettes" / "openai" / "compatible_xai_web_search.yaml"


def test_a_cassette_is_judged_by_its_own_profile_unless_told(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    code, out, _ = _run(capsys, str(COMPAT))
    assert code == EXIT_OK and "0 errors, 17 warnings" in out
    assert "a warning under profile openai-compatible" in out
    code, out, _ = _run(capsys, "--profile", "strict", str(COMPAT))
    assert code == EXIT_FINDINGS and "17 findings: FAILED" in out
    strict = tmp_path / "strict.yaml"
    strict.write_text(COMPAT.read_text(encoding="utf-8").replace("  profile: openai-compatible\n", ""))
    assert _run(capsys, str(strict))[0] == EXIT_FINDINGS
    assert _run(capsys, "--profile", "openai-compatible", str(strict))[0] == EXIT_OK


X_SEARCH = Path(__file__).resolve().parent / "data" / "contracts" / "xai_x_search_call.yaml"


def test_an_xai_x_search_call_verifies_under_its_profile_and_is_refused_strictly(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(X_SEARCH))
    assert code == EXIT_OK and "0 errors, 10 warnings" in out
    item = f"{X_SEARCH}:interactions[0]: contract: response /output/0/type 'x_se…ll' (13 chars) is not one"
    assert item in out and "(OpenAI only: a warning under profile openai-compatible) (warning)" in out
    code, out, _ = _run(capsys, "--profile", "strict", str(X_SEARCH))
    assert code == EXIT_FINDINGS and item in out and "10 findings: FAILED" in out


def test_an_unknown_profile_is_a_finding_in_the_file_or_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    odd = tmp_path / "odd.yaml"
    odd.write_text(COMPAT.read_text(encoding="utf-8").replace("profile: openai-compatible", "profile: loose"))
    code, out, _ = _run(capsys, str(odd))
    assert code == EXIT_FINDINGS
    assert f"{odd}:replaykit.profile: contract: profile 'loose' is unknown; write one of strict, " \
           "openai-compatible" in out
    code, _, err = _run(capsys, "--profile", "loose", str(COMPAT))
    assert code == EXIT_USAGE and "invalid choice: 'loose'" in err


EXPECTING = Path(__file__).resolve().parents[1] / "cassettes" / "cloudflare" / "search_missing_fields.yaml"


def test_declared_violations_are_expected_not_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(EXPECTING))
    lines = out.splitlines()
    found = [line for line in lines if line.startswith(f"{EXPECTING}:")]
    assert code == EXIT_OK and len(found) == 2
    assert all(line.endswith("(expected)") and "(warning)" not in line for line in found)
    assert lines[-2].startswith("OK (2 expected) ")
    assert lines[-1] == "1 cassette, 1 interaction, 2 findings (0 errors, 0 warnings, 2 expected): OK"
    code, out, _ = _run(capsys, "--json", str(EXPECTING))
    doc = json.loads(out)
    assert {f["severity"] for f in doc["files"][0]["findings"]} == {"expected"}
    assert (doc["summary"]["warnings"], doc["summary"]["expected"], doc["summary"]["ok"]) == (0, 2, True)


def test_every_declared_violation_of_the_bundled_cassettes_is_expected(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(EXPECTING.parents[1]))
    assert code == EXIT_OK
    assert re.search(r" findings \(0 errors, \d+ warnings, 6 expected\): OK$", out.strip())
    code, out, _ = _run(capsys, "--json", str(EXPECTING.parents[1]))
    # the warnings left: the openai-compatible profile's relaxed rules, on the files of that profile (the
    # compatible providers' synthesized ones and the real OpenRouter recordings)
    warned = {finding["file"] for result in json.loads(out)["files"] for finding in result["findings"]
              if finding["severity"] == "warning"}
    names = {Path(path).name for path in warned}
    assert all(name.startswith(("compatible_", "pydantic-ai__openrouter_")) for name in names), names
    assert all(cassette.load(Path(path)).meta.extra.get("profile") == "openai-compatible" for path in warned)
