"""The engine (jsonschema-rs, rules as a second pass) against the reference (stock jsonschema with the same
``x-rules`` keyword): the same violations (messages, JSON pointers, keywords, severities) on every bundled
interaction and stream event and on every negative example, under both profiles. Where one value breaks
several keywords the engines may list them in another order (jsonschema-rs orders a schema's keywords its own
way), so the lists are compared sorted."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from test_contracts_negative import NEGATIVE, VALID, patched
from test_contracts_replaykit import BASES, CASES, changed

from replaykit import cassette, contracts, routes
from replaykit.contracts.validator import Reference, RulesKeyword
from replaykit.contracts.violations import Violation, _explain, _without_cascades
from replaykit.resources import data_dir

_REFERENCES: dict[str, Any] = {}


def reference(kind: str, value: Any, profile: contracts.Profile) -> list[Violation]:
    """What stock jsonschema (no jsonschema-rs anywhere) says of ``value``, worded by the violations."""
    uri = contracts.kinds()[kind]
    validator = _REFERENCES.get(uri)
    if validator is None:
        registry = contracts.default().reference_registry()
        validator = _REFERENCES[uri] = Reference({"$ref": uri}, registry=registry)
    found = [v for error in validator.iter_errors(value) for v in _explain(error, profile)]
    return contracts.default().booked(_without_cascades(list(dict.fromkeys(found))), profile)


def same(ours: list[Violation], theirs: list[Violation]) -> bool:
    """The same violations, in any order."""
    return sorted(ours, key=repr) == sorted(theirs, key=repr)


def bundled() -> Iterator[tuple[str, str, Any]]:
    """(where, kind, value) of every request, response and stream event of the bundled cassettes."""
    for path in cassette.iter_paths([data_dir("cassettes")]):
        for index, item in enumerate(cassette.load(path).interactions):
            route = routes.known(item.request.method, item.request.uri)
            if route is None or route.contracts is None:
                continue
            where, kinds = f"{path.name}[{index}]", route.contracts
            body = item.request.json()
            if body is not None:
                yield f"{where} request", kinds.request, body
            response = item.response
            if response.is_stream and kinds.stream_event:
                for number, event in enumerate(response.iter_events()):
                    if event.data and event.data.strip() != "[DONE]":  # Chat Completions' end, not JSON
                        yield f"{where} event {number}", kinds.stream_event, event.json()
            elif (parsed := response.json()) is not None:
                yield f"{where} response", kinds.error if response.status >= 400 else kinds.response, parsed


BUNDLED = list(bundled())
NEGATIVES = [(kind, patched(VALID[kind], edits)) for kind, edits, _, _ in NEGATIVE] + \
    [(f"replaykit.{BASES[base][0]}", changed(BASES[base][1](), at, value)) for base, at, value, _, _ in CASES]
PROFILES = [contracts.STRICT, contracts.OPENAI_COMPATIBLE]


def test_the_bundled_corpus_is_large_and_has_streams() -> None:
    assert len(BUNDLED) > 300
    assert sum(" event " in where for where, _, _ in BUNDLED) > 200


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_every_bundled_value_gets_the_same_verdict_from_both_engines(profile: contracts.Profile) -> None:
    differ = [(where, contracts.validate(kind, value, profile), reference(kind, value, profile))
              for where, kind, value in BUNDLED]
    assert [case for case in differ if not same(case[1], case[2])] == []


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_every_negative_example_gets_the_same_violations_from_both_engines(
        profile: contracts.Profile) -> None:
    for kind, value in NEGATIVES:
        ours = contracts.validate(kind, value, profile)
        assert ours, (kind, value)
        assert same(ours, reference(kind, value, profile)), kind


def test_values_outside_json_and_nan_are_judged_as_the_reference_judges_them() -> None:
    usage = copy.deepcopy(VALID["anthropic.usage"])
    for odd in (float("nan"), float("inf"), b"\x01", 10**400, (1, 2)):
        usage["output_tokens"] = odd
        ours = contracts.validate("anthropic.usage", usage)
        assert same(ours, reference("anthropic.usage", usage, contracts.STRICT)), odd
    history = {"systemHistory": [{"timestamp": float("nan")}]}  # a number to jsonschema, null to the other
    assert same(contracts.validate("replaykit.transcript", history),
                reference("replaykit.transcript", history, contracts.STRICT))


def test_the_comparison_catches_an_engine_without_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RulesKeyword, "validate", lambda self, instance: None)
    fresh = contracts.Contracts()
    ruled = [index for index, (kind, value) in enumerate(NEGATIVES)
             if any(v.keyword == "x-rules" for v in reference(kind, value, contracts.STRICT))]
    differ = [index for index, (kind, value) in enumerate(NEGATIVES)
              if not same(fresh.validate(kind, value), reference(kind, value, contracts.STRICT))]
    assert differ == ruled != []
