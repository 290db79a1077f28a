"""The Anthropic Messages request rules (``contracts/anthropic/request.rules.json`` says each one's real error
and source): ids and their pairing across blocks and messages, block order, thinking kept whole and in
place, tool names, empty content, the web search tool's domain lists.

Each check reads the whole request body and yields a :class:`~replaykit.contracts.rulebook.walk.RuleError`
per failure, placed from the body's root, with the values the provider's message names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from replaykit.contracts.rulebook.walk import Block, RuleError, Turn, all_blocks, blocks, turns

__all__ = ["ANTHROPIC_RULES"]

Check = Callable[[Mapping[str, object]], Iterator[RuleError]]
_CLIENT_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_SERVER_ID = re.compile(r"^srvtoolu_[a-zA-Z0-9_]+$")
_THINKING = ("thinking", "redacted_thinking")
_RESULT_OF = {"tool_search_tool_regex": "tool_search_tool_result",
              "tool_search_tool_bm25": "tool_search_tool_result"}


def _server_result(block: Block) -> bool:
    """A server tool's result block (``web_search_tool_result``, ``code_execution_tool_result``...)."""
    return block.type.endswith("_tool_result") and block.type not in ("tool_result", "mcp_tool_result")


def _result_type(name: str) -> str:
    return _RESULT_OF.get(name, f"{name}_tool_result")


def _thinking_type(body: Mapping[str, object]) -> str:
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    return kind if isinstance(kind, str) else "disabled"


# ---------------------------------------------------------------- client tools: ids and pairing


