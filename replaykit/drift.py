"""SDK drift: compare the contracts with the installed SDKs' pydantic models (and request TypedDicts).

:data:`MAPPING` pairs SDK types with the contract's ``$defs`` entries; :func:`compare` walks the models and
reports each gap (``discriminator``, ``enum``, ``required``, ``closed``, ``unparsed``: blocking;
``contract-only``, ``sdk-required``, ``sdk-missing``: info) as a :class:`~replaykit.findings.Finding`, a
blocking gap ``explained`` by an ``x-drift-ignore`` entry; :func:`verdict` reads the verdict back. Called by
``replaykit drift`` and qualify; the gaps are tabled in docs/architecture/modules.md.
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urldefrag, urljoin

from replaykit.contracts import BASE_URI, Contracts, default
from replaykit.errors import UsageError
from replaykit.findings import Finding
from replaykit.jsondoc import JSON

__all__ = ["MAPPING", "SDKS", "Entry", "Verdict", "compare", "sdk_version", "verdict"]

Verdict = Literal["blocking", "info", "explained"]
SDKS = ("anthropic", "openai", "google-genai")
_DISTRIBUTIONS = {"google": "google-genai"}  # a module's top package -> its distribution, where they differ
_BLOCKING = {"discriminator", "enum", "required", "closed", "unparsed"}


@dataclass(frozen=True, slots=True)
class Entry:
    """One SDK type (``module:Name`` or ``module:Name.field`` for a field's annotation) and its contract."""

    sdk: str
    contract: str
    discriminator: str = "type"
    parsed: bool = False  # a union the SDK parses from responses: each member the provider sends must parse

    @property
    def package(self) -> str:
        """The SDK distribution the type comes from (``google.genai.types`` -> ``google-genai``)."""
        top = self.sdk.split(".", 1)[0]
        return _DISTRIBUTIONS.get(top, top)


def verdict(gap: Finding) -> Verdict:
    """The verdict of a gap :func:`compare` found: ``blocking``, ``explained`` or ``info``."""
    if gap.severity == "error":
        return "blocking"
    return "explained" if gap.note else "info"


_A, _O, _G = "anthropic.types", "openai.types.responses", "google.genai.types"
_GR = "gemini/response.schema.json#/$defs/"
_ACB = "anthropic/content-blocks.schema.json#/$defs/"
_OUT = "openai/output-items.schema.json#/$defs/"
_C = "openai.types.chat"
_CC, _CK = "openai/chat-completion.schema.json#/$defs/", "openai/chat-chunk.schema.json#/$defs/"
_CR = "openai/chat-request.schema.json#/$defs/"

MAPPING: tuple[Entry, ...] = (
    # Anthropic: messages, content blocks (web search, web fetch), citations, usage, stream events, errors
    Entry(f"{_A}:Message", "anthropic/message.schema.json#/$defs/message"),
    Entry(f"{_A}:ContentBlock", _ACB + "content_block", parsed=True),
    Entry(f"{_A}:WebSearchResultBlock", _ACB + "web_search_result"),
    Entry(f"{_A}:WebSearchToolResultErrorObject", _ACB + "web_search_tool_result_error"),
    Entry(f"{_A}:WebFetchToolResultBlock.content", _ACB + "web_fetch_tool_result/properties/content"),
    Entry(f"{_A}.server_tool_use_block:ServerToolUseBlock.caller", _ACB + "caller"),
    Entry(f"{_A}:TextCitation", "anthropic/citations.schema.json#/$defs/citation"),
    Entry(f"{_A}:Usage", "anthropic/usage.schema.json#/$defs/usage"),
    Entry(f"{_A}:MessageDeltaUsage", "anthropic/usage.schema.json#/$defs/message_delta_usage"),
    Entry(f"{_A}:ServerToolUsage", "anthropic/usage.schema.json#/$defs/server_tool_usage"),
    Entry(f"{_A}:RawMessageStreamEvent", "anthropic/stream-event.schema.json#"),
    Entry(f"{_A}:RawContentBlockDelta", "anthropic/stream-event.schema.json#/$defs/delta", parsed=True),
    Entry(f"{_A}.shared:ErrorResponse", "anthropic/error.schema.json#"),
    Entry(f"{_A}.shared:ErrorObject", "anthropic/error.schema.json#/$defs/error_object"),
    Entry(f"{_A}.shared:ErrorType", "anthropic/error.schema.json#/$defs/error_object/properties/type"),
    Entry(f"{_A}:StopReason", "anthropic/message.schema.json#/$defs/message/properties/stop_reason"),
    Entry(f"{_A}.message_create_params:MessageCreateParamsBase.tools",
          "anthropic/tools.schema.json#/$defs/tool"),
    Entry(f"{_A}:UserMessageParam.content", "anthropic/request.schema.json#/$defs/content_block"),
    Entry(f"{_A}:WebSearchResultBlockParam", "anthropic/request.schema.json#/$defs/web_search_result"),
    # OpenAI Responses: response, output items, web_search_call and its actions, url_citation, usage, events
    Entry(f"{_O}:Response", "openai/response.schema.json#/$defs/response"),
    Entry(f"{_O}:ResponseOutputItem", _OUT + "output_item", parsed=True),
    Entry(f"{_O}:ResponseOutputMessage.content", _OUT + "content_part", parsed=True),
    Entry(f"{_O}:ResponseOutputText.annotations", _OUT + "annotation", parsed=True),
    Entry(f"{_O}:ResponseFunctionWebSearch.action", _OUT + "action"),
    Entry(f"{_O}.response_function_web_search:ActionSearch.sources", _OUT + "source"),
    Entry(f"{_O}:ResponseUsage", "openai/usage.schema.json#/$defs/usage"),
    Entry(f"{_O}:ResponseStreamEvent", "openai/stream-event.schema.json#"),
    Entry(f"{_O}.response_create_params:ResponseCreateParamsBase.tools",
          "openai/tools.schema.json#/$defs/tool"),
    Entry(f"{_O}.response_create_params:ResponseCreateParamsBase.include",
          "openai/request.schema.json#/properties/include"),
    Entry(f"{_O}:ResponseFunctionWebSearchParam", "openai/input-items.schema.json#/$defs/web_search_call"),
    Entry(f"{_O}.response_function_web_search_param:ActionSearch.sources",
          "openai/input-items.schema.json#/$defs/source"),
    # OpenAI Chat Completions: the completion, its message and url_citation annotations, chunks, usage,
    # web_search_options and the request's messages
    Entry(f"{_C}:ChatCompletion", _CC + "completion"),
    Entry(f"{_C}.chat_completion:Choice", _CC + "choice"),
    Entry(f"{_C}:ChatCompletionMessage", _CC + "message"),
    Entry(f"{_C}.chat_completion_message:Annotation", _CC + "annotation"),
    Entry(f"{_C}.chat_completion_message:AnnotationURLCitation", _CC + "url_citation"),
    Entry(f"{_C}:ChatCompletionMessageToolCallUnion", _CC + "tool_call", parsed=True),
    Entry("openai.types:CompletionUsage", _CC + "usage"),
    Entry(f"{_C}:ChatCompletionChunk", _CK + "chunk"),
    Entry(f"{_C}.chat_completion_chunk:Choice", _CK + "choice"),
    Entry(f"{_C}.chat_completion_chunk:ChoiceDelta", _CK + "delta"),
    Entry(f"{_C}.completion_create_params:WebSearchOptions", _CR + "web_search_options"),
    Entry(f"{_C}:ChatCompletionMessageParam", _CR + "message", discriminator="role"),
    Entry(f"{_C}:ChatCompletionToolUnionParam", _CR + "tool"),
    # Gemini generateContent (google-genai): the response, its candidate, grounding and url context, usage,
    # the request's tools and the error envelope's fields (camelCase aliases, as on the wire)
    Entry(f"{_G}:GenerateContentResponse", _GR + "response"),
    Entry(f"{_G}:Candidate", _GR + "candidate"),
    Entry(f"{_G}:Part", _GR + "part"),
    Entry(f"{_G}:FunctionCall", _GR + "function_call"),
    Entry(f"{_G}:GroundingMetadata", _GR + "grounding_metadata"),
    Entry(f"{_G}:GroundingChunkWeb", _GR + "web"),
    Entry(f"{_G}:GroundingSupport", _GR + "grounding_support"),
    Entry(f"{_G}:Segment", _GR + "segment"),
    Entry(f"{_G}:UrlContextMetadata", _GR + "url_context_metadata"),
    Entry(f"{_G}:UrlMetadata", _GR + "url_context_metadata/properties/urlMetadata/items"),
    Entry(f"{_G}:GenerateContentResponseUsageMetadata", _GR + "usage_metadata"),
    Entry(f"{_G}:Tool", "gemini/request.schema.json#/$defs/tool"),
    Entry(f"{_G}:GenerationConfig", "gemini/request.schema.json#/$defs/generation_config"),
)


# ---------------------------------------------------------------- the SDK side


def _qualifier(annotation: object) -> str:
    """``NotRequired``, ``Required`` or ``ReadOnly`` when one (of typing or typing_extensions) wraps
    ``annotation``, else ``""``."""
    origin = typing.get_origin(annotation)
    name = getattr(origin, "_name", None) or str(origin)
    return next((q for q in ("NotRequired", "Required", "ReadOnly") if name.endswith(q)), "")


def _strip(annotation: object) -> object:
    while typing.get_origin(annotation) is typing.Annotated or _qualifier(annotation):
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation: object) -> list[object]:
    """The non-container members of a union (lists, sequences and Optional unwrapped)."""
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) if arg is not type(None) for m in _members(arg)]
    if origin is not None and getattr(origin, "__name__", "") in {"list", "List", "Iterable", "Sequence"}:
        return _members(typing.get_args(annotation)[0])
    return [annotation]


