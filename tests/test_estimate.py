"""replaykit.estimate: the heuristic, usage anchoring, system reconstruction, budgets and the exact mode."""

from __future__ import annotations

import copy
import importlib.util
import math
from fractions import Fraction
from typing import Any

import pytest

from replaykit import estimate as est
from replaykit import strategies as rs
from replaykit.errors import LocalRequestError, UsageError
from replaykit.estimate import (
    IMAGE_CHARS,
    RATES,
    Anchor,
    Chars,
    ExactModeUnavailable,
    budget,
    estimate,
    find_anchor,
    o200k_base,
    text_chars,
    text_tokens,
    usage_tokens,
)
from replaykit.replay import ProviderModel, project

JSON = dict[str, Any]
ANTHROPIC = {"provider": "anthropic", "api": "anthropic-messages", "model": "claude-sonnet-4-5"}
OPENAI = {"provider": "openai", "api": "openai-responses", "model": "gpt-5"}
T0 = 1_764_662_400_000
needs_ranks = pytest.mark.skipif(
    importlib.util.find_spec("bpe_openai") is None or importlib.util.find_spec("tiktoken") is None,
    reason="tiktoken or bpe-openai (the offline o200k_base ranks) is not installed")


def _usage(total: float, **parts: float) -> JSON:
    usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total}
    return {**usage, **parts}


def _assistant(text: str, total: float = 0, stop: str = "stop", at: int = 1, **extra: Any) -> JSON:
    return {"role": "assistant", "provider": "anthropic", "api": "anthropic-messages", "model": "m",
            "content": [{"type": "text", "text": text}], "usage": _usage(total), "stopReason": stop,
            "timestamp": T0 + at, **extra}


def _user(text: str, at: int = 0) -> JSON:
    return {"role": "user", "content": text, "timestamp": T0 + at}


def _transcript(*messages: JSON, system: str | None = None, tools: list[JSON] | None = None) -> JSON:
    return {"version": 1, "system": system, "tools": tools or [], "messages": list(messages)}


SEARCH_RESULT = {
    "type": "hostedSearch", "phase": "result", "provider": "anthropic", "api": "anthropic-messages",
    "toolUseId": "srvtoolu_01", "results": [{"url": "https://example.com/a", "title": "Changelog"}],
    "raw": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
            "content": [{"type": "web_search_result", "url": "https://example.com/a", "title": "Changelog",
                         "encrypted_content": "E" * 400, "page_age": None}]},
}


# ---------------------------------------------------------------- the heuristic on text


@pytest.mark.parametrize(("text", "chars", "tokens"), [
    ("", Chars(), 0),
    ("abcd", Chars(4), 1),
    ("abcde", Chars(5), 2),  # rounded up
    ("internationalization", Chars(20), 5),  # a long word is text, not an opaque run
    ("今日は", Chars(0, 3), 3),
    ("。、「」", Chars(0, 4), 3),
    ("\U00020000x", Chars(1, 1), 1),  # CJK extension B, outside the BMP
    ("한국어 text 이 도구는", Chars(5, 7), 7),  # a space before a CJK character is joined to it
    ("é😀", Chars(2), 1),
    ('{"a": [1, 2]}', Chars(13, structure=8, digits=2), 5),
    ("In 2024, 13.6%", Chars(14, structure=1, digits=7), 6),
    ("see https://example.com/a?b=1.", Chars(30, digits=1, url=25), 10),  # a URL's digits are digits
    ("https://x.com/AbCdEf0123456789xyz", Chars(33, url=14, opaque=19), 18),  # a key in a URL is opaque
    ("https://x.com/news/2024/euro-final-spain-wins", Chars(45, digits=4, url=41), 16),  # a slug is URL
    ("EqA1b2C3d4E5f6G7h8", Chars(18, opaque=18), 13),  # its digits are the run's
    ("call_a1B2c3", Chars(11, digits=3), 4),  # under 12 characters: not an opaque run
])
def test_text_is_counted_per_content_class(text: str, chars: Chars, tokens: int) -> None:
    assert text_chars(text) == chars
    assert text_tokens(text) == tokens


def test_each_class_counts_at_its_rate() -> None:
    assert text_tokens("中" * 1000) == 750
    assert text_tokens("a" * 1000) == 250  # the seed's rule
    assert text_tokens("https://" + "a" * 992) == 334
    assert text_tokens("A1b2C3d4" * 125) == 700
    assert text_tokens("7" * 1000) == 500
    assert text_tokens("[]" * 500) == 334


