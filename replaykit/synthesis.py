"""Synthesized provider traffic: the SSE stream of a final response body, event by event.

Final response bodies (:func:`anthropic_message`, :func:`openai_response`, :func:`gemini_response`,
:func:`chat_completion`), their streams derived block by block, item by item or chunk by chunk, plausible
event offsets and the event-stream bodies (:func:`sse_body`, data-only :func:`gemini_sse_body` and
:func:`chat_sse_body`); deterministic. Used by
``scripts/synthesize_cassettes`` (the bundled cassettes) and by ``replaykit repro``; a cassette holding such
traffic is marked ``origin: synthesized``.
"""

from __future__ import annotations

import json
import re

from replaykit import sse
from replaykit.jsondoc import JSON

__all__ = ["A_DELAY", "O_DELAY", "a_offsets", "a_stream_events", "anthropic_message", "anthropic_usage",
           "block_events", "chat_chunks", "chat_completion", "chat_sse_body", "chunks", "compact",
           "gemini_chunks", "gemini_json", "gemini_response", "gemini_sse_body", "item_events", "message_end",
           "message_start", "o_offsets", "o_stream_events", "openai_response", "sse_body"]

Json = JSON


def compact(value: object) -> str:
    """JSON as the providers send it: compact, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def sse_body(events: list[tuple[str, Json]]) -> bytes:
    """``event: X`` / ``data: {json}`` blocks, one per event."""
    return sse.serialize(sse.encode(data=compact(data), event=name) for name, data in events)


# ---------------------------------------------------------------- final bodies


def anthropic_usage(input_tokens: int, output_tokens: int, searches: int = 0, fetches: int = 0) -> Json:
    """The final ``usage`` of an Anthropic message (``input_tokens`` includes the search results read)."""
    return {"input_tokens": input_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output_tokens,
            "server_tool_use": {"web_search_requests": searches, "web_fetch_requests": fetches},
            "service_tier": "standard"}


def anthropic_message(ident: str, model: str, content: list[Json], usage: Json, stop: str = "end_turn",
                      container: Json | None = None) -> Json:
    """A complete Messages response body (``type: message``); ``container`` is the code execution
    container a turn that ran code reports."""
    body: Json = {"id": ident, "type": "message", "role": "assistant", "model": model, "content": content}
    body |= {"container": container} if container else {}
    return body | {"stop_reason": stop, "stop_sequence": None, "stop_details": None, "usage": usage}


def openai_response(ident: str, created: int, model: str, output: list[Json], tokens: tuple[int, int, int],
                    instructions: str | None, tools: list[Json]) -> Json:
    """A completed Responses body; ``tokens`` are (input, reasoning, visible output)."""
    given, reasoning, visible = tokens
    usage = {"input_tokens": given, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
             "output_tokens": reasoning + visible, "output_tokens_details": {"reasoning_tokens": reasoning},
             "total_tokens": given + reasoning + visible}
    return {"id": ident, "object": "response", "created_at": created,
            "status": "completed", "background": False, "completed_at": created + 9, "error": None,
            "incomplete_details": None, "instructions": instructions,
            "max_output_tokens": None, "max_tool_calls": None, "model": model, "output": output,
            "parallel_tool_calls": True, "previous_response_id": None, "prompt_cache_key": None,
            "reasoning": {"effort": "medium", "summary": None}, "safety_identifier": None,
            "service_tier": "default", "store": False, "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
            "tools": tools, "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled", "usage": usage,
            "user": None, "metadata": {}}


# ---------------------------------------------------------------- Anthropic Messages: block by block

A_DELAY = {"message_start": 420.0, "ping": 1.0, "content_block_start": 8.0, "input_json_delta": 35.0,
           "text_delta": 28.0, "citations_delta": 3.0, "content_block_stop": 2.0, "message_delta": 40.0,
           "message_stop": 1.0, "error": 2500.0, "web_search_tool_result": 1850.0,
           "web_fetch_tool_result": 1200.0}


def chunks(text: str, words: int = 3) -> list[str]:
    """``text`` split after every few words (the pieces join back to ``text``)."""
    parts = re.findall(r"\S+\s*|\s+", text)
    return ["".join(parts[i:i + words]) for i in range(0, len(parts), words)] or [""]


def _delta(index: int, delta: Json) -> tuple[str, Json]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _called_by_code(block: Json) -> bool:
    """A server tool call made by the model's code: it arrives whole in content_block_start, no deltas."""
    return bool(block.get("caller", {}).get("type", "direct") != "direct")


