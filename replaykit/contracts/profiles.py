"""Profiles: how strictly provider traffic is judged.

OpenAI-compatible providers (xAI, OpenRouter, DeepSeek and the like) speak the Responses shape with their own
ids and leaner citations. A contract stays strict by default (profile ``strict``); under profile
``openai-compatible`` the rules a schema marks as OpenAI-only (its ``x-profiles`` keyword: ``{"<profile>":
["pattern", "required:<member>", "additionalProperties"]}`` on the subschema holding the rule) are reported as
warnings, never as errors. :data:`PROFILES` lists the profiles; a cassette may name its own under
``replaykit: {profile: ...}`` (:func:`profile_of`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from replaykit.cassette import Cassette
from replaykit.errors import ContractError, UsageError, located

__all__ = [
    "OPENAI_COMPATIBLE",
    "PROFILES",
    "PROFILE_KEYWORD",
    "STRICT",
    "Profile",
    "profile_of",
    "resolve_profile",
]

PROFILE_KEYWORD = "x-profiles"  # schema keyword: {profile: [rule ids it relaxes here]}


@dataclass(frozen=True, slots=True)
class Profile:
    """How strictly provider traffic is judged: ``name`` (the key of the schemas' ``x-profiles`` marks) and
    whether an OpenAI ``url_citation`` may come without its span (``spans_optional``)."""

    name: str
    spans_optional: bool = False


STRICT = Profile("strict")
OPENAI_COMPATIBLE = Profile("openai-compatible", spans_optional=True)
PROFILES: dict[str, Profile] = {each.name: each for each in (STRICT, OPENAI_COMPATIBLE)}


def resolve_profile(name: str | Profile | None) -> Profile:
    """The profile called ``name`` (None: ``strict``); an unknown name is a UsageError."""
    if isinstance(name, Profile):
        return name
    found = PROFILES.get(name or STRICT.name)
    if found is None:
        raise UsageError(f"profile {name!r} is unknown; use one of {', '.join(PROFILES)}")
    return found


def profile_of(cassette: Cassette, override: str | Profile | None = None) -> Profile:
    """``override`` when given, else the cassette's own ``replaykit: {profile: ...}``, else ``strict``."""
    if override is not None:
        return resolve_profile(override)
    named = cassette.meta.extra.get("profile")
    if named is not None and named not in PROFILES:
        where = cassette.path or "<cassette>"
        raise ContractError(located(where, "replaykit.profile", f"profile {named!r} is unknown",
                                    f"write one of {', '.join(PROFILES)}"))
    return resolve_profile(named)


def _relaxes(schema: object, chosen: Profile) -> Collection[str]:
    """The rule ids ``chosen`` relaxes at ``schema`` (its ``x-profiles`` marks): a keyword, or
    ``<keyword>:<member>``."""
    marks = schema.get(PROFILE_KEYWORD) if isinstance(schema, dict) else None
    relaxed: Collection[str] = marks.get(chosen.name, ()) if isinstance(marks, dict) else ()
    return relaxed


def _profile_names(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        marks = node.get(PROFILE_KEYWORD)
        yield from marks if isinstance(marks, dict) else ()
        for value in node.values():
            yield from _profile_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _profile_names(value)
