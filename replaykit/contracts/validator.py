"""The engines the contracts run on: ``jsonschema-rs`` decides, stock ``jsonschema`` phrases.

Every contract kind compiles once into a ``jsonschema_rs`` validator over one registry (:func:`compile_kind`),
replaykit's cross-field rules being its ``x-rules`` keyword; the rules run again on a failing object to say
where and why (:mod:`replaykit.contracts.violations`). :data:`Reference` is stock jsonschema extended with the
same keyword: it words the rare keywords and is the tests' reference. Called by :mod:`replaykit.contracts`.
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
