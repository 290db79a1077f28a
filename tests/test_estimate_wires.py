"""The estimator on Gemini generateContent and Chat Completions bodies: every part counted where the body
keeps it, images as images, and another provider's search history counted as the text it becomes."""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import pytest
from test_replay_wires import CHAT, GEMINI, conversation, gemini_turn

from replaykit.errors import UsageError
from replaykit.estimate import IMAGE_CHARS, body_chars, estimate, o200k_base, text_tokens
from replaykit.replay import ProviderModel, project, search_text_projection

JSON = dict[str, Any]
ANTHROPIC = ProviderModel("anthropic", "anthropic-messages", "claude-sonnet-4-5")
needs_ranks = pytest.mark.skipif(importlib.util.find_spec("bpe_openai") is None, reason="bpe-openai missing")


def _say(text: str) -> JSON:
    return {"version": 1, "system": "Be brief.", "tools": [],
            "messages": [{"role": "user", "content": text, "timestamp": 1}]}


def test_gemini_system_instruction_and_contents_are_counted() -> None:
    found = estimate(_say("hello world"), GEMINI)
    assert found.breakdown.system == text_tokens("Be brief.")
    assert found.breakdown.messages == text_tokens("user") + text_tokens("hello world")


def test_a_chat_system_message_counts_as_the_system() -> None:
    found = estimate(_say("hello world"), CHAT)
    assert found.breakdown.system == -(-len("systemBe brief.") // 4)  # role and text, plain text
    assert found.breakdown.messages == text_tokens("user") + text_tokens("hello world")


@pytest.mark.parametrize("target", [GEMINI, CHAT], ids=["gemini", "chat"])
def test_an_image_counts_as_an_image_not_as_its_base64(target: ProviderModel) -> None:
    transcript = _say("")
    transcript["messages"][0]["content"] = [{"type": "image", "mimeType": "image/png", "data": "iVBO" * 5000}]
    chars = body_chars(project(transcript, target))["messages"]
    assert IMAGE_CHARS <= chars.other < IMAGE_CHARS + 20
    assert chars.opaque == 0


def test_gemini_grounding_projected_to_anthropic_is_counted() -> None:
    turn = gemini_turn()
    turn["usage"] = dict.fromkeys(turn["usage"], 0)  # no anchor: every message is counted
    transcript = conversation(turn)
    searchless = copy.deepcopy(transcript)
    searchless["messages"][1]["content"] = [block for block in searchless["messages"][1]["content"]
                                            if block["type"] != "hostedSearch"]
    added = estimate(transcript, ANTHROPIC).tokens - estimate(searchless, ANTHROPIC).tokens
    assert added >= text_tokens(search_text_projection(gemini_turn()["content"][1]))  # the result's text
    # to Gemini itself the grounding is not sent, so not counted
    assert estimate(transcript, GEMINI).tokens == estimate(searchless, GEMINI).tokens


@needs_ranks
def test_exact_mode_counts_chat_bodies() -> None:
    found = estimate(_say("hello world"), CHAT, exact=True)
    encoding = o200k_base()
    assert found.breakdown.system == len(encoding.encode("system")) + len(encoding.encode("Be brief."))
    assert found.breakdown.messages == len(encoding.encode("user")) + len(encoding.encode("hello world"))


def test_exact_mode_is_not_for_gemini() -> None:
    with pytest.raises(UsageError, match="gemini has no public tokenizer"):
        estimate(_say("hi"), GEMINI, exact=True)
