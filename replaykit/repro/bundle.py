"""The folder ``replaykit repro`` writes: a scenario, the transcript, a synthesized cassette and a summary.

``DIR/scenario.yaml``, ``DIR/transcripts/repro.json``, ``DIR/cassettes/repro.yaml`` and ``DIR/repro.json``
(the marker of a repro folder). The scenario says what any correct harness does with the transcript (refuse
locally, or repair and send one request that keeps the contract, or replay every provider block verbatim and
estimate within :mod:`replaykit.repro.band`'s band). Every file is checked for keys first
(:func:`replaykit.redact.scan_text`); the folder appears whole or not at all. Called by
:mod:`replaykit.repro`; the layout and the expectations are in docs/architecture/repro.md.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import yaml

from replaykit import __version__, cassette
from replaykit.canonical import canonical
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response, write_atomic
from replaykit.errors import UsageError, located
from replaykit.jsondoc import JSON
from replaykit.pointer import matches
from replaykit.redact import SecretFinding, scan, scan_text
from replaykit.reference.wire import key_header, wire_body
from replaykit.replay import ProviderModel
from replaykit.repro.diagnosis import PROMPT, RESERVE, Diagnosis, Failure
from replaykit.repro.reported import Reported
from replaykit.routes import API_ORIGINS, API_ROUTES, MODEL_APIS
from replaykit.synthesis import (
    a_offsets,
    a_stream_events,
    anthropic_message,
    anthropic_usage,
    chat_chunks,
    chat_completion,
    chat_sse_body,
    compact,
    gemini_chunks,
    gemini_response,
    gemini_sse_body,
    o_offsets,
    o_stream_events,
    openai_response,
    sse_body,
)

__all__ = ["CASSETTE", "FILES", "SCENARIO", "SUMMARY", "TRANSCRIPT", "Bundle", "build", "leaks",
           "prepare_folder", "write"]

SCENARIO, TRANSCRIPT, CASSETTE, SUMMARY = "scenario.yaml", "transcripts/repro.json", "cassettes/repro.yaml", \
    "repro.json"
FILES = (SCENARIO, TRANSCRIPT, CASSETTE, SUMMARY)
REPLY = "(a synthesized reply: replaykit repro answers the follow-up with this text)"
_AZURE = "https://replaykit-example.openai.azure.com/openai/v1"
_VERTEX = f"{API_ORIGINS['vertex']}/v1/projects/replaykit-example/locations/global/publishers/google/models"
#: Where each provider and API answers (``{model}`` and ``{method}`` filled in).
_URIS: dict[tuple[str, str], str] = {
    ("anthropic", "anthropic-messages"): f"{API_ORIGINS['anthropic']}/v1/messages",
    ("openai", "openai-responses"): f"{API_ORIGINS['openai']}/v1/responses",
    ("openai", "openai-chat"): f"{API_ORIGINS['openai']}/v1/chat/completions",
    ("azure", "openai-responses"): f"{_AZURE}/responses",
    ("azure", "openai-chat"): f"{_AZURE}/chat/completions",
    ("gemini", "gemini-generate"): f"{API_ORIGINS['gemini']}/v1beta/models/{{model}}:{{method}}",
    ("vertex", "gemini-generate"): f"{_VERTEX}/{{model}}:{{method}}",
}
#: Where the transcript's own fields would land in each API's request.
_LISTS = {"anthropic-messages": "/messages", "openai-responses": "/input", "openai-chat": "/messages",
          "gemini-generate": "/contents"}
_REFUSED = {"code": "LOCAL_REQUEST_ERROR", "phase": "validation", "provenance": "local"}
_IDS = ("id", "tool_use_id", "call_id")
_MAX_REACHES = 32
_CREATED = 1_764_662_400  # 2025-12-02T08:00:00Z: the synthesized answer's creation time


@dataclass(frozen=True)
class Bundle:
    """The files of a repro folder, by their path relative to it, as bytes."""

    files: dict[str, bytes]
    name: str


def build(reported: Reported, diagnosis: Diagnosis) -> Bundle:
    """Every file of the folder, not yet written."""
    name = _name(reported.path)
    doc = _scenario(reported, diagnosis, name)
    tape = _cassette(diagnosis, f"{name}: {_what(diagnosis)}")
    files = {
        SCENARIO: _yaml(doc),
        TRANSCRIPT: _json(reported.transcript),
        CASSETTE: cassette.dumps(tape).encode(),
        SUMMARY: _json(_summary(reported, diagnosis, name)),
    }
    return Bundle(files, name)


def _json(doc: object) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode()


def _name(path: Path) -> str:
    words = re.findall(r"[a-z0-9]+", path.stem.lower())
    return "-".join(["repro", *words])[:60].rstrip("-")


def _what(diagnosis: Diagnosis) -> str:
    if diagnosis.failure is None:
        return "restore, projection and estimate pass; a correct harness sends the follow-up"
    failure = diagnosis.failure
    if failure.kind != "request violation":
        return str(failure)
    return (f"{failure} (found in {failure.request}). A correct harness never sends a request that breaks "
            "the provider's contract: it refuses the transcript locally (LOCAL_REQUEST_ERROR, validation, "
            "nothing sent or persisted) or repairs it and sends one request that keeps the contract")


def _sends(diagnosis: Diagnosis) -> bool:
    """Whether a correct harness sends the replayed request as projected (its follow-up gets answered)."""
    failure = diagnosis.failure
    return diagnosis.body is not None and (failure is None or failure.kind == "estimator exception")


# ---------------------------------------------------------------- the scenario


def _scenario(reported: Reported, diagnosis: Diagnosis, name: str) -> JSON:
    target = diagnosis.target
    transcript = reported.transcript if isinstance(reported.transcript, dict) else {}
    tools = transcript.get("tools")
    description = (f"Reproduces {reported.path.name} ({reported.form}): {_what(diagnosis)}. Written by "
                   "replaykit repro; its cassette is synthesized, the answer recorded plain and streamed "
                   f"(twins), so a harness of either form is served. {_estimate_policy(diagnosis)}")
    return {
        "name": name, "kind": "regression", "description": description,
        "cassettes": [CASSETTE], "transcript": TRANSCRIPT,
        "steps": [_step(target)],
        "tools": tools if diagnosis.body is not None and isinstance(tools, list) else [],
        "expectations": _expectations(diagnosis),
    }


def _step(target: ProviderModel) -> JSON:
    """The follow-up's step: the API named when it is not the provider's default."""
    step: JSON = {"prompt": PROMPT, "provider": target.provider, "model": target.model}
    return step | ({"api": target.api} if target.api != MODEL_APIS[target.provider] else {})


def _estimate_policy(diagnosis: Diagnosis) -> str:
    if diagnosis.band is not None:
        return f"The policy of the estimate: {diagnosis.band.why}"
    if diagnosis.failure is None or diagnosis.failure.kind == "estimator exception":
        return ("No estimate is checked: the estimator raises on this transcript, so no policy count can be "
                "made here; the turn going through is the check.")
    if diagnosis.failure.kind == "request violation":
        return "No estimate is checked: a correct harness may refuse before it estimates."
    return "No estimate is checked: a correct harness refuses before it estimates."


def _expectations(diagnosis: Diagnosis) -> JSON:
    failure = diagnosis.failure
    if failure is not None and failure.kind == "request violation":
        return {"outcome": ["ok", "error"], "error": dict(_REFUSED), "providerRequests": {"max": 1},
                "requestContractsHold": True, "persistWrites": {"max": 1}, "unused": True,
                "neverReaches": _internal(diagnosis.target)}
    if not _sends(diagnosis):
        return {"outcome": "error", "error": dict(_REFUSED), "providerRequests": 0, "persistWrites": 0,
                "unused": True}
    expected: JSON = {"outcome": "ok", "providerRequests": 1, "requestContractsHold": True,
                      "persistWrites": 1}
    if diagnosis.band is not None:
        expected["estimates"] = [{"step": 0, "min": diagnosis.band.low, "max": diagnosis.band.high}]
    route = API_ROUTES[diagnosis.target.provider, diagnosis.target.api].name
    view = canonical(route, wire_body(diagnosis.body or {}, diagnosis.target))
    if reaches := [check for check in _reaches(view, diagnosis.target) if _holds(check, view)]:
        expected["reaches"] = reaches[:_MAX_REACHES]
    expected["neverReaches"] = _internal(diagnosis.target)
    return expected


def _internal(target: ProviderModel) -> list[JSON]:
    """The transcript's own fields, which never reach the provider."""
    return [{"pointer": "/version"}, {"pointer": "/systemHistory"},
            {"pointer": f"{_LISTS[target.api]}/*/timestamp"}]