def _start_block(block: Json) -> Json:
    if block["type"] == "text":
        return {"type": "text", "text": ""} | ({"citations": []} if "citations" in block else {})
    if block["type"] in ("server_tool_use", "tool_use") and not _called_by_code(block):
        return {**block, "input": {}}
    return block  # search and fetch results (and calls made by code) arrive whole


def _block_deltas(index: int, block: Json) -> list[tuple[str, Json]]:
    if block["type"] == "text":
        cites = [_delta(index, {"type": "citations_delta", "citation": c})
                 for c in block.get("citations", [])]
        return cites + [_delta(index, {"type": "text_delta", "text": t}) for t in chunks(block["text"])]
    if block["type"] in ("server_tool_use", "tool_use") and not _called_by_code(block):
        raw = json.dumps(block["input"], ensure_ascii=False)
        pieces = [""] + [raw[i:i + 12] for i in range(0, len(raw), 12)]
        return [_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in pieces]
    return []


def block_events(index: int, block: Json) -> list[tuple[str, Json]]:
    """``content_block_start``, its deltas, ``content_block_stop``."""
    start = ("content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": _start_block(block)})
    stop = ("content_block_stop", {"type": "content_block_stop", "index": index})
    return [start, *_block_deltas(index, block), stop]


def message_start(message: Json, prompt_tokens: int) -> tuple[str, Json]:
    """``message_start``: the message head with empty content and the prompt-only usage."""
    usage = {k: v for k, v in message["usage"].items() if k != "server_tool_use"}
    usage.update(input_tokens=prompt_tokens, output_tokens=3)
    head = {"model": message["model"], "id": message["id"], "type": "message", "role": "assistant",
            "content": [], "stop_reason": None, "stop_sequence": None, "stop_details": None, "usage": usage}
    return "message_start", {"type": "message_start", "message": head}


