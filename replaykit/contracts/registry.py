"""The registry: every ``*.schema.json`` under ``contracts/``, loaded into one local :mod:`referencing`
registry keyed by its ``$id`` (``https://replaykit.dev/contracts/...``), and the same files into one
``jsonschema_rs`` registry for the engine (:mod:`replaykit.contracts.validator`).

A ``$ref`` to any other URI raises :class:`~replaykit.errors.ContractError`: nothing is ever fetched.
:func:`validate` returns :class:`~replaykit.contracts.violations.Violation` s; compiled validators are cached
per kind.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema_rs
import referencing.exceptions
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from replaykit.contracts.profiles import (
    PROFILE_KEYWORD,
    PROFILES,
    STRICT,
    Profile,
    _profile_names,
    resolve_profile,
)
from replaykit.contracts.rulebook import RULEBOOK_GLOB, WIRE_RULES, Rulebook, RuleSpec, read_rulebook
from replaykit.contracts.rules import RULES, _rule_names
from replaykit.contracts.validator import Reference, compile_kind, rust_registry
from replaykit.contracts.violations import Violation, _explain, _from_rust, _misread, _without_cascades
from replaykit.errors import ContractError, located
from replaykit.jsondoc import JSON
from replaykit.resources import data_dir

__all__ = ["BASE_URI", "PROVIDER_KINDS", "Contracts", "default", "first_violation", "kinds", "rule_spec",
           "validate"]

BASE_URI = "https://replaykit.dev/contracts/"

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
    "openai.chat_request": "openai/chat-request.schema.json",
    "openai.chat_response": "openai/chat-completion.schema.json",
    "openai.chat_chunk": "openai/chat-chunk.schema.json",
    "cloudflare.request": "cloudflare/request.schema.json",
    "cloudflare.binding_options": "cloudflare/binding-options.schema.json",
    "cloudflare.response": "cloudflare/response.schema.json",
    "cloudflare.error": "cloudflare/error.schema.json",
    "gemini.request": "gemini/request.schema.json",
    "gemini.response": "gemini/response.schema.json",
    "gemini.stream_event": "gemini/stream-event.schema.json",
    "gemini.error": "gemini/error.schema.json",
}
_PROVIDER_DIRS = ("anthropic", "openai", "cloudflare", "gemini")


def _read(path: Path) -> JSON:
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


def _refuse(uri: str) -> Resource[object]:
    raise ContractError(f"{uri}: not a replaykit contract and never fetched; "
                        "refer to a $id of a file under contracts/")


def _kind_of(root: Path, path: Path) -> str:
    relative = path.relative_to(root)
    stem = path.name.removesuffix(".schema.json")
    return f"replaykit.{stem}" if relative.parts[0] not in _PROVIDER_DIRS else ""


class Contracts:
    """The contracts of one ``contracts/`` folder (the bundled one by default), loaded on first use."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else data_dir("contracts")
        self._files: dict[str, Path] | None = None
        self._registry: Registry[object] | None = None
        self._rust: jsonschema_rs.Registry | None = None
        self._contents: list[tuple[str, JSON]] = []
        self._kinds: dict[str, str] = {}
        self._validators: dict[str, jsonschema_rs.Validator] = {}
        self._references: JSON = {}
        self._plain: Registry[object] | None = None
        self._rulebook: Rulebook | None = None

    def _load(self) -> Registry[object]:
        if self._registry is not None:
            return self._registry
        files: dict[str, Path] = {}
        contents_of: list[tuple[str, JSON]] = []
        for path in sorted(self.root.rglob("*.schema.json")):
            contents = _read(path)
            uri = contents["$id"]
            if uri in files:
                raise ContractError(located(path, "/$id", f"$id {uri} is also used by {files[uri]}",
                                            "give every contract its own $id"))
            self._check_rules(path, contents)
            files[uri] = path
            contents_of.append((uri, contents))
            if kind := _kind_of(self.root, path):
                self._kinds[kind] = uri
        self._kinds.update({kind: BASE_URI + target for kind, target in PROVIDER_KINDS.items()})
        self._files = files
        resources = [(uri, DRAFT202012.create_resource(contents)) for uri, contents in contents_of]
        self._contents = contents_of
        self._registry = Registry(retrieve=_refuse).with_resources(resources)  # type: ignore[call-arg]
        return self._registry

    @staticmethod
    def _check_rules(path: Path, contents: JSON) -> None:
        for name in _rule_names(contents):
            if name not in RULES:
                raise ContractError(located(path, "x-rules", f"unknown rule {name!r}",
                                            f"use one of {', '.join(sorted(RULES))}"))
        for name in _profile_names(contents):
            if name not in PROFILES:
                raise ContractError(located(path, PROFILE_KEYWORD, f"unknown profile {name!r}",
                                            f"use one of {', '.join(PROFILES)}"))

    def rulebook(self) -> Rulebook:
        """The rulebook files (``contracts/*/*.rules.json``), each checked against ``replaykit.rulebook``;
        every rule has a check in :data:`RULES` and is named by its contract's ``x-rules``, and every wire
        check has a rule."""
        if self._rulebook is None:
            files = [(path, self._read_rulebook(path)) for path in sorted(self.root.rglob(RULEBOOK_GLOB))]
            book = Rulebook(files)
            for spec in book.specs.values():
                self._check_spec(book.files[spec.id], spec)
            unbooked = sorted(name for name in WIRE_RULES if book.get(name) is None)
            if unbooked and files:
                raise ContractError(f"{self.root}: rules {', '.join(unbooked)} have no rulebook entry; "
                                    f"describe each in contracts/<provider>/request.rules.json")
            self._rulebook = book
        return self._rulebook

    def _read_rulebook(self, path: Path) -> JSON:
        contents = read_rulebook(path)
        problems = [v for v in self.validate("replaykit.rulebook", contents) if v.severity == "error"]
        if problems:
            raise ContractError(located(path, problems[0].pointer or "/", problems[0].message,
                                        "see contracts/replaykit/rulebook.schema.json"))
        return contents

    def _check_spec(self, path: Path, spec: RuleSpec) -> None:
        if spec.id not in RULES:
            raise ContractError(located(path, "/rules", f"rule {spec.id!r} has no check",
                                        "add its function to replaykit.contracts.rulebook"))
        if spec.id not in self.rule_names(spec.contract):
            raise ContractError(located(path, "/rules", f"rule {spec.id!r} is not named by {spec.contract}",
                                        f"add it to the x-rules of {self.file(spec.contract).name}"))

    def kinds(self) -> dict[str, str]:
        """Every contract kind and the URI of its schema."""
        self._load()
        return dict(sorted(self._kinds.items()))

    def rule_names(self, kind: str) -> list[str]:
        """The cross-field rules (:data:`RULES`) the file of ``kind`` names."""
        return sorted(set(_rule_names(self.lookup(self._resolve(kind)[0]))))

    def schema(self, kind: str) -> JSON:
        """The schema of ``kind`` (a whole file or a ``$defs`` entry of one)."""
        return self._resolve(kind)[1]

    def file(self, kind: str) -> Path:
        """The file that holds the schema of ``kind``."""
        self._load()
        assert self._files is not None
        return self._files[self._resolve(kind)[0]]

    def _resolve(self, kind: str) -> tuple[str, JSON]:
        self._load()
        uri = self._kinds.get(kind)
        if uri is None:
            raise ContractError(f"unknown contract kind {kind!r}; known kinds: {', '.join(self.kinds())}")
        return uri.partition("#")[0], self.lookup(uri)

    def lookup(self, uri: str) -> JSON:
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

    def validator(self, kind: str) -> jsonschema_rs.Validator:
        """The compiled (cached) jsonschema-rs validator of ``kind``."""
        cached = self._validators.get(kind)
        if cached is None:
            self._resolve(kind)
            try:
                if self._rust is None:  # every $ref resolved up front: an unknown one fails here
                    self._rust = rust_registry(self._contents, _refuse)
                cached = compile_kind(self._kinds[kind], self._rust)
            except (jsonschema_rs.ReferencingError, jsonschema_rs.ValidationError, ValueError) as exc:
                raise ContractError(self._unresolvable(kind, exc)) from exc
            self._validators[kind] = cached
        return cached

    def validate(self, kind: str, value: object, profile: Profile = STRICT) -> list[Violation]:
        """Every violation of ``value`` against contract ``kind`` (empty when it conforms); the rules
        ``profile`` relaxes come as warnings."""
        validator = self.validator(kind)
        try:
            if validator.is_valid(value):
                return []
            errors = list(validator.iter_errors(value))
        except (ValueError, TypeError, OverflowError, RecursionError):  # not JSON to jsonschema-rs (bytes...)
            return self._by_reference(kind, value, profile)
        if any(_misread(error, value) for error in errors):
            return self._by_reference(kind, value, profile)
        found = [v for error in errors for v in _from_rust(error, value, self.lookup, self._phrase, profile)]
        return self.booked(_without_cascades(list(dict.fromkeys(found))), profile)

    def booked(self, found: list[Violation], profile: Profile) -> list[Violation]:
        """``found`` with the rulebook applied: a rule that words the provider's answer for a place replaces
        the schema's report of the same place, and a rule the profile relaxes is a warning."""
        if not any(v.rule in WIRE_RULES for v in found):
            return found
        book = self.rulebook()
        ruled = {v.pointer for v in found if book.get(v.rule) is not None}
        kept = [v for v in found if book.get(v.rule) is not None or v.pointer not in ruled]
        return [_relaxed(v, profile) if profile.name in _relaxed_under(book.get(v.rule)) else v for v in kept]

    def first_violation(self, kind: str, value: object, profile: Profile = STRICT) -> Violation | None:
        """The first error of ``value`` against ``kind`` as the provider meets it: a schema violation first
        (shapes are checked before rules), else the first broken rule (with its id in ``rule``); None when
        it conforms."""
        errors = [v for v in self.validate(kind, value, profile) if v.severity == "error"]
        return next((v for v in errors if not v.rule), None) or next(iter(errors), None)

    def _by_reference(self, kind: str, value: object, profile: Profile) -> list[Violation]:
        """Stock jsonschema's verdict, for a value jsonschema-rs does not take or misreads (bytes, nan)."""
        found = [v for error in self._phrase(self._kinds[kind], value) for v in _explain(error, profile)]
        return self.booked(_without_cascades(list(dict.fromkeys(found))), profile)

    def _phrase(self, uri: str, instance: object) -> list[object]:
        """Stock jsonschema's errors (x-rules too) of ``instance`` against the schema at ``uri``."""
        reference = self._references.get(uri)
        if reference is None:
            reference = self._references[uri] = Reference({"$ref": uri}, registry=self.reference_registry())
        return list(reference.iter_errors(instance))

    def reference_registry(self) -> Registry[object]:
        """The files for :data:`~replaykit.contracts.validator.Reference`: without ``$schema``, which would
        make jsonschema pick its stock class (no ``x-rules``) at every ``$ref`` into another file."""
        if self._plain is None:
            self._load()
            plain = [(uri, DRAFT202012.create_resource({k: v for k, v in contents.items() if k != "$schema"}))
                     for uri, contents in self._contents]
            self._plain = Registry(retrieve=_refuse).with_resources(plain)  # type: ignore[call-arg]
        return self._plain

    def _unresolvable(self, kind: str, exc: BaseException) -> str:
        return located(self.file(kind), None, f"contract {kind!r} cannot be used: {exc}",
                       "fix the $ref to point at a contract's $id and $defs entry")


