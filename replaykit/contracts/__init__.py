"""Wire-format contracts: JSON Schema (draft 2020-12) files in ``contracts/``, checked offline.

Every ``*.schema.json`` under ``contracts/`` is loaded into one local registry keyed by its ``$id``; nothing
is ever fetched (:mod:`~replaykit.contracts.registry`). :func:`validate` (``validate(kind, value)``, kinds
such as ``anthropic.request``, ``openai.stream_event``, ``cloudflare.response``, ``replaykit.<stem>``)
returns :class:`Violation` s (JSON pointer, keyword, message). Its parts: validator, rules, rulebook,
profiles, streams and the interaction checks; the kinds and parts are in docs/architecture/contracts.md.
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
