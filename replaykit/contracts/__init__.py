"""Wire-format contracts: JSON Schema (draft 2020-12) files in ``contracts/``, checked offline.

Every ``*.schema.json`` under ``contracts/`` is loaded into one local registry keyed by its ``$id``; nothing
is ever fetched (:mod:`~replaykit.contracts.registry`). :func:`validate` returns :class:`Violation` s (JSON
pointer, keyword, message; :mod:`~replaykit.contracts.violations`).

Contract kinds (``validate(kind, value)``)::

    anthropic.request                Messages request body (messages and content blocks closed)
    anthropic.response               a successful non-streaming Messages response
    anthropic.stream_event           the JSON data of one Messages SSE event
    anthropic.error                  the HTTP error envelope {type: error, error: {type, message}}
    anthropic.count_tokens_request   POST /v1/messages/count_tokens body
    anthropic.count_tokens_response  its response {input_tokens}
    anthropic.content_block          one response content block
    anthropic.citation               one text citation
    anthropic.usage                  a usage object
    anthropic.tool                   one tool definition (web search / web fetch closed)
    openai.request                   Responses request body (input items closed)
    openai.response                  a Response object
    openai.stream_event              the JSON data of one Responses SSE event
    openai.error                     the HTTP error envelope {error: {message, type, param, code}}
    openai.input_item                one item of ``input``
    openai.output_item               one item of ``output``
    openai.usage                     a Response usage object
    openai.tool                      one tool definition
    cloudflare.request               Web Search REST request body (closed)
    cloudflare.binding_options       the Worker binding's options (closed)
    cloudflare.response              {items, metadata}
    cloudflare.error                 the AI Gateway error object or a v4 envelope
    replaykit.<stem>                 every other ``contracts/**/<stem>.schema.json`` (replaykit's own formats,
                                     e.g. replaykit.transcript, replaykit.scenario, replaykit.journal-entry)


Azure OpenAI shares the ``openai.*`` shapes. The parts: :mod:`~replaykit.contracts.validator` (jsonschema-rs
decides, stock jsonschema words the rare keywords and is the tests' reference),
:mod:`~replaykit.contracts.rules` (the cross-field rules of the ``x-rules`` keyword),
:mod:`~replaykit.contracts.rulebook` (the providers' request rules across fields, blocks and messages, each
with the provider's real error: :func:`first_violation`, :func:`rule_spec`, :func:`refusal`),
:mod:`~replaykit.contracts.profiles` (``strict`` and ``openai-compatible``),
:mod:`~replaykit.contracts.streams` (stream sequence rules) and :mod:`~replaykit.contracts.interaction_check`
(which contracts a recorded interaction is checked against, and its deliberate violations).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replaykit.contracts.interaction_check import (
        EXPECTED_VIOLATIONS,
        check_body,
        check_interaction,
        expected_keys,
        expected_violations,
        place,
    )
    from replaykit.contracts.profiles import (
        OPENAI_COMPATIBLE,
        PROFILES,
        STRICT,
        Profile,
        profile_of,
        resolve_profile,
    )
    from replaykit.contracts.registry import BASE_URI as BASE_URI  # the contracts' $id prefix, not in __all__
    from replaykit.contracts.registry import (
        PROVIDER_KINDS,
        Contracts,
        default,
        first_violation,
        kinds,
        rule_spec,
        validate,
    )
    from replaykit.contracts.rulebook import ProviderError, RuleSpec, refusal
    from replaykit.contracts.rules import RULES
    from replaykit.contracts.streams import check_events
    from replaykit.contracts.violations import Violation

# Each name -> its module, imported on first use: a profile (``STRICT``, ``resolve_profile``) costs no schema
# engine, so the reference target and ``replaykit.citations`` load jsonschema only when they validate.
_HOMES = {
    **dict.fromkeys(("EXPECTED_VIOLATIONS", "check_body", "check_interaction", "expected_keys",
                     "expected_violations", "place"), "interaction_check"),
    **dict.fromkeys(("OPENAI_COMPATIBLE", "PROFILES", "STRICT", "Profile", "profile_of", "resolve_profile"),
                    "profiles"),
    **dict.fromkeys(("BASE_URI", "PROVIDER_KINDS", "Contracts", "default", "first_violation", "kinds",
                     "rule_spec", "validate"), "registry"),
    **dict.fromkeys(("ProviderError", "RuleSpec", "refusal"), "rulebook"),
    "RULES": "rules",
    "check_events": "streams",
    "Violation": "violations",
}

__all__ = [
    "EXPECTED_VIOLATIONS",
    "OPENAI_COMPATIBLE",
    "PROFILES",
    "PROVIDER_KINDS",
    "RULES",
    "STRICT",
    "Contracts",
    "Profile",
    "ProviderError",
    "RuleSpec",
    "Violation",
    "check_body",
    "check_events",
    "check_interaction",
    "default",
    "expected_keys",
    "expected_violations",
    "first_violation",
    "kinds",
    "place",
    "profile_of",
    "refusal",
    "resolve_profile",
    "rule_spec",
    "validate",
]


if not TYPE_CHECKING:  # a type checker reads the imports above: a misspelt name stays an error

    def __getattr__(name: str) -> object:
        if name not in _HOMES:
            raise AttributeError(f"module 'replaykit.contracts' has no attribute {name!r}")
        return getattr(importlib.import_module(f"replaykit.contracts.{_HOMES[name]}"), name)