def _tool_use_answered(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = turns(body)
    for at, turn in enumerate(listed[:-1]):
        following = listed[at + 1]
        answered = {b.id for b in following.of_type("tool_result")} if following.role == "user" else set()
        missing = [b for b in turn.of_type("tool_use") if b.id and b.id not in answered] \
            if turn.role == "assistant" else []
        if missing:
            ids = ", ".join(b.id for b in missing)
            yield RuleError(f"tool_use {ids} has no tool_result in the next user message; answer each "
                            "tool_use there", [*missing[0].path, "id"], message=missing[0].message, ids=ids)


def _tool_results_lead(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = turns(body)
    for at, turn in enumerate(listed):
        previous = listed[at - 1] if at and turn.role == "user" else Turn("")
        calls = {b.id: b for b in previous.of_type("tool_use")}
        led = True
        for block in turn.blocks if turn.role == "user" else []:
            led = led and block.type == "tool_result"
            if block.type == "tool_result" and not led and block.id in calls:
                yield RuleError(f"tool_result {block.id} comes after other content; put every tool_result "
                                "first in the user message", block.path, message=calls[block.id].message,
                                ids=block.id)


def _tool_result_matches(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = turns(body)
    for at, turn in enumerate(listed):
        previous = listed[at - 1] if at and listed[at - 1].role == "assistant" else Turn("")
        calls = {b.id for b in previous.of_type("tool_use")}
        for block in turn.of_type("tool_result") if turn.role == "user" else []:
            if block.id not in calls:
                yield RuleError(f"tool_result {block.id} answers no tool_use of the previous assistant turn",
                                [*block.path, "tool_use_id"], message=block.message, block=block.index,
                                id=block.id)


def _tool_use_id(body: Mapping[str, object]) -> Iterator[RuleError]:
    for block in all_blocks(body):
        if block.type == "tool_use" and block.id and not _CLIENT_ID.match(block.id):
            yield RuleError(f"tool_use id {block.id!r} has characters outside [a-zA-Z0-9_-]",
                            [*block.path, "id"], message=block.message, block=block.index)


# ---------------------------------------------------------------- server tools: ids, pairing, order


def _server_tool_use_id(body: Mapping[str, object]) -> Iterator[RuleError]:
    for block in all_blocks(body):
        server = block.type == "server_tool_use" or _server_result(block)
        if server and block.id and not _SERVER_ID.match(block.id):
            member = "id" if block.type == "server_tool_use" else "tool_use_id"
            yield RuleError(f"{block.type} {member} {block.id!r} is not a srvtoolu_ id; replay the id as "
                            "received", [*block.path, member], message=block.message, block=block.index,
                            field=f"{block.type}.{member}")


def _server_call_as_client(body: Mapping[str, object]) -> Iterator[RuleError]:
    for turn in turns(body):
        clients = {b.id: b for b in turn.of_type("tool_use") if b.id.startswith("srvtoolu_")}
        for block in turn.blocks:
            if _server_result(block) and block.id in clients:
                call = clients[block.id]
                yield RuleError(f"server call {block.id} is replayed as a client tool_use; replay it as the "
                                "server_tool_use it was", [*call.path, "type"], message=block.message,
                                block=block.index, type=block.type, id=block.id)


def _server_result_follows_call(body: Mapping[str, object]) -> Iterator[RuleError]:
    calls: set[str] = set()
    clients = {b.id for b in all_blocks(body) if b.type == "tool_use"}
    for block in all_blocks(body):
        if block.type == "server_tool_use":
            calls.add(block.id)
        elif _server_result(block) and block.id not in calls and block.id not in clients:
            yield RuleError(f"{block.type} {block.id} has no server_tool_use before it; keep the call "
                            "and its result together, in order", [*block.path, "tool_use_id"],
                            message=block.message, block=block.index, type=block.type, id=block.id)


def _server_call_has_result(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = turns(body)
    for at, turn in enumerate(listed):
        later = {b.id for after in listed[at:] for b in after.blocks if _server_result(b)}
        for call in turn.of_type("server_tool_use") if not _may_be_open(listed, at) else []:
            if call.id not in later:
                yield _unfinished(call, "has no result block after it; keep the result the response carried")


def _may_be_open(listed: list[Turn], at: int) -> bool:
    """Whether the assistant turn ``listed[at]`` may hold a server call still without its result: it is the
    final message (a ``pause_turn`` continuation), or the last assistant turn with client tool_use blocks
    (the API runs a server call deferred beside them after their results). Other turns are never open."""
    turn = listed[at]
    last = max((i for i, each in enumerate(listed) if each.role == "assistant"), default=-1)
    deferred = at == last and bool(turn.of_type("tool_use"))
    return turn.role != "assistant" or at == len(listed) - 1 or deferred


def _unfinished(call: Block, what: str) -> RuleError:
    name = str(call.data.get("name", ""))
    return RuleError(f"{name} call {call.id} {what}", call.path, message=call.message, name=name, id=call.id,
                     result=_result_type(name))


def _client_tool_use_last(body: Mapping[str, object]) -> Iterator[RuleError]:
    for turn in turns(body):
        calls = {b.id: b for b in turn.of_type("server_tool_use")}
        client_seen = False
        for block in turn.blocks if turn.role == "assistant" else []:
            client_seen = client_seen or block.type == "tool_use"
            if client_seen and _server_result(block) and block.id in calls:
                yield _unfinished(calls[block.id], "and its result come after a client tool_use; client "
                                  "tool_use blocks go last in the assistant message")


# ---------------------------------------------------------------- thinking


def _thinking_first(body: Mapping[str, object]) -> Iterator[RuleError]:
    if _thinking_type(body) == "disabled":
        return
    for turn in turns(body):
        for index in sorted({b.message for b in turn.blocks}) if turn.role == "assistant" else []:
            first = [b for b in turn.blocks if b.message == index]
            if any(b.type in _THINKING for b in first) and first[0].type not in _THINKING:
                yield RuleError(f"messages[{index}] holds thinking but starts with {first[0].type}; keep the "
                                "thinking blocks first, in place", [*first[0].path, "type"], message=index,
                                found=first[0].type)


def _thinking_not_last(body: Mapping[str, object]) -> Iterator[RuleError]:
    for turn in turns(body):
        for index in sorted({b.message for b in turn.blocks}) if turn.role == "assistant" else []:
            final = [b for b in turn.blocks if b.message == index][-1]
            if final.type == "thinking":
                yield RuleError(f"messages[{index}] ends with a thinking block; replay the blocks after it",
                                final.path, message=index)


def _thinking_needs_enabled(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = _listed(body, "messages")
    last = listed[-1] if listed else None
    if _thinking_type(body) != "disabled" or not isinstance(last, dict) or last.get("role") != "assistant":
        return
    for block in blocks(len(listed) - 1, last):
        if block.type in _THINKING:
            yield RuleError("the final assistant message holds thinking while thinking is disabled; enable "
                            "thinking or leave the block out", block.path, message=block.message,
                            block=block.index)
            return


def _thinking_leads_tool_loop(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = turns(body)
    looping = len(listed) > 1 and listed[-1].role == "user" and bool(listed[-1].of_type("tool_result"))
    if _thinking_type(body) != "enabled" or not looping or listed[-2].role != "assistant" \
            or not listed[-2].blocks:
        return
    first = listed[-2].blocks[0]
    if first.type not in _THINKING:
        yield RuleError(f"thinking is enabled and the tool loop's assistant message starts with "
                        f"{first.type}; replay its thinking block first", [*first.path, "type"],
                        message=first.message, found=first.type)


def _thinking_signed(body: Mapping[str, object]) -> Iterator[RuleError]:
    for block in all_blocks(body):
        if block.type == "thinking" and block.data.get("signature") == "":
            yield RuleError("a thinking block's signature is empty; replay the signature as received",
                            [*block.path, "signature"], message=block.message, block=block.index)


def _redacted_thinking_data(body: Mapping[str, object]) -> Iterator[RuleError]:
    for block in all_blocks(body):
        if block.type == "redacted_thinking" and block.data.get("data") == "":
            yield RuleError("a redacted_thinking block's data is empty; replay the data the response carried",
                            [*block.path, "data"], message=block.message, block=block.index)


# ---------------------------------------------------------------- content, tools


def _non_empty_content(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = _listed(body, "messages")
    for index, message in enumerate(listed):
        final_assistant = index == len(listed) - 1 and isinstance(message, dict) \
            and message.get("role") == "assistant"
        if isinstance(message, dict) and message.get("content") in ("", []) and not final_assistant:
            yield RuleError(f"messages[{index}] has empty content; only a final assistant message may",
                            ["messages", index, "content"], message=index)


def _listed(body: Mapping[str, object], member: str) -> list[Any]:
    found = body.get(member)
    return found if isinstance(found, list) else []


def _text_not_blank(body: Mapping[str, object]) -> Iterator[RuleError]:
    for index, message in enumerate(_listed(body, "messages")):
        content = message.get("content") if isinstance(message, dict) else None
        for block in blocks(index, message) if isinstance(content, list) else []:
            text = block.data.get("text") if block.type == "text" else None
            if isinstance(text, str) and text and not text.strip():
                yield RuleError("a text block holds only whitespace; drop it or give it text",
                                [*block.path, "text"])


def _tool_names_unique(body: Mapping[str, object]) -> Iterator[RuleError]:
    seen: set[str] = set()
    for index, tool in enumerate(_listed(body, "tools")):
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and name in seen:
            yield RuleError(f"tool name {name!r} is used twice; give every tool its own name",
                            ["tools", index, "name"], name=name)
        if isinstance(name, str):
            seen.add(name)


def _one_domain_list(body: Mapping[str, object]) -> Iterator[RuleError]:
    for index, tool in enumerate(_listed(body, "tools")):
        if isinstance(tool, dict) and tool.get("allowed_domains") is not None \
                and tool.get("blocked_domains") is not None:
            yield RuleError("allowed_domains and blocked_domains are both set; keep one of them",
                            ["tools", index, "blocked_domains"])


def _encrypted_kept(body: Mapping[str, object]) -> Iterator[RuleError]:
    for block in all_blocks(body):
        content = block.data.get("content") if block.type == "web_search_tool_result" else None
        for at, result in enumerate(content if isinstance(content, list) else []):
            if isinstance(result, dict) and result.get("encrypted_content") == "":
                yield RuleError("a search result's encrypted_content is empty; replay it as received",
                                [*block.path, "content", at, "encrypted_content"])
        cited = block.data.get("citations") if block.type == "text" else None
        for at, citation in enumerate(cited if isinstance(cited, list) else []):
            if isinstance(citation, dict) and citation.get("encrypted_index") == "":
                yield RuleError("a web citation's encrypted_index is empty; replay it as received",
                                [*block.path, "citations", at, "encrypted_index"])


ANTHROPIC_RULES: dict[str, Check] = {
    "anthropic.tool_use_answered": _tool_use_answered,
    "anthropic.tool_results_lead": _tool_results_lead,
    "anthropic.tool_result_matches": _tool_result_matches,
    "anthropic.tool_use_id": _tool_use_id,
    "anthropic.server_tool_use_id": _server_tool_use_id,
    "anthropic.server_call_as_client": _server_call_as_client,
    "anthropic.server_result_follows_call": _server_result_follows_call,
    "anthropic.server_call_has_result": _server_call_has_result,
    "anthropic.client_tool_use_last": _client_tool_use_last,
    "anthropic.thinking_first": _thinking_first,
    "anthropic.thinking_not_last": _thinking_not_last,
    "anthropic.thinking_needs_enabled": _thinking_needs_enabled,
    "anthropic.thinking_leads_tool_loop": _thinking_leads_tool_loop,
    "anthropic.thinking_signed": _thinking_signed,
    "anthropic.redacted_thinking_data": _redacted_thinking_data,
    "anthropic.non_empty_content": _non_empty_content,
    "anthropic.text_not_blank": _text_not_blank,
    "anthropic.tool_names_unique": _tool_names_unique,
    "anthropic.one_domain_list": _one_domain_list,
    "anthropic.encrypted_kept": _encrypted_kept,
}
