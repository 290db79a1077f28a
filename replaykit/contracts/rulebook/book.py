"""The rulebook: each cross-field and cross-message rule of a provider's requests as data
(``contracts/<provider>/request.rules.json``, checked against ``contracts/replaykit/rulebook.schema.json``):
its id, one line of statement, the pointers it reads, the provider's real status, error type and message,
where that was read, and a failing and a passing example.

The checks themselves are Python (:data:`replaykit.contracts.RULES`, by id), named by the request contract's
``x-rules`` keyword; :meth:`RuleSpec.reply` words a broken rule as the provider answers it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from replaykit.errors import ContractError, located
from replaykit.jsondoc import JSON

__all__ = ["RULEBOOK_GLOB", "ProviderError", "RuleSpec", "Rulebook", "read_rulebook"]

RULEBOOK_GLOB = "*.rules.json"
Wording = Literal["verbatim", "template", "not-public"]


@dataclass(frozen=True, slots=True)
class ProviderError:
    """How the provider answers a request that breaks a rule: HTTP status, error type, message, and for
    OpenAI the ``param`` and ``code`` of its error body."""

    status: int
    type: str
    message: str
    param: str | None = None
    code: str | int | None = None


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One rule of the rulebook (see the module docstring); ``contract`` is the request kind it belongs to."""

    id: str
    contract: str
    statement: str
    reads: tuple[str, ...]
    error: ProviderError
    wording: Wording
    sources: tuple[str, ...]
    relaxed_under: tuple[str, ...]
    examples: Mapping[str, object]

    def reply(self, params: Mapping[str, str]) -> ProviderError:
        """The provider's error for a failure naming ``params``; where the provider's wording is not public,
        replaykit's statement, marked as such."""
        if self.wording == "not-public":
            text = f"{self.statement} (replaykit rule {self.id}; the provider's exact wording is not public)"
        else:
            text = self.error.message.format_map(defaultdict(lambda: "?", params))
        return ProviderError(self.error.status, self.error.type, text, self.error.param, self.error.code)


def _spec(contract: str, rule: Mapping[str, Any]) -> RuleSpec:
    error = rule["error"]
    reply = ProviderError(error["status"], error["type"], error.get("message", ""), error.get("param"),
                          error.get("code"))
    return RuleSpec(rule["id"], contract, rule["statement"], tuple(rule["reads"]), reply, error["wording"],
                    tuple(rule["sources"]), tuple(rule.get("relaxedUnder", ())), rule["examples"])


def read_rulebook(path: Path) -> JSON:
    """The JSON of one rulebook file (a ContractError naming the file when it is not JSON)."""
    try:
        contents = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(located(path, getattr(exc, "lineno", None), f"not a readable rulebook: {exc}",
                                    "fix the JSON")) from exc
    if not isinstance(contents, dict):
        raise ContractError(located(path, "/", "a rulebook is a JSON object", "see rulebook.schema.json"))
    return contents


class Rulebook:
    """Every rule of the rulebook files, by id, in file and list order."""

    def __init__(self, files: list[tuple[Path, JSON]]) -> None:
        self.specs: dict[str, RuleSpec] = {}
        self.files: dict[str, Path] = {}
        for path, contents in files:
            for rule in contents["rules"]:
                if rule["id"] in self.specs:
                    raise ContractError(located(path, "/rules", f"rule {rule['id']!r} is defined twice",
                                                "give every rule its own id"))
                self.specs[rule["id"]] = _spec(contents["contract"], rule)
                self.files[rule["id"]] = path

    def get(self, rule: str) -> RuleSpec | None:
        """The rule called ``rule`` (None for a rule the rulebook does not hold, e.g. ``index_span``)."""
        return self.specs.get(rule)

    def of(self, contract: str) -> list[RuleSpec]:
        """The rules of one request contract (``anthropic.request``...), in rulebook order."""
        return [spec for spec in self.specs.values() if spec.contract == contract]
