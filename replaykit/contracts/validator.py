"""The engines the contracts run on: ``jsonschema-rs`` decides, stock ``jsonschema`` phrases.

Every contract kind compiles once into a ``jsonschema_rs.Draft202012Validator`` over one ``jsonschema_rs``
registry of the contract files (:func:`compile_kind`); replaykit's cross-field rules
(:mod:`replaykit.contracts.rules`) are its ``x-rules`` custom keyword, which only says whether a rule fails:
the rules run again on the failing object to say where and why (:mod:`replaykit.contracts.violations`). A
conforming value (the common case) costs one call into Rust.

:data:`Reference` is stock jsonschema's ``Draft202012Validator`` extended with the same ``x-rules`` keyword
and a ``properties`` that places a forbidden member at the member (public
:func:`jsonschema.validators.extend`): it phrases the rare keywords the violations do not word
themselves (``minimum``, ``minItems``, ``anyOf``...) exactly as jsonschema does, and it is the reference the
tests compare the engine with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, ValidationError, validators  # type: ignore[import-untyped]

from replaykit.contracts.rules import RULES
from replaykit.jsondoc import JSON

__all__: list[str] = []  # package-internal: the registry and the violations import these by name


def _rules_keyword(validator: object, names: list[str], instance: object,
                   schema: Any) -> Iterator[ValidationError]:
    """``x-rules`` for stock jsonschema: every failure of the rules ``names``, located by the rule."""
    if isinstance(instance, dict):
        for name in names:
            for error in RULES[name](instance):
                error.validator_value = name  # kept by jsonschema (it fills only unset fields): the rule's id
                yield error


def _properties(validator: Any, properties: JSON, instance: object,
                schema: object) -> Iterator[ValidationError]:
    """jsonschema's ``properties``, except that a member a ``false`` schema forbids is placed at the member:
    jsonschema's ``descend`` drops the path of a false schema's error (it would point at the object)."""
    if not isinstance(instance, dict):
        return
    for name, subschema in properties.items():
        if name not in instance:
            continue
        if subschema is False:
            yield ValidationError(f"False schema does not allow {instance[name]!r}", validator=None,
                                  validator_value=None, instance=instance[name], schema=False, path=[name])
        else:
            yield from validator.descend(instance[name], subschema, path=name, schema_path=name)


Reference = validators.extend(Draft202012Validator, {"x-rules": _rules_keyword, "properties": _properties})


class RulesKeyword:
    """``x-rules`` for jsonschema-rs (its custom-keyword protocol): fails when any named rule fails."""

    def __init__(self, parent_schema: Mapping[str, object], value: list[str],
                 schema_path: list[str | int]) -> None:
        self.rules = tuple(RULES[name] for name in value)  # names are checked when the contracts load

    def validate(self, instance: Any) -> None:
        """Raise when a rule fails on ``instance`` (the violations run the rules again to place each one)."""
        if isinstance(instance, dict):
            for rule in self.rules:
                for error in rule(instance):
                    raise ValueError(error.message)


def rust_registry(resources: list[tuple[str, JSON]], retrieve: Any) -> jsonschema_rs.Registry:
    """One jsonschema-rs registry of the contract files (``(uri, contents)``); ``retrieve`` refuses others."""
    return jsonschema_rs.Registry(resources, retriever=retrieve)


def compile_kind(uri: str, registry: jsonschema_rs.Registry) -> jsonschema_rs.Validator:
    """The compiled validator of the schema at ``uri`` (a contract's ``$id``, maybe with a fragment)."""
    return jsonschema_rs.Draft202012Validator({"$ref": uri}, registry=registry, validate_formats=False,
                                              keywords={"x-rules": RulesKeyword})
