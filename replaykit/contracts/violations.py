"""Violations: where (JSON pointer), which rule (keyword) and what is wrong; how an error of jsonschema-rs
(the engine, :func:`_from_rust`) or of stock jsonschema (the reference and the phrasing of rare keywords,
:func:`_explain`) becomes one, worded the same either way, relaxed to a warning where the profile in use says
so (:mod:`replaykit.contracts.profiles`). A message quotes a received value only as :func:`received` shows it:
a value long enough to be a key is never shown whole, key or not."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

import jsonschema_rs
from jsonschema import ValidationError  # type: ignore[import-untyped]
from jsonschema_rs import ValidationErrorKind as Kind

from replaykit.contracts.profiles import STRICT, Profile, _relaxes
from replaykit.contracts.rulebook import RuleError
from replaykit.contracts.rules import RULES
from replaykit.pointer import json_pointer
from replaykit.redact.shapes import glimpse, mask

__all__ = ["Violation", "received"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One contract violation: where (JSON pointer), which rule (keyword) and what is wrong.

    ``event`` is the index of the SSE event in a stream, ``part`` is ``request`` or ``response`` when the
    violation comes from :func:`check_interaction` (empty from :func:`validate`). ``severity`` is
    ``warning`` for a rule the profile in use relaxes (see :mod:`replaykit.contracts.profiles`), else
    ``error``. ``rule`` is the id of the ``x-rules`` rule that failed (a rulebook id such as
    ``anthropic.tool_use_answered``), empty for a schema keyword.
    """

    pointer: str
    keyword: str
    message: str
    event: int | None = None
    part: str = ""
    severity: Literal["error", "warning"] = "error"
    rule: str = ""

    def __str__(self) -> str:
        head = f"{self.part} " if self.part else ""
        at = f"event {self.event} " if self.event is not None else ""
        return f"{head}{at}{self.pointer or '/'} {self.message}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(value: object, limit: int = 60) -> str:
    """A schema's ``value`` quoted for a message: any secret in it masked first (never shown whole), then
    clipped."""
    text = json.dumps(value, ensure_ascii=False, default=repr) if not isinstance(value, str) else repr(value)
    return _clip(mask(text), limit)


def received(value: object) -> str:
    """A received ``value`` quoted for a message: a string as :func:`~replaykit.redact.shapes.glimpse` shows
    it (never whole when long enough to be a key, key or not), an object or an array by its size, a number,
    a boolean or null as JSON."""
    if isinstance(value, str):
        return glimpse(value)
    if isinstance(value, dict):
        return f"{{…}} ({len(value)} member{'s' if len(value) != 1 else ''})"
    if isinstance(value, list):
        return f"[…] ({len(value)} item{'s' if len(value) != 1 else ''})"
    return _short(value, 40)


def _unechoed(message: str, instance: object) -> str:
    """An engine's ``message`` with ``instance`` (as jsonschema or jsonschema-rs quote it) shown as
    :func:`received` shows it."""
    shown = received(instance)
    for form in sorted(_quoted_forms(instance), key=len, reverse=True):
        message = message.replace(form, shown)
    return message


def _quoted_forms(instance: object) -> set[str]:
    """How an engine's message may quote ``instance``: its repr, its JSON, and a long string as it is."""
    forms = {repr(instance)}
    with contextlib.suppress(TypeError, ValueError):  # not JSON (nan is): its repr only
        forms |= {json.dumps(instance, ensure_ascii=ascii, separators=separators)
                  for ascii in (True, False) for separators in ((", ", ": "), (",", ":"))}
    if isinstance(instance, str) and received(instance) != repr(instance):
        forms.add(instance)  # a long string, however an engine quotes it
    return forms


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
               type(None): "null"}
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _explain(error: ValidationError, chosen: Profile = STRICT) -> list[Violation]:
    """A jsonschema error as violations (one per missing or unexpected member), relaxed as ``chosen`` says."""
    return _relaxing(_violations(error), error.schema, chosen)


def _relaxing(found: list[Violation], schema: object, chosen: Profile) -> list[Violation]:
    """``found`` with the rules ``chosen`` relaxes at ``schema`` turned into warnings."""
    relaxed = _relaxes(schema, chosen)
    return [_relax(violation, chosen) if _relaxed(violation, relaxed) else violation for violation in found]


def _relaxed(violation: Violation, relaxed: Iterable[str]) -> bool:
    member = violation.pointer.rpartition("/")[2]
    return any(rule in (violation.keyword, f"{violation.keyword}:{member}") for rule in relaxed)


def _relax(violation: Violation, chosen: Profile) -> Violation:
    message = f"{violation.message} (OpenAI only: a warning under profile {chosen.name})"
    return replace(violation, message=message, severity="warning")


def _violations(error: ValidationError) -> list[Violation]:
    at, instance = list(error.absolute_path), error.instance
    keyword = _keyword(error)
    if keyword == "required":
        name = _QUOTED.match(error.message)
        return _required(at, name.group(1) if name else "")
    if keyword == "x-rules":  # the path is the failure's own, already under the object's
        return [_ruled([], str(error.validator_value), error, at)]
    if keyword in ("additionalProperties", "unevaluatedProperties"):
        return _closed(at, keyword, _QUOTED.findall(_unexpected_part(error.message)))
    return [Violation(json_pointer(at), keyword, _message(keyword, instance, error.validator_value,
                                                          error.message))]


