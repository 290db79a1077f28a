"""The admin API under /__replaykit/: load and unload cassettes, add stubs, reset; what it refuses and how."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from server_support import ANTHROPIC, anthropic_message, anthropic_request, bundled, json_interaction

from replaykit import cassette, contracts
from replaykit.server import FakeProvider, admin

SEARCH = "anthropic/web_search.yaml"


def _admin(fake: FakeProvider, method: str, path: str, **options: Any) -> httpx.Response:
    return httpx.request(method, f"{fake.url}/__replaykit/{path}", **options)


def _loaded(fake: FakeProvider) -> list[str]:
    return [row["cassette"] for row in _admin(fake, "GET", "cassettes").json()["cassettes"]]


def _ask(fake: FakeProvider, name: str = SEARCH) -> httpx.Response:
    body = cassette.load(bundled(name)).interactions[0].request.json()
    return httpx.post(f"{fake.url}/v1/messages", json=body)


def _stub() -> dict[str, Any]:
    """One interaction as a cassette holds it (vcrpy's layout)."""
    return {
        "request": {"method": "POST", "uri": ANTHROPIC, "body": json.dumps(anthropic_request("stubbed"))},
        "response": {"status": {"code": 200, "message": "OK"},
                     "headers": {"content-type": ["application/json"]},
                     "body": {"string": json.dumps(anthropic_message("from a stub"))}},
    }


def test_a_suite_loads_cassettes_by_path_without_a_restart(serve: Any) -> None:
    fake = serve()
    assert _ask(fake).status_code == 404
    loaded = _admin(fake, "POST", "cassettes", json={"paths": [str(bundled(SEARCH))]})
    assert loaded.status_code == 200 and loaded.json()["cassettes"] == [
        {"cassette": str(bundled(SEARCH)), "interactions": 1, "routes": ["anthropic.messages"]}]
    assert _ask(fake).status_code == 200
    openai = str(bundled("openai/web_search.yaml"))
    added = _admin(fake, "POST", "cassettes", json={"mode": "add", "paths": [openai]})
    assert [row["cassette"] for row in added.json()["cassettes"]] == [str(bundled(SEARCH)), openai]
    assert fake.unused() == [{"cassette": openai, "index": 0, "line": 14, "route": "openai.responses"}]
    _admin(fake, "POST", "cassettes", json={"paths": [str(bundled(SEARCH))]})
    assert len(fake.unused()) == 1  # replaced: usage starts afresh


def test_a_path_not_found_here_is_a_bundled_cassette(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    fake = serve()
    assert _admin(fake, "POST", "cassettes", json={"paths": [SEARCH]}).status_code == 200
    assert _loaded(fake) == [str(bundled(SEARCH))]


def test_a_remote_client_loads_no_file_by_name(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = serve()
    monkeypatch.setattr(admin, "is_loopback", lambda host: False)  # as a peer of --allow-remote would be
    refused = _admin(fake, "POST", "cassettes", json={"paths": [str(bundled(SEARCH))]})
    assert refused.status_code == 403 and "files are loaded by name only for a client on this machine" \
        in refused.json()["error"]
    assert _loaded(fake) == []
    held = [{"name": "sent", "cassette": bundled(SEARCH).read_text(encoding="utf-8")}]
    assert _admin(fake, "POST", "cassettes", json={"cassettes": held}).status_code == 200


def test_a_cassette_held_in_the_body_as_yaml_or_as_a_document(serve: Any) -> None:
    fake = serve()
    text = bundled(SEARCH).read_text(encoding="utf-8")
    held = [{"name": "as-text", "cassette": text}, {"name": "as-doc", "cassette": yaml.safe_load(text)}]
    assert _admin(fake, "POST", "cassettes", json={"cassettes": held}).status_code == 200
    assert _loaded(fake) == ["as-text", "as-doc"]
    chosen = httpx.post(f"{fake.url}/v1/messages", headers={"x-replaykit-cassette": "as-doc"},
                        json=cassette.load(bundled(SEARCH)).interactions[0].request.json())
    assert chosen.status_code == 200
    assert [u["cassette"] for u in fake.unused()] == ["as-text"]


def test_unload_every_cassette_or_those_named(serve: Any) -> None:
    fake = serve(*(bundled(name) for name in (SEARCH, "anthropic/error_429_rate_limit.yaml",
                                              "openai/web_search.yaml")))
    names = {"name": ["error_429_rate_limit", "openai/web_search"]}
    unloaded = _admin(fake, "DELETE", "cassettes", params=names)
    assert [name.rsplit("/", 1)[-1] for name in unloaded.json()["unloaded"]] == [
        "error_429_rate_limit.yaml", "web_search.yaml"]
    assert _loaded(fake) == [str(bundled(SEARCH))]
    missing = _admin(fake, "DELETE", "cassettes", params={"name": "nope"})
    assert missing.status_code == 404 and "no loaded cassette is named 'nope'" in missing.json()["error"]
    assert _admin(fake, "DELETE", "cassettes").json() == {"unloaded": [str(bundled(SEARCH))], "cassettes": []}
    assert _ask(fake).status_code == 404


def test_a_stub_is_served_as_if_recorded(serve: Any) -> None:
    fake = serve()
    first = _admin(fake, "POST", "interactions", json=_stub())
    assert first.json() == {"added": {"cassette": "<stubs>", "index": 0, "line": None,
                                      "route": "anthropic.messages"}}
    assert _admin(fake, "POST", "interactions", json=_stub()).json()["added"]["index"] == 1
    answer = httpx.post(f"{fake.url}/v1/messages", json=anthropic_request("stubbed"))
    assert answer.json()["content"][0]["text"] == "from a stub"
    assert fake.journal[0].matched == {"cassette": "<stubs>", "index": 0, "line": None}
    assert _admin(fake, "DELETE", "cassettes", params={"name": "<stubs>"}).json()["unloaded"] == ["<stubs>"]


def test_reset_forgets_the_journal_usage_and_faults_but_keeps_the_cassettes(serve: Any) -> None:
    fake = serve(bundled(SEARCH))
    _admin(fake, "POST", "faults", json={"kind": "status", "status": 500, "nth": 2})
    assert _ask(fake).status_code == 200
    assert _admin(fake, "POST", "reset").json() == {"reset": True}
    assert (fake.journal, fake.faults, len(fake.unused())) == ([], [], 1)
    assert _ask(fake).status_code == 200  # served again
    assert fake.journal[0].faults == []  # the fault is gone
    assert _loaded(fake) == [str(bundled(SEARCH))]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "jurnal", 404), ("POST", "", 404), ("GET", "journal/1", 404), ("GET", "reset", 405),
     ("PUT", "cassettes", 405)],
)
def test_a_mistyped_admin_path_gets_replaykit_s_own_404_and_is_not_journaled(
    serve: Any, method: str, path: str, status: int
) -> None:
    fake = serve(bundled(SEARCH))
    answer = _admin(fake, method, path)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error.startswith(f"{method} /__replaykit/{path}: ") and "GET /__replaykit/journal" in error
    if status == 405:
        assert "POST" in answer.headers["allow"]
    assert fake.journal == [] and _admin(fake, "GET", "journal").json() == []


