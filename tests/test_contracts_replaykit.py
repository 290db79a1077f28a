"""replaykit's own contracts: cassette, scenario, target input and outcome, the reports (run, kill matrix,
qualification).

Each contract is checked two ways: through :func:`replaykit.contracts.validate` (the registry the toolkit
uses, which reports a JSON pointer and a keyword per violation) and through a stock
``jsonschema.Draft202012Validator`` over a ``referencing`` registry built here from the files on disk
(nothing is fetched), so the schemas do not depend on the toolkit's fast paths. YAML files are checked as
they load with ``yaml.safe_load``; a ``!!binary`` value loads as bytes, which JSON has no type for, so
:func:`json_view` writes bytes as their base64 text before validation (the cassette contract describes
bodies that way).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import referencing.exceptions
import yaml
from jsonschema import Draft202012Validator, ValidationError  # type: ignore[import-untyped]
from recordings import RECORDINGS
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from replaykit import cassette, contracts, estimate, replay, transcript
from replaykit.errors import UsageError
from replaykit.resources import data_dir
from replaykit.server.faults import Fault

JSON = dict[str, Any]
OURS = ("cassette", "scenario", "target-input", "target-outcome", "qualification-report", "run-report",
        "kill-matrix", "explore-report")
BASE_URI = "https://replaykit.dev/contracts/replaykit/"
DATA = Path(__file__).parent / "data" / "contracts_replaykit"
SCENARIOS = data_dir("scenarios")
EXAMPLE = SCENARIOS / "example-nameless-search-block.yaml"
DELETE = object()


# ---------------------------------------------------------------- loading and validating


def json_view(value: Any) -> Any:
    """A YAML document as JSON values: bytes (``!!binary``) become their base64 text."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {key: json_view(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_view(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"{type(value).__name__} {value!r} has no JSON form")


def load_yaml(path: Path) -> Any:
    """A YAML file as yaml.safe_load reads it (libyaml's loader when present)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_bytes(), Loader=loader)  # a safe loader


def violations(kind: str, value: Any) -> set[tuple[str, str]]:
    """(pointer, keyword) of each violation reported by replaykit's contract registry."""
    return {(found.pointer, found.keyword) for found in contracts.validate(f"replaykit.{kind}", value)}


def _refuse(uri: str) -> Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


@cache
def _registry() -> Registry[Any]:
    resources = []
    for path in sorted(data_dir("contracts").rglob("*.schema.json")):
        contents = json.loads(path.read_text(encoding="utf-8"))
        resources.append((contents["$id"], DRAFT202012.create_resource(contents)))
    return Registry(retrieve=_refuse).with_resources(resources)  # type: ignore[call-arg]


def stock_errors(kind: str, value: Any) -> list[ValidationError]:
    """Errors from a stock Draft 2020-12 validator over the files on disk."""
    schema = _registry().contents(BASE_URI + f"{kind}.schema.json")
    return list(Draft202012Validator(schema, registry=_registry()).iter_errors(value))


def _pointer(parts: Any) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def assert_valid(kind: str, value: Any) -> None:
    assert violations(kind, value) == set()
    assert [error.message for error in stock_errors(kind, value)] == []