def _relaxed_under(spec: RuleSpec | None) -> tuple[str, ...]:
    return spec.relaxed_under if spec is not None else ()


def _relaxed(violation: Violation, profile: Profile) -> Violation:
    message = f"{violation.message} (OpenAI only: a warning under profile {profile.name})"
    return replace(violation, message=message, severity="warning")


_DEFAULT: list[Contracts] = []


def default() -> Contracts:
    """The bundled contracts (loaded once)."""
    if not _DEFAULT:
        _DEFAULT.append(Contracts())
    return _DEFAULT[0]


def kinds() -> dict[str, str]:
    """Every contract kind of the bundled contracts and its schema URI."""
    return default().kinds()


def validate(kind: str, value: object, profile: str | Profile | None = None) -> list[Violation]:
    """Violations of ``value`` against the bundled contract ``kind`` (under ``profile``, default strict)."""
    return default().validate(kind, value, resolve_profile(profile))


def first_violation(kind: str, value: object, profile: str | Profile | None = None) -> Violation | None:
    """The first error of ``value`` against the bundled contract ``kind``, as the provider meets it (see
    :meth:`Contracts.first_violation`): what a reproduction pinpoints, with the rule id and JSON pointer."""
    return default().first_violation(kind, value, resolve_profile(profile))


def rule_spec(rule: str) -> RuleSpec | None:
    """The bundled rulebook's entry for ``rule`` (its statement, the provider's real error, its sources)."""
    return default().rulebook().get(rule)