def _literals(annotation: object) -> list[object]:
    """Every Literal or Enum value an annotation allows (through unions, Optional and lists)."""
    return [value for member in _members(annotation) for value in _values(member) if value is not None]


def _values(member: object) -> tuple[object, ...]:
    """The values of a Literal, or of an Enum class (google-genai types its enums so)."""
    if typing.get_origin(member) is Literal:
        return typing.get_args(member)
    if isinstance(member, type) and issubclass(member, enum.Enum):
        return tuple(item.value for item in member)
    return ()


def _fields(model: object) -> dict[str, tuple[bool, object]]:
    """``{wire name: (required, annotation)}`` of a pydantic model or a TypedDict; ``{}`` for others."""
    if hasattr(model, "model_fields"):
        return {(field.alias or name): (field.is_required(), field.annotation)
                for name, field in model.model_fields.items()}
    if typing.is_typeddict(model) or hasattr(model, "__required_keys__"):
        hints = typing.get_type_hints(model, include_extras=True)
        return {name: (_required_key(model, hint), hint) for name, hint in hints.items()}
    return {}


def _required_key(model: object, hint: object) -> bool:
    qualifier = _qualifier(hint)
    if qualifier in ("NotRequired", "Required"):
        return qualifier == "Required"
    return bool(getattr(model, "__total__", True))


