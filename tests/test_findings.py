"""One finding type: how a finding prints and serializes, whichever check made it."""

from __future__ import annotations

from replaykit.findings import Finding, errors_only


def test_finding_text_and_json() -> None:
    finding = Finding("error", "secret", "m", "a.yaml", "12", fix="rotate the key")
    assert str(finding) == "a.yaml:12: secret: m; rotate the key"
    assert str(Finding("warning", "parse", "m", "a.yaml")) == "a.yaml: parse: m (warning)"
    assert finding.to_json() == {"severity": "error", "code": "secret", "message": "m", "file": "a.yaml",
                                 "place": "12", "fix": "rotate the key", "note": ""}


def test_a_finding_at_a_json_pointer_and_the_errors_among_findings() -> None:
    at = Finding.at("/content/0/url", "warning", "title-mismatch", "differs")
    assert (at.place, at.file) == ("/content/0/url", "")
    assert str(at) == "/content/0/url: title-mismatch: differs (warning)"
    assert str(Finding.at("", "error", "not-an-object", "x")) == "/: not-an-object: x"
    error = Finding("error", "c", "m")
    assert errors_only([at, error, Finding("info", "c", "m")]) == [error]