def _reaches(view: JSON, target: ProviderModel) -> Iterator[JSON]:
    """A check per provider block the request replays (by its id), so a harness that drops one fails; read
    from the canonical view (``view``) of the request, as the check reads what a harness sends."""
    blocks, plain = _replayed(view, target.api)
    seen: set[str] = set()
    for where, block in blocks:
        if not isinstance(block, dict) or "role" in block or block.get("type") in plain:
            continue
        key = _key(block)
        check = {"request": 1, "pointer": f"{where}/{key}", "equals": block[key]} if key else \
            {"request": 1, "pointer": where, "equals": block}
        if (text := json.dumps(check, sort_keys=True)) not in seen:
            seen.add(text)
            yield check


def _replayed(view: JSON, api: str) -> tuple[list[tuple[str, JSON]], tuple[str, ...]]:
    """The blocks of the request ``view`` that may be provider blocks, each with its place, and the types
    of those that are not (text, a tool's result...)."""
    if api == "anthropic-messages":
        return ([("/messages/*/content/*", block) for message in view.get("messages", [])
                 if isinstance(message.get("content"), list) for block in message["content"]],
                ("text", "image", "tool_result", "thinking", "redacted_thinking"))
    if api == "openai-responses":
        return [("/input/*", item) for item in view.get("input", [])], ("function_call_output", "message")
    if api == "openai-chat":
        return [("/messages/*/tool_calls/*", call) for message in view.get("messages", [])
                if isinstance(message.get("tool_calls"), list) for call in message["tool_calls"]], ()
    parts = [part for content in view.get("contents", []) if isinstance(content.get("parts"), list)
             for part in content["parts"] if isinstance(part, dict)]
    return [("/contents/*/parts/*/functionCall", part["functionCall"]) for part in parts  # with an id
            if isinstance(part.get("functionCall"), dict) and "id" in part["functionCall"]], ()