def _required(at: list[object], member: str) -> list[Violation]:
    return [Violation(json_pointer([*at, member]), "required", f"{member!r} is required")]


def _closed(at: list[object], keyword: str, names: Iterable[str]) -> list[Violation]:
    fix = "is not allowed here (a closed object)"
    return [Violation(json_pointer([*at, name]), keyword, f"{name!r} {fix}") for name in names]


# jsonschema-rs words the engine's keywords itself; these it reports under another name
_RUST_NAMES = {"falseSchema": "false", "oneOfNotValid": "oneOf", "oneOfMultipleValid": "oneOf"}
_WORDED = frozenset({"type", "const", "enum", "pattern"})
Lookup = Callable[[str], Any]
Phrase = Callable[[str, Any], list[ValidationError]]


def _at(value: Any, path: Iterable[str | int]) -> object:
    for part in path:
        value = value[part]
    return value


def _misread(error: jsonschema_rs.ValidationError, value: object) -> bool:
    """Whether jsonschema-rs judged a nan or an infinity (which it reads as null), not the value itself."""
    found = _at(value, error.instance_path)
    return isinstance(found, float) and not math.isfinite(found)


def _from_rust(error: jsonschema_rs.ValidationError, value: Any, lookup: Lookup, phrase: Phrase,
               chosen: Profile = STRICT) -> list[Violation]:
    """A jsonschema-rs error on ``value`` as violations, worded as :func:`_explain` words jsonschema's.

    ``lookup(uri)`` is the schema at a URI; ``phrase(uri, instance)`` is stock jsonschema's errors of
    ``instance`` against the schema at ``uri`` (for the keywords not worded here). The instance is read
    from ``value`` itself: jsonschema-rs's copy turns nan into null.
    """
    at, kind = list(error.instance_path), error.kind
    if isinstance(kind, Kind.PropertyNames):  # jsonschema reports the name's own error at the object
        inner = kind.error
        return _worded(inner, at, inner.instance, lookup, phrase, chosen)
    return _worded(error, at, _at(value, at), lookup, phrase, chosen)


def _worded(error: jsonschema_rs.ValidationError, at: list[Any], instance: Any, lookup: Lookup,
            phrase: Phrase, chosen: Profile) -> list[Violation]:
    kind = error.kind
    keyword = _RUST_NAMES.get(kind.name, kind.name)
    if keyword == "false":
        return [Violation(json_pointer(at), keyword, "must not be present")]
    parent_uri = (error.absolute_keyword_location or "").rpartition("/")[0]
    schema = lookup(parent_uri)
    if isinstance(kind, Kind.Required):
        found = _required(at, str(kind.property))
    elif isinstance(kind, Kind.AdditionalProperties | Kind.UnevaluatedProperties):
        found = _closed(at, keyword, sorted(map(str, kind.unexpected)))
    elif keyword == "x-rules":  # the rules run again to say where and why
        found = [_ruled(at, rule, failure) for rule in schema[keyword] for failure in RULES[rule](instance)]
    elif keyword in _WORDED:
        found = [Violation(json_pointer(at), keyword, _message(keyword, instance, schema[keyword], ""))]
    else:
        return _phrased(at, keyword, phrase(parent_uri, instance), _unechoed(error.message, instance), chosen)
    return _relaxing(found, schema, chosen)


def _ruled(at: list[object], rule: str, failure: ValidationError,
           where: list[object] | None = None) -> Violation:
    """A failure of the ``x-rules`` rule ``rule`` on the object at ``at`` (placed at ``where`` when given); a
    rulebook rule's message starts with its id."""
    text = f"{rule}: {failure.message}" if isinstance(failure, RuleError) else failure.message
    place = where if where is not None else [*at, *failure.path]
    return Violation(json_pointer(place), "x-rules", _message("x-rules", None, None, text), rule=rule)


def _phrased(at: list[object], keyword: str, errors: list[ValidationError], fallback: str,
             chosen: Profile) -> list[Violation]:
    """Stock jsonschema's wording of the ``keyword`` errors at the instance's own place, under ``at``."""
    prefix = json_pointer(at)
    found = [replace(violation, pointer=prefix + violation.pointer)
             for error in errors if not error.path and _keyword(error) == keyword
             for violation in _explain(error, chosen)]
    return found or [Violation(prefix, keyword, _clip(mask(fallback), 200))]


def _keyword(error: ValidationError) -> str:
    """The keyword of a jsonschema error (a false schema's has none: ``false``)."""
    return "false" if error.validator is None else str(error.validator)


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


def _message(keyword: str, instance: object, expected: Any, message: str) -> str:
    """The wording of a ``keyword`` violation by ``instance`` (``expected``: the keyword's value in the
    schema; ``message``: the engine's own, for keywords not worded here)."""
    if keyword in ("false", "None"):
        return "must not be present"
    if keyword == "type":
        got = _JSON_TYPES.get(type(instance), "value")
        return f"expected {_short(expected)}, got {got} {received(instance)}"
    if keyword == "const":
        return f"{received(instance)} must be {_short(expected)}"
    if keyword == "enum":
        shown = expected if len(expected) <= 12 else [*expected[:12], "…"]
        return f"{received(instance)} is not one of {', '.join(map(str, shown))}"
    if keyword == "pattern":
        return f"{received(instance)} does not match {expected!r}"
    return _clip(mask(_unechoed(str(message), instance)), 200)
