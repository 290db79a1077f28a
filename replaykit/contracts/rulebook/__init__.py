"""The wire rules: what a provider refuses across fields, blocks and messages, with the provider's own answer.

The data (:mod:`~replaykit.contracts.rulebook.book`) lives in ``contracts/<provider>/request.rules.json``;
the checks, one short function per rule, in :mod:`~replaykit.contracts.rulebook.anthropic`,
:mod:`~replaykit.contracts.rulebook.openai` and :mod:`~replaykit.contracts.rulebook.cloudflare` (on
:mod:`~replaykit.contracts.rulebook.walk`). They run where the schemas run: the request contracts name them
in their ``x-rules`` keyword (:data:`replaykit.contracts.RULES`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from replaykit.contracts.rulebook.anthropic import ANTHROPIC_RULES
from replaykit.contracts.rulebook.book import RULEBOOK_GLOB, ProviderError, Rulebook, RuleSpec, read_rulebook
from replaykit.contracts.rulebook.cloudflare import CLOUDFLARE_RULES
from replaykit.contracts.rulebook.openai import OPENAI_RULES
from replaykit.contracts.rulebook.walk import RuleError

__all__ = ["RULEBOOK_GLOB", "WIRE_RULES", "ProviderError", "RuleError", "RuleSpec", "Rulebook",
           "read_rulebook", "refusal"]

WIRE_RULES: dict[str, Callable[[Mapping[str, object]], Iterator[RuleError]]] = {
    **ANTHROPIC_RULES, **OPENAI_RULES, **CLOUDFLARE_RULES}


def refusal(spec: RuleSpec, body: object) -> ProviderError:
    """The provider's answer to ``body`` (a request that breaks ``spec``), naming its first failure."""
    failures = WIRE_RULES[spec.id](body) if isinstance(body, dict) else iter(())
    first = next(failures, None)
    return spec.reply(first.params if first is not None else {})
