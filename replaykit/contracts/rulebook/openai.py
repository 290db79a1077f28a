"""The OpenAI Responses request rules (``contracts/openai/request.rules.json`` says each one's real error and
source; Azure OpenAI shares them): input item ids, ``call_id`` pairing, reasoning items and what must follow
them, ``store: false`` with items referred to by id, ``previous_response_id`` with replayed items."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from replaykit.contracts.rulebook.walk import Item, RuleError, input_items

__all__ = ["OPENAI_RULES"]

Check = Callable[[Mapping[str, object]], Iterator[RuleError]]
_PREFIX = {"reasoning": "rs", "function_call": "fc", "web_search_call": "ws"}
_OUTPUT_TYPES = frozenset({"reasoning", "function_call", "web_search_call", "file_search_call",
                           "computer_call", "code_interpreter_call", "image_generation_call",
                           "local_shell_call", "shell_call", "apply_patch_call", "mcp_call", "mcp_list_tools",
                           "mcp_approval_request", "custom_tool_call", "tool_search_call"})


def _prefix(item: Item) -> str:
    """The id prefix OpenAI gives an item of this type ("" when the rule does not know it)."""
    if item.type == "message":
        return "msg" if item.data.get("role") == "assistant" else ""
    return _PREFIX.get(item.type, "")


def _is_output(item: Item) -> bool:
    """An item the model produced (replayed output), as opposed to the caller's input."""
    return item.type in _OUTPUT_TYPES or (item.type == "message" and item.data.get("role") == "assistant")


def _chained(body: Mapping[str, object]) -> bool:
    """Whether earlier items come from the server (``previous_response_id`` or ``conversation``)."""
    return bool(body.get("previous_response_id")) or bool(body.get("conversation"))


def _item_id_prefix(body: Mapping[str, object]) -> Iterator[RuleError]:
    for item in input_items(body):
        prefix, given = _prefix(item), item.data.get("id")
        if prefix and isinstance(given, str) and not given.startswith(prefix + "_"):
            yield RuleError(f"a {item.type} item's id {given!r} does not begin with {prefix}_; replay the id "
                            "as received, or leave it out", [*item.path, "id"], index=item.index, id=given,
                            prefix=prefix)


def _store_false_reference(body: Mapping[str, object]) -> Iterator[RuleError]:
    if body.get("store") is not False:
        return
    for item in input_items(body):
        by_id = item.type == "item_reference" or (item.type == "reasoning" and not item.data.get(
            "encrypted_content"))
        if by_id and item.text("id"):
            yield RuleError(f"{item.type} {item.text('id')} is referred to by id with store: false; send it "
                            "whole (reasoning: its encrypted_content) or store responses",
                            [*item.path, "id"], id=item.text("id"))


def _previous_response_replayed(body: Mapping[str, object]) -> Iterator[RuleError]:
    if not body.get("previous_response_id"):
        return
    for item in input_items(body):
        if _is_output(item) and item.text("id"):
            yield RuleError(f"{item.type} {item.text('id')} is replayed while previous_response_id already "
                            "holds it; send only the new items", [*item.path, "id"], id=item.text("id"))
            return


def _unique_item_ids(body: Mapping[str, object]) -> Iterator[RuleError]:
    seen: set[str] = set()
    for item in input_items(body):
        given = item.text("id")
        if given and given in seen:
            yield RuleError(f"item id {given} appears twice in input; replay each item once",
                            [*item.path, "id"], id=given)
        seen.add(given)


def _function_call_output_matches(body: Mapping[str, object]) -> Iterator[RuleError]:
    if _chained(body):
        return
    calls: set[str] = set()
    for item in input_items(body):
        if item.type == "function_call":
            calls.add(item.text("call_id"))
        elif item.type == "function_call_output" and item.text("call_id") not in calls:
            yield RuleError(f"function_call_output {item.text('call_id')} follows no function_call with that "
                            "call_id; replay the function_call before its output", [*item.path, "call_id"],
                            call_id=item.text("call_id"))


def _function_call_answered(body: Mapping[str, object]) -> Iterator[RuleError]:
    if _chained(body):
        return
    listed = input_items(body)
    for at, item in enumerate(listed):
        answered = {later.text("call_id") for later in listed[at + 1:]
                    if later.type == "function_call_output"}
        if item.type == "function_call" and item.text("call_id") not in answered:
            yield RuleError(f"function_call {item.text('call_id')} has no function_call_output after it; "
                            "send the tool's output", [*item.path, "call_id"], call_id=item.text("call_id"))


def _reasoning_followed(body: Mapping[str, object]) -> Iterator[RuleError]:
    listed = input_items(body)
    for at, item in enumerate(listed):
        following = listed[at + 1] if at + 1 < len(listed) else None
        if item.type == "reasoning" and item.text("id") and (following is None or not _is_output(following)):
            yield RuleError(f"reasoning {item.text('id')} is not followed by the item it produced; replay "
                            "the output items after it, in order", [*item.path, "id"], id=item.text("id"))


OPENAI_RULES: dict[str, Check] = {
    "openai.item_id_prefix": _item_id_prefix,
    "openai.store_false_reference": _store_false_reference,
    "openai.previous_response_replayed": _previous_response_replayed,
    "openai.unique_item_ids": _unique_item_ids,
    "openai.function_call_output_matches": _function_call_output_matches,
    "openai.function_call_answered": _function_call_answered,
    "openai.reasoning_followed": _reasoning_followed,
}