def test_a_bare_admin_prefix_is_the_admin_api_too(serve: Any) -> None:
    fake = serve()
    assert httpx.get(f"{fake.url}/__replaykit").status_code == 404 and fake.journal == []
    assert httpx.get(f"{fake.url}/__replaykitx").status_code == 404
    assert [entry.path for entry in fake.journal] == ["/__replaykitx"]  # not ours: provider traffic


STUB_FIX = "send one interaction as a cassette holds it"
LOAD_FIX = 'send e.g. {"paths": ['


@pytest.mark.parametrize(
    ("path", "body", "place", "message", "fix"),
    [
        ("cassettes", b"not json", "", "the body is not JSON", LOAD_FIX),
        ("cassettes", b"[" * 100_000 + b"]" * 100_000, "", "nested too deep", LOAD_FIX),
        ("cassettes", {}, ":/", "is not valid under any of the given schemas", LOAD_FIX),
        ("cassettes", {"paths": ["x.yaml"], "mode": "merge"}, ":/mode", "'merge' is not one of replace, add",
         LOAD_FIX),
        ("cassettes", {"paths": [3]}, ":/paths/0", "expected 'string'", LOAD_FIX),
        ("cassettes", {"paths": ["x.yaml"], "colour": "red"}, ":/colour", "not allowed here", LOAD_FIX),
        ("cassettes", {"paths": [SEARCH, "/no/such/x.yaml"]}, ":/paths/1",
         "/no/such/x.yaml: no such cassette", "or a bundled one"),
        ("cassettes", {"paths": [str(Path(__file__).parent / "server_support.py")]}, ":/paths",
         "server_support.py:1: invalid YAML", "fix the YAML syntax"),
        ("cassettes", {"cassettes": [{"name": "m", "cassette": "version: 2\ninteractions: []\n"}]},
         ":/cassettes/0/cassette", "m:1: unsupported cassette version 2", "version: 1"),
        ("cassettes", {"cassettes": [{"name": "m", "cassette": {"version": 1, "interactions": [
            {"request": {"method": "POST", "uri": "/v1/messages"},
             "response": {"status": {"code": 200}}}]}}]},
         ":/cassettes/0/cassette/interactions/0/request/uri", "does not match", LOAD_FIX),
        ("interactions", {"request": _stub()["request"]}, ":/response", "'response' is required", STUB_FIX),
        ("interactions", {**_stub(), "extra": 1}, ":/extra", "not allowed here", STUB_FIX),
        ("interactions", [_stub()], ":/", "expected 'object'", STUB_FIX),
    ],
)
def test_a_bad_admin_body_gets_a_400_with_its_pointer_and_the_fix_and_changes_nothing(
    serve: Any, path: str, body: Any, place: str, message: str, fix: str
) -> None:
    fake = serve(bundled(SEARCH))
    sent = {"content": body} if isinstance(body, bytes) else {"json": body}
    answer = _admin(fake, "POST", path, **sent)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error.startswith(f"POST /__replaykit/{path}{place}: ") and message in error and fix in error
    assert _loaded(fake) == [str(bundled(SEARCH))] and fake.journal == []


def test_the_admin_bodies_have_contracts() -> None:
    assert contracts.validate("replaykit.admin-load", {"mode": "add", "paths": ["a.yaml"]}) == []
    assert contracts.validate("replaykit.admin-interaction", _stub()) == []
    assert contracts.validate("replaykit.admin-load", {"cassettes": [{"name": "x", "cassette": ""}]}) != []


def test_the_fake_provider_does_in_python_what_the_admin_api_does(serve: Any) -> None:
    fake = serve()
    fake.load([bundled(SEARCH)], add=True)
    fake.stub(json_interaction(ANTHROPIC, anthropic_request("s"), anthropic_message("s")))
    assert [row["cassette"] for row in fake.cassettes()] == [str(bundled(SEARCH)), "<stubs>"]
    assert fake.unload(["web_search"]) == [str(bundled(SEARCH))]
    assert fake.unload() == ["<stubs>"] and fake.cassettes() == []