def _key(block: JSON) -> str | None:
    """The field naming a block: a function call by its ``call_id`` (its item ``id`` is optional on input)."""
    keys = ("call_id", *_IDS) if block.get("type") == "function_call" else _IDS
    return next((key for key in keys if isinstance(block.get(key), str)), None)


def _holds(check: JSON, view: JSON) -> bool:
    """Whether ``check`` holds on the canonical ``view`` of the request the reference sends."""
    return any(value == check["equals"] for _, value in matches(view, check["pointer"]))


def _yaml(doc: JSON) -> bytes:
    head = ("# Written by `replaykit repro` (contracts/replaykit/scenario.schema.json); paths are relative "
            "to this folder.\n")
    return (head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110)).encode()


def _summary(reported: Reported, diagnosis: Diagnosis, name: str) -> JSON:
    failure, band = diagnosis.failure, diagnosis.band
    return {
        "tool": "replaykit repro", "version": __version__, "scenario": name, "input": reported.path.name,
        "form": reported.form,
        "redacted": [{"pointer": f.field, "kind": f.kind, "excerpt": f.excerpt} for f in reported.redacted],
        "firstFailure": None if failure is None else _failure(failure),
        "target": {"provider": diagnosis.target.provider, "api": diagnosis.target.api,
                   "model": diagnosis.target.model},
        "estimate": diagnosis.tokens,
        "estimateBand": None if band is None else {"min": band.low, "max": band.high},
        "notes": [str(note) for note in diagnosis.notes],
        "files": [SCENARIO, TRANSCRIPT, CASSETTE],
    }


def _failure(failure: Failure) -> JSON:
    found: JSON = {"kind": failure.kind, "pointer": failure.pointer, "message": failure.message}
    if failure.kind == "request violation":
        found.update({"rule": failure.rule or None, "request": failure.request,
                      "statement": failure.statement or None, "others": list(failure.others)})
    return found


# ---------------------------------------------------------------- the synthesized cassette


def _cassette(diagnosis: Diagnosis, description: str) -> Cassette:
    """The answer to the follow-up twice, plain then streamed: the same request but for streaming (its
    ``stream`` field; Gemini's method in the URL)."""
    target = diagnosis.target
    sent = _sends(diagnosis)
    body = wire_body(diagnosis.body if sent and diagnosis.body is not None else _bare_request(target), target)
    uri = _URIS[target.provider, target.api]
    name, value = key_header(target, "REDACTED")
    headers = {"content-type": ["application/json"], name: [value]}
    final, stream, offsets = _reply(target, diagnosis.tokens or 1)
    plain_body = {key: item for key, item in body.items() if key not in ("stream", "stream_options")}
    plain = Interaction(Request("POST", _uri(uri, target, False), headers, compact(plain_body).encode()),
                        Response(200, "OK", {"content-type": ["application/json"]}, compact(final).encode()))
    streamed = Interaction(Request("POST", _uri(uri, target, True), headers, compact(body).encode()),
                           Response(200, "OK", {"content-type": ["text/event-stream; charset=utf-8"]},
                                    stream, event_offsets_ms=offsets))
    shows = description if sent else f"{description}. {_unsent(diagnosis)}"
    meta = Meta(origin="synthesized", provider=target.provider, description=f"{shows}; plain and streamed",
                recorded_with=f"replaykit repro {__version__}", extra={"sources": ["replaykit repro"]})
    return Cassette(interactions=[plain, streamed], meta=meta)


