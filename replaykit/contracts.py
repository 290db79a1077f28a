"""Wire-format contracts: JSON Schema (draft 2020-12) files in ``contracts/``, checked offline.

Every ``*.schema.json`` under ``contracts/`` is loaded into one local :mod:`referencing` registry keyed by its
``$id`` (``https://replaykit.dev/contracts/...``); a ``$ref`` to any other URI raises
:class:`~replaykit.errors.ContractError`: nothing is ever fetched. :func:`validate` returns
:class:`Violation` s (JSON pointer, keyword, message); compiled validators are cached per kind.

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

Validation is jsonschema's (``Draft202012Validator`` extended with :func:`jsonschema.validators.extend`)
over a :mod:`referencing` registry, not hand-written checks. The extension adds the ``x-rules`` keyword and
keeps jsonschema's semantics while caching what it would rebuild per instance: the child validator of each
subschema, each ``$ref`` resolution, and a direct jump to the branch of a discriminated union (an ``allOf``
of ``if: {properties: {type: {const: X}}} / then``), which is what makes stream events cheap to check.

Profiles: OpenAI-compatible providers (xAI, OpenRouter, DeepSeek and the like) speak the Responses shape with
their own ids and leaner citations. A contract stays strict by default (profile ``strict``); under profile
``openai-compatible`` the rules a schema marks as OpenAI-only (its ``x-profiles`` keyword: ``{"<profile>":
["pattern", "required:<member>", "additionalProperties"]}`` on the subschema holding the rule) are reported as
warnings, never as errors. :data:`PROFILES` lists the profiles; a cassette may name its own under
``replaykit: {profile: ...}`` (:func:`profile_of`).

Azure OpenAI shares the ``openai.*`` shapes. Cross-field value rules that JSON Schema cannot state (e.g.
``start_index <= end_index``) are small named Python checks (:data:`RULES`) that a schema object names in
its ``x-rules`` list; they run inside the same validation and report violations the same way.

Which contracts apply to which request is said by the route table (:mod:`replaykit.routes`);
:func:`check_interaction` checks one recorded interaction: the request, and the response body or every stream
event (with its ``event`` index) plus the stream's sequence rules; error statuses are checked against the
provider's error envelope (:func:`check_body` and :func:`check_events` are its parts); ``replaykit verify``
builds its contract check on it (:func:`replaykit.verify.check_contracts`). A cassette that is off-contract on
purpose lists its violations under ``replaykit: {x-expected-violations: [...]}`` (:func:`expected_violations`,
:func:`expected_keys`).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeGuard
from urllib.parse import urlsplit

import attrs
import referencing.exceptions
from jsonschema import Draft202012Validator, ValidationError, validators  # type: ignore[import-untyped]
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from replaykit.cassette import Cassette, Interaction, Response
from replaykit.errors import ContractError, UsageError, located
from replaykit.pointer import json_pointer
from replaykit.redact.shapes import mask
from replaykit.resources import data_dir
from replaykit.routes import Kinds, Route, known
from replaykit.sse import Event

__all__ = [
    "EXPECTED_VIOLATIONS",
    "OPENAI_COMPATIBLE",
    "PROFILES",
    "PROVIDER_KINDS",
    "RULES",
    "STRICT",
    "Contracts",
    "Profile",
    "Violation",
    "check_body",
    "check_events",
    "check_interaction",
    "default",
    "expected_keys",
    "expected_violations",
    "kinds",
    "place",
    "profile_of",
    "resolve_profile",
    "validate",
]

BASE_URI = "https://replaykit.dev/contracts/"
EXPECTED_VIOLATIONS = "x-expected-violations"  # cassette metadata: deliberate contract violations

PROVIDER_KINDS: dict[str, str] = {
    "anthropic.request": "anthropic/request.schema.json",
    "anthropic.response": "anthropic/message.schema.json",
    "anthropic.stream_event": "anthropic/stream-event.schema.json",
    "anthropic.error": "anthropic/error.schema.json",
    "anthropic.count_tokens_request": "anthropic/count-tokens.schema.json#/$defs/request",
    "anthropic.count_tokens_response": "anthropic/count-tokens.schema.json#/$defs/response",
    "anthropic.content_block": "anthropic/content-blocks.schema.json",
    "anthropic.citation": "anthropic/citations.schema.json",
    "anthropic.usage": "anthropic/usage.schema.json",
    "anthropic.tool": "anthropic/tools.schema.json",
    "openai.request": "openai/request.schema.json",
    "openai.response": "openai/response.schema.json",
    "openai.stream_event": "openai/stream-event.schema.json",
    "openai.error": "openai/error.schema.json",
    "openai.input_item": "openai/input-items.schema.json",
    "openai.output_item": "openai/output-items.schema.json",
    "openai.usage": "openai/usage.schema.json",
    "openai.tool": "openai/tools.schema.json",
    "cloudflare.request": "cloudflare/request.schema.json",
    "cloudflare.binding_options": "cloudflare/binding-options.schema.json",
    "cloudflare.response": "cloudflare/response.schema.json",
    "cloudflare.error": "cloudflare/error.schema.json",
}
_PROVIDER_DIRS = ("anthropic", "openai", "cloudflare")


# ---------------------------------------------------------------- profiles

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


# ---------------------------------------------------------------- violations


@dataclass(frozen=True, slots=True)
class Violation:
    """One contract violation: where (JSON pointer), which rule (keyword) and what is wrong.

    ``event`` is the index of the SSE event in a stream, ``part`` is ``request`` or ``response`` when the
    violation comes from :func:`check_interaction` (empty from :func:`validate`). ``severity`` is
    ``warning`` for a rule the profile in use relaxes (see the module doc), else ``error``.
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
    found = _violations(error)
    marks = error.schema.get(PROFILE_KEYWORD) if isinstance(error.schema, dict) else None
    relaxed = marks.get(chosen.name, ()) if isinstance(marks, dict) else ()
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


