"""Violations: where (JSON pointer), which rule (keyword) and what is wrong; how a jsonschema error becomes
one, relaxed to a warning where the profile in use says so (:mod:`replaykit.contracts.profiles`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from jsonschema import ValidationError  # type: ignore[import-untyped]

from replaykit.contracts.profiles import STRICT, Profile, _relaxes
from replaykit.pointer import json_pointer
from replaykit.redact.shapes import mask

__all__ = ["Violation"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One contract violation: where (JSON pointer), which rule (keyword) and what is wrong.

    ``event`` is the index of the SSE event in a stream, ``part`` is ``request`` or ``response`` when the
    violation comes from :func:`check_interaction` (empty from :func:`validate`). ``severity`` is
    ``warning`` for a rule the profile in use relaxes (see :mod:`replaykit.contracts.profiles`), else
    ``error``.
    """

    pointer: str
    keyword: str
    message: str
    event: int | None = None
    part: str = ""
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        head = f"{self.part} " if self.part else ""
        at = f"event {self.event} " if self.event is not None else ""
        return f"{head}{at}{self.pointer or '/'} {self.message}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(value: Any, limit: int = 60) -> str:
    """``value`` quoted for a message: any secret in it masked first (never shown whole), then clipped."""
    text = json.dumps(value, ensure_ascii=False, default=repr) if not isinstance(value, str) else repr(value)
    return _clip(mask(text), limit)


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
               type(None): "null"}
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _explain(error: ValidationError, chosen: Profile = STRICT) -> list[Violation]:
    """A jsonschema error as violations (one per missing or unexpected member), relaxed as ``chosen`` says."""
    found, relaxed = _violations(error), _relaxes(error.schema, chosen)
    return [_relax(violation, chosen) if _relaxed(violation, relaxed) else violation for violation in found]


def _relaxed(violation: Violation, relaxed: Iterable[str]) -> bool:
    member = violation.pointer.rpartition("/")[2]
    return any(rule in (violation.keyword, f"{violation.keyword}:{member}") for rule in relaxed)


def _relax(violation: Violation, chosen: Profile) -> Violation:
    message = f"{violation.message} (OpenAI only: a warning under profile {chosen.name})"
    return replace(violation, message=message, severity="warning")


def _violations(error: ValidationError) -> list[Violation]:
    at, keyword, instance = list(error.absolute_path), str(error.validator), error.instance
    if keyword == "required":
        name = _QUOTED.match(error.message)
        member = name.group(1) if name else ""
        return [Violation(json_pointer([*at, member]), keyword, f"{member!r} is required")]
    if keyword in ("additionalProperties", "unevaluatedProperties"):
        fix = "is not allowed here (a closed object)"
        names = _QUOTED.findall(_unexpected_part(error.message))
        return [Violation(json_pointer([*at, name]), keyword, f"{name!r} {fix}") for name in names]
    return [Violation(json_pointer(at), keyword, _message(error, keyword, instance))]


def _without_cascades(found: list[Violation]) -> list[Violation]:
    """Drop ``unevaluatedProperties`` reports that only echo another violation in the same object.

    When a branch of an object's schema fails, JSON Schema forgets what that branch evaluated, so every
    member of the object looks unevaluated. Those echoes are dropped while a real violation sits in the
    object; a truly unexpected member there is reported once the real violation is fixed.
    """
    real = [v.pointer for v in found if v.keyword != "unevaluatedProperties"]

    def echo(violation: Violation) -> bool:
        parent = violation.pointer.rpartition("/")[0]
        return violation.keyword == "unevaluatedProperties" and any(
            pointer == parent or pointer.startswith(parent + "/") for pointer in real)

    return [v for v in found if not echo(v)]


def _unexpected_part(message: str) -> str:
    """The part of a closed-object message that quotes the unexpected names.

    jsonschema says either "... ('a', 'b' were unexpected)" or, with ``patternProperties``,
    "'a', 'b' do not match any of the regexes: ...".
    """
    if message.endswith("unexpected)"):
        return message.rpartition("(")[2]
    return message.partition(" do")[0]


def _message(error: ValidationError, keyword: str, instance: Any) -> str:
    expected = error.validator_value
    if keyword in ("false", "None"):
        return "must not be present"
    if keyword == "type":
        got = _JSON_TYPES.get(type(instance), "value")
        return f"expected {_short(expected)}, got {got} {_short(instance)}"
    if keyword == "const":
        return f"{_short(instance)} must be {_short(expected)}"
    if keyword == "enum":
        shown = expected if len(expected) <= 12 else [*expected[:12], "…"]
        return f"{_short(instance)} is not one of {', '.join(map(str, shown))}"
    if keyword == "pattern":
        return f"{_short(instance)} does not match {expected!r}"
    return _clip(mask(str(error.message)), 200)
