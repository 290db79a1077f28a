"""A tiny target for the runner's own tests: speaks the target protocol, with defects on demand.

As a Python target: ``python:tiny_target:run`` (this folder on ``PYTHONPATH``); as a command target:
``python tests/scenario/tiny_target.py``. Each step sends one request (Anthropic Messages or OpenAI
Responses, not streamed) to the fake provider, retrying 429 / 5xx up to ``maxRetries`` times, appends the
answer, persists the transcript atomically and reports an estimate. ``REPLAYKIT_MUTANT`` picks a defect
(:data:`DEFECTS`); an unknown name exits 2 (a function target raises).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

DEFECTS = {
    "no-request": "answers every step without asking the provider",
    "no-persist": "never writes its store",
    "big-estimate": "estimates a hundred times too many tokens",
    "leak": "sends an internal field in the request body",
    "no-retry": "never retries",
    "crash": "raises before doing anything",
    "hang": "sleeps for a minute",
    "bad-outcome": "reports an outcome that breaks its contract",
}
JSON = dict[str, Any]
STAMP = 1_764_662_400_000


def _mutant() -> str | None:
    name = os.environ.get("REPLAYKIT_MUTANT")
    if name is not None and name not in DEFECTS:
        raise SystemExit(f"unknown mutant {name!r}; known: {', '.join(DEFECTS)}")
    return name


def _restore(given: JSON, state: Path) -> JSON:
    if given["transcript"] is not None:
        return dict(given["transcript"])
    stored = state / "transcript.json"
    if stored.is_file():
        restored: JSON = json.loads(stored.read_text(encoding="utf-8"))
        return restored
    return {"version": 1, "system": given["system"], "tools": [], "messages": []}


def _persist(transcript: JSON, state: Path) -> None:
    temporary = state / "transcript.json.tmp"
    temporary.write_text(json.dumps(transcript), encoding="utf-8")
    os.replace(temporary, state / "transcript.json")


def _request(step: JSON, mutant: str | None) -> tuple[str, JSON]:
    if step["provider"] == "anthropic":
        body: JSON = {
            "model": step["model"],
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": [{"type": "text", "text": step["prompt"]}]}],
        }
        url = os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
    else:
        body = {"model": step["model"], "input": step["prompt"]}
        url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/responses"
    if mutant == "leak":
        body["x_internal"] = {"secretNote": "internal"}
    return url, body


def _send(step: JSON, given: JSON, mutant: str | None) -> httpx.Response:
    url, body = _request(step, mutant)
    retries = 0 if mutant == "no-retry" else given["maxRetries"]
    for attempt in range(retries + 1):
        reply = httpx.post(url, json=body, timeout=given["idleTimeoutMs"] / 1000)
        if reply.status_code not in (429, 500, 502, 503, 529) or attempt == retries:
            return reply
    raise AssertionError("unreachable")


def _answer(step: JSON) -> JSON:
    api = "anthropic-messages" if step["provider"] == "anthropic" else "openai-responses"
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": "answered"}],
        "provider": step["provider"],
        "api": api,
        "model": step["model"],
        "stopReason": "stop",
        "timestamp": STAMP + 1,
        "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12},
    }


def _error(reply: httpx.Response) -> JSON:
    return {
        "code": "PROVIDER_ERROR",
        "provenance": "provider",
        "retryable": reply.status_code >= 500,
        "message": f"HTTP {reply.status_code}",
        "status": reply.status_code,
    }


def run(given: JSON) -> JSON:
    """The target function: ``given`` is the input, the outcome is returned."""
    mutant = _mutant()
    if mutant == "crash":
        raise RuntimeError("the tiny target crashed on purpose")
    if mutant == "hang":
        time.sleep(60)
    state = Path(os.environ["REPLAYKIT_STATE_DIR"])
    transcript, writes, estimates = _restore(given, state), 0, []
    for index, step in enumerate(given["steps"]):
        transcript["messages"].append({"role": "user", "content": step["prompt"], "timestamp": STAMP})
        tokens = len(step["prompt"]) // 4 + 10
        estimates.append({"step": index, "tokens": tokens * 100 if mutant == "big-estimate" else tokens})
        if mutant != "no-request":
            reply = _send(step, given, mutant)
            if reply.status_code >= 400:
                return {
                    "status": "error",
                    "error": _error(reply),
                    "transcript": transcript,
                    "persistWrites": writes,
                    "estimates": estimates,
                }
        transcript["messages"].append(_answer(step))
        if mutant != "no-persist":
            _persist(transcript, state)
            writes += 1
    if mutant == "bad-outcome":
        return {"status": "ok", "persistWrites": -1}
    return {
        "status": "ok",
        "error": None,
        "transcript": transcript,
        "persistWrites": writes,
        "estimates": estimates,
    }


def main() -> int:
    """The command target: read REPLAYKIT_INPUT, write REPLAYKIT_OUTCOME."""
    given = json.loads(Path(os.environ["REPLAYKIT_INPUT"]).read_text(encoding="utf-8"))
    outcome = run(given)
    destination = Path(os.environ["REPLAYKIT_OUTCOME"])
    destination.with_suffix(".tmp").write_text(json.dumps(outcome), encoding="utf-8")
    os.replace(destination.with_suffix(".tmp"), destination)
    return 0


if __name__ == "__main__":
    sys.exit(main())