def message_end(message: Json) -> list[tuple[str, Json]]:
    """``message_delta`` (stop reason, cumulative usage) and ``message_stop``."""
    final = message["usage"]
    usage = {k: final[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                                   "output_tokens", "server_tool_use")}
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None, "stop_details": None}
    delta |= {"container": message["container"]} if "container" in message else {}
    return [("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}),
            ("message_stop", {"type": "message_stop"})]


def a_stream_events(message: Json, prompt_tokens: int) -> list[tuple[str, Json]]:
    """The whole stream of ``message``, with one ``ping`` after the first block starts."""
    events = [message_start(message, prompt_tokens)]
    for index, block in enumerate(message["content"]):
        events += block_events(index, block)
        if index == 0:
            events.insert(2, ("ping", {"type": "ping"}))
    return events + message_end(message)


def a_offsets(events: list[tuple[str, Json]]) -> list[float]:
    """Plausible, increasing per-event time offsets (search results take longest)."""
    offsets: list[float] = []
    clock = 0.0
    for name, data in events:
        kind = data.get("delta", {}).get("type") or data.get("content_block", {}).get("type") or name
        clock += A_DELAY.get(kind, A_DELAY.get(name, 5.0))
        offsets.append(round(clock, 1))
    return offsets


# ---------------------------------------------------------------- OpenAI Responses: item by item

O_DELAY = {"response.created": 310.0, "response.in_progress": 2.0, "response.output_item.added": 15.0,
           "response.output_item.done": 2.0, "response.web_search_call.in_progress": 2.0,
           "response.web_search_call.searching": 5.0, "response.web_search_call.completed": 1600.0,
           "response.content_part.added": 5.0, "response.output_text.delta": 22.0,
           "response.output_text.annotation.added": 1.0, "response.output_text.done": 2.0,
           "response.content_part.done": 1.0, "response.completed": 30.0}


def _item_start(item: Json) -> Json:
    if item["type"] == "web_search_call" and "action" not in item:
        return {**item, "status": "in_progress"}
    if item["type"] == "web_search_call":
        action = item["action"] if item["action"]["type"] != "search" else {"type": "search"}
        return {**item, "status": "in_progress", "action": action}
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    return item


def _where(index: int, item: Json) -> Json:
    return {"item_id": item["id"], "output_index": index}


def _search_events(index: int, item: Json) -> list[tuple[str, Json]]:
    return [(f"response.web_search_call.{step}", _where(index, item))
            for step in ("in_progress", "searching", "completed")]


def _text_events(index: int, item: Json) -> list[tuple[str, Json]]:
    part = item["content"][0]
    where = _where(index, item) | {"content_index": 0}
    events = [("response.content_part.added", where | {"part": {**part, "annotations": [], "text": ""}})]
    pending = list(enumerate(part["annotations"]))
    written = 0
    for piece in chunks(part["text"], words=2):
        events.append(("response.output_text.delta", where | {"delta": piece, "logprobs": []}))
        written += len(piece)
        while pending and pending[0][1]["end_index"] <= written:
            number, note = pending.pop(0)
            events.append(("response.output_text.annotation.added",
                           where | {"annotation": note, "annotation_index": number}))
    events.append(("response.output_text.done", where | {"text": part["text"], "logprobs": []}))
    return [*events, ("response.content_part.done", where | {"part": part})]


def item_events(index: int, item: Json) -> list[tuple[str, Json]]:
    """``output_item.added``, the item's own events, ``output_item.done``."""
    middle = {"web_search_call": _search_events, "message": _text_events}.get(item["type"])
    events = [("response.output_item.added", {"output_index": index, "item": _item_start(item)})]
    events += middle(index, item) if middle else []
    return [*events, ("response.output_item.done", {"output_index": index, "item": item})]


def o_stream_events(response: Json) -> list[tuple[str, Json]]:
    """Every event of the stream of ``response``, numbered by ``sequence_number``."""
    start = {**response, "status": "in_progress", "completed_at": None, "output": [], "usage": None}
    events = [("response.created", {"response": start}), ("response.in_progress", {"response": start})]
    for index, item in enumerate(response["output"]):
        events += item_events(index, item)
    events.append(("response.completed", {"response": response}))
    return [(name, {"type": name, "sequence_number": n, **data}) for n, (name, data) in enumerate(events)]


def o_offsets(events: list[tuple[str, Json]]) -> list[float]:
    """Plausible, increasing per-event time offsets."""
    clock, offsets = 0.0, []
    for name, data in events:
        item = data.get("item", {})
        slow = name == "response.output_item.done" and item.get("type") == "reasoning"
        clock += 900.0 if slow else O_DELAY.get(name, 5.0)
        offsets.append(round(clock, 1))
    return offsets


# ---------------------------------------------------------------- Gemini generateContent: chunk by chunk


def gemini_json(value: Json, *, indent: int | None = None) -> str:
    """JSON as Google's front end writes it: ``<`` and ``>`` as ``\\u003c`` / ``\\u003e``, other characters
    as UTF-8; a body pretty-printed with two spaces, a stream chunk on one line with ``": "`` and ``,``."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, separators=None if indent else (",", ": "))
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


def gemini_response(ident: str, model: str, text: str, tokens: tuple[int, int]) -> Json:
    """A GenerateContentResponse of one candidate answering ``text``; ``tokens``: (prompt, output)."""
    prompt, output = tokens
    usage = {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output,
             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    candidate = {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": ident}


def gemini_chunks(response: Json, pieces: list[str], first: Json | None = None) -> list[Json]:
    """The stream of ``response``: one chunk per text piece (usage running, every chunk with modelVersion,
    responseId and Vertex's createTime), ``first`` in the first chunk's candidate, finishReason and the rest
    of the candidate's metadata in the last."""
    final = response["candidates"][0]
    usage = response["usageMetadata"]
    out, sent = [], 0
    for index, piece in enumerate(pieces):
        sent += len(piece)
        running = usage | {"candidatesTokenCount": max(1, usage["candidatesTokenCount"] * sent // len(
            "".join(pieces)))}
        running["totalTokenCount"] = usage["totalTokenCount"] - usage["candidatesTokenCount"] + \
            running["candidatesTokenCount"]
        candidate: Json = {"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0}
        candidate |= (first or {}) if index == 0 else {}
        if index == len(pieces) - 1:
            rest = {k: v for k, v in final.items() if k not in ("content", "index", *(first or {}))}
            candidate = {"content": candidate["content"], "finishReason": final["finishReason"],
                         "index": 0, **{k: v for k, v in rest.items() if k != "finishReason"}}
        top = {k: v for k, v in response.items() if k not in ("candidates", "usageMetadata")}
        out.append({"candidates": [candidate], "usageMetadata": running, **top})
    return out


def gemini_sse_body(chunks: list[Json]) -> bytes:
    """``data: {...}`` CRLF CRLF per chunk: no event field, no terminal event (the stream just ends)."""
    return "".join(f"data: {gemini_json(chunk)}\r\n\r\n" for chunk in chunks).encode()


# ---------------------------------------------------------------- Chat Completions: chunk by chunk


def chat_completion(ident: str, created: int, model: str, text: str, tokens: tuple[int, int],
                    notes: list[Json] | None = None) -> Json:
    """A ``chat.completion`` of one choice answering ``text`` (``notes``: its annotations); ``tokens``:
    (prompt, completion)."""
    prompt, completion = tokens
    usage = {"completion_tokens": completion, "prompt_tokens": prompt, "total_tokens": prompt + completion,
             "completion_tokens_details": {"accepted_prediction_tokens": 0, "audio_tokens": 0,
                                           "reasoning_tokens": 0, "rejected_prediction_tokens": 0},
             "prompt_tokens_details": {"audio_tokens": 0, "cached_tokens": 0}}
    message = {"annotations": notes or [], "content": text, "refusal": None, "role": "assistant"}
    return {"choices": [{"finish_reason": "stop", "index": 0, "logprobs": None, "message": message}],
            "created": created, "id": ident, "model": model, "object": "chat.completion",
            "service_tier": "default", "system_fingerprint": "", "usage": usage}


def chat_chunks(completion: Json, size: int = 48) -> list[Json]:
    """The chunks OpenAI streams for ``completion``: the role, the text in pieces, the annotations in a
    delta of their own, the finish_reason, then the usage with empty choices (``include_usage``)."""
    keys = ("id", "object", "created", "model", "service_tier", "system_fingerprint")
    head = {key: completion[key] for key in keys} | {"object": "chat.completion.chunk"}
    message = completion["choices"][0]["message"]

    def chunk(delta: Json, finish: str | None = None) -> Json:
        choice = {"delta": delta, "finish_reason": finish, "index": 0, "logprobs": None}
        return {**head, "choices": [choice], "usage": None}

    text = message["content"]
    pieces = [chunk({"content": "", "refusal": None, "role": "assistant"})]
    pieces += [chunk({"content": text[at:at + size]}) for at in range(0, len(text), size)]
    notes = chunk({"annotations": message["annotations"]})
    return [*pieces, notes, chunk({}, "stop"), {**head, "choices": [], "usage": completion["usage"]}]


def chat_sse_body(chunks: list[Json], done: bool = True) -> bytes:
    """``data: {json}`` blocks with no event names, then ``data: [DONE]`` (when ``done``)."""
    events = [sse.encode(data=compact(data)) for data in chunks]
    return sse.serialize([*events, *([sse.encode(data="[DONE]")] if done else [])])