def test_every_rate_is_a_whole_number_of_sixtieths_and_none_under_a_quarter_token() -> None:
    assert all((rate * 60).denominator == 1 for rate in RATES.values())
    assert RATES["text"] == Fraction(1, 4) == min(RATES.values())  # +N search characters: >= N/4 tokens
    assert set(RATES) == set(Chars().classes())


def test_every_string_is_classified_on_its_own() -> None:
    """A URL or an opaque run ends with its string: two strings are counted as their sum."""
    first, second = "see https://example.com/a", "EqA1b2C3d4E5f6G7h8 and more"
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": first},
                                                      {"type": "text", "text": second}]}]}
    parts = est.body_chars(body)
    each = [text_chars(text) for text in ("user", "text", first, "text", second)]
    assert parts["messages"] == each[0] + each[1] + each[2] + each[3] + each[4]
    assert parts["messages"].url == 21 and parts["messages"].opaque == 18


@needs_ranks
@pytest.mark.parametrize("kind", ["prose", "code", "japanese", "chinese", "korean"])
def test_the_rates_hold_on_every_passage_the_strategies_draw(kind: str) -> None:
    """Every run of lines rs.passages can draw is estimated within 20% of o200k_base: the accuracy property
    judges the estimate on them with a band of 25%."""
    lines, joiner = rs.PASSAGES[kind], rs._JOINS[kind]
    encoding = o200k_base()
    errors = []
    for count in range(rs._MIN_LINES[kind], 13):
        for start in range(len(lines)):
            text = joiner.join(lines[(start + n) % len(lines)] for n in range(count))
            exact = len(encoding.encode_ordinary(text))
            errors.append((text_tokens(text) - exact) / exact)
    assert min(errors) >= -0.2 and max(errors) <= 0.2, (min(errors), max(errors))


# ---------------------------------------------------------------- what project emits, counted


def test_counts_every_string_of_the_projected_body_system_and_tools_included() -> None:
    tool = {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}
    transcript = _transcript(_user("hello"), system="Be brief.", tools=[tool])
    found = estimate(transcript, ANTHROPIC)
    # system "Be brief." (9); tools "read" "Read a file" "object" (21); messages "user" "hello" (9)
    assert (found.breakdown.system, found.breakdown.tools, found.breakdown.messages) == (3, 6, 3)
    assert found.tokens == 12 and found.anchor is None


def test_replayed_search_characters_count_for_the_same_provider() -> None:
    plain = _transcript(_user("q"), _assistant("answer"))
    searched = copy.deepcopy(plain)
    searched["messages"][1]["content"].insert(0, SEARCH_RESULT)
    gained = estimate(searched, ANTHROPIC).tokens - estimate(plain, ANTHROPIC).tokens
    assert gained >= 400 // 4  # the encrypted_content is replayed verbatim


def test_another_provider_counts_the_text_projection_not_the_raw_block() -> None:
    searched = _transcript(_user("q"), _assistant("answer"))
    searched["messages"][1]["content"].insert(0, SEARCH_RESULT)
    plain = _transcript(_user("q"), _assistant("answer"))
    gained = estimate(searched, OPENAI).tokens - estimate(plain, OPENAI).tokens
    projection = "[web search results]\n1. Changelog - https://example.com/a"
    assert gained == text_tokens("assistant" + projection)  # a new assistant item with the text


def test_display_only_blocks_are_not_counted() -> None:
    display = {key: value for key, value in SEARCH_RESULT.items() if key != "raw"}
    with_block = _transcript(_user("q"), {**_assistant("answer"), "content": [display, {"type": "text",
                                                                                        "text": "answer"}]})
    assert estimate(with_block, ANTHROPIC).tokens == estimate(_transcript(_user("q"), _assistant("answer")),
                                                                 ANTHROPIC).tokens


def test_an_image_counts_as_a_fixed_number_of_characters() -> None:
    image = {"type": "image", "data": "A" * 100_000, "mimeType": "image/png"}
    transcript = _transcript({"role": "user", "content": [image], "timestamp": T0})
    expected = text_tokens("user") - 1 + math.ceil((len("user") + IMAGE_CHARS) / 4)  # one part, one ceil
    assert estimate(transcript, ANTHROPIC).tokens == expected == 1201


# ---------------------------------------------------------------- usage anchoring


@pytest.mark.parametrize(("usage", "stop", "expected"), [
    (_usage(100, input=60, output=40), "stop", 100),
    (_usage(0, input=60, output=40), "stop", 100),          # totalTokens 0: the parts are summed
    (_usage(99.2), "pauseTurn", 100),
    (_usage(0), "stop", None),                               # zero
    (_usage(math.nan, input=5), "stop", None),               # non-finite
    (_usage(100, input=math.inf), "stop", None),
    (_usage(10**400, input=5), "stop", None),                # an int too large for a float
    (_usage(100, output=-1), "stop", None),                  # negative
    (_usage(100), "error", None),
    (_usage(100), "aborted", None),
    ({"input": 1, "output": 1}, "stop", None),               # incomplete
])
def test_usage_tokens_accepts_only_valid_usage(usage: JSON, stop: str, expected: int | None) -> None:
    message = {**_assistant("x"), "usage": usage, "stopReason": stop}
    assert usage_tokens(message) == expected