# ---------------------------------------------------------------- cross-field rules


Rule = Callable[[Mapping[str, Any]], Iterator[ValidationError]]


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _span(low: str, high: str) -> Rule:
    """``instance[low] <= instance[high]`` when both are integers."""

    def check(instance: Mapping[str, Any]) -> Iterator[ValidationError]:
        start, end = instance.get(low), instance.get(high)
        if _is_int(start) and _is_int(end) and start > end:
            message = f"{high} {end} is before {low} {start}; {low} must be <= {high}"
            yield ValidationError(message, path=[high])

    return check


def _total_tokens(instance: Mapping[str, Any]) -> Iterator[ValidationError]:
    """OpenAI usage: ``total_tokens == input_tokens + output_tokens``."""
    given, made, total = (instance.get(name) for name in ("input_tokens", "output_tokens", "total_tokens"))
    if _is_int(given) and _is_int(made) and _is_int(total) and total != given + made:
        message = f"total_tokens {total} != input_tokens {given} + output_tokens {made}"
        yield ValidationError(message, path=["total_tokens"])


def _one_domain_list(instance: Mapping[str, Any]) -> Iterator[ValidationError]:
    """Anthropic web search / fetch tools: never both ``allowed_domains`` and ``blocked_domains``."""
    if instance.get("allowed_domains") is not None and instance.get("blocked_domains") is not None:
        message = "allowed_domains and blocked_domains are both set (the API answers 400); keep one of them"
        yield ValidationError(message, path=["blocked_domains"])


def _min_max(instance: Mapping[str, Any]) -> Iterator[ValidationError]:
    """A scenario's ``{min, max}`` range (a count, an estimate bound): ``min <= max`` when both are given."""
    low, high = instance.get("min"), instance.get("max")
    if _is_int(low) and _is_int(high) and low > high:
        yield ValidationError(f"max {high} is below min {low}; a {{min, max}} range needs min <= max",
                              path=["max"])


def _reserve_below_window(instance: Mapping[str, Any]) -> Iterator[ValidationError]:
    """Scenario and target input: ``reserve < contextWindow`` (the budget is contextWindow - reserve)."""
    reserve, window = instance.get("reserve"), instance.get("contextWindow")
    if _is_int(reserve) and _is_int(window) and reserve >= window:
        message = (f"reserve {reserve} leaves no room in contextWindow {window}; "
                   "reserve must be below contextWindow")
        yield ValidationError(message, path=["reserve"])


def _finite(value: Any) -> TypeGuard[int | float]:
    """A JSON number that is not nan or infinite: every int is (10**400 too, which a float cannot hold)."""
    return math.isfinite(value) if isinstance(value, float) else _is_int(value)