def _load(spec: str) -> object:
    """``module:Name`` or ``module:Name.field`` (that field's annotation)."""
    module, _, name = spec.partition(":")
    target, _, field = name.partition(".")
    loaded = getattr(importlib.import_module(module), target)
    return _fields(loaded)[field][1] if field else loaded


def _label(annotation: object) -> str:
    return getattr(annotation, "__name__", None) or str(annotation)


# ---------------------------------------------------------------- the contract side


class _Schemas:
    """Contract lookups by URI, following ``$ref`` and merging ``allOf`` members."""

    def __init__(self, contracts: Contracts) -> None:
        self.contracts = contracts

    def get(self, uri: str) -> tuple[JSON, str]:
        return self.contracts.lookup(uri), urldefrag(uri)[0]

    def deref(self, schema: object, base: str) -> tuple[JSON, str]:
        while isinstance(schema, dict) and "$ref" in schema:
            schema, base = self.get(urljoin(base, schema["$ref"]))
        return (schema if isinstance(schema, dict) else {}), base

    def parts(self, schema: object, base: str) -> Iterator[tuple[JSON, str]]:
        """The schema and its allOf members (dereferenced), without the discriminated branches."""
        schema, base = self.deref(schema, base)
        yield schema, base
        for member in schema.get("allOf", ()):
            if "if" not in member:
                yield from self.parts(member, base)

    def values(self, schema: object, base: str) -> set[object] | None:
        """The literal values a schema allows (None when it does not restrict them to a set)."""
        schema, base = self.deref(schema, base)
        if "const" in schema:
            return {schema["const"]}
        if "enum" in schema:
            return {value for value in schema["enum"] if value is not None}
        if "then" in schema and "else" in schema:  # values split by a condition (call item types and others)
            chosen, other = (self.values(schema[key], base) for key in ("then", "else"))
            return None if chosen is None or other is None else chosen | other
        for key in ("else", "items"):
            if key in schema:
                return self.values(schema[key], base)
        if "allOf" in schema:
            found = [self.values(member, base) for member in schema["allOf"] if "if" not in member]
            return next((f for f in found if f is not None), None)
        return None

    def is_union(self, schema: object, base: str, prop: str) -> bool:
        """True for a discriminated union on ``prop`` (if/then branches on its values)."""
        schema, base = self.deref(schema, base)
        branches = [member.get("if", {}).get("properties") or {} for member in schema.get("allOf", ())]
        return any(prop in branch for branch in branches)

    def branch(self, schema: object, base: str, prop: str, value: str) -> tuple[object, str] | None:
        """The subschema a discriminated union applies to objects whose ``prop`` is ``value``."""
        schema, base = self.deref(schema, base)
        for member in schema.get("allOf", ()):
            cond = member.get("if", {}) if isinstance(member, dict) else {}
            if cond.get("properties", {}).get(prop, {}).get("const") == value:
                return member.get("then"), base
        return None