def test_usage_needs_a_finite_timestamp() -> None:
    assert usage_tokens({**_assistant("x", 100), "timestamp": math.nan}) is None
    assert usage_tokens({**_assistant("x", 100), "timestamp": None}) is None
    assert usage_tokens({**_assistant("x", 100), "timestamp": 10**400}) is None


def test_the_last_valid_usage_anchors_and_only_later_messages_are_counted() -> None:
    transcript = _transcript(_user("a" * 400), _assistant("b", 1000, at=1), _assistant("c", 0, at=2),
                             _user("dddd", at=3), system="S" * 400)
    found = estimate(transcript, ANTHROPIC)
    assert found.anchor == Anchor(1, 1000)
    later = estimate(_transcript(_assistant("c", 0), _user("dddd")), ANTHROPIC)
    assert found.tokens == 1000 + later.breakdown.messages
    assert (found.breakdown.system, found.breakdown.tools) == (0, 0)


class _Untouchable(dict[str, Any]):
    """A message that fails the test if anything reads it."""

    def get(self, *args: Any) -> Any:
        raise AssertionError("the prefix the anchor covers was read")

    __getitem__ = get


def test_an_anchored_estimate_reads_only_the_messages_after_the_anchor() -> None:
    prefix = [_Untouchable(_user("x" * 400)) for _ in range(50)]
    transcript = _transcript(*prefix, _assistant("b", 1000), _user("dddd", at=2))
    found = estimate(transcript, ANTHROPIC)
    assert found.anchor == Anchor(50, 1000)
    assert found.tokens == 1000 + 2  # "user" and "dddd": 8 characters


def test_a_broken_tail_still_fails_when_anchored() -> None:
    broken = _transcript(_user("q"), _assistant("b", 1000),
                         {"role": "user", "content": [{"type": "thinking"}], "timestamp": T0 + 2})
    with pytest.raises(LocalRequestError) as caught:
        estimate(broken, ANTHROPIC)
    assert caught.value.message_index == 2 and caught.value.pointer == "/messages/2/content"


def test_a_broken_prefix_fails_when_nothing_anchors() -> None:
    broken = _transcript({"role": "user", "content": [{"type": "thinking"}], "timestamp": T0},
                         _assistant("b", 0))
    with pytest.raises(LocalRequestError) as caught:
        estimate(broken, ANTHROPIC)
    assert caught.value.message_index == 0 and caught.value.pointer == "/messages/0/content"


def test_the_estimator_shares_raw_blocks_and_project_copies_them() -> None:
    transcript = _transcript(_user("q"), {**_assistant("a"), "content": [SEARCH_RESULT]})
    target = ProviderModel("anthropic", "anthropic-messages", "m")
    shared = project(transcript, target, share=True)["messages"][1]["content"][0]
    copied = project(transcript, target)["messages"][1]["content"][0]
    assert shared is SEARCH_RESULT["raw"]
    assert copied == SEARCH_RESULT["raw"] and copied is not SEARCH_RESULT["raw"]


# ---------------------------------------------------------------- system reconstruction


def _history(*entries: tuple[int, str | None, list[JSON]]) -> list[JSON]:
    return [{"timestamp": T0 + at, "system": system, "tools": tools} for at, system, tools in entries]


def test_an_unchanged_rebuild_keeps_the_anchor() -> None:
    transcript = _transcript(_user("q"), _assistant("a", 500, at=1), system="Be brief.")
    transcript["systemHistory"] = _history((0, "Be brief.", []), (5, "Be brief.", []))
    assert find_anchor(transcript) == Anchor(1, 500)


@pytest.mark.parametrize(("system", "tools"), [
    ("Be verbose.", []),
    ("Be brief.", [{"name": "read", "parameters": {"type": "object"}}]),
])
def test_a_real_instruction_or_tool_change_drops_the_anchor(system: str, tools: list[JSON]) -> None:
    transcript = _transcript(_user("q"), _assistant("a", 500, at=1), system=system, tools=tools)
    transcript["systemHistory"] = _history((0, "Be brief.", []), (5, system, tools))
    assert find_anchor(transcript) is None
    assert estimate(transcript, ANTHROPIC).tokens == estimate({**transcript, "messages": [
        transcript["messages"][0], {**transcript["messages"][1], "usage": _usage(0)}]}, ANTHROPIC).tokens