def _non_decreasing(member: str) -> Rule:
    """``instance[member]``, a list of objects, is in time order: no entry's ``timestamp`` is below the
    previous one's. Entries without a finite number there are skipped (the schema and the caller report them).
    """

    def check(instance: Mapping[str, Any]) -> Iterator[ValidationError]:
        entries = instance.get(member)
        listed = entries if isinstance(entries, list) else []
        comparable = [(index, entry["timestamp"]) for index, entry in enumerate(listed)
                      if isinstance(entry, dict) and _finite(entry.get("timestamp"))]
        for (before, earlier), (index, stamp) in itertools.pairwise(comparable):
            if stamp < earlier:
                message = (f"{member} entry {index} (timestamp {stamp}) is earlier than entry {before} "
                           f"(timestamp {earlier}); list the {member} entries in time order")
                yield ValidationError(message, path=[member, index, "timestamp"])

    return check


RULES: dict[str, Rule] = {
    "index_span": _span("start_index", "end_index"),
    "char_span": _span("start_char_index", "end_char_index"),
    "page_span": _span("start_page_number", "end_page_number"),
    "block_span": _span("start_block_index", "end_block_index"),
    "total_tokens": _total_tokens,
    "one_domain_list": _one_domain_list,
    "min_max": _min_max,
    "reserve_below_window": _reserve_below_window,
    "non_decreasing_timestamps": _non_decreasing("systemHistory"),
}


def _rules_keyword(validator: Any, names: list[str], instance: Any, schema: Any) -> Iterator[ValidationError]:
    if isinstance(instance, dict):
        for name in names:
            yield from RULES[name](instance)


# ---------------------------------------------------------------- fast paths over stock keywords
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


# ---------------------------------------------------------------- the registry


def _read(path: Path) -> dict[str, Any]:
    try:
        contents = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ContractError(located(path, None, f"cannot read: {exc.strerror}")) from exc
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise ContractError(located(path, line, f"not valid JSON: {exc}", "fix the JSON syntax")) from exc
    if not isinstance(contents, dict) or not isinstance(contents.get("$id"), str):
        raise ContractError(located(path, "/$id", "a contract needs a string $id",
                                    f'add "$id": "{BASE_URI}<folder>/<name>.schema.json"'))
    return contents


def _refuse(uri: str) -> Resource[Any]:
    raise ContractError(f"{uri}: not a replaykit contract and never fetched; "
                        "refer to a $id of a file under contracts/")


def _rule_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        yield from node.get("x-rules", ()) if isinstance(node.get("x-rules"), list) else ()
        for value in node.values():
            yield from _rule_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _rule_names(value)


def _profile_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        marks = node.get(PROFILE_KEYWORD)
        yield from marks if isinstance(marks, dict) else ()
        for value in node.values():
            yield from _profile_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _profile_names(value)


def _kind_of(root: Path, path: Path) -> str:
    relative = path.relative_to(root)
    stem = path.name.removesuffix(".schema.json")
    return f"replaykit.{stem}" if relative.parts[0] not in _PROVIDER_DIRS else ""


