"""Cross-field rules: value rules that JSON Schema cannot state (e.g. ``start_index <= end_index``).

Each is a small named Python check (:data:`RULES`) that a schema object names in its ``x-rules`` list; they
run inside the same validation (the ``x-rules`` keyword) and report violations the same way. The providers'
request rules (ids such as ``anthropic.tool_use_answered``) come from :mod:`replaykit.contracts.rulebook`,
which holds each one's real error and source.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from typing import TypeGuard

from jsonschema import ValidationError  # type: ignore[import-untyped]

from replaykit.contracts.rulebook import WIRE_RULES

__all__ = ["RULES", "Rule"]


Rule = Callable[[Mapping[str, object]], Iterator[ValidationError]]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _span(low: str, high: str) -> Rule:
    """``instance[low] <= instance[high]`` when both are integers."""

    def check(instance: Mapping[str, object]) -> Iterator[ValidationError]:
        start, end = instance.get(low), instance.get(high)
        if _is_int(start) and _is_int(end) and start > end:
            message = f"{high} {end} is before {low} {start}; {low} must be <= {high}"
            yield ValidationError(message, path=[high])

    return check


def _total_tokens(instance: Mapping[str, object]) -> Iterator[ValidationError]:
    """OpenAI usage: ``total_tokens == input_tokens + output_tokens``."""
    given, made, total = (instance.get(name) for name in ("input_tokens", "output_tokens", "total_tokens"))
    if _is_int(given) and _is_int(made) and _is_int(total) and total != given + made:
        message = f"total_tokens {total} != input_tokens {given} + output_tokens {made}"
        yield ValidationError(message, path=["total_tokens"])


def _one_domain_list(instance: Mapping[str, object]) -> Iterator[ValidationError]:
    """Anthropic web search / fetch tools: never both ``allowed_domains`` and ``blocked_domains``."""
    if instance.get("allowed_domains") is not None and instance.get("blocked_domains") is not None:
        message = "allowed_domains and blocked_domains are both set (the API answers 400); keep one of them"
        yield ValidationError(message, path=["blocked_domains"])


def _min_max(instance: Mapping[str, object]) -> Iterator[ValidationError]:
    """A scenario's ``{min, max}`` range (a count, an estimate bound): ``min <= max`` when both are given."""
    low, high = instance.get("min"), instance.get("max")
    if _is_int(low) and _is_int(high) and low > high:
        yield ValidationError(f"max {high} is below min {low}; a {{min, max}} range needs min <= max",
                              path=["max"])


def _reserve_below_window(instance: Mapping[str, object]) -> Iterator[ValidationError]:
    """Scenario and target input: ``reserve < contextWindow`` (the budget is contextWindow - reserve)."""
    reserve, window = instance.get("reserve"), instance.get("contextWindow")
    if _is_int(reserve) and _is_int(window) and reserve >= window:
        message = (f"reserve {reserve} leaves no room in contextWindow {window}; "
                   "reserve must be below contextWindow")
        yield ValidationError(message, path=["reserve"])


def _finite(value: object) -> TypeGuard[int | float]:
    """A JSON number that is not nan or infinite: every int is (10**400 too, which a float cannot hold)."""
    return math.isfinite(value) if isinstance(value, float) else _is_int(value)


def _non_decreasing(member: str) -> Rule:
    """``instance[member]``, a list of objects, is in time order: no entry's ``timestamp`` is below the
    previous one's. Entries without a finite number there are skipped (the schema and the caller report them).
    """

    def check(instance: Mapping[str, object]) -> Iterator[ValidationError]:
        entries = instance.get(member)
        listed = entries if isinstance(entries, list) else []
        comparable = [(index, entry["timestamp"]) for index, entry in enumerate(listed)
                      if isinstance(entry, dict) and _finite(entry.get("timestamp"))]
        for (before, earlier), (index, stamp) in itertools.pairwise(comparable):
            if stamp < earlier:
                message = (f"{member} entry {index} (timestamp {stamp}) is earlier than entry {before} "
                           f"(timestamp {earlier}); list the {member} entries in time order")
                yield ValidationError(message, path=[member, index, "timestamp"])

    return check


RULES: dict[str, Rule] = {
    "index_span": _span("start_index", "end_index"),
    "char_span": _span("start_char_index", "end_char_index"),
    "page_span": _span("start_page_number", "end_page_number"),
    "block_span": _span("start_block_index", "end_block_index"),
    "total_tokens": _total_tokens,
    "one_domain_list": _one_domain_list,
    "min_max": _min_max,
    "reserve_below_window": _reserve_below_window,
    "non_decreasing_timestamps": _non_decreasing("systemHistory"),
    **WIRE_RULES,  # the providers' request rules, by rulebook id (contracts/<provider>/request.rules.json)
}


def _rules_keyword(validator: object, names: list[str], instance: object,
                   schema: object) -> Iterator[ValidationError]:
    if isinstance(instance, dict):
        for name in names:
            yield from RULES[name](instance)


def _rule_names(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        yield from node.get("x-rules", ()) if isinstance(node.get("x-rules"), list) else ()
        for value in node.values():
            yield from _rule_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _rule_names(value)