def _uri(template: str, target: ProviderModel, stream: bool) -> str:
    """The endpoint of ``target``: Gemini's names its model and, streamed, ``streamGenerateContent``."""
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return template.format(model=quote(target.model, safe=""), method=method) if "{" in template else template


def _unsent(diagnosis: Diagnosis) -> str:
    """What the cassette of a transcript a correct harness does not replay as it is holds."""
    if diagnosis.failure is not None and diagnosis.failure.kind == "request violation":
        return ("The answer a harness that repairs the transcript gets (recorded for the follow-up alone; "
                "served to the request that comes, which must keep the contract)")
    return "The answer a harness that sends the follow-up anyway would get (a correct one sends nothing)"


def _bare_request(target: ProviderModel) -> JSON:
    """The follow-up alone: what a harness that skipped the broken transcript would send."""
    if target.api == "anthropic-messages":
        return {"model": target.model, "max_tokens": RESERVE,
                "messages": [{"role": "user", "content": PROMPT}]}
    if target.api == "openai-chat":
        return {"model": target.model, "messages": [{"role": "user", "content": PROMPT}]}
    if target.api == "gemini-generate":
        return {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
    return {"model": target.model, "input": [{"role": "user", "content": PROMPT}]}


def _reply(target: ProviderModel, tokens: int) -> tuple[JSON, bytes, list[float]]:
    """The final body of the answer, its stream and the stream's event offsets."""
    if target.api == "anthropic-messages":
        text = {"type": "text", "text": REPLY}
        message = anthropic_message("msg_01replaykitrepro", target.model, [text], anthropic_usage(tokens, 24))
        events = a_stream_events(message, tokens)
        return message, sse_body(events), a_offsets(events)
    if target.api == "openai-chat":
        completion = chat_completion("chatcmpl-replaykitrepro", _CREATED, target.model, REPLY, (tokens, 24))
        pieces = chat_chunks(completion)
        return completion, chat_sse_body(pieces), _steady(len(pieces) + 1)
    if target.api == "gemini-generate":
        answer = gemini_response("replaykitrepro", target.model, REPLY, (tokens, 24))
        parts = gemini_chunks(answer, [REPLY[:40], REPLY[40:]])
        return answer, gemini_sse_body(parts), _steady(len(parts))
    item = {"id": "msg_replaykitrepro", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": REPLY}]}
    response = openai_response("resp_replaykitrepro", _CREATED, target.model, [item], (tokens, 0, 24), None,
                               [])
    events = o_stream_events(response)
    return response, sse_body(events), o_offsets(events)


def _steady(count: int) -> list[float]:
    """Offsets of a stream whose first event comes after 300 ms, the others 12 ms apart."""
    return [round(300.0 + 12.0 * index, 1) for index in range(count)]


# ---------------------------------------------------------------- the folder


def prepare_folder(out: Path) -> str:
    """Whether ``out`` may be written: ``new``, ``empty`` or ``an earlier repro output`` (its ``repro.json``
    written by replaykit repro, and no file but the ones it writes); anything else is a UsageError."""
    if not out.exists():
        return "new"
    if not out.is_dir():
        raise UsageError(located(out, None, "exists and is not a folder", "name a new or empty folder"))
    found = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    if not found:
        return "empty"
    strange = [name for name in found if name not in FILES]
    if strange or not _earlier(out / SUMMARY):
        shown = ", ".join(strange[:3]) or ", ".join(found[:3])
        raise UsageError(located(out, None, f"not empty and not an earlier repro output (holds {shown})",
                                 "name a new or empty folder (an earlier `replaykit repro` folder is "
                                 "replaced)"))
    return "an earlier repro output"


def _earlier(summary: Path) -> bool:
    try:
        doc = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("tool") == "replaykit repro"


def leaks(bundle: Bundle) -> list[SecretFinding]:
    """Every key left in the folder's files (masked): in their text, and in the cassette's traffic."""
    found = [finding for name, data in bundle.files.items()
             for finding in scan_text(data.decode("utf-8"), name)]
    return found + scan(cassette.loads(bundle.files[CASSETTE], CASSETTE, cache=False))


def write(out: Path, bundle: Bundle) -> list[Path]:
    """Write every file of ``bundle`` under ``out``: a new folder appears whole (written beside it, then
    renamed); into an existing one each file is replaced atomically, the summary last."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        try:
            _files(staging, bundle)
            staging.rename(out)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise UsageError(located(out, None, f"cannot be written: {exc.strerror or exc}",
                                     "name a new or empty folder you may write")) from exc
    else:
        _files(out, bundle)
    return [out / name for name in bundle.files]


def _files(folder: Path, bundle: Bundle) -> None:
    for name in sorted(bundle.files, key=lambda name: name == SUMMARY):
        write_atomic(folder / name, bundle.files[name])