class Contracts:
    """The contracts of one ``contracts/`` folder (the bundled one by default), loaded on first use."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else data_dir("contracts")
        self._files: dict[str, Path] | None = None
        self._registry: Registry[Any] | None = None
        self._kinds: dict[str, str] = {}
        self._validators: dict[str, Any] = {}

    def _load(self) -> Registry[Any]:
        if self._registry is not None:
            return self._registry
        files: dict[str, Path] = {}
        resources: list[tuple[str, Resource[Any]]] = []
        for path in sorted(self.root.rglob("*.schema.json")):
            contents = _read(path)
            uri = contents["$id"]
            if uri in files:
                raise ContractError(located(path, "/$id", f"$id {uri} is also used by {files[uri]}",
                                            "give every contract its own $id"))
            self._check_rules(path, contents)
            files[uri] = path
            resources.append((uri, DRAFT202012.create_resource(contents)))
            if kind := _kind_of(self.root, path):
                self._kinds[kind] = uri
        self._kinds.update({kind: BASE_URI + target for kind, target in PROVIDER_KINDS.items()})
        self._files = files
        self._registry = Registry(retrieve=_refuse).with_resources(resources)  # type: ignore[call-arg]
        return self._registry

    @staticmethod
    def _check_rules(path: Path, contents: dict[str, Any]) -> None:
        for name in _rule_names(contents):
            if name not in RULES:
                raise ContractError(located(path, "x-rules", f"unknown rule {name!r}",
                                            f"use one of {', '.join(sorted(RULES))}"))
        for name in _profile_names(contents):
            if name not in PROFILES:
                raise ContractError(located(path, PROFILE_KEYWORD, f"unknown profile {name!r}",
                                            f"use one of {', '.join(PROFILES)}"))

    def kinds(self) -> dict[str, str]:
        """Every contract kind and the URI of its schema."""
        self._load()
        return dict(sorted(self._kinds.items()))

    def rule_names(self, kind: str) -> list[str]:
        """The cross-field rules (:data:`RULES`) the file of ``kind`` names."""
        return sorted(set(_rule_names(self.lookup(self._resolve(kind)[0]))))

    def schema(self, kind: str) -> dict[str, Any]:
        """The schema of ``kind`` (a whole file or a ``$defs`` entry of one)."""
        return self._resolve(kind)[1]

    def file(self, kind: str) -> Path:
        """The file that holds the schema of ``kind``."""
        self._load()
        assert self._files is not None
        return self._files[self._resolve(kind)[0]]

    def _resolve(self, kind: str) -> tuple[str, dict[str, Any]]:
        self._load()
        uri = self._kinds.get(kind)
        if uri is None:
            raise ContractError(f"unknown contract kind {kind!r}; known kinds: {', '.join(self.kinds())}")
        return uri.partition("#")[0], self.lookup(uri)

    def lookup(self, uri: str) -> dict[str, Any]:
        """The schema at ``uri``: a contract's ``$id``, optionally with a ``#/json/pointer`` fragment."""
        registry = self._load()
        base, _, fragment = uri.partition("#")
        try:
            resource = registry.get_or_retrieve(base).value
            found = resource.pointer(fragment, registry.resolver(base)).contents if fragment else \
                resource.contents
        except (referencing.exceptions.Unresolvable, LookupError, ContractError) as exc:
            raise ContractError(f"{uri}: no such contract or $defs entry under {self.root}; "
                                "check the URI against the files' $id") from exc
        if not isinstance(found, dict):
            raise ContractError(f"{uri}: not a schema object")
        return found

    def validator(self, kind: str) -> Any:
        """The compiled (cached) validator of ``kind``."""
        cached = self._validators.get(kind)
        if cached is None:
            base, contents = self._resolve(kind)
            registry = self._load()
            whole = registry.get_or_retrieve(base).value.contents
            root = _Validator(whole, registry=registry)
            # evolve() would pick the stock class for a schema with "$schema": keep ours for whole files
            cached = self._validators[kind] = root if contents is whole else root.evolve(schema=contents)
        return cached

    def validate(self, kind: str, value: Any, profile: Profile = STRICT) -> list[Violation]:
        """Every violation of ``value`` against contract ``kind`` (empty when it conforms); the rules
        ``profile`` relaxes come as warnings."""
        validator = self.validator(kind)
        try:
            found = [v for error in validator.iter_errors(value) for v in _explain(error, profile)]
        except (referencing.exceptions.Unresolvable, _Unresolved) as exc:
            raise ContractError(self._unresolvable(kind, exc)) from exc
        return _without_cascades(list(dict.fromkeys(found)))

    def _unresolvable(self, kind: str, exc: BaseException) -> str:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ContractError):
            cause = cause.__cause__ or cause.__context__
        ref = getattr(exc, "ref", "?")
        why = str(cause) if cause is not None else f"$ref {ref} resolves to nothing"
        return located(self.file(kind), ref, f"contract {kind!r} cannot be used: {why}",
                       "fix the $ref to point at a contract's $id and $defs entry")


_DEFAULT: list[Contracts] = []


def default() -> Contracts:
    """The bundled contracts (loaded once)."""
    if not _DEFAULT:
        _DEFAULT.append(Contracts())
    return _DEFAULT[0]


def kinds() -> dict[str, str]:
    """Every contract kind of the bundled contracts and its schema URI."""
    return default().kinds()


def validate(kind: str, value: Any, profile: str | Profile | None = None) -> list[Violation]:
    """Violations of ``value`` against the bundled contract ``kind`` (under ``profile``, default strict)."""
    return default().validate(kind, value, resolve_profile(profile))


