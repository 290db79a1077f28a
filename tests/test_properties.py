"""The estimator property suite: the reference passes, and every known defect is caught by its property.

The defective estimators below are small, each one a mistake seen in real harnesses (WIRE.md section 4, the
hosted-search repair in the seeds). A property that catches none of them would be vacuous: the table is
checked to name every property.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replaykit import properties
from replaykit import strategies as rs
from replaykit.callables import load_callable
from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main
from replaykit.contracts import validate
from replaykit.errors import UsageError
from replaykit.estimate import Chars, ExactModeUnavailable, body_chars, estimate, estimate_tokens, to_target
from replaykit.properties import (
    ACCURACY,
    PROPERTIES,
    CommandEstimator,
    ContentError,
    EstimatorFailed,
    Outcome,
    PropertyFailed,
    accuracy,
    dumps,
    run,
    selected,
)
from replaykit.replay import project
from replaykit.transcript import restore

JSON = dict[str, Any]
FIXTURES = Path(__file__).parent / "fixtures"
BY_NAME = {prop.name: prop for prop in PROPERTIES}
node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


# ---------------------------------------------------------------- defective estimators


def _full(transcript: JSON, target: JSON) -> int:
    """The heuristic over everything project emits, ignoring usage."""
    return sum(chars.tokens for chars in body_chars(project(transcript, to_target(target))).values())


def assumes_name(transcript: JSON, target: JSON) -> int:
    """Treats every non-text, non-thinking block as a tool call: block["name"] fails on search blocks."""
    names = sum(len(block["name"]) for message in transcript["messages"] if message["role"] == "assistant"
                for block in message["content"] if block["type"] not in ("text", "thinking"))
    return estimate_tokens(transcript, target) + 0 * names


def ignores_search(transcript: JSON, target: JSON) -> int:
    """Counts unknown blocks as nothing: hosted search adds 0 tokens."""
    def kept(message: JSON) -> JSON:
        if message["role"] != "assistant":
            return message
        return {**message, "content": [block for block in message["content"]
                                       if block["type"] != "hostedSearch"]}

    messages = [kept(message) for message in transcript["messages"]]
    return estimate_tokens({**transcript, "messages": messages}, target)


def _opaque_kept(transcript: JSON, keep: Callable[[JSON], JSON | None]) -> JSON:
    def mapped(message: JSON) -> JSON:
        if message["role"] != "assistant":
            return message
        blocks = [block if block["type"] != "providerBlock" else keep(block) for block in message["content"]]
        return {**message, "content": [block for block in blocks if block is not None]}

    return {**transcript, "messages": [mapped(message) for message in transcript["messages"]]}


def rejects_unknown_types(transcript: JSON, target: JSON) -> int:
    """Knows the block types of its day and raises on any other (code execution, next month's server tool)."""
    for message in transcript["messages"]:
        for block in message["content"] if message["role"] == "assistant" else []:
            if block["type"] not in ("text", "thinking", "toolCall", "hostedSearch"):
                raise TypeError(f"unsupported content block type: {block['type']}")
    return estimate_tokens(transcript, target)


def drops_opaque(transcript: JSON, target: JSON) -> int:
    """Skips blocks it does not model: opaque provider blocks add 0 tokens, even when they are replayed."""
    return estimate_tokens(_opaque_kept(transcript, lambda block: None), target)


def counts_foreign_opaque(transcript: JSON, target: JSON) -> int:
    """Counts every opaque block as if it were sent, whichever provider it belongs to."""
    def own(block: JSON) -> JSON:
        return {**block, "provider": target["provider"], "api": target["api"]}

    return estimate_tokens(_opaque_kept(transcript, own), target)


def no_cjk_correction(transcript: JSON, target: JSON) -> int:
    """Plain ceil(chars/4): a CJK character counts a quarter token."""
    anchor, tail = _anchored_chars(transcript, target)
    return anchor + sum(math.ceil((chars.other + chars.cjk) / 4) for chars in tail)


def _anchored_chars(transcript: JSON, target: JSON) -> tuple[int, list[Chars]]:
    """The anchor's tokens (0 without one) and the characters of each part replayed after it."""
    found = estimate(transcript, target)
    rest, parts = transcript, ["system", "tools", "messages"]
    if found.anchor is not None:
        later = transcript["messages"][found.anchor.index + 1:]
        rest, parts = {**transcript, "system": None, "tools": [], "messages": later}, ["messages"]
    counted = body_chars(project(rest, to_target(target)))
    return found.breakdown.anchor, [counted[part] for part in parts]


def counts_prefix_twice(transcript: JSON, target: JSON) -> int:
    """Adds the anchor's usage to a full estimate: the prefix is counted again."""
    return estimate(transcript, target).breakdown.anchor + _full(transcript, target)


def exception_to_zero(transcript: JSON, target: JSON) -> int:
    """Hides the name crash by answering 0."""
    try:
        return assumes_name(transcript, target)
    except Exception:
        return 0


def drops_anchor_on_rebuild(transcript: JSON, target: JSON) -> int:
    """Drops usage whenever the system was rebuilt after it, changed or not (timestamps, not content)."""
    found = estimate(transcript, target)
    if found.anchor is not None:
        stamp = transcript["messages"][found.anchor.index]["timestamp"]
        if any(entry["timestamp"] > stamp for entry in transcript.get("systemHistory", [])):
            return _full(transcript, target)
    return found.tokens


def off_by_one(transcript: JSON, target: JSON) -> int:
    """Subtracts a token it thinks is counted twice: -1 for an empty transcript."""
    return estimate_tokens(transcript, target) - 1


def trusts_any_usage(transcript: JSON, target: JSON) -> int:
    """Anchors on the last assistant turn whatever its usage or stop reason (a non-finite count read as 0)."""
    messages = transcript["messages"]
    turns = [index for index, message in enumerate(messages) if message["role"] == "assistant"]
    last = turns[-1] if turns else None
    if last is None:
        return estimate_tokens(transcript, target)
    used = messages[last]["usage"]["totalTokens"]
    later = {**transcript, "system": None, "tools": [], "messages": messages[last + 1:]}
    counted: int = body_chars(project(later, to_target(target)))["messages"].tokens
    return (used if math.isfinite(used) else 0) + counted


def ignores_system_and_tools(transcript: JSON, target: JSON) -> int:
    """Estimates the messages only."""
    return estimate_tokens({**transcript, "system": None, "tools": []}, target)


def seed_rule(transcript: JSON, target: JSON) -> int:
    """The seed's rule over what project emits: ceil(chars/4) plus one token per CJK character, anchored
    (replaykit's own estimate before its per-class rates): search content is half what a tokenizer counts."""
    anchor, tail = _anchored_chars(transcript, target)
    return anchor + sum(math.ceil(chars.other / 4) + chars.cjk for chars in tail)


def pi_style(transcript: JSON, target: JSON) -> int:
    """pi's compaction estimate, in kind (not its code): a quarter token per character of each message's
    text, thinking and tool calls, an image as 1,200 tokens; other blocks, system and tools are not read."""
    def chars(block: JSON) -> int:
        kind = block.get("type")
        if kind == "toolCall":
            return len(block["name"]) + len(json.dumps(block["arguments"], separators=(",", ":")))
        if kind == "image":
            return 4800
        return len(block.get("text") or block.get("thinking") or "") if kind in ("text", "thinking") else 0

    total = 0
    for message in transcript["messages"]:
        content = message["content"]
        counted = len(content) if isinstance(content, str) else sum(chars(block) for block in content)
        total += math.ceil(counted / 4)
    return total


DEFECTS: list[tuple[Callable[[JSON, JSON], int], str]] = [
    (assumes_name, "never_raises"),
    (rejects_unknown_types, "never_raises"),
    (drops_opaque, "opaque_blocks_count"),
    (counts_foreign_opaque, "opaque_blocks_count"),
    (off_by_one, "finite_non_negative"),
    (exception_to_zero, "no_decrease_on_append"),
    (exception_to_zero, "search_chars_count"),
    (ignores_search, "search_chars_count"),
    (no_cjk_correction, "cjk_chars_count"),
    (counts_prefix_twice, "anchor_counted_once"),
    (trusts_any_usage, "invalid_usage_falls_back"),
    (ignores_system_and_tools, "matches_projection"),
    (drops_anchor_on_rebuild, "system_rebuild"),
    (seed_rule, "tracks_o200k"),
    (pi_style, "tracks_o200k"),
]


# ---------------------------------------------------------------- the reference passes


@pytest.mark.parametrize("prop", PROPERTIES, ids=lambda prop: prop.name)
def test_the_reference_estimator_passes(prop: Any) -> None:
    prop.verify(estimate_tokens, max_examples=40, seed=20260101)


def test_every_property_has_a_name_and_a_one_line_statement() -> None:
    assert len(BY_NAME) == len(PROPERTIES) == 11
    assert all(prop.statement and "\n" not in prop.statement for prop in PROPERTIES)


# ---------------------------------------------------------------- each defect is caught by its property


@pytest.mark.parametrize(("defect", "name"), DEFECTS, ids=[f"{d.__name__}-{n}" for d, n in DEFECTS])
def test_each_defect_is_caught_by_the_property_meant_for_it(defect: Any, name: str) -> None:
    outcome = BY_NAME[name].outcome(defect, max_examples=150, seed=7, shrink=False)
    assert outcome.status == "fail", f"{defect.__name__} was not caught by {name}"


def test_no_property_is_vacuous() -> None:
    assert {name for _, name in DEFECTS} == set(BY_NAME)


def test_the_reference_and_the_defects_differ_only_where_meant() -> None:
    transcript = {"version": 1, "system": "S", "tools": [], "messages": [
        {"role": "user", "content": "hello", "timestamp": 1}]}
    target = {"provider": "anthropic", "api": "anthropic-messages", "model": "m"}
    reference = estimate_tokens(transcript, target)
    for defect in (assumes_name, ignores_search, no_cjk_correction, counts_prefix_twice, exception_to_zero,
                   drops_anchor_on_rebuild, trusts_any_usage, rejects_unknown_types, drops_opaque,
                   counts_foreign_opaque):
        assert defect(transcript, target) == reference, defect.__name__


def test_a_failure_shows_the_statement_and_the_shrunk_transcript_as_json() -> None:
    with pytest.raises(PropertyFailed) as caught:
        BY_NAME["never_raises"].verify(assumes_name, max_examples=100, seed=3)
    text = str(caught.value)
    assert text.startswith("never_raises: never raises on a contract-valid transcript")
    assert "KeyError: 'name'" in text
    transcript = json.loads(text.split("transcript: ", 1)[1])
    assert restore(transcript) == transcript
    blocks = [block for message in transcript["messages"] for block in message.get("content", [])
              if isinstance(block, dict)]
    # shrunk to what matters: one nameless block (a search block or an opaque one), or one search round
    assert {block["type"] for block in blocks} <= {"hostedSearch", "providerBlock"}, blocks
    assert len(blocks) <= 2, blocks


# ---------------------------------------------------------------- against a real tokenizer


def _search_error(outcome: Outcome) -> ContentError:
    return next(error for error in outcome.errors if error.content == "search")


def test_the_seeds_rule_is_caught_under_on_search_content() -> None:
    outcome = BY_NAME[ACCURACY].outcome(seed_rule, max_examples=60, seed=7, shrink=False)
    assert outcome.failure is not None and outcome.failure.detail.startswith("search content adds ")
    assert "not at most 10% under" in outcome.failure.detail
    assert _search_error(outcome).high < -0.3  # base64 is 0.68 tokens a character, not 0.25


def test_pi_style_is_caught_under_on_search_content() -> None:
    outcome = BY_NAME[ACCURACY].outcome(pi_style, max_examples=60, seed=7, shrink=False)
    assert outcome.status == "fail"
    assert _search_error(outcome).high < -0.3  # hosted search unread, a search tool's JSON at chars/4


def test_the_reference_reports_its_error_per_kind_of_content() -> None:
    outcome = BY_NAME[ACCURACY].outcome(estimate_tokens, max_examples=150, seed=7)
    assert outcome.passed
    errors = {error.content: error for error in outcome.errors}
    assert set(errors) == set(rs.CONTENT_KINDS)
    assert errors["search"].low >= -0.10 and all(-0.25 <= e.low <= e.high <= 0.25 for e in errors.values()
                                                   if e.content != "search")
    assert sum(error.examples for error in errors.values()) <= 150


def test_the_margins_are_options() -> None:
    loose = accuracy(search_margin=0.9, band=0.9)
    assert "never more than 90% under" in loose.statement and "+-90%" in loose.statement
    assert loose.outcome(seed_rule, max_examples=30, seed=7).passed
    chosen = selected([ACCURACY], search_margin=0.9, band=0.9)
    assert chosen[0].statement == loose.statement
    assert selected(None)[-1].statement == BY_NAME[ACCURACY].statement == accuracy().statement


@pytest.mark.parametrize("value", [1.0, -0.1, True, "10%"])
def test_the_margins_are_checked(value: Any) -> None:
    with pytest.raises(UsageError, match="must be a fraction from 0 to below 1"):
        accuracy(search_margin=value)


def test_without_the_tokenizer_the_property_is_skipped_with_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise ExactModeUnavailable("exact counting needs tiktoken: pip install 'tiktoken>=0.7'")

    monkeypatch.setattr(properties, "o200k_base", missing)
    outcome = BY_NAME[ACCURACY].outcome(estimate_tokens, max_examples=5, seed=1)
    assert (outcome.status, outcome.passed, outcome.failure) == ("skipped", False, None)
    assert outcome.unchecked is not None and "pip install 'replaykit-llm[exact]'" in outcome.unchecked
    with pytest.raises(PropertyFailed, match="skipped: skipped: exact counting needs tiktoken"):
        BY_NAME[ACCURACY].verify(estimate_tokens, max_examples=5)
    assert BY_NAME["finite_non_negative"].outcome(estimate_tokens, max_examples=5, seed=1).passed


# ---------------------------------------------------------------- another process, another language


@node
def test_the_javascript_estimator_passes_the_suite() -> None:
    with CommandEstimator(["node", str(FIXTURES / "estimator.js")]) as estimator:
        outcomes = run(estimator, max_examples=30, seed=11)
    assert [outcome.status for outcome in outcomes] == ["pass"] * len(PROPERTIES), [
        (outcome.name, outcome.failure) for outcome in outcomes if not outcome.passed]


@node
def test_the_seeds_rule_in_javascript_fails_under_on_search_content() -> None:
    with CommandEstimator(["node", str(FIXTURES / "estimator_chars4.js")]) as estimator:
        found = run(estimator, max_examples=30, seed=11, shrink=False)
    outcomes = {outcome.name: outcome for outcome in found}
    failed = {name for name, outcome in outcomes.items() if not outcome.passed}
    assert failed == {ACCURACY, "matches_projection"}
    detail = outcomes[ACCURACY].failure.detail  # type: ignore[union-attr]
    assert detail.startswith("search content adds") and "not at most 10% under" in detail


@node
def test_the_javascript_estimator_counts_real_content_as_the_reference_does() -> None:
    """The per-class rates, ported: URLs, opaque runs, digits, JSON punctuation and CJK (spaced Korean
    included) on real-looking content, which random text seldom holds."""
    with CommandEstimator(["node", str(FIXTURES / "estimator.js")]) as estimator:
        @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(rs.targets(), st.sampled_from(rs.CONTENT_KINDS).flatmap(rs.rich_messages))
        def same(target: JSON, messages: list[JSON]) -> None:
            transcript = {"version": 1, "system": "Cite https://example.com/a1 [1].", "tools": [],
                          "messages": messages}
            assert estimator(transcript, target) == estimate_tokens(transcript, target)

        same()


@node
def test_the_javascript_defective_twin_fails_never_raises() -> None:
    with CommandEstimator(["node", str(FIXTURES / "estimator_name_defect.js")]) as estimator:
        outcome = BY_NAME["never_raises"].outcome(estimator, max_examples=100, seed=11, shrink=False)
    assert outcome.failure is not None
    assert "Cannot read properties of undefined (reading 'length')" in outcome.failure.detail


@node
def test_a_javascript_estimator_that_throws_on_unknown_blocks_is_shrunk_to_one_opaque_block() -> None:
    with CommandEstimator(["node", str(FIXTURES / "estimator_unknown_block.js")]) as estimator:
        outcome = BY_NAME["never_raises"].outcome(estimator, max_examples=100, seed=11)
    assert outcome.failure is not None
    assert "TypeError: unsupported content block type" in outcome.failure.detail
    transcript = outcome.failure.transcript
    assert restore(transcript) == transcript
    blocks = [block for message in transcript["messages"] if message["role"] == "assistant"
              for block in message["content"]]
    assert [block["type"] for block in blocks] == ["providerBlock"]  # shrunk to the one block that matters


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


ECHO = "import sys, json\nfor line in sys.stdin:\n    r = json.loads(line)\n"


@pytest.mark.parametrize(("code", "message"), [
    (ECHO + "    print(json.dumps({'id': r['id'], 'tokens': 7}), flush=True)", None),
    (ECHO + "    print(json.dumps({'id': r['id'], 'error': 'boom'}), flush=True)", "answered error: boom"),
    (ECHO + "    print('not json', flush=True)", "not a JSON line"),
    (ECHO + "    print(json.dumps({'id': r['id'] + 1, 'tokens': 1}), flush=True)",
     "answered id 2 to request 1"),
    (ECHO + "    print(json.dumps({'id': r['id'], 'tokens': '7'}), flush=True)", "breaks the protocol"),
    (ECHO + "    sys.exit(3)", "exited with code 3"),
    ("import sys, time\nsys.stdin.readline()\ntime.sleep(30)", "no answer within 0.5 s"),
])
def test_the_command_protocol_reports_what_went_wrong(code: str, message: str | None) -> None:
    transcript = {"version": 1, "messages": []}
    target = {"provider": "openai", "api": "openai-responses", "model": "gpt-5"}
    with CommandEstimator(_python(code), timeout=0.5) as estimator:
        if message is None:
            assert estimator(transcript, target) == 7
            return
        with pytest.raises(EstimatorFailed, match=message):
            estimator(transcript, target)


def test_a_command_that_crashed_is_restarted_for_the_next_request() -> None:
    code = ECHO + "    if r['transcript']['messages']: sys.exit(3)\n" \
                  "    print(json.dumps({'id': r['id'], 'tokens': 1}), flush=True)"
    crash = {"version": 1, "messages": [{"role": "user", "content": "x", "timestamp": 1}]}
    with CommandEstimator(_python(code)) as estimator:
        with pytest.raises(EstimatorFailed, match="exited with code 3"):
            estimator(crash, {})
        assert estimator({"version": 1, "messages": []}, {}) == 1


def test_non_finite_numbers_cross_the_protocol_as_strict_json() -> None:
    text = dumps({"a": math.nan, "b": [math.inf, -math.inf], "c": "NaN Infinity", "d": 1.5})
    assert text == '{"a":null,"b":[1e999,-1e999],"c":"NaN Infinity","d":1.5}'
    assert json.loads(text)["b"] == [math.inf, -math.inf]


def test_the_protocol_schemas() -> None:
    transcript = {"version": 1, "system": None, "tools": [], "messages": [
        {"role": "user", "content": "hi", "timestamp": 1}]}
    good = {"id": 1, "transcript": transcript, "target": {"provider": "azure", "api": "openai-responses",
                                                         "model": "dep"}}
    assert validate("replaykit.estimator-request", good) == []
    bad = {**good, "target": {"provider": "azure", "api": "openai-responses"}}
    assert [v.pointer for v in validate("replaykit.estimator-request", bad)] == ["/target/model"]
    broken = {**good, "transcript": {"version": 1, "messages": [{"role": "robot", "timestamp": 1}]}}
    assert validate("replaykit.estimator-request", broken)
    assert validate("replaykit.estimator-response", {"id": "a", "tokens": 3.5}) == []
    assert validate("replaykit.estimator-response", {"id": 1, "error": "boom"}) == []
    wrong = ({"id": 1}, {"id": 1, "tokens": 1, "error": "x"}, {"tokens": 1}, {"id": 1, "tokens": 1, "x": 0})
    for answer in wrong:
        assert validate("replaykit.estimator-response", answer), answer


# ---------------------------------------------------------------- loading and the command line


@pytest.mark.parametrize(("spec", "message"), [
    ("replaykit.estimate", "must be module:function"),
    ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
    ("replaykit.estimate:no_such_function", "has no attribute 'no_such_function'"),
    ("replaykit.estimate:IMAGE_CHARS", "is a int, not a function"),
])
def test_a_bad_module_function_is_a_usage_error(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_callable(spec)


def test_load_callable_finds_the_reference() -> None:
    assert load_callable("replaykit.estimate:estimate_tokens") is estimate_tokens


def test_cli_passes_the_reference_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["properties", "--estimator", "replaykit.estimate:estimate_tokens", "--max-examples", "10",
                 "--seed", "5", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and report["ok"] is True and report["seed"] == 5
    assert [entry["name"] for entry in report["properties"]] == list(BY_NAME)


@node
def test_cli_fails_the_defective_twin(capsys: pytest.CaptureFixture[str]) -> None:
    command = f"node {FIXTURES / 'estimator_name_defect.js'}"
    code = main(["properties", "--estimator-cmd", command, "--max-examples", "40", "--seed", "5",
                 "--property", "never_raises", "--no-shrink"])
    out = capsys.readouterr().out
    assert code == EXIT_FINDINGS
    assert "FAIL      never_raises" in out and "transcript: {" in out
    assert out.rstrip().endswith("1 properties, 0 passed, 1 failed")


@pytest.mark.parametrize("argv", [
    ["properties", "--estimator", "nope"],
    ["properties", "--estimator-cmd", "/no/such/estimator --flag"],
    ["properties"],
    ["properties", "--estimator", "a:b", "--estimator-cmd", "c"],
    ["properties", "--estimator", "replaykit.estimate:estimate_tokens", "--max-examples", "0"],
    ["properties", "--estimator", "replaykit.estimate:estimate_tokens", "--property", "nope"],
])
def test_cli_usage_errors_exit_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(("replaykit: error:", "replaykit properties: error:"))
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_json_is_strict_json_when_a_failure_holds_non_finite_numbers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from replaykit import properties
    from replaykit.properties import Failure, Outcome

    usage = {"input_tokens": math.inf, "output_tokens": math.nan}
    failure = Failure("estimate was inf", {"messages": [], "usage": usage}, {"provider": "anthropic"})
    fail = Outcome("never_raises", "s", failure)
    monkeypatch.setattr(properties.Property, "outcome", lambda *_, **__: fail)
    code = main(["properties", "--estimator", "replaykit.estimate:estimate_tokens", "--seed", "5", "--json",
                 "--property", "never_raises"])

    def refuse(token: str) -> None:
        raise ValueError(f"not strict JSON: {token}")

    report = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert code == EXIT_FINDINGS
    assert report["properties"][0]["failure"]["transcript"]["usage"] == {"input_tokens": math.inf,
                                                                         "output_tokens": None}
