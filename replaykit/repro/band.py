"""The estimate a repro scenario expects: a policy band any sound estimator meets, whatever its style.

:func:`policy_band` derives it from the policy, never from replaykit's own count: three counting styles over
the strings of the request a correct harness sends (:func:`replaykit.replay.project`), anchored on the last
assistant turn with valid usage when there is one (:func:`replaykit.estimate.find_anchor`), widened by
:data:`SLACK`, its bottom set to catch a defect's count when it lies :data:`APART` below. Used by
:mod:`replaykit.repro.bundle`; the bounds are derived in docs/architecture/repro.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from replaykit.errors import LocalRequestError
from replaykit.estimate import _PARTS as BODY_PARTS  # each part's keys in a body of any wire: one definition
from replaykit.estimate import IMAGE_CHARS, ExactModeUnavailable, find_anchor, o200k_base, text_chars
from replaykit.estimate import _strings as strings  # the strings the estimator counts: one definition
from replaykit.jsondoc import JSON
from replaykit.replay import ProviderModel, project

__all__ = ["APART", "SLACK", "Band", "policy_band", "style_counts"]

SLACK = 500  # tokens of framing a harness may count besides the text (roles, separators, tool schemas)
APART = 0.8  # a defect's count at most this share of the smallest sound count is told apart by the band
_SETUP = (*BODY_PARTS["system"], *BODY_PARTS["tools"])  # system, instructions, systemInstruction, tools
_PARTS = (*_SETUP, *BODY_PARTS["messages"])  # and messages, input, Gemini's contents
CHARS4, CJK1, O200K = "four characters a token", "one token a CJK character", "o200k_base"


@dataclass(frozen=True)
class Band:
    """The estimates a sound harness makes: ``low`` to ``high`` tokens, derived as ``why`` says."""

    low: int
    high: int
    why: str


def _chars4(texts: list[str]) -> int:
    return math.ceil(sum(len(text) for text in texts) / 4)


def _cjk1(texts: list[str]) -> int:
    chars = text_chars("".join(texts))
    return math.ceil(chars.other / 4) + chars.cjk


def _o200k(texts: list[str]) -> int:
    encoding = o200k_base()
    return sum(len(encoding.encode_ordinary(text)) for text in texts)


def _counters() -> dict[str, Callable[[list[str]], int]]:
    counters: dict[str, Callable[[list[str]], int]] = {CHARS4: _chars4, CJK1: _cjk1, O200K: _o200k}
    try:
        o200k_base()
    except ExactModeUnavailable:  # tiktoken or its ranks missing: the two heuristics still bound the band
        del counters[O200K]
    return counters


def style_counts(body: Mapping[str, object], parts: tuple[str, ...] = _PARTS) -> dict[str, int]:
    """The tokens of ``body``'s strings under ``parts`` in each style (an image: :data:`IMAGE_CHARS` / 4)."""
    texts, images = strings([body.get(part) for part in parts])
    return {style: count(texts) + images * IMAGE_CHARS // 4 for style, count in _counters().items()}


def _n(value: int) -> str:
    return f"{value:,}"


def _spread(counts: Mapping[str, int]) -> str:
    low, high = min(counts.values()), max(counts.values())
    return _n(low) if low == high else f"{_n(low)} to {_n(high)}"


def policy_band(grown: JSON, target: ProviderModel) -> Band:
    """The band of the estimate before the request for ``grown`` (the transcript with the follow-up)."""
    anchor = find_anchor(grown)
    if anchor is not None:
        return _anchored(grown, target, anchor.index, anchor.tokens)
    return _unanchored(grown, target)


def _largest(body: Mapping[str, object], parts: tuple[str, ...] = _PARTS) -> int:
    return max(style_counts(body, parts).values())


def _anchored(grown: JSON, target: ProviderModel, index: int, total: int) -> Band:
    usage = grown["messages"][index]["usage"]
    prompt = min(total, int(usage["input"] + usage["cacheRead"] + usage["cacheWrite"]) or total)
    whole = project(grown, target, share=True)
    follows = _largest(project(grown, target, share=True, since=index + 1)) + _largest(whole, _SETUP)
    high = total + 2 * follows + SLACK
    counts = style_counts(whole)
    why = (f"Anchored: /messages/{index} has valid usage ({_n(prompt)} prompt tokens, {_n(total)} in all) "
           f"that covers everything before it once (counting those turns again adds {_spread(counts)} in the "
           f"styles compared, {', '.join(counts)}; dropping the anchor leaves only that). What follows it "
           f"(the later turns and the follow-up, the system and tools counted again) is at most "
           f"{_n(follows)} tokens in the largest style; so the band is {_n(prompt)} (anchored on the prompt "
           f"alone) to {_n(total)} + 2 x {_n(follows)} + {SLACK} = {_n(high)}.")
    return Band(prompt, high, why)


def _unanchored(grown: JSON, target: ProviderModel) -> Band:
    whole = style_counts(project(grown, target, share=True))
    defects = _defects(grown, target, whole)
    sound = {style: count for style, count in whole.items() if not (style == CHARS4 and "cjk" in defects)}
    floor = min(sound.values())
    proven = {name: count for name, (_, count) in defects.items() if count <= APART * floor}
    high = 2 * max(sound.values()) + SLACK
    low = (max(proven.values()) + floor) // 2 + 1 if proven else floor // 2
    said = "".join(f"{what[0].upper()}{what[1:]} gives {_n(count)}"
                   f"{'' if name in proven else ' (too close to tell apart)'}. "
                   for name, (what, count) in defects.items())
    how = "halfway between, so it proves the rule" if proven else "half the least"
    why = (f"No usage anchors the estimate, so everything is counted: {_spread(sound)} tokens "
           f"({', '.join(sound)}). {said}The band is {_n(low)} ({how}) to {_n(high)} (twice the most, plus "
           f"{SLACK}).")
    return Band(low, high, why)


def _defects(grown: JSON, target: ProviderModel, whole: Mapping[str, int]) -> dict[str, tuple[str, int]]:
    """The count of each defect the transcript can show, by name: ``cjk``, ``search``."""
    found: dict[str, tuple[str, int]] = {}
    sound = [count for style, count in whole.items() if style != CHARS4]
    if whole[CHARS4] <= APART * min(sound):  # CJK text: four characters a token undercounts it
        found["cjk"] = ("counting CJK at four characters a token", whole[CHARS4])
    if _searched(grown):
        try:
            without = style_counts(project(_without_search(grown), target, share=True))
        except LocalRequestError:  # a turn of search blocks alone does not project empty: no such count
            return found
        kept = [count for style, count in without.items() if not (style == CHARS4 and "cjk" in found)]
        found["search"] = ("leaving the hosted search blocks out", max(kept))
    return found


def _search(block: object) -> bool:
    return isinstance(block, dict) and block.get("type") == "hostedSearch"


def _searched(grown: JSON) -> bool:
    return any(_search(block) for message in grown["messages"] if isinstance(message.get("content"), list)
               for block in message["content"])


def _without_search(grown: JSON) -> JSON:
    messages = [{**message, "content": [block for block in message["content"] if not _search(block)]}
                if isinstance(message.get("content"), list) else message for message in grown["messages"]]
    return {**grown, "messages": messages}