# ---------------------------------------------------------------- streams


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``{}`` (the schema reports the wrong type on its own)."""
    return value if isinstance(value, dict) else {}


class _AnthropicStream:
    """Sequence rules of a Messages stream: message_start first, blocks paired by index, message_stop last."""

    _DELTAS: ClassVar[dict[str, set[str]]] = {
        "text": {"text_delta", "citations_delta"}, "thinking": {"thinking_delta", "signature_delta"},
        "tool_use": {"input_json_delta"}, "server_tool_use": {"input_json_delta"}}

    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.open: dict[int, str] = {}
        self.started = 0
        self.first = True
        self.ended: str | None = None

    def flag(self, index: int, pointer: str, message: str) -> None:
        self.found.append(Violation(pointer, "sequence", message, event=index))

    def feed(self, index: int, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if self.first and kind != "message_start":
            self.flag(index, "/type", f"the stream starts with {kind!r}; message_start must come first")
        elif not self.first and kind == "message_start":
            self.flag(index, "/type", "a second message_start; a stream carries one message")
        self.first = False
        if self.ended is not None and kind != "ping":
            self.flag(index, "/type", f"{kind!r} after {self.ended}; {self.ended} ends the stream")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None and isinstance(data.get("index", 0), int):
            handler(index, data)

    def _on_content_block_start(self, index: int, data: dict[str, Any]) -> None:
        block, block_type = data.get("index", 0), _object(data.get("content_block")).get("type", "")
        if block in self.open or block != self.started:
            expected = f"the next block is {self.started}"
            self.flag(index, "/index", f"content_block_start for index {block}; {expected}")
        self.open[block] = str(block_type)
        self.started = max(self.started, block + 1)

    def _on_content_block_delta(self, index: int, data: dict[str, Any]) -> None:
        block = data.get("index", 0)
        if block not in self.open:
            self.flag(index, "/index", f"content_block_delta for block {block}, which is not open")
            return
        delta = _object(data.get("delta")).get("type")
        allowed = self._DELTAS.get(self.open[block])
        if allowed is not None and delta not in allowed:
            self.flag(index, "/delta/type", f"{delta!r} cannot extend a {self.open[block]} block")

    def _on_content_block_stop(self, index: int, data: dict[str, Any]) -> None:
        if self.open.pop(data.get("index", 0), None) is None:
            self.flag(index, "/index", f"content_block_stop for block {data.get('index')}, which is not open")

    def _on_message_stop(self, index: int, data: dict[str, Any]) -> None:
        if self.open:
            self.flag(index, "/type", f"message_stop while blocks {sorted(self.open)} are still open")
        self.ended = "message_stop"

    def _on_error(self, index: int, data: dict[str, Any]) -> None:
        self.ended = "an error event"

    def finish(self, last: int) -> list[Violation]:
        if self.ended is None and not self.first:
            self.flag(last, "", "the stream ends without message_stop (or an error event)")
        return self.found


_OPENAI_TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})


def _openai_sequence(events: list[tuple[int, dict[str, Any]]]) -> list[Violation]:
    """sequence_number strictly increasing; exactly one terminal event, and it is last."""
    found: list[Violation] = []
    previous: int | None = None
    terminal: tuple[int, str] | None = None
    for index, data in events:
        number = data.get("sequence_number")
        if _is_int(number):
            if previous is not None and number <= previous:
                found.append(Violation("/sequence_number", "sequence",
                                       f"{number} does not increase on the previous {previous}", event=index))
            previous = number
        if terminal is not None:
            found.append(Violation("/type", "sequence", f"{data.get('type')!r} after the terminal event "
                                   f"{terminal[1]!r} (event {terminal[0]})", event=index))
        if data.get("type") in _OPENAI_TERMINAL and terminal is None:
            terminal = (index, str(data.get("type")))
    if terminal is None and events:
        found.append(Violation("", "sequence", "the stream has no terminal event (response.completed, "
                               "response.failed, response.incomplete or error)", event=events[-1][0]))
    return found


def _sequence(api: str | None, events: list[tuple[int, dict[str, Any]]]) -> list[Violation]:
    if api == "anthropic-messages":
        stream = _AnthropicStream()
        for index, data in events:
            stream.feed(index, data)
        return stream.finish(events[-1][0] if events else 0)
    return _openai_sequence(events)


def check_events(route: Route, events: list[Event], contracts: Contracts | None = None,
                 profile: Profile = STRICT) -> list[Violation]:
    """Every event of a stream against the route's stream-event contract, then the provider's sequence
    rules (a route that never streams, or no contract covers, gets one ``stream`` violation)."""
    kind = route.contracts.stream_event if route.contracts else None
    if kind is None:
        return [Violation("", "stream", f"{mask(route.name)} does not stream")]
    chosen = contracts or default()
    found: list[Violation] = []
    parsed: list[tuple[int, dict[str, Any]]] = []
    for index, event in enumerate(events):
        if event.data is None:
            continue
        try:
            data = event.json()
        except ValueError:
            found.append(Violation("", "json", "data is not JSON", event=index))
            continue
        found += [replace(v, event=index) for v in chosen.validate(kind, data, profile)]
        if isinstance(data, dict):
            found += _event_name(index, event, data)
            parsed.append((index, data))
    return found + _sequence(route.api, parsed)


def _event_name(index: int, event: Event, data: dict[str, Any]) -> list[Violation]:
    if event.event is None or data.get("type") in (None, event.event):
        return []
    return [Violation("/type", "event", f"the SSE event name is {event.event!r} but the data's type is "
                      f"{data.get('type')!r}", event=index)]


# ---------------------------------------------------------------- interactions


def check_interaction(interaction: Interaction, contracts: Contracts | None = None,
                      profile: Profile = STRICT) -> list[Violation]:
    """The request, then the response body or every stream event, against the route's contracts."""
    chosen = contracts or default()
    request = interaction.request
    route = known(request.method, request.uri)
    if route is None or route.contracts is None:
        path = urlsplit(request.uri).path
        covers = f"no contract covers {request.method.upper()} {mask(path)}"
        return [Violation("", "route", covers, part="request")]
    body = request.json()
    kinds = route.contracts
    found = [replace(v, part="request") for v in check_body(kinds.request, body, "request", chosen, profile)]
    response = _check_response(chosen, route, kinds, interaction.response, _asks_stream(body), profile)
    return found + [replace(v, part="response") for v in response]