# ---------------------------------------------------------------- comparing


@dataclass(frozen=True, slots=True)
class _Target:
    """One contract object an SDK model is compared with."""

    name: str
    where: str
    required: set[str]
    props: dict[str, tuple[object, str]]
    closed: bool
    ignore: dict[str, str]

    @classmethod
    def of(cls, name: str, where: str, parts: list[tuple[JSON, str]]) -> _Target:
        """The target made of an object schema's ``parts`` (:meth:`_Schemas.parts`), walked once."""
        props: dict[str, tuple[object, str]] = {}
        ignore: dict[str, str] = {}
        for part, at in parts:
            for prop, sub in part.get("properties", {}).items():
                props.setdefault(prop, (sub, at))
            ignore.update(part.get("x-drift-ignore", {}))
        required = {prop for part, _ in parts for prop in part.get("required", ())}
        closed = any(part.get("additionalProperties") is False or part.get("unevaluatedProperties") is False
                     for part, _ in parts)
        return cls(name, where, required, props, closed, ignore)


class _Comparison:
    def __init__(self, entry: Entry, schemas: _Schemas) -> None:
        self.entry, self.schemas = entry, schemas
        self.gaps: list[Finding] = []

    def add(self, target: _Target, gap: str, gap_id: str, detail: str) -> None:
        reason = target.ignore.get(gap_id, "")
        label = target.where.removeprefix(BASE_URI)
        blocking = gap in _BLOCKING and not reason
        fix = f"allow it in the contract, or explain it there (x-drift-ignore: {gap_id})" if blocking else ""
        self.gaps.append(Finding("error" if blocking else "info", gap, detail, label,
                                 f"{self.entry.package}:{target.name}", fix=fix, note=reason))

    def target(self, name: str, schema: object, base: str, where: str) -> _Target:
        return _Target.of(name, where, list(self.schemas.parts(schema, base)))

    def run(self) -> list[Finding]:
        where = BASE_URI + self.entry.contract
        try:
            annotation = _load(self.entry.sdk)
        except (ImportError, AttributeError, KeyError) as exc:  # a type this SDK release does not have
            package = self.entry.package
            detail = f"{package} {sdk_version(package)} has no {self.entry.sdk} ({exc}); nothing to compare"
            self.gaps.append(Finding("info", "sdk-missing", detail, where.removeprefix(BASE_URI),
                                     f"{package}:{self.entry.sdk}"))
            return self.gaps
        schema, base = self.schemas.get(where)
        members = _members(annotation)
        if not all(_fields(m) for m in members):
            target = self.target(self.entry.sdk, schema, base, where)
            self.values(target, "", set(_literals(annotation)), self.schemas.values(schema, base))
        elif len(members) > 1 or self.schemas.is_union(schema, base, self.entry.discriminator):
            self.union(members, schema, base, where)
        else:
            self.model(members[0], self.target(_label(members[0]), schema, base, where))
        return self.gaps

    def union(self, members: list[object], schema: object, base: str, where: str) -> None:
        prop = self.entry.discriminator
        union = self.target(self.entry.sdk, schema, base, where)
        allowed = self.schemas.values(*union.props[prop]) if prop in union.props else None
        seen: set[object] = set()
        for member in members:
            for value in _literals(_fields(member).get(prop, (False, None))[1]):
                seen.add(value)
                self.member(member, value, union, (schema, base), allowed)
        for value in sorted(map(str, (allowed or set()) - seen)):
            self.only_in_contract(union, prop, value)

    def only_in_contract(self, union: _Target, prop: str, value: str) -> None:
        """A union member only the contract has: blocking where the SDK parses the union (it cannot parse
        a block the provider sends), else information."""
        if not self.entry.parsed:
            self.add(union, "contract-only", f"discriminator:{value}",
                     f"{prop} {value!r} is in the contract but in no SDK model")
            return
        package = self.entry.package
        self.add(union, "unparsed", f"unparsed:{value}",
                 f"{prop} {value!r}: the provider sends it and {package} {sdk_version(package)} has no model "
                 "for it (the SDK cannot parse it); upgrade the SDK")

    def member(self, model: object, value: object, union: _Target, located: tuple[object, str],
               allowed: set[object] | None) -> None:
        prop = self.entry.discriminator
        if allowed is not None and value not in allowed:
            missing = replace(union, name=_label(model))
            self.add(missing, "discriminator", f"discriminator:{value}",
                     f"{prop} {value!r} ({_label(model)}) is missing from the contract")
            return
        branch = self.schemas.branch(*located, prop, str(value))
        if branch is not None and branch[0] is not None:
            schema, base = self.schemas.deref(*branch)
            self.model(model, self.target(_label(model), schema, base, f"{union.where}[{value}]"))

    def model(self, model: object, target: _Target) -> None:
        for field, (sdk_required, annotation) in sorted(_fields(model).items()):
            self.required(target, field, sdk_required)
            if field not in target.props:
                if target.closed:
                    self.add(target, "closed", f"closed:{field}",
                             f"{field}: the SDK sends it, the closed contract object rejects it")
            elif field != self.entry.discriminator:
                allowed = self.schemas.values(*target.props[field])
                self.values(target, field, set(_literals(annotation)), allowed)

    def required(self, target: _Target, field: str, sdk_required: bool) -> None:
        contract_required = field in target.required
        if contract_required and not sdk_required:
            self.add(target, "required", f"required:{field}",
                     f"{field}: the contract requires it, the SDK marks it optional")
        if sdk_required and not contract_required and field in target.props:
            self.add(target, "sdk-required", f"sdk-required:{field}",
                     f"{field}: the SDK requires it, the contract leaves it optional")

    def values(self, target: _Target, field: str, sdk_values: set[object],
               allowed: set[object] | None) -> None:
        if not sdk_values or allowed is None:
            return
        prefix = f"{field}: " if field else ""
        for value in sorted(map(str, sdk_values - allowed)):
            self.add(target, "enum", f"enum:{field}:{value}",
                     f"{prefix}{value!r} is allowed by the SDK, not by the contract")
        for value in sorted(map(str, allowed - sdk_values)):
            self.add(target, "contract-only", f"enum:{field}:{value}",
                     f"{prefix}{value!r} is in the contract only")


def sdk_version(sdk: str) -> str:
    """The installed version of ``sdk``; a UsageError when it is not installed."""
    try:
        return importlib.metadata.version(sdk)
    except importlib.metadata.PackageNotFoundError as exc:
        raise UsageError(f"the {sdk} SDK is not installed; pip install {sdk} to compare its models") from exc


def compare(sdks: tuple[str, ...] = SDKS, contracts: Contracts | None = None,
            mapping: tuple[Entry, ...] = MAPPING) -> list[Finding]:
    """Every gap between the installed ``sdks`` and the contracts, in mapping order."""
    for sdk in sdks:
        sdk_version(sdk)
    schemas = _Schemas(contracts or default())
    return [gap for entry in mapping if entry.package in sdks for gap in _Comparison(entry, schemas).run()]
