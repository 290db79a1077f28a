"""The Cloudflare Web Search request rules (``contracts/cloudflare/request.rules.json``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from replaykit.contracts.rulebook.walk import RuleError

__all__ = ["CLOUDFLARE_RULES"]

Check = Callable[[Mapping[str, object]], Iterator[RuleError]]


def _query_not_blank(body: Mapping[str, object]) -> Iterator[RuleError]:
    query = body.get("query")
    if isinstance(query, str) and query and not query.strip():
        yield RuleError("query holds only whitespace; send the words to search for", ["query"])


CLOUDFLARE_RULES: dict[str, Check] = {"cloudflare.query_not_blank": _query_not_blank}
