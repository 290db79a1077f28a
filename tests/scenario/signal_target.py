"""A target for the runner's cancel tests: it reports the SIGINTs it got, and when.

As a Python target: ``python:signal_target:run``; as a command: ``python tests/scenario/signal_target.py``.
Its one step sends Anthropic requests one after another (at most :data:`MOST`) until one is cancelled: by
SIGINT (the runner's ``cancelOn``) or by its own timer (the input's ``cancelAfterMs``, SIGALRM). Then it sends
one more request, so a cancel armed twice would come again, and ends ``aborted`` / CANCELLED. Its message:
``signals=N sent=K cancelAfterMs=X``: the SIGINTs it got, the requests it had sent when the first came, and
the ``cancelAfterMs`` of its input (``absent``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

JSON = dict[str, Any]
MOST = 4  # requests before the target gives up waiting for a cancel


class Cancelled(BaseException):
    """The step was cancelled (SIGINT or the timer): no library's ``except Exception`` swallows it."""


@dataclass
class Seen:
    """What the target saw: SIGINTs, requests sent, whether the step is cancelled."""

    signals: int = 0
    sent: int = 0
    sent_at_signal: int | None = None
    cancelled: bool = False

    def interrupted(self, number: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.sent_at_signal is None:
            self.sent_at_signal = self.sent
        self.cancel()

    def alarm(self, number: int, frame: FrameType | None) -> None:
        self.cancel()

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            raise Cancelled


def _send(seen: Seen, step: JSON, client: httpx.Client) -> None:
    body = {"model": step["model"], "max_tokens": 1024,
            "messages": [{"role": "user", "content": [{"type": "text", "text": step["prompt"]}]}]}
    url = os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
    seen.sent += 1
    client.post(url, json=body)


def _step(seen: Seen, step: JSON, client: httpx.Client) -> None:
    if "cancelAfterMs" in step:
        signal.setitimer(signal.ITIMER_REAL, step["cancelAfterMs"] / 1000)
    try:
        for _ in range(MOST):
            _send(seen, step, client)
    except Cancelled:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _send(seen, step, client)


def run(given: JSON) -> JSON:
    """The target function: ``given`` is the input, the outcome is returned."""
    seen = Seen()
    signal.signal(signal.SIGINT, seen.interrupted)
    signal.signal(signal.SIGALRM, seen.alarm)
    step = given["steps"][0]
    with httpx.Client(timeout=given["idleTimeoutMs"] / 1000) as client:  # made before the step's timer
        _step(seen, step, client)
    message = (f"signals={seen.signals} sent={seen.sent_at_signal} "
               f"cancelAfterMs={step.get('cancelAfterMs', 'absent')}")
    error = {"code": "CANCELLED", "provenance": "cancelled", "retryable": False, "message": message}
    return {"status": "aborted" if seen.cancelled else "ok", "error": error if seen.cancelled else None,
            "transcript": None, "persistWrites": 0}


def main() -> int:
    """The command target: read REPLAYKIT_INPUT, write REPLAYKIT_OUTCOME."""
    outcome = run(json.loads(Path(os.environ["REPLAYKIT_INPUT"]).read_text(encoding="utf-8")))
    destination = Path(os.environ["REPLAYKIT_OUTCOME"])
    destination.with_suffix(".tmp").write_text(json.dumps(outcome), encoding="utf-8")
    os.replace(destination.with_suffix(".tmp"), destination)
    return 0


if __name__ == "__main__":
    sys.exit(main())
