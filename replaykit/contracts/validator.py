"""The validator the contracts run on: jsonschema's ``Draft202012Validator`` extended with
:func:`jsonschema.validators.extend`, not hand-written checks.

The extension adds the ``x-rules`` keyword (:mod:`replaykit.contracts.rules`) and keeps jsonschema's semantics
while caching what it would rebuild per instance: the child validator of each subschema, each ``$ref``
resolution, and a direct jump to the branch of a discriminated union (an ``allOf`` of ``if: {properties:
{type: {const: X}}} / then``), which is what makes stream events cheap to check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import referencing.exceptions
from jsonschema import Draft202012Validator, ValidationError, validators  # type: ignore[import-untyped]
from referencing.jsonschema import DRAFT202012

from replaykit.contracts.profiles import PROFILE_KEYWORD
from replaykit.contracts.rules import _rules_keyword

__all__: list[str] = []  # package-internal: the registry imports _Validator and _Unresolved by name

# Same semantics as jsonschema's own keywords, without rebuilding a validator at every step: the child
# validator of each (parent validator, subschema) pair and each $ref's resolution are computed once and
# cached. A discriminated ``allOf`` of ``{"if": {"properties": {P: {"const": V}}, "required": [P]}, "then":
# ...}`` jumps to the one branch that applies; ``if: {"type": T}`` is a type test; leaf property schemas
# (type, const, enum, bounds, pattern) run on the parent validator.

_Table = tuple[str, dict[str, int], int | None]
_TABLES: dict[int, tuple[object, _Table | None]] = {}
_LEAVES: dict[int, tuple[object, bool]] = {}
_CHILDREN: dict[tuple[int, int], tuple[object, object, Any]] = {}
_REFS: dict[int, tuple[object, Any]] = {}
_LEAF_KEYS = frozenset({"type", "const", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern",
                        "description", "title", PROFILE_KEYWORD})


def _child(validator: Any, schema: Any, resolver: Any = None) -> Any:
    """The validator for ``schema`` below ``validator`` (cached; ``resolver`` given for $ref targets)."""
    key = (id(validator), id(schema))
    cached = _CHILDREN.get(key)
    if cached is not None and cached[0] is validator and cached[1] is schema:
        return cached[2]
    if resolver is None and isinstance(schema, dict) and "$id" in schema:  # a nested resource: its own base
        resolver = validator._resolver.in_subresource(DRAFT202012.create_resource(schema))
    changes = {"schema": schema} if resolver is None else {"schema": schema, "_resolver": resolver}
    child = attrs.evolve(validator, **changes)
    _CHILDREN[key] = (validator, schema, child)
    return child


def _descend(validator: Any, instance: Any, schema: Any, path: str | int | None = None,
             schema_path: str | int | None = None, resolver: Any = None) -> Iterator[ValidationError]:
    if schema is True:
        return
    if schema is False:
        yield _absent(path)
        return
    for error in _child(validator, schema, resolver).iter_errors(instance):
        if path is not None:
            error.path.appendleft(path)
        if schema_path is not None:
            error.schema_path.appendleft(schema_path)
        yield error


def _absent(name: str | int | None) -> ValidationError:
    path = [] if name is None else [name]
    error = ValidationError(f"{name!r} must not be present", path=path, validator="false")
    error.validator_value = False
    return error


def _ref(validator: Any, ref: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    cached = _REFS.get(id(schema))
    if cached is None or cached[0] is not schema:
        try:
            resolved = validator._resolver.lookup(ref)  # what jsonschema's own $ref does, once per site
        except referencing.exceptions.Unresolvable as exc:
            raise _Unresolved(ref) from exc
        cached = _REFS[id(schema)] = (schema, resolved)
    resolved = cached[1]
    yield from _descend(validator, instance, resolved.contents, resolver=resolved.resolver)


class _Unresolved(Exception):
    """A $ref that resolves to nothing (turned into a ContractError by :meth:`Contracts.validate`)."""

    def __init__(self, ref: str) -> None:
        super().__init__(ref)
        self.ref = ref


def _branch(item: Any) -> tuple[str, str | None] | None:
    """``(property, value)`` of a discriminator branch, ``value`` None for the branch without it."""
    if not isinstance(item, dict) or set(item) != {"if", "then"} or not isinstance(item["if"], dict):
        return None
    cond = item["if"]
    props, required = cond.get("properties"), cond.get("required")
    if set(cond) == {"properties", "required"} and isinstance(props, dict) and len(props) == 1:
        (name, sub), = props.items()
        if required == [name] and isinstance(sub, dict) and set(sub) == {"const"}:
            return (name, sub["const"]) if isinstance(sub["const"], str) else None
    negated = cond.get("not")
    if set(cond) == {"not"} and isinstance(negated, dict) and set(negated) == {"required"}:
        names = negated["required"]
        if isinstance(names, list) and len(names) == 1:
            return str(names[0]), None
    return None


def _table(all_of: list[Any]) -> _Table | None:
    cached = _TABLES.get(id(all_of))
    if cached is not None and cached[0] is all_of:
        return cached[1]
    branches = [_branch(item) for item in all_of]
    result: _Table | None = None
    names = {b[0] for b in branches if b is not None}
    if all(b is not None for b in branches) and len(names) == 1:
        values = {b[1]: i for i, b in enumerate(branches) if b is not None and b[1] is not None}
        default = next((i for i, b in enumerate(branches) if b is not None and b[1] is None), None)
        complete = len(values) + (default is not None) == len(all_of)
        result = (names.pop(), values, default) if complete else None
    _TABLES[id(all_of)] = (all_of, result)
    return result


def _all_of(validator: Any, all_of: list[Any], instance: Any, schema: Any) -> Iterator[ValidationError]:
    table = _table(all_of)
    if table is None:
        for position, subschema in enumerate(all_of):
            yield from _descend(validator, instance, subschema, schema_path=position)
        return
    if not isinstance(instance, dict):
        return  # the union's own "type": "object" reports it, once
    name, values, default = table
    value = instance.get(name)
    index: int | None = default
    if name in instance:
        index = values.get(value) if isinstance(value, str) else None
    if index is not None:
        yield from _descend(validator, instance, all_of[index]["then"], schema_path=index)


def _if(validator: Any, if_schema: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if isinstance(if_schema, dict) and set(if_schema) == {"type"} and isinstance(if_schema["type"], str):
        matched = validator.is_type(instance, if_schema["type"])
    else:
        matched = next(_descend(validator, instance, if_schema), None) is None
    branch = "then" if matched else "else"
    if branch in schema:
        yield from _descend(validator, instance, schema[branch], schema_path=branch)


def _is_leaf(schema: Any) -> bool:
    cached = _LEAVES.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    leaf = isinstance(schema, dict) and set(schema) <= _LEAF_KEYS
    _LEAVES[id(schema)] = (schema, leaf)
    return leaf


def _leaf_errors(validator: Any, schema: dict[str, Any], value: Any, name: str) -> Iterator[ValidationError]:
    for keyword, expected in schema.items():
        check = validator.VALIDATORS.get(keyword)
        for error in (check(validator, expected, value, schema) or ()) if check else ():
            error.validator, error.validator_value = keyword, expected
            error.instance, error.schema = value, schema
            error.schema_path.appendleft(keyword)
            error.path.appendleft(name)
            error.schema_path.appendleft(name)
            yield error


def _properties(validator: Any, properties: dict[str, Any], instance: Any,
                schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for name, subschema in properties.items():
        if name not in instance:
            continue
        if _is_leaf(subschema):
            yield from _leaf_errors(validator, subschema, instance[name], name)
        else:
            yield from _descend(validator, instance[name], subschema, path=name, schema_path=name)


def _items(validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    prefix = len(schema.get("prefixItems", []))
    if items is False and len(instance) > prefix:
        yield ValidationError(f"expected at most {prefix} items, found {len(instance)}")
        return
    for index in range(prefix, len(instance)):
        yield from _descend(validator, instance[index], items, path=index)


_Validator = validators.extend(
    Draft202012Validator,
    {"x-rules": _rules_keyword, "allOf": _all_of, "if": _if, "properties": _properties, "items": _items,
     "$ref": _ref},
)