def changed(doc: Any, pointer: str, value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``pointer`` (DELETE removes it)."""
    out = copy.deepcopy(doc)
    *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]
    holder = out
    for part in parents:
        holder = holder[int(part)] if isinstance(holder, list) else holder[part]
    key: Any = int(last) if isinstance(holder, list) else last
    if value is DELETE:
        del holder[key]
    else:
        holder[key] = value
    return out


# ---------------------------------------------------------------- examples that must validate


def _example_transcript() -> JSON:
    loaded: JSON = json.loads((SCENARIOS / "transcripts" / "example-nameless-search-block.json").read_text())
    return loaded


def _cassette_doc() -> JSON:
    return {
        "version": 1,
        "replaykit": {"origin": "recorded", "provider": "anthropic", "recorded_with": "replaykit 0.1.0",
                      "fingerprint": "sha256:" + "0" * 64, "description": "a stream", "sources": ["WIRE.md"],
                      "x-expected-violations": ["response /items/1/url",
                                                "interactions[0]:events[1] response /"],
                      "x-team": "search",
                      "attribution": {"source": "owner/repo tests/x.yaml @ 1234567", "license": "MIT"}},
        "interactions": [{
            "request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages",
                        "headers": {"content-type": ["application/json"]}, "body": '{"model":"m"}'},
            "response": {"status": {"code": 200, "message": "OK"},
                         "headers": {"content-type": ["text/event-stream"]},
                         "body": {"string": "event: ping\ndata: {}\n\nevent: ping\ndata: {}\n\n"}},
            "replaykit": {"event_offsets_ms": [0, 12.5]},
        }],
    }


def _parsed_doc() -> JSON:
    return {"version": 1, "interactions": [{
        "request": {"method": "POST", "uri": "https://api.openai.com/v1/responses", "headers": {},
                    "parsed_body": {"model": "gpt-5", "input": "hi"}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {},
                     "parsed_body": {"id": "resp_1", "object": "response"}},
    }]}


def _scenario(name: str) -> JSON:
    path = EXAMPLE if name == "example" else DATA / f"scenario_{name}.yaml"
    loaded: JSON = load_yaml(path)
    return loaded


def _input() -> JSON:
    example = _scenario("example")
    return {"scenario": example["name"], "transcript": _example_transcript(), "steps": example["steps"],
            "tools": example["tools"], "contextWindow": 200000, "reserve": 16384, "idleTimeoutMs": 30000,
            "maxRetries": 2, "system": None}


def _error(code: str, provenance: str, retryable: bool, **more: str) -> JSON:
    message = f"{code} happened"
    return {"code": code, "provenance": provenance, "retryable": retryable, "message": message, **more}


def _outcome(status: str, error: JSON | None = None) -> JSON:
    out: JSON = {"status": status, "transcript": _example_transcript(), "persistWrites": 1,
                 "estimates": [{"step": 0, "tokens": 10063}]}
    if error is not None:
        out["error"] = error
    return out


def _section(status: str, failures: int = 0) -> JSON:
    out: JSON = {"status": status, "counts": {"scenarios": 3, "red": 0},
                 "failures": [{"name": f"scenarios/s{n}.yaml", "message": "expected ok, got error",
                               "where": "/expectations/outcome"} for n in range(failures)]}
    if status == "skipped":
        out["reason"] = "no baseline given"
    return out


def _report(verdict: str) -> JSON:
    names = ("verify", "contracts", "scenarios", "redgreen", "mutants", "properties", "drift")
    sections = {name: _section("pass") for name in names}
    sections["scenarios"]["verdicts"] = {"retry-529": "pass"}
    if verdict == "fail":
        sections["mutants"] = _section("fail", failures=2)
        sections["drift"] = _section("skipped")
    return {
        "version": 1, "verdict": verdict, "generatedAt": "2026-09-22T10:15:00.125Z",
        "replaykitVersion": "0.1.0",
        "subject": {"baseline": {"label": "main", "command": ["node", "sidecar.mjs"], "revision": "46d4ee4"},
                    "candidate": {"label": "fix", "command": ["node", "sidecar.mjs"], "revision": None}},
        "environment": {"python": "3.11.7 CPython", "platform": "Linux-6.8.0-x86_64",
                        "packages": {"anthropic": "2.16.0", "openai": None}},
        "dependencies": [{"name": "@earendil-works/pi-ai", "from": "0.85.1", "to": "0.86.1"},
                         {"name": "left-pad", "from": "1.3.0", "to": None}],
        "hashes": {"cassettes": {"anthropic/web_search.yaml": "sha256:" + "a" * 64},
                   "contracts": {"replaykit/scenario.schema.json": "sha256:" + "b" * 64}, "scenarios": {}},
        "sections": sections,
    }


def _shard() -> JSON:
    return {"command": "run", "index": 2, "count": 4, "inputs": "sha256:" + "d" * 64, "total": 6,
            "positions": [1, 5]}


def _result(verdict: str) -> JSON:
    check = {"name": "outcome", "ok": verdict != "fail", "why": "" if verdict != "fail" else "expected ok",
             "stage": "ended"}
    return {"scenario": "retry-529", "file": "scenarios/retry-529.yaml", "kind": "contract",
            "target": "python:replaykit.reference:run", "mutant": None, "verdict": verdict,
            "passed": verdict == "pass", "missing": ["research"] if verdict == "n/a" else [],
            "firstFailure": check if verdict == "fail" else None,
            "checks": [] if verdict == "n/a" else [check],
            "providerRequests": 2, "seconds": 1.25, "outcome": None if verdict == "n/a" else {"status": "ok"}}


def _run_report() -> JSON:
    return {"passed": False, "counts": {"scenarios": 3, "passed": 1, "failed": 1, "na": 1},
            "coverage": "2 of 3 apply (n/a: research 1)",
            "results": [_result("pass"), _result("fail"), _result("n/a")], "shard": _shard()}


def _matrix() -> JSON:
    row = {"scenario": "retry-529", "file": "scenarios/retry-529.yaml", "kills": ["no-retry-on-529"],
           "killed": ["no-retry-on-529"], "passesOnTarget": True, "verdictOnTarget": "pass",
           "firstFailureOnTarget": None, "missingOnTarget": [], "cells": {"no-retry-on-529": "fail"},
           "seconds": 2.5}
    return {"ok": True, "full": True, "mutants": ["no-retry-on-529"], "scenarios": [row], "survivors": [],
            "vacuous": [], "problems": [], "shard": {**_shard(), "command": "mutants"}}


def _explored() -> JSON:
    point = {"request": 1, "after": 4, "route": "anthropic.messages", "nth": 1, "events": 9, "tool": ""}
    step = {"fault": {"kind": "kill", "route": "anthropic.messages", "nth": 1, "after": 4}, "kind": "kill",
            "point": point}
    group = {"invariant": "partial-kept", "check": "reaches[0]", "schedule": [step], "runs": 2,
             "describe": "kill after event 4 of 9 of request 1 (anthropic.messages #1)",
             "file": "durable-duplicate-submit-partial-kept-reaches-0.yaml"}
    return {"scenario": "durable-duplicate-submit", "target": "python:replaykit.reference:run",
            "mutant": "partial-dropped-on-recovery", "kinds": ["kill"], "budget": 3, "seed": 7, "points": 10,
            "space": 11, "runs": 2, "shrinkRuns": 2, "notes": [], "found": True,
            "groups": [group, {**group, "check": "other", "schedule": [], "file": None}],
            "shard": {"command": "explore", "index": 1, "count": 2, "inputs": "sha256:" + "e" * 64}}


def _sharded() -> JSON:
    return {**_report("pass"), "shard": {**_shard(), "command": "qualify"},
            "shardResults": {"scenarios": [_result("pass")], "matrix": {**_matrix(), "shard": _shard()}}}


BASES: dict[str, tuple[str, Callable[[], Any]]] = {
    "cassette": ("cassette", _cassette_doc),
    "parsed": ("cassette", _parsed_doc),
    "binary": ("cassette", lambda: json_view(load_yaml(DATA / "binary_body.yaml"))),
    "example": ("scenario", lambda: _scenario("example")),
    "defaults": ("scenario", lambda: {key: value for key, value in _scenario("example").items()
                                      if key not in ("contextWindow", "reserve")}),
    "restore": ("scenario", lambda: _scenario("invalid_restore")),
    "faults": ("scenario", lambda: _scenario("every_fault")),
    "input": ("target-input", _input),
    "input-new": ("target-input", lambda: {**_input(), "transcript": None}),
    "ok": ("target-outcome", lambda: _outcome("ok")),
    "ok-null": ("target-outcome", lambda: {**_outcome("ok"), "error": None}),
    "local": ("target-outcome", lambda: {**_outcome("error", _error("LOCAL_REQUEST_ERROR", "local", False,
                                                                     phase="validation")),
                                         "transcript": None, "persistWrites": 0, "estimates": []}),
    "provider": ("target-outcome", lambda: _outcome("error", _error("PROVIDER_ERROR", "provider", True))),
    "provider-details": ("target-outcome", lambda: _outcome("error", {
        **_error("PROVIDER_ERROR", "provider", True), "status": 529, "providerType": "overloaded_error",
        "requestId": "req_011"})),
    "internal": ("target-outcome", lambda: _outcome("error", _error("INTERNAL_ERROR", "local", False))),
    "transport": ("target-outcome", lambda: _outcome("error", _error("TRANSPORT_ERROR", "transport", True))),
    "deadline": ("target-outcome", lambda: _outcome("error", _error("DEADLINE_EXCEEDED", "deadline", True))),
    "aborted": ("target-outcome", lambda: _outcome("aborted", _error("CANCELLED", "cancelled", False))),
    "aborted-bare": ("target-outcome", lambda: {"status": "aborted", "persistWrites": 0}),
    "pass": ("qualification-report", lambda: _report("pass")),
    "fail": ("qualification-report", lambda: _report("fail")),
    "sharded": ("qualification-report", _sharded),
    "run": ("run-report", _run_report),
    "matrix": ("kill-matrix", _matrix),
    "explored": ("explore-report", _explored),
}


@pytest.mark.parametrize("base", sorted(BASES))
def test_example_validates(base: str) -> None:
    kind, build = BASES[base]
    assert_valid(kind, build())


def _cassette_files() -> list[Path]:
    bundled = cassette.iter_paths([data_dir("cassettes"), SCENARIOS / "cassettes"])
    return [*bundled, DATA / "binary_body.yaml"]


@pytest.mark.parametrize("path", _cassette_files(), ids=lambda path: "/".join(path.parts[-3:]))
def test_cassette_file_validates(path: Path) -> None:
    assert_valid("cassette", json_view(load_yaml(path)))


def test_the_recordings_are_all_checked() -> None:
    assert len(RECORDINGS) == 20
    assert set(RECORDINGS) <= set(_cassette_files())


def test_a_binary_body_validates_only_through_the_json_view() -> None:
    raw = load_yaml(DATA / "binary_body.yaml")
    body = raw["interactions"][0]["response"]["body"]["string"]
    assert isinstance(body, bytes)
    assert _stock_found(stock_errors("cassette", raw), "/interactions/0/response/body/string", "type")
    view = json_view(raw)["interactions"][0]["response"]["body"]["string"]
    assert base64.b64decode(view) == body
    loaded = cassette.load(DATA / "binary_body.yaml").interactions[0].response.json()
    assert loaded["error"]["type"] == "overloaded_error"


def test_json_view_refuses_values_json_cannot_hold() -> None:
    with pytest.raises(TypeError, match="date"):
        json_view(yaml.safe_load("when: 2026-09-22"))


# ---------------------------------------------------------------- examples that must not validate

# (base, pointer changed, new value or DELETE, expected violation pointer, expected keyword)
Case = tuple[str, str, Any, str, str]
MISSING_TOOL = {"type": "function", "name": "read"}


def case(base: str, at: str, value: Any, keyword: str, pointer: str | None = None) -> Case:
    """``base`` with ``value`` at ``at`` violates ``keyword`` at ``pointer`` (by default ``at``)."""
    return (base, at, value, at if pointer is None else pointer, keyword)


CASSETTE_CASES: list[Case] = [
    case("cassette", "/version", 2, "const"),
    case("cassette", "/interactions", DELETE, "required"),
    case("cassette", "/interactions", {}, "type"),
    case("cassette", "/replaykit/origin", "captured", "enum"),
    case("cassette", "/replaykit/provider", "google", "enum"),
    case("cassette", "/replaykit/fingerprint", "sha256:ABC", "pattern"),
    case("cassette", "/replaykit/orgin", "recorded", "unevaluatedProperties"),
    case("cassette", "/replaykit/x-expected-violations/0", "/items/1/url", "pattern"),
    case("cassette", "/replaykit/attribution/license", DELETE, "required"),
    case("cassette", "/replaykit/attribution/original_sha256", "abc", "pattern"),
    case("cassette", "/interactions/0/request/method", "post", "pattern"),
    case("cassette", "/interactions/0/request/uri", "/v1/messages", "pattern"),
    case("cassette", "/interactions/0/request/uri", DELETE, "required"),
    case("cassette", "/interactions/0/request/headers/accept", "*/*", "type"),
    case("cassette", "/interactions/0/request/headers/x api key", ["k"], "pattern",
         "/interactions/0/request/headers"),
    case("cassette", "/interactions/0/request/body", {"model": "m"}, "type"),
    case("cassette", "/interactions/0/request/parsed_body", {"model": "m"}, "not", "/interactions/0/request"),
    case("cassette", "/interactions/0/request/bodi", "", "additionalProperties"),
    case("cassette", "/interactions/0/response", DELETE, "required"),
    case("cassette", "/interactions/0/response/body", DELETE, "required"),
    case("cassette", "/interactions/0/response/body", "text", "type"),
    case("cassette", "/interactions/0/response/body/string", 5, "type"),
    case("cassette", "/interactions/0/response/status", 200, "type"),
    case("cassette", "/interactions/0/response/status/code", "200", "type"),
    case("cassette", "/interactions/0/response/status/code", 99, "minimum"),
    case("cassette", "/interactions/0/replaykit/event_offsets_ms/1", -1, "minimum"),
    case("cassette", "/interactions/0/replaykit/offsets", [], "additionalProperties"),
    case("cassette", "/interactions/0/played", True, "additionalProperties"),
    case("parsed", "/interactions/0/response/body", {"string": "{}"}, "not", "/interactions/0/response"),
    case("binary", "/interactions/0/response/headers/content-encoding", "gzip", "type"),
]

SCENARIO_CASES: list[Case] = [
    case("example", "/name", "Nameless Search", "pattern"),
    case("example", "/kind", "smoke", "enum"),
    case("example", "/description", DELETE, "required"),
    case("example", "/description", "", "minLength"),
    case("example", "/steps", [], "minItems"),
    case("example", "/steps", DELETE, "required"),
    case("example", "/steps/0/provider", "google", "enum"),
    case("example", "/steps/0/promt", "hi", "additionalProperties"),
    case("example", "/steps/0/model", DELETE, "required"),
    case("example", "/cassettes/0", "/srv/cassettes/x.yaml", "pattern"),
    case("example", "/cassettes/0", "C:/cassettes/x.yaml", "pattern"),
    case("example", "/cassettes/0", "cassettes/x.json", "pattern"),
    case("example", "/cassettes", ["a.yaml", "a.yaml"], "uniqueItems"),
    case("example", "/transcript", "transcripts/x.yaml", "pattern"),
    case("example", "/transcript", 5, "type"),
    case("example", "/tools/0", MISSING_TOOL, "required", "/tools/0/parameters"),
    case("example", "/contextWindow", 0, "minimum"),
    case("example", "/reserve", -1, "minimum"),
    case("defaults", "/reserve", 200000, "exclusiveMaximum"),
    case("defaults", "/contextWindow", 16384, "exclusiveMinimum"),
    case("example", "/faults", {"kind": "status"}, "type"),
    case("example", "/expectations", DELETE, "required"),
    case("example", "/expectation", {"outcome": "ok"}, "additionalProperties"),
    case("example", "/expectations/outcome", "passed", "enum"),
    case("example", "/expectations/outcome", 3, "type"),
    case("example", "/expectations/outcome", ["ok"], "minItems"),
    case("example", "/expectations/outcome", ["ok", "ok"], "uniqueItems"),
    case("example", "/expectations/outcome", ["ok", "passed"], "enum", "/expectations/outcome/1"),
    case("example", "/expectations/outcome", DELETE, "required"),
    case("example", "/expectations/error", {"code": "PROVIDER_ERROR"}, "false"),
    case("example", "/expectations/providerRequests", -1, "minimum"),
    case("example", "/expectations/providerRequests", 1.5, "type"),
    case("example", "/expectations/providerRequests", {}, "required", "/expectations/providerRequests/min"),
    case("example", "/expectations/providerRequests", {"max": 2, "most": 3}, "additionalProperties",
         "/expectations/providerRequests/most"),
    case("example", "/expectations/requestContractsHold", "yes", "type"),
    case("example", "/expectations/persistedSnapshot", "../up", "pattern"),
    case("example", "/expectations/estimates/0/step", DELETE, "required"),
    case("example", "/expectations/estimates/0", {"step": 0}, "required", "/expectations/estimates/0/min"),
    case("example", "/expectations/estimates/0/tokens", 5, "additionalProperties"),
    case("example", "/kills", [], "minItems"),
    case("example", "/kills/1", "estimator-assumes-name", "uniqueItems", "/kills"),
    case("example", "/kills/0", "Estimator_Mutant", "pattern"),
    case("restore", "/expectations/error/code", "CANCELLED", "not"),
    case("restore", "/expectations/error/code", "TIMEOUT", "enum"),
    case("restore", "/expectations/error/provenance", "provider", "const"),
    case("restore", "/expectations/error/phase", "sending", "enum"),
    case("restore", "/expectations/error/code", DELETE, "required"),
    case("restore", "/expectations/error/retryable", False, "additionalProperties"),
    case("restore", "/expectations/outcome", "aborted", "const", "/expectations/error/code"),
    case("restore", "/expectations/outcome", ["ok", "aborted"], "false", "/expectations/error"),
    case("restore", "/expectations/persistWrites", {"min": -1}, "minimum", "/expectations/persistWrites/min"),
    case("faults", "/expectations/error/phase", "validation", "false"),
]

FAULT_CASES: list[Case] = [
    case("faults", "/faults/0/kind", "throttle", "enum"),
    case("faults", "/faults/0/kind", DELETE, "required"),
    case("faults", "/faults/0/status", 200, "minimum"),
    case("faults", "/faults/0/status", DELETE, "required"),
    case("faults", "/faults/0/retry_after", -1, "minimum"),
    case("faults", "/faults/0/retryAfter", 1, "unevaluatedProperties"),
    case("faults", "/faults/0/route", "anthropc", "pattern"),
    case("faults", "/faults/0/nth", 0, "minimum"),
    case("faults", "/faults/0/times", 0, "minimum"),
    case("faults", "/faults/1/ms", DELETE, "required"),
    case("faults", "/faults/2/ms", -5, "minimum"),
    case("faults", "/faults/3/status", 500, "unevaluatedProperties"),
    case("faults", "/faults/3/after", DELETE, "required"),
    case("faults", "/faults/4/after", -1, "minimum"),
    case("faults", "/faults/4/ms", 10, "unevaluatedProperties"),
    case("faults", "/faults/5/as_failed", "yes", "type"),
    case("faults", "/faults/6/event", DELETE, "required"),
    case("faults", "/faults/6/event", 0, "minimum"),
    case("faults", "/faults/7/after", 1, "unevaluatedProperties"),
    case("faults", "/faults/8/at", -1, "minimum"),
]

INPUT_CASES: list[Case] = [
    case("input", "/transcript", DELETE, "required"),
    case("input", "/transcript", [], "type"),
    case("input", "/scenario", "Bad Name", "pattern"),
    case("input", "/steps", [], "minItems"),
    case("input", "/steps/0/model", "", "minLength"),
    case("input", "/steps/0/provider", "cloudflare", "enum"),
    case("input", "/tools", {}, "type"),
    case("input", "/tools/0", MISSING_TOOL, "required", "/tools/0/parameters"),
    case("input", "/contextWindow", 0, "minimum"),
    case("input", "/contextWindow", DELETE, "required"),
    case("input", "/reserve", -1, "minimum"),
    case("input", "/maxTokens", 4096, "additionalProperties"),
    case("input", "/idleTimeoutMs", DELETE, "required"),
    case("input", "/idleTimeoutMs", 0, "minimum"),
    case("input", "/maxRetries", -1, "minimum"),
    case("input", "/system", 3, "type"),
    case("input", "/steps/0/cancelAfterMs", -5, "minimum"),
]

OUTCOME_CASES: list[Case] = [
    case("ok", "/status", "failed", "enum"),
    case("ok", "/status", DELETE, "required"),
    case("ok", "/error", _error("PROVIDER_ERROR", "provider", True), "type"),
    case("ok", "/transcript/version", 2, "const"),
    case("ok", "/persistWrites", DELETE, "required"),
    case("ok", "/persistWrites", -1, "minimum"),
    case("ok", "/persist_writes", 0, "additionalProperties"),
    case("ok", "/estimates/0/tokens", 1.5, "type"),
    case("ok", "/estimates/0/step", -1, "minimum"),
    case("ok", "/estimates/0/model", "m", "additionalProperties"),
    case("local", "/error", DELETE, "required"),
    case("local", "/error", None, "type"),
    case("local", "/error/phase", DELETE, "required"),
    case("local", "/error/phase", "network", "enum"),
    case("local", "/error/provenance", "provider", "const"),
    case("local", "/error/retryable", True, "const"),
    case("local", "/error/message", DELETE, "required"),
    case("local", "/error/detail", "x", "additionalProperties"),
    case("local", "/error/code", "INTERNAL", "enum"),
    case("provider", "/error/phase", "validation", "false"),
    case("provider", "/error/provenance", "transport", "const"),
    case("provider", "/error/retryable", "yes", "type"),
    case("provider", "/error/code", "CANCELLED", "not"),
    case("provider-details", "/error/status", 99, "minimum"),
    case("provider-details", "/error/status", 600, "maximum"),
    case("provider-details", "/error/status", "529", "type"),
    case("provider-details", "/error/providerType", None, "type"),
    case("provider-details", "/error/requestId", 11, "type"),
    case("provider-details", "/error/request_id", "req_011", "additionalProperties"),
    case("internal", "/error/provenance", "provider", "const"),
    case("internal", "/error/retryable", True, "const"),
    case("internal", "/error/phase", "preparation", "false"),
    case("internal", "/status", "aborted", "const", "/error/code"),
    case("transport", "/error/provenance", "local", "const"),
    case("deadline", "/error/provenance", "transport", "const"),
    case("aborted", "/error/code", "PROVIDER_ERROR", "const"),
    case("aborted", "/error/retryable", True, "const"),
    case("aborted", "/error/provenance", "local", "const"),
]

REPORT_CASES: list[Case] = [
    case("pass", "/version", 2, "const"),
    case("pass", "/verdict", "ok", "enum"),
    case("pass", "/generatedAt", "2026-09-22 10:15", "pattern"),
    case("pass", "/replaykitVersion", DELETE, "required"),
    case("pass", "/subject/candidate", None, "type"),
    case("pass", "/subject/candidate/command", [], "minItems"),
    case("pass", "/subject/baseline/label", DELETE, "required"),
    case("pass", "/dependencies/0/to", DELETE, "required"),
    case("pass", "/dependencies/0/version", "1", "additionalProperties"),
    case("pass", "/hashes/cassettes/anthropic~1web_search.yaml", "abc", "pattern"),
    case("pass", "/hashes/cassettes/~1abs~1x.yaml", "sha256:" + "c" * 64, "pattern", "/hashes/cassettes"),
    case("pass", "/hashes/contracts", DELETE, "required"),
    case("pass", "/sections/drift", DELETE, "required"),
    case("pass", "/sections/lint", _section("pass"), "additionalProperties"),
    case("pass", "/sections/verify/failures", _section("fail", 1)["failures"], "maxItems"),
    case("pass", "/sections/verify/counts/files", -1, "minimum"),
    case("pass", "/sections/verify/counts/Files", 1, "pattern", "/sections/verify/counts"),
    case("pass", "/sections/verify/status", "passed", "enum"),
    case("fail", "/verdict", "pass", "enum", "/sections/mutants/status"),
    case("fail", "/sections/mutants/failures", [], "minItems"),
    case("fail", "/sections/mutants/failures/0/message", DELETE, "required"),
    case("fail", "/sections/drift/reason", DELETE, "required"),
    case("fail", "/sections/drift/failures", _section("fail", 1)["failures"], "maxItems"),
    case("pass", "/environment", DELETE, "required"),
    case("pass", "/environment/packages/anthropic", 2, "type"),
    case("pass", "/environment/kernel", "6.8", "additionalProperties"),
    case("pass", "/sections/scenarios", DELETE, "required"),
    case("pass", "/sections/scenarios/verdicts/retry-529", "passed", "enum"),
    case("pass", "/subject/candidate/files", {"harness.js": "abc"}, "pattern",
         "/subject/candidate/files/harness.js"),
    case("pass", "/changes", {"verdicts": [], "hashes": []}, "required", "/changes/baseline"),
    case("pass", "/changes", {"baseline": {"file": "r.json", "generatedAt": "x", "verdict": "pass"},
                              "hashes": [],
                              "verdicts": [{"section": "drift", "name": "g", "from": "info", "to": None}]},
         "required", "/changes/verdicts/0/flipped"),
]

SHARD_CASES: list[Case] = [
    case("run", "/passed", "no", "type"),
    case("run", "/counts/na", DELETE, "required"),
    case("run", "/results/1/verdict", "maybe", "enum"),
    case("run", "/results/1/checks/0/stage", "later", "enum"),
    case("run", "/results/0/journal", [], "additionalProperties"),
    case("run", "/shard/index", 0, "minimum"),
    case("run", "/shard/inputs", "md5:abc", "pattern"),
    case("run", "/shard/command", "redgreen", "enum"),
    case("run", "/shard/positions", DELETE, "required"),
    case("matrix", "/scenarios/0/cells/no-retry-on-529", "killed", "enum"),
    case("matrix", "/scenarios/0/seconds", DELETE, "required"),
    case("matrix", "/survivors", DELETE, "required"),
    case("matrix", "/shard/count", "4", "type"),
    case("sharded", "/shard/total", -1, "minimum"),
    case("sharded", "/shardResults/matrix", DELETE, "required"),
    case("sharded", "/shardResults/scenarios/0/verdict", "passed", "enum"),
    case("explored", "/groups/0/schedule/0/fault/kind", "boom", "enum"),
    case("explored", "/groups/0/schedule/0/point/request", 0, "minimum"),
    case("explored", "/groups/0/runs", DELETE, "required"),
    case("explored", "/kinds/0", "meteor", "enum"),
    case("explored", "/shard/command", "run", "const"),
    case("explored", "/found", DELETE, "required"),
]

CASES = (CASSETTE_CASES + SCENARIO_CASES + FAULT_CASES + INPUT_CASES + OUTCOME_CASES + REPORT_CASES
         + SHARD_CASES)


def _stock_found(errors: list[ValidationError], pointer: str, keyword: str) -> bool:
    """A stock error with ``keyword`` at ``pointer``, or at its parent (for missing or extra members)."""
    for error in errors:
        at, named = _pointer(error.absolute_path), str(error.validator)
        named = "false" if error.validator is None or named == "False" else named
        if named == keyword and (at == pointer or pointer.startswith(at + "/")):
            return True
    return False


@pytest.mark.parametrize(("base", "at", "value", "pointer", "keyword"), CASES,
                         ids=[f"{case[0]}:{case[1]}->{case[4]}" for case in CASES])
def test_violation_is_reported_with_pointer_and_keyword(base: str, at: str, value: Any, pointer: str,
                                                        keyword: str) -> None:
    kind, build = BASES[base]
    doc = changed(build(), at, value)
    found = violations(kind, doc)
    assert (pointer, keyword) in found, found
    assert _stock_found(stock_errors(kind, doc), pointer, keyword), stock_errors(kind, doc)


# Cross-field rules (replaykit.contracts.RULES, keyword x-rules): replaykit's registry reports them, a stock
# validator ignores the unknown keyword.
RULE_CASES: list[Case] = [
    case("example", "/expectations/providerRequests", {"min": 3, "max": 2}, "x-rules",
         "/expectations/providerRequests/max"),
    case("restore", "/expectations/persistWrites", {"min": 1, "max": 0}, "x-rules",
         "/expectations/persistWrites/max"),
    case("example", "/expectations/estimates/0/max", 9000, "x-rules"),
    case("example", "/reserve", 200000, "x-rules"),
    case("example", "/contextWindow", 16384, "x-rules", "/reserve"),
    case("input", "/reserve", 200001, "x-rules"),
    case("input", "/contextWindow", 16384, "x-rules", "/reserve"),
]


@pytest.mark.parametrize(("base", "at", "value", "pointer", "keyword"), RULE_CASES,
                         ids=[f"{case[0]}:{case[1]}" for case in RULE_CASES])
def test_a_cross_field_rule_is_reported_with_its_pointer(base: str, at: str, value: Any, pointer: str,
                                                         keyword: str) -> None:
    kind, build = BASES[base]
    doc = changed(build(), at, value)
    assert violations(kind, doc) == {(pointer, keyword)}
    assert stock_errors(kind, doc) == []


@pytest.mark.parametrize(("base", "at", "value"), [
    ("example", "/expectations/providerRequests", {"min": 2, "max": 2}),
    ("restore", "/expectations/outcome", ["ok", "error"]),
    ("example", "/expectations/estimates/0", {"step": 0, "min": 7, "max": 7}),
    ("example", "/reserve", 199999),
    ("input", "/reserve", 199999),
    ("defaults", "/reserve", 199999),
    ("defaults", "/contextWindow", 16385),
])
def test_the_cross_field_rules_admit_their_bounds(base: str, at: str, value: Any) -> None:
    kind, build = BASES[base]
    assert_valid(kind, changed(build(), at, value))


def test_a_cross_field_message_says_what_to_change() -> None:
    doc = changed(_input(), "/reserve", 300000)
    (found,) = contracts.validate("replaykit.target-input", doc)
    assert found.message == "reserve 300000 leaves no room in contextWindow 200000; reserve must be below " \
                            "contextWindow"
    doc = changed(_scenario("example"), "/expectations/providerRequests", {"min": 3, "max": 2})
    (found,) = contracts.validate("replaykit.scenario", doc)
    assert found.message == "max 2 is below min 3; a {min, max} range needs min <= max"


def test_every_base_is_used_by_a_negative_case() -> None:
    valid_only = {"input-new", "ok-null", "aborted-bare"}
    assert {case[0] for case in CASES} == set(BASES) - valid_only


# ---------------------------------------------------------------- faults: the schema and the server agree


def _faults() -> list[JSON]:
    faults: list[JSON] = _scenario("every_fault")["faults"]
    return faults


@pytest.mark.parametrize("fault", _faults(), ids=lambda fault: str(fault["kind"]))
def test_a_valid_fault_is_accepted_by_the_fake_provider(fault: JSON) -> None:
    assert Fault.from_dict(fault).to_json()["kind"] == fault["kind"]


@pytest.mark.parametrize(("at", "value"), [
    pytest.param(case[1], case[2], id=f"{case[1]}->{case[4]}") for case in FAULT_CASES])
def test_a_fault_the_schema_refuses_is_refused_by_the_fake_provider(at: str, value: Any) -> None:
    index = int(at.split("/")[2])
    fault = changed(_scenario("every_fault"), at, value)["faults"][index]
    with pytest.raises(UsageError):
        Fault.from_dict(fault)


# ---------------------------------------------------------------- the schema files themselves


@pytest.mark.parametrize("name", OURS)
def test_schema_file_is_well_formed(name: str) -> None:
    path = data_dir("contracts") / "replaykit" / f"{name}.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == BASE_URI + path.name
    assert len(schema["description"]) > 80
    assert contracts.kinds()[f"replaykit.{name}"] == schema["$id"]


@pytest.mark.parametrize("name", OURS)
def test_no_reference_leaves_the_local_registry(name: str) -> None:
    text = (data_dir("contracts") / "replaykit" / f"{name}.schema.json").read_text(encoding="utf-8")
    refs = _all_refs(json.loads(text))
    assert refs
    for ref in refs:
        base = ref.partition("#")[0]
        assert not base or base.startswith(BASE_URI), ref
        _registry().resolver(BASE_URI + f"{name}.schema.json").lookup(ref)


def _all_refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [ref for value in node.values() for ref in _all_refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _all_refs(value)]
    return []


# ---------------------------------------------------------------- bundled scenarios


def _bundled() -> list[Path]:
    return sorted(SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("path", _bundled(), ids=lambda path: path.name)
def test_bundled_scenario_validates_and_its_files_exist(path: Path) -> None:
    doc = load_yaml(path)
    assert_valid("scenario", doc)
    assert doc["name"] == path.stem
    for name in doc.get("cassettes", []):
        assert cassette.load(path.parent / name).interactions
    if isinstance(doc.get("transcript"), str) and doc["expectations"]["outcome"] == "ok":
        stored = json.loads((path.parent / doc["transcript"]).read_text(encoding="utf-8"))
        assert transcript.restore(stored, source=doc["transcript"]) is stored


def test_example_scenario_cassette_is_the_recorded_follow_up() -> None:
    ours = cassette.load(SCENARIOS / "cassettes" / "example-nameless-search-block.yaml")
    recorded = cassette.load(data_dir("cassettes") / "anthropic" / "web_search_follow_up.yaml")
    assert len(ours.interactions) == 1
    parts = list(cassette.canonical_parts(ours.interactions[0]))
    assert parts == list(cassette.canonical_parts(recorded.interactions[1]))
    assert parts != list(cassette.canonical_parts(recorded.interactions[0]))
    assert ours.meta.fingerprint == ours.fingerprint()


def _after(stored: JSON) -> JSON:
    """``stored`` with the example's step 0 prompt appended, as a harness holds it before sending."""
    after = copy.deepcopy(stored)
    prompt = _scenario("example")["steps"][0]["prompt"]
    after["messages"].append({"role": "user", "content": [{"type": "text", "text": prompt}],
                              "timestamp": 1764662460000})
    return after


def _target(max_tokens: int | None = None) -> replay.ProviderModel:
    step = _scenario("example")["steps"][0]
    return replay.ProviderModel(step["provider"], "anthropic-messages", step["model"], max_tokens)


def _next_request(stored: JSON) -> JSON:
    """The body a correct harness sends for the example's step 0 after restoring ``stored``."""
    return replay.project(_after(stored), _target(max_tokens=4096))


def test_example_transcript_is_what_the_cassette_expects() -> None:
    stored = _example_transcript()
    blocks = stored["messages"][1]["content"]
    nameless = [block for block in blocks if block.get("phase") == "result"]
    assert nameless and all("name" not in block and "name" not in block["raw"] for block in nameless)
    recorded = cassette.load(SCENARIOS / "cassettes" / "example-nameless-search-block.yaml").interactions[0]
    assert _next_request(stored) == recorded.request.json()
    without = copy.deepcopy(stored)
    without["messages"][1]["content"] = [block for block in blocks if block.get("phase") != "result"]
    assert _next_request(without) != recorded.request.json()


def _estimate(stored: JSON) -> int:
    return estimate.estimate(_after(stored), _target()).tokens


def test_example_estimate_bounds_hold_and_separate_the_named_estimator_mutants() -> None:
    bounds = _scenario("example")["expectations"]["estimates"][0]
    stored = _example_transcript()
    correct = _estimate(stored)
    assert bounds["min"] <= correct <= bounds["max"]
    unanchored = copy.deepcopy(stored)
    del unanchored["messages"][1]["usage"]
    from_text = _estimate(unanchored)
    assert from_text < bounds["min"]  # the anchor ignored (timestamp-refresh-invalidates-usage)
    assert bounds["max"] < correct + from_text  # the anchored prefix counted twice (usage-double-count)


def test_an_ok_outcome_needs_no_transcript_and_a_manifest_needs_no_capabilities() -> None:
    kind, build = BASES["ok"]
    outcome = build()
    del outcome["transcript"]
    assert violations(kind, outcome) == set()  # written only when a scenario reads it
    assert violations("target-manifest", {"mutants": {"a-b": {"env": {"X": "1"}}}}) == set()
    assert violations("target-manifest", {"capabilities": ["tool:read", "stream"]}) == set()
    assert ("/capabilities/0", "anyOf") in violations("target-manifest", {"capabilities": ["streams"]})