def check_body(kind: str, body: Any, what: str, contracts: Contracts | None = None,
               profile: Profile = STRICT) -> list[Violation]:
    """A parsed JSON body (None when it was empty or not JSON) against ``kind``; ``what`` names it."""
    if body is None:
        return [Violation("", "json", f"the {what} body is empty or not JSON")]
    return validate(kind, body, profile) if contracts is None else contracts.validate(kind, body, profile)


def _asks_stream(body: Any) -> bool:
    return isinstance(body, dict) and body.get("stream") is True


def _check_response(contracts: Contracts, route: Route, kinds: Kinds, response: Response, streamed: bool,
                    profile: Profile) -> list[Violation]:
    if response.status >= 400:
        return check_body(kinds.error, response.json(), f"HTTP {response.status} error", contracts, profile)
    if response.is_stream:
        found = [] if streamed else [Violation("", "stream", "an event stream answers a request without "
                                               "stream: true")]
        return found + check_events(route, response.events, contracts, profile)
    if streamed:
        return [Violation("", "stream", "the request asked for stream: true but the response is not "
                          "text/event-stream")]
    return check_body(kinds.response, response.json(), "response", contracts, profile)


def place(index: int, violation: Violation) -> str:
    """Where ``violation`` of interaction ``index`` is: ``interactions[i]`` or
    ``interactions[i]:events[j]``."""
    at = f"interactions[{index}]"
    return at if violation.event is None else f"{at}:events[{violation.event}]"


def expected_keys(index: int, violation: Violation) -> set[str]:
    """The ways an ``x-expected-violations`` entry may name ``violation`` of interaction ``index``.

    ``"<part> <pointer>"`` (any interaction) and ``"interactions[i] <part> <pointer>"`` (or
    ``"interactions[i]:events[j] <part> <pointer>"`` for a stream event); the pointer of the root is ``/``.
    """
    short = f"{violation.part} {violation.pointer or '/'}"
    return {short, f"{place(index, violation)} {short}"}


def expected_violations(cassette: Cassette) -> set[str]:
    """The ``x-expected-violations`` a cassette lists (deliberate contract violations of a fixture)."""
    listed = cassette.meta.extra.get(EXPECTED_VIOLATIONS) or []
    return {str(entry) for entry in listed} if isinstance(listed, list) else set()