def test_a_change_before_the_anchor_does_not_drop_it() -> None:
    transcript = _transcript(_user("q"), _assistant("a", 500, at=9), system="Be verbose.")
    transcript["systemHistory"] = _history((0, "Be brief.", []), (5, "Be verbose.", []))
    assert find_anchor(transcript) == Anchor(1, 500)


def test_an_anchor_older_than_the_history_cannot_be_trusted() -> None:
    transcript = _transcript(_user("q"), _assistant("a", 500, at=1), system="Be brief.")
    transcript["systemHistory"] = _history((5, "Be brief.", []))
    assert find_anchor(transcript) is None


# ---------------------------------------------------------------- budget and targets


def test_budget_compacts_past_the_window_minus_the_reserve() -> None:
    transcript = _transcript(_user("q"), _assistant("a", 900, at=1))
    assert budget(transcript, ANTHROPIC, 1000, 100).compact is False
    tight = budget(transcript, ANTHROPIC, 1000, 200)
    assert tight.compact is True and tight.output_allowance == 1000 - tight.estimate.tokens
    assert budget(transcript, ANTHROPIC, 500, 100).output_allowance == 0


@pytest.mark.parametrize(("window", "reserve", "message"), [
    (0, 0, "context_window=0 must be positive"),
    (1000, 1000, "reserve=1000 must be at least 0 and below context_window=1000"),
    (1000, -1, "reserve=-1"),
    (1000.5, 1, "context_window=1000.5 must be an integer"),
])
def test_budget_checks_its_arguments(window: Any, reserve: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        budget(_transcript(), ANTHROPIC, window, reserve)


def test_targets_are_checked() -> None:
    azure = ProviderModel("azure", "openai-responses", "dep")
    assert est.to_target({"provider": "azure", "model": "dep"}) == azure
    with pytest.raises(UsageError, match="provider='cohere'"):
        estimate(_transcript(), {"provider": "cohere", "api": "x", "model": "m"})
    with pytest.raises(UsageError, match="must be a ProviderModel"):
        estimate(_transcript(), "anthropic")  # type: ignore[arg-type]


# ---------------------------------------------------------------- exact mode (o200k_base, offline)


@needs_ranks
@pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")  # inside bpe_openai
def test_o200k_base_loads_offline_and_matches_an_independent_tokenizer() -> None:
    import bpe_openai  # type: ignore[import-untyped]

    reference = bpe_openai.get_encoding("o200k_base")  # GitHub's Rust BPE, not tiktoken
    samples = ["hello world", "def f(x):\n    return x ** 2\n", '{"url": "https://example.com/a?b=1"}',
               "今日は良い天気ですね。", "한국어 텍스트", "naïve café 😀 <|endoftext|>"]
    for sample in samples:
        assert o200k_base().encode_ordinary(sample) == reference.encode(sample, disallowed_special=()), sample
    assert o200k_base().encode("hello world") == [24912, 2375]


@needs_ranks
def test_exact_mode_counts_the_same_strings_with_o200k_base() -> None:
    transcript = _transcript(_user("hello world"), system="Be brief.")
    found = estimate(transcript, OPENAI, exact=True)
    encoding = o200k_base()
    assert found.breakdown.system == len(encoding.encode("Be brief."))
    assert found.breakdown.messages == len(encoding.encode("user")) + len(encoding.encode("hello world"))


@needs_ranks
def test_o200k_tokens_counts_every_string_of_a_body_for_any_target() -> None:
    transcript = _transcript(_user("hello world"), system="Be brief.")
    body = project(transcript, ProviderModel("anthropic", "anthropic-messages", "m"))
    encoding = o200k_base()
    assert est.o200k_tokens(body) == sum(len(encoding.encode(text)) for text in ("Be brief.", "user",
                                                                                  "hello world"))


def test_exact_mode_is_for_openai_targets_only() -> None:
    with pytest.raises(UsageError, match="anthropic has no public tokenizer"):
        estimate(_transcript(_user("hi")), ANTHROPIC, exact=True)


def test_exact_mode_without_the_ranks_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ExactModeUnavailable, match=r"pip install 'bpe-openai>=0.1.4'"):
        est._bundled_path()


@needs_ranks
def test_tampered_ranks_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import gzip

    fake = tmp_path / "o200k_base.tiktoken.gz"
    fake.write_bytes(gzip.compress(b"YQ== 0\n"))
    monkeypatch.setattr(est, "_bundled_path", lambda: fake)
    with pytest.raises(ExactModeUnavailable, match="do not match tiktoken's SHA-256"):
        est._bundled_ranks("446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")
