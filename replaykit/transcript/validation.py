"""Restoring a stored transcript: :func:`restore` validates it against its JSON Schema.

:func:`restore` validates a stored transcript against ``contracts/replaykit/transcript.schema.json`` and
raises :class:`~replaykit.errors.LocalRequestError` (phase ``validation``) with the JSON pointer and the
message index. Its messages show the type of a wrong value, never its content.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from replaykit import contracts
from replaykit.errors import LocalRequestError
from replaykit.jsondoc import JSON
from replaykit.pointer import json_pointer, resolve
from replaykit.transcript.model import CONTRACT, Transcript, _finite

if TYPE_CHECKING:
    import jsonschema  # type: ignore[import-untyped]

__all__ = ["restore", "schema"]


def schema() -> JSON:
    """The transcript's JSON Schema (``contracts/replaykit/transcript.schema.json``)."""
    return contracts.default().schema(CONTRACT)


@cache
def _validator() -> jsonschema.protocols.Validator:
    import jsonschema  # stock jsonschema words a failure: imported when a transcript fails

    cls = jsonschema.validators.validator_for(schema())
    validator: jsonschema.protocols.Validator = cls(schema())
    return validator


def restore(data: object, *, source: str = "<transcript>") -> Transcript:
    """Validate a stored transcript and return it unchanged (no migration: legacy blocks load as they are).

    The structure is checked with ``replaykit.contracts.validate("replaykit.transcript", data)`` (which also
    keeps ``systemHistory`` in time order), then every timestamp is checked to be finite; the first violation
    raises :class:`LocalRequestError` (phase ``validation``) naming ``source``, its JSON pointer, the index of
    the message at fault (None outside ``messages``) and the fix (the schema's description of the value).
    """
    violations = contracts.validate(CONTRACT, data)
    if violations:
        first = violations[0]
        errors = list(_validator().iter_errors(data))
        fix = _fix(errors, first.pointer)
        message = _safe_message(data, errors, first)
        raise LocalRequestError(f"{source}: {message}{'; ' + fix if fix else ''}", phase="validation",
                                pointer=first.pointer, message_index=_message_index(first.pointer))
    _check_timestamps(cast(JSON, data), source)
    return cast(Transcript, data)


def _message_index(pointer: str) -> int | None:
    parts = pointer.split("/")
    if len(parts) > 2 and parts[1] == "messages" and parts[2].isdigit():
        return int(parts[2])
    return None


_JSON_TYPES: dict[type, str] = {bool: "a boolean", int: "an integer", float: "a number", type(None): "null",
                                dict: "an object"}


def _describe(value: object) -> str:
    """``value`` by its JSON type (and length for strings and arrays), never its content."""
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return _JSON_TYPES.get(type(value), "a value")


def _safe_message(data: object, errors: list[object], violation: contracts.Violation) -> str:
    """What is wrong at the violation's pointer, with the schema's expectation and only the type of the value.

    The violation's own message may quote the offending value (user content, keys): it is not used, except
    for ``required``, whose message names the missing member from the schema, and the cross-field rules
    (``x-rules``), whose messages quote only numbers (timestamps) and say the fix.
    """
    if violation.keyword in ("required", "x-rules"):
        return violation.message
    value, expected = resolve(data, violation.pointer), _expected(errors, violation)
    got = _describe(value)
    if violation.keyword == "type" and expected is not _UNKNOWN:
        return f"expected {_types(expected)}, got {got}"
    if violation.keyword == "enum" and isinstance(expected, list):
        return f"got {got}, expected one of {', '.join(json.dumps(item) for item in expected)}"
    if violation.keyword == "const" and expected is not _UNKNOWN:
        return f"got {got}, expected {json.dumps(expected)}"
    return f"{got} breaks the schema's {violation.keyword!r} rule"


def _types(expected: object) -> str:
    return " or ".join(expected) if isinstance(expected, list) else str(expected)


_UNKNOWN = object()


def _expected(errors: list[Any], violation: contracts.Violation) -> object:
    """The schema's side of the violation (its ``type``, ``enum`` or ``const``), or ``_UNKNOWN``."""
    for error in errors:
        if error.validator == violation.keyword and json_pointer(error.absolute_path) == violation.pointer:
            return error.validator_value
    return _UNKNOWN


def _fix(errors: list[Any], pointer: str) -> str:
    """The schema's description of the value at ``pointer``: what a valid value looks like."""
    for error in errors:
        parts, where = list(error.absolute_path), error.schema if isinstance(error.schema, dict) else {}
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = next(name for name in error.validator_value if name not in error.instance)
            parts, where = [*parts, missing], _resolve(where.get("properties", {}).get(missing, {}))
        if json_pointer(parts) == pointer and isinstance(where.get("description"), str):
            return str(where["description"])
    return ""


def _resolve(subschema: JSON) -> JSON:
    ref = subschema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: JSON = schema()["$defs"][ref.removeprefix("#/$defs/")]
        return resolved
    return subschema


def _check_timestamps(data: JSON, source: str) -> None:
    for index, message in enumerate(data["messages"]):
        _check_finite(message["timestamp"], f"/messages/{index}/timestamp", index, source)
    for index, entry in enumerate(data.get("systemHistory", [])):
        _check_finite(entry["timestamp"], f"/systemHistory/{index}/timestamp", None, source)


def _check_finite(stamp: float, pointer: str, message_index: int | None, source: str) -> None:
    if not _finite(stamp):
        raise LocalRequestError(
            f"{source}: timestamp {_shown(stamp)} is not a finite number; store milliseconds since the epoch",
            phase="validation", pointer=pointer, message_index=message_index)


def _shown(stamp: float) -> str:
    text = repr(stamp)
    return text if len(text) <= 40 else text[:40] + "…"
