"""The local steps around a request: validate a stored transcript, rebuild the system, choose what is
replayed and check it against the provider's rules, estimate and preflight the budget, and check an answer's
citations.

Each is a thin use of the library (:func:`replaykit.transcript.restore`, :func:`replaykit.replay.projection`,
:func:`replaykit.contracts.first_violation`, :func:`replaykit.estimate.estimate`,
:func:`replaykit.citations.verify_transcript`); the named mutants
(:mod:`replaykit.reference.defects`) live here, at the line each defect would sit in a real harness.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from replaykit import contracts
from replaykit.citations import errors_only, verify_transcript
from replaykit.errors import LocalRequestError
from replaykit.estimate import Chars, Estimate, body_chars, estimate
from replaykit.jsondoc import JSON
from replaykit.reference.defects import mutant
from replaykit.reference.wire import wire_body
from replaykit.replay import ProviderModel, project, projection
from replaykit.routes import API_ROUTES
from replaykit.transcript import AssistantMessage, Transcript, restore

__all__ = ["OverBudget", "checked_citations", "estimate_tokens", "prepare", "rebuild_system", "validate"]



# ---------------------------------------------------------------- validate


def validate(data: object, source: str) -> Transcript:
    """A stored transcript, validated (:func:`replaykit.transcript.restore`): LOCAL_REQUEST_ERROR, phase
    validation, on the first violation. A display-only search record (no ``raw``) is valid: it is shown but
    never replayed (see :func:`prepare`)."""
    if mutant("accept-corrupt-container"):
        data = _wrap_containers(data)
    for block, pointer in _blocks(data):
        if mutant("reject-display-only") and block.get("type") == "hostedSearch" and "raw" not in block:
            raise LocalRequestError("a hostedSearch block has no raw", phase="validation", pointer=pointer)
        if mutant("reject-nameless-legacy") and block.get("type") == "hostedSearch" \
                and "name" not in (block.get("raw") or {"name": ""}):
            raise LocalRequestError("a search block has no name", phase="validation", pointer=pointer)
    return restore(data, source=source)


def _blocks(data: object) -> Iterator[tuple[JSON, str]]:
    messages = data.get("messages") if isinstance(data, dict) else None
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for number, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict):
                yield block, f"/messages/{index}/content/{number}"


def _wrap_containers(data: object) -> object:
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        for message in data["messages"]:
            if isinstance(message, dict) and isinstance(message.get("content"), dict):
                message["content"] = [message["content"]]
    return data


# ---------------------------------------------------------------- the system prompt


def rebuild_system(transcript: JSON, system: str | None, tools: list[JSON], now: int) -> None:
    """Rebuild the system prompt and tools for a step, logging the rebuild in ``systemHistory``.

    ``system`` None keeps the restored one. The log lets the estimator tell a real instruction or tool change
    (the usage anchor is dropped) from a rebuild of the same configuration (it is kept). A transcript without
    a log gets one that starts with its restored configuration at its first message.
    """
    history = transcript.get("systemHistory")
    if not isinstance(history, list):
        messages = transcript.get("messages") or []
        first = messages[0].get("timestamp", now) if messages and isinstance(messages[0], dict) else now
        history = transcript["systemHistory"] = [] if not messages else [
            {"timestamp": first, "system": transcript.get("system"), "tools": transcript.get("tools", [])}]
    transcript["system"] = system if system is not None else transcript.get("system")
    transcript["tools"] = copy.deepcopy(tools)
    last = history[-1]["timestamp"] if history else now
    history.append({"timestamp": max(now, last), "system": transcript["system"],
                    "tools": copy.deepcopy(tools)})


# ---------------------------------------------------------------- replay


def prepare(transcript: JSON, target: ProviderModel) -> JSON:
    """The request body for ``target``: :func:`replaykit.replay.projection` of the transcript (search blocks
    verbatim to their own provider, a text projection to another; display-only records and another
    provider's opaque blocks left out, each noted on stderr), checked by :func:`preflight`."""
    replayed = transcript
    if mutant("search-dropped-on-replay"):
        replayed = _without(replayed, "hostedSearch")
    if mutant("opaque-block-dropped"):
        replayed = _without(replayed, "providerBlock")
    if mutant("annotations-dropped-on-switch"):
        replayed = _uncited_elsewhere(replayed, target)
    built = projection(replayed, target)
    for note in built.notes:
        print(f"replaykit.reference: {note}", file=sys.stderr)
    if mutant("internal-fields-leak"):
        spread = {key: value for key, value in transcript.items() if key not in ("messages", "tools")}
        return spread | built.body
    if not mutant("accept-corrupt-container"):  # its defect: the wrapped content goes out unchecked
        preflight(built.body, target)
    return built.body


def preflight(body: JSON, target: ProviderModel) -> None:
    """Refuse a request the provider would refuse: ``body`` as sent (:func:`~.wire.wire_body`) against the
    provider's request contract, shapes then rules (:func:`replaykit.contracts.first_violation`).
    A transcript whose replay breaks a rule (a server tool id a proxy rewrote, a client tool_use before the
    server blocks of its turn, a reasoning item without its encrypted content under ``store: false``) is
    refused like a corrupt one: LOCAL_REQUEST_ERROR, phase validation, naming the rule and its place."""
    kinds = API_ROUTES[target.provider, target.api].contracts
    found = contracts.first_violation(kinds.request, wire_body(body, target)) if kinds else None
    if found is not None:
        raise LocalRequestError(f"the request would break its contract at {found.pointer or '/'}: "
                                f"{found.message}; refused before sending", phase="validation")


def _without(transcript: Mapping[str, Any], kind: str, api: str | None = None) -> JSON:
    """``transcript`` without the assistant blocks of type ``kind`` (of answers from ``api`` only, when
    given)."""
    def kept(message: JSON, block: JSON) -> bool:
        return block.get("type") != kind or (api is not None and block.get("api", message.get("api")) != api)

    messages = [{**message, "content": [block for block in message["content"] if kept(message, block)]}
                if message.get("role") == "assistant" else message for message in transcript["messages"]]
    return {**transcript, "messages": messages}


def _uncited_elsewhere(transcript: Mapping[str, Any], target: ProviderModel) -> JSON:
    """The defect of ``annotations-dropped-on-switch``: the text blocks of another provider lose their
    citations."""
    def uncited(message: JSON) -> JSON:
        if message.get("role") != "assistant" or (message.get("provider"), message.get("api")) == (
                target.provider, target.api):
            return message
        return {**message, "content": [{k: v for k, v in block.items() if k != "citations"}
                                       for block in message["content"]]}

    return {**transcript, "messages": [uncited(message) for message in transcript["messages"]]}


# ---------------------------------------------------------------- estimate and budget


class OverBudget(LocalRequestError):
    """The estimate of the next request is over the budget: LOCAL_REQUEST_ERROR, phase estimation."""

    def __init__(self, tokens: int, context_window: int, reserve: int) -> None:
        super().__init__(f"the request needs about {tokens} input tokens, over the budget of "
                         f"{context_window - reserve} (contextWindow {context_window} - reserve {reserve})",
                         phase="estimation")
        self.tokens = tokens


def estimate_tokens(transcript: JSON, target: ProviderModel, context_window: int, reserve: int) -> int:
    """The input-token estimate of the next request (:func:`replaykit.estimate.estimate`, anchored on valid
    usage), refused locally (LOCAL_REQUEST_ERROR, phase estimation) above ``context_window - reserve``."""
    try:
        tokens = _tokens(transcript, target)
        if tokens > context_window - reserve:
            raise OverBudget(tokens, context_window, reserve)
    except LocalRequestError:
        if mutant("estimate-error-to-zero"):
            return 0
        raise
    return tokens


def _tokens(transcript: JSON, target: ProviderModel) -> int:
    if mutant("estimator-assumes-name"):
        _tool_names(transcript)
    counted = _without(transcript, "hostedSearch") if mutant("search-not-estimated") else transcript
    if mutant("grounding-not-estimated"):
        counted = _without(counted, "hostedSearch", api="gemini-generate")
    found = estimate(counted, target)
    if found.anchor is not None and mutant("usage-double-count"):
        return found.tokens + _recount(counted, target, None, cjk=True)
    if found.anchor and mutant("timestamp-refresh-invalidates-usage") and _rebuilt(counted, found):
        return _recount(counted, target, None, cjk=True)
    if mutant("no-cjk-correction"):
        return found.breakdown.anchor + _recount(counted, target, found, cjk=False)
    return found.tokens


def _tool_names(transcript: JSON) -> int:
    """The defect of ``estimator-assumes-name``: every block other than text is taken for a tool call."""
    return sum(len(block["name"]) for block, _ in _blocks(transcript) if block["type"] != "text")


def _rebuilt(transcript: JSON, found: Estimate) -> bool:
    """The defect of ``timestamp-refresh-invalidates-usage``: any rebuild logged after the anchor's turn is
    taken for a change, whatever it built."""
    anchored = transcript["messages"][found.anchor.index]["timestamp"] if found.anchor else 0
    return any(entry["timestamp"] > anchored for entry in transcript.get("systemHistory") or [])


def _recount(transcript: JSON, target: ProviderModel, found: Estimate | None, *, cjk: bool) -> int:
    """The heuristic on the projected text after ``found``'s anchor (all of it without one); ``cjk=False``
    is the defect of ``no-cjk-correction``."""
    if found is not None and found.anchor is not None:
        later = transcript["messages"][found.anchor.index + 1:]
        transcript = {"version": 1, "system": None, "tools": [], "messages": later}
    parts = body_chars(project(transcript, target)).values()
    return sum((chars if cjk else Chars(chars.other + chars.cjk, 0)).tokens for chars in parts)


# ---------------------------------------------------------------- citations


def checked_citations(transcript: JSON, message: AssistantMessage) -> AssistantMessage:
    """``message`` with every citation that fails :func:`replaykit.citations.verify_transcript` against the
    search evidence before it removed (a document citation in a web search answer, an unknown URL...)."""
    if mutant("grounding-index-unchecked"):
        _cited_pages(message)
    if mutant("non-url-citation-accepted"):
        return message
    index = len(transcript["messages"])
    findings = errors_only(verify_transcript({"messages": [*transcript["messages"], message]}))
    prefix = f"/messages/{index}/content/"
    bad = {tuple(int(part) for part in finding.place[len(prefix):].split("/")[0:3:2])
           for finding in findings if finding.place.startswith(prefix) and "/citations/" in finding.place}
    for number, block in enumerate(message["content"]):
        if block["type"] == "text" and "citations" in block:
            kept = [c for k, c in enumerate(block["citations"]) if (number, k) not in bad]
            block["citations"] = kept
            if not kept:
                del block["citations"]
    return message


def _cited_pages(message: AssistantMessage) -> list[str]:
    """The defect of ``grounding-index-unchecked``: each grounding support's pages looked up by index in its
    answer's groundingChunks, unchecked (an index past the list raises IndexError)."""
    grounding = next((block["raw"] for block in message["content"] if block["type"] == "hostedSearch"
                      and isinstance(block.get("raw"), dict) and "groundingChunks" in block["raw"]), {})
    chunks = grounding.get("groundingChunks", [])
    return [chunks[index]["web"]["uri"] for block in message["content"] if block["type"] == "text"
            for support in block.get("citations", []) for index in support.get("groundingChunkIndices", [])]
