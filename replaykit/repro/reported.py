"""A reported transcript, read: which of the forms users paste it is, redacted, as a neutral transcript.

:func:`read` tells the forms apart by their shape: the neutral transcript, a request body of a model API
(:data:`API_NAMES`) or its bare array, a pydantic-ai history (:mod:`~replaykit.repro.pydantic_history`),
a cassette's failing request (:mod:`~replaykit.repro.failing`), a JSONL session log. The input is bounded
(:data:`MAX_INPUT`, :data:`MAX_LINES`) and scrubbed (:func:`replaykit.redact.redact_document`) before anything
reads it; a file that is none is a :class:`~replaykit.errors.UsageError`. Called by :mod:`replaykit.repro`;
the forms are listed in docs/architecture/repro.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from replaykit import cassette, jsondoc
from replaykit.errors import CassetteError, UsageError, located
from replaykit.jsondoc import JSON
from replaykit.redact import SecretFinding, redact_document
from replaykit.repro.failing import failing_request
from replaykit.repro.pydantic_history import from_pydantic_ai, is_history
from replaykit.routes import PROVIDER_APIS, Api
from replaykit.transcript import (
    ConversionError,
    Transcript,
    from_anthropic_request,
    from_chat_request,
    from_gemini_request,
    from_openai_request,
)

__all__ = ["API_NAMES", "MAX_INPUT", "MAX_LINES", "TIMESTAMP", "Reported", "read"]

MAX_INPUT = 64 << 20  # bytes: a long session log is a few MB
MAX_LINES = 100_000
TIMESTAMP = 1_764_662_400_000  # 2025-12-02T08:00:00Z: the first converted message's time (never "now")
_FIX = ("give a neutral transcript (contracts/replaykit/transcript.schema.json), an Anthropic Messages, "
        "OpenAI Responses, Chat Completions or Gemini request body, its messages / input / contents array, "
        "a JSONL log of them, a pydantic-ai message history or a cassette")
_CASSETTE = re.compile(r"^interactions:", re.M)  # a cassette's top-level list, vcrpy's or replaykit's
_OPENAI_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning", "web_search_call",
                           "item_reference", "code_interpreter_call", "file_search_call", "mcp_call"})
_OPENAI_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file", "refusal"})
_CHAT_ROLES = frozenset({"system", "developer", "tool", "function"})
_CHAT_FIELDS = frozenset({"web_search_options", "max_completion_tokens", "stream_options", "response_format",
                          "n", "logprobs", "frequency_penalty", "presence_penalty", "reasoning_effort"})
#: Each model API as the forms name it.
API_NAMES: dict[Api, str] = {"anthropic-messages": "Anthropic Messages",
                             "openai-responses": "OpenAI Responses", "openai-chat": "Chat Completions",
                             "gemini-generate": "Gemini generateContent"}
#: The provider a bare request body of each API is read for (the body does not say which host it went to):
#: the first in the route table that serves it.
_PROVIDERS: dict[str, str] = {}
for _provider, _apis in PROVIDER_APIS.items():
    for _api in _apis:
        _PROVIDERS.setdefault(_api, _provider)


@dataclass
class Reported:
    """What was read: the ``form`` in words, the neutral ``transcript`` (redacted; not yet validated), the
    keys scrubbed from it (``redacted``, masked), the ``provider`` and ``model`` of the request it came
    from (None for a neutral transcript, or a bare list without a model), and that ``request`` body itself
    (redacted) when the input is one: a request body, a JSONL log's last one, a cassette's failing one."""

    path: Path
    form: str
    transcript: Any
    redacted: list[SecretFinding] = field(default_factory=list)
    provider: str | None = None
    model: str | None = None
    request: JSON | None = None
    api: Api | None = None


def read(path: Path) -> Reported:
    """Read, redact and convert the reported transcript at ``path`` (see the module docstring)."""
    text = _text(path)
    try:
        doc = jsondoc.loads(text)
    except jsondoc.TooDeep as exc:
        raise UsageError(located(path, None, str(exc), "a transcript nests 10-20 levels; this is not one")) \
            from exc
    except ValueError as exc:
        return _recorded(path, text) if _CASSETTE.search(text) else _jsonl(path, text, exc)
    scrubbed, found = redact_document(doc, str(path))
    return _convert(path, scrubbed, found, _same, "")


def _text(path: Path) -> str:
    try:
        if not path.is_file():
            raise UsageError(located(path, None, "no such file (or not a regular file)",
                                     "name the transcript file"))
        size = path.stat().st_size
        if size > MAX_INPUT:
            raise UsageError(located(path, None, f"{size:,} bytes: more than the {MAX_INPUT >> 20} MiB a "
                                     "reported transcript may have", "cut the log to the failing session"))
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(located(path, None, f"cannot read: {exc.strerror or exc}",
                                 "check the path")) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(located(path, f"byte {exc.start}", "not UTF-8 text", "save the transcript as UTF-8 "
                                 "JSON")) from exc


# ---------------------------------------------------------------- one JSON document


Place = Callable[[str], str]  # a JSON pointer into the converted document -> the place in the file


def _same(pointer: str) -> str:
    return pointer or "/"


def _convert(path: Path, doc: Any, found: list[SecretFinding], place: Place, log: str) -> Reported:
    """The neutral transcript of one JSON document (a whole file, or the conversation of a JSONL log);
    ``place`` says where a pointer into ``doc`` is in the file."""
    if isinstance(doc, dict) and _neutral(doc):
        return Reported(path, f"{log}neutral transcript", doc, found)
    api = _body_api(doc)
    if api is not None:
        return _converted(path, doc, found, place, f"{log}{API_NAMES[api]} request body", _PROVIDERS[api],
                          api)
    if is_history(doc):
        return _history(path, doc, found, place, f"{log}pydantic-ai message history")
    if isinstance(doc, list):
        return _array(path, doc, found, place, log)
    got = "an object without messages or input" if isinstance(doc, dict) else f"a JSON {_kind(doc)}"
    raise UsageError(located(path, place(""), f"{got}: not a transcript", _FIX))


def _body_api(doc: object) -> Api | None:
    """The API of a request body: Gemini's ``contents``, Responses' ``input``, and ``messages``: Chat
    Completions when a message or a field says so (a system, developer or tool message, tool calls,
    ``web_search_options``...), else Anthropic Messages."""
    if not isinstance(doc, dict):
        return None
    if "contents" in doc:
        return "gemini-generate"
    if "input" in doc:
        return "openai-responses"
    if "messages" not in doc:
        return None
    messages = doc["messages"] if isinstance(doc["messages"], list) else []
    chat = any(isinstance(m, dict) and (m.get("role") in _CHAT_ROLES or "tool_calls" in m) for m in messages)
    return "openai-chat" if chat or _CHAT_FIELDS & doc.keys() else "anthropic-messages"


def _neutral(doc: JSON) -> bool:
    messages = doc.get("messages")
    return "version" in doc or (isinstance(messages, list) and any(_neutral_message(m) for m in messages))


def _neutral_message(message: object) -> bool:
    return isinstance(message, dict) and ("timestamp" in message or message.get("role") == "toolResult")


def _array(path: Path, items: list[object], found: list[SecretFinding], place: Place, log: str) -> Reported:
    if any(_neutral_message(item) for item in items):
        transcript = {"version": 1, "system": None, "tools": [], "messages": items}
        return Reported(path, f"{log}neutral messages array", transcript, found)
    if any(isinstance(item, dict) and "parts" in item for item in items):
        return _converted(path, items, found, place, f"{log}Gemini contents array", "gemini",
                          "gemini-generate")
    if any(isinstance(item, dict) and (item.get("role") == "tool" or "tool_calls" in item) for item in items):
        return _converted(path, items, found, place, f"{log}Chat Completions messages array", "openai",
                          "openai-chat")
    if any(_openai_item(item) for item in items):
        return _converted(path, items, found, place, f"{log}OpenAI Responses input array", "openai",
                          "openai-responses")
    plain = all(isinstance(item, dict) and isinstance(item.get("content"), str) for item in items)
    form = "Anthropic messages array" + (" (plain text messages: read as Anthropic Messages)"
                                         if plain else "")
    return _converted(path, items, found, place, f"{log}{form}", "anthropic", "anthropic-messages")


def _openai_item(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    content = item.get("content")
    parts = content if isinstance(content, list) else []
    return (item.get("type") in _OPENAI_ITEMS or item.get("role") in ("system", "developer")
            or any(isinstance(part, dict) and part.get("type") in _OPENAI_PARTS for part in parts))


_CONVERTERS: dict[Api, Callable[..., Transcript]] = {
    "anthropic-messages": from_anthropic_request, "openai-responses": from_openai_request,
    "openai-chat": from_chat_request, "gemini-generate": from_gemini_request}


def _converted(path: Path, doc: object, found: list[SecretFinding], place: Place, form: str,
               provider: str, api: Api, model: str | None = None) -> Reported:
    """``doc``, a request body of ``api`` (or its list) to ``provider``, converted; ``model``: the one its
    route names when the body does not (Gemini's path)."""
    named = {} if api == "anthropic-messages" else {"provider": provider}
    try:
        transcript = _CONVERTERS[api](doc, timestamp=TIMESTAMP, **named)
    except ConversionError as exc:
        raise _unconverted(path, exc, place, form) from exc
    body = doc if isinstance(doc, dict) else None
    model = body.get("model") if body is not None and isinstance(body.get("model"), str) else model
    return Reported(path, form, transcript, found, provider, model or None, body, api)


def _unconverted(path: Path, exc: ConversionError, place: Place, form: str) -> UsageError:
    pointer, _, message = str(exc).partition(": ")
    return UsageError(located(path, place("" if pointer == "/" else pointer), message,
                              f"read as: {form}; fix that value, or give the neutral transcript"))


def _history(path: Path, doc: list[object], found: list[SecretFinding], place: Place, form: str) -> Reported:
    try:
        converted = from_pydantic_ai(doc, timestamp=TIMESTAMP)
    except ConversionError as exc:
        raise _unconverted(path, exc, place, form) from exc
    left = converted.left_out
    if left:
        form += f" (left out, no neutral form: {', '.join(left[:3])}{' ...' if len(left) > 3 else ''})"
    return Reported(path, form, converted.transcript, found)


# ---------------------------------------------------------------- a cassette


def _recorded(path: Path, text: str) -> Reported:
    """The failing request of the cassette ``text`` (:func:`replaykit.repro.failing.failing_request`)."""
    try:
        tape = cassette.loads(text, path, cache=False)
    except CassetteError as exc:
        raise UsageError(str(exc)) from exc
    chosen = failing_request(tape)
    if chosen is None:
        raise UsageError(located(path, None, "a cassette without a model request (" + ", ".join(
            API_NAMES.values()) + ")", "give the cassette of the failing model call"))
    where = f"interaction {chosen.index}"
    body = chosen.interaction.request.json()
    if not isinstance(body, dict):
        raise UsageError(located(path, where, "its request body is not a JSON object",
                                 "give the cassette of the failing model call"))
    scrubbed, found = redact_document(body, str(path))
    found = [replace(finding, field=f"{where} request {finding.field}") for finding in found]
    form = (f"cassette, interaction {chosen.index} of {len(tape.interactions)} ({chosen.why}): "
            f"{API_NAMES[chosen.api]} request body")
    return _converted(path, scrubbed, found, lambda pointer: f"{where} request {pointer or '/'}", form,
                      chosen.provider, chosen.api, chosen.model)


def _kind(value: object) -> str:
    return {str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")


# ---------------------------------------------------------------- JSONL session logs


def _jsonl(path: Path, text: str, error: ValueError) -> Reported:
    """A JSONL log: one JSON value a line (blank lines skipped); else the whole file's JSON error."""
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) < 2 or not _parses(lines[0][1]):  # one JSON document, broken: its own error and place
        raise UsageError(located(path, _where(error), f"not JSON: {_reason(error)}", _FIX)) from error
    if len(lines) > MAX_LINES:
        raise UsageError(located(path, None, f"{len(lines):,} lines: more than {MAX_LINES:,}",
                                 "cut the log to the failing session"))
    values = [_line(path, number, line) for number, line in lines]
    scrubbed, found = redact_document([value for _, value in values], str(path))
    numbers = [number for number, _ in values]
    found = [replace(finding, field=_on_line(numbers)(finding.field)) for finding in found]
    numbered = list(zip(numbers, scrubbed, strict=True))
    bodies = [(number, value) for number, value in numbered if _body(value)]
    if len(bodies) == len(numbered):
        number, last = bodies[-1]
        return _convert(path, last, found, lambda pointer: f"line {number} {pointer}".rstrip(),
                        "JSONL log, its last line: ")
    messages = [_message(path, number, value) for number, value in numbered]
    return _convert(path, messages, found, _on_line(numbers), "JSONL session log: ")


def _body(value: object) -> bool:
    return isinstance(value, dict) and _body_api(value) is not None and "role" not in value


def _on_line(numbers: list[int]) -> Place:
    """Where a pointer into the list of a log's messages is: ``/3/content`` -> ``line 7 /content``."""
    def place(pointer: str) -> str:
        head, _, rest = pointer.lstrip("/").partition("/")
        if not head.isdigit() or int(head) >= len(numbers):
            return pointer or "/"
        return f"line {numbers[int(head)]}" + (f" /{rest}" if rest else "")
    return place


def _parses(line: str) -> bool:
    try:
        jsondoc.loads(line)
    except ValueError:
        return False
    return True


def _line(path: Path, number: int, line: str) -> tuple[int, object]:
    try:
        return number, jsondoc.loads(line)
    except ValueError as exc:
        raise UsageError(located(path, f"line {number}", f"not JSON: {_reason(exc)}",
                                 "a JSONL log holds one JSON value a line")) from exc


def _message(path: Path, number: int, value: object) -> object:
    """A log line's message: itself, or the ``message`` object of its envelope."""
    if isinstance(value, dict) and isinstance(value.get("message"), dict):
        return value["message"]
    if isinstance(value, dict) and ("role" in value or "type" in value):
        return value
    raise UsageError(located(path, f"line {number}", "neither a message, a {\"message\": ...} envelope nor a "
                             "request body", "keep one message (or request body) a line"))


def _where(error: ValueError) -> str | None:
    return f"{error.lineno}:{error.colno}" if isinstance(error, json.JSONDecodeError) else None


def _reason(error: ValueError) -> str:
    """Why a text is not JSON, without a "not JSON:" of its own (the message says it once)."""
    return error.msg if isinstance(error, json.JSONDecodeError) else str(error).removeprefix("not JSON: ")
