"""What the wire rules read: a request's messages and input items with their places, its turns (consecutive
messages of one role, which the Messages API combines), and :class:`RuleError`, the failure a rule raises."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from jsonschema import ValidationError  # type: ignore[import-untyped]

__all__ = ["Block", "Item", "RuleError", "Turn", "all_blocks", "blocks", "input_items", "turns"]


class RuleError(ValidationError):  # type: ignore[misc]
    """A wire rule's failure: where (``path``, from the request's root), replaykit's words (``message``) and
    the values the provider's own message names (``params``: message and block indices, ids...)."""

    def __init__(self, what: str, path: Sequence[str | int], /, **params: object) -> None:
        super().__init__(what, path=list(path))
        self.params = {name: str(value) for name, value in params.items()}


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of ``messages[message]``, at ``content[index]`` (string content: one text block)."""

    message: int
    index: int
    data: Mapping[str, object]

    @property
    def type(self) -> str:
        kind = self.data.get("type")
        return kind if isinstance(kind, str) else ""

    @property
    def id(self) -> str:
        """The block's ``id`` (a call) or ``tool_use_id`` (a result), "" when it has none."""
        found = self.data.get("id", self.data.get("tool_use_id"))
        return found if isinstance(found, str) else ""

    @property
    def path(self) -> list[str | int]:
        return ["messages", self.message, "content", self.index]


@dataclass(slots=True)
class Turn:
    """Consecutive messages of one role: their blocks in order."""

    role: str
    blocks: list[Block] = field(default_factory=list)

    def of_type(self, *types: str) -> list[Block]:
        return [block for block in self.blocks if block.type in types]


def _messages(body: Mapping[str, object]) -> Iterator[tuple[int, Mapping[str, object]]]:
    listed = body.get("messages")
    for index, message in enumerate(listed if isinstance(listed, list) else []):
        if isinstance(message, dict):
            yield index, message


def blocks(index: int, message: Mapping[str, object]) -> list[Block]:
    """The blocks of ``message`` (``messages[index]``); a string content is one text block."""
    content = message.get("content")
    if isinstance(content, str):
        return [Block(index, 0, {"type": "text", "text": content})]
    listed = content if isinstance(content, list) else []
    return [Block(index, at, block) for at, block in enumerate(listed) if isinstance(block, dict)]


def turns(body: Mapping[str, object]) -> list[Turn]:
    """The request's messages as turns (consecutive messages of one role combined, as the API does)."""
    found: list[Turn] = []
    for index, message in _messages(body):
        role = message.get("role") if isinstance(message.get("role"), str) else ""
        if not found or found[-1].role != role:
            found.append(Turn(str(role)))
        found[-1].blocks.extend(blocks(index, message))
    return found


def all_blocks(body: Mapping[str, object]) -> Iterator[Block]:
    """Every block of every message, in order."""
    for index, message in _messages(body):
        yield from blocks(index, message)


@dataclass(frozen=True, slots=True)
class Item:
    """One entry of an OpenAI Responses ``input`` list, at ``input[index]``."""

    index: int
    data: Mapping[str, object]

    @property
    def type(self) -> str:
        """Its ``type``; a role-only entry is a ``message``."""
        kind = self.data.get("type", "message" if "role" in self.data else "")
        return kind if isinstance(kind, str) else ""

    def text(self, name: str) -> str:
        value = self.data.get(name)
        return value if isinstance(value, str) else ""

    @property
    def path(self) -> list[str | int]:
        return ["input", self.index]


def input_items(body: Mapping[str, object]) -> list[Item]:
    """The objects of a Responses request's ``input`` list (none when ``input`` is a string)."""
    listed = body.get("input")
    return [Item(at, item) for at, item in enumerate(listed if isinstance(listed, list) else [])
            if isinstance(item, dict)]
