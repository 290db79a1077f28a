"""The reference harness's run: steps of an agent loop over a neutral transcript, and the outcome.

Per step: restore → validate → rebuild the system → then, until the turn ends: prepare the request (project,
estimate, preflight) → send it with bounded retries → read the stream → check citations → append → run the
local tools → and finally persist the transcript atomically. Any failure becomes the outcome's ``error``,
classified by :func:`replaykit.provenance.classify`; a cancellation (``cancelAfterMs``, or SIGINT: a user's
Ctrl-C, :class:`CtrlC`) ends the run ``aborted`` with CANCELLED.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import ssl
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx

from replaykit.cassette import header, write_atomic
from replaykit.errors import LocalRequestError
from replaykit.jsondoc import JSON
from replaykit.provenance import ErrorInfo, classify
from replaykit.reference import durable, steps, wire
from replaykit.reference.defects import active, mutant
from replaykit.reference.research import Research
from replaykit.reference.tools import DELEGATION, Tools
from replaykit.replay import ProviderModel
from replaykit.routes import MODEL_APIS
from replaykit.transcript import AssistantMessage

__all__ = ["CtrlC", "backoff", "failure", "run", "run_async", "should_retry"]

MAX_ROUNDS = 16  # model calls in one turn, at most
STORE = "transcript.json"


@dataclass
class InputSettings:
    """What the input fixes for the whole run (contracts/replaykit/target-input.schema.json)."""

    tools: list[JSON]
    context_window: int
    reserve: int
    idle_timeout: float
    max_retries: int
    system: str | None
    cwd: Path
    state_dir: Path | None

    @classmethod
    def of(cls, data: JSON) -> InputSettings:
        state = os.environ.get("REPLAYKIT_STATE_DIR")
        return cls(list(data.get("tools") or []), int(data["contextWindow"]), int(data["reserve"]),
                   int(data.get("idleTimeoutMs", 30000)) / 1000, int(data.get("maxRetries", 2)),
                   data.get("system"), Path.cwd(), Path(state) if state else None)


@dataclass
class HarnessRun:
    """One run of the input's steps: the transcript, the store writes and the estimates so far."""

    settings: InputSettings
    client: httpx.AsyncClient
    transcript: JSON | None = None
    persist_writes: int = 0
    estimates: list[JSON] = field(default_factory=list)
    research: list[JSON] = field(default_factory=list)

    # ------------------------------------------------------------ restore and persist

    def restore(self, given: object) -> None:
        """The input's transcript, else the store's, else a new one; validated either way."""
        if given is None and self.settings.state_dir and (self.settings.state_dir / STORE).is_file():
            path = self.settings.state_dir / STORE
            try:
                given = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise LocalRequestError(f"{path}: not JSON ({exc})", phase="validation") from exc
            self.transcript = cast(JSON, steps.validate(given, str(path)))
        elif given is None:
            self.transcript = {"version": 1, "system": None, "tools": [], "messages": []}
        else:
            self.transcript = cast(JSON, steps.validate(given, "the input transcript"))

    def persist(self) -> None:
        """Write the transcript to the store, atomically (temp file + rename)."""
        if self.settings.state_dir is None:
            return
        data = json.dumps(self.transcript, ensure_ascii=False, indent=1).encode()
        write_atomic(self.settings.state_dir / STORE, data)
        self.persist_writes += 1

    # ------------------------------------------------------------ one request, retried

    async def request(self, transcript: JSON, target: ProviderModel, step: int,
                      record: durable.StreamRecord | None = None) -> AssistantMessage:
        """Prepare, estimate and send one request; retry what is retryable, at most ``maxRetries`` times.
        A durable turn's ``record`` gets each attempt's events as they arrive; its stall is not retried
        (:class:`~replaykit.reference.wire.Stalled` goes up: an interruption)."""
        attempt = 0
        while True:
            try:
                body = steps.prepare(transcript, target)
                self.estimate(transcript, target, step)
                if record is None:
                    return await wire.send(self.client, body, target)
                record.begin()
                return await wire.send(self.client, body, target, record.append, record.stall)
            except wire.Stalled:
                raise
            except Exception as exc:
                info = failure(exc)
                if attempt >= self.settings.max_retries or not should_retry(info):
                    raise
                attempt += 1
                await asyncio.sleep(backoff(exc, attempt))

    def estimate(self, transcript: JSON, target: ProviderModel, step: int) -> None:
        """Estimate the request and record it in the outcome; refused above the budget (recorded too)."""
        try:
            tokens = steps.estimate_tokens(transcript, target, self.settings.context_window,
                                           self.settings.reserve)
        except steps.OverBudget as refused:
            self.estimates.append({"step": step, "tokens": refused.tokens})
            raise
        self.estimates.append({"step": step, "tokens": tokens})

    # ------------------------------------------------------------ the agent loop

    async def turn(self, transcript: JSON, target: ProviderModel, step: int, tools: Tools) -> None:
        """Call the model until the turn ends, running the local tools it asks for in between."""
        for _ in range(MAX_ROUNDS):
            message = steps.checked_citations(transcript, await self.request(transcript, target, step))
            transcript["messages"].append(message)
            calls = [block for block in message["content"] if block["type"] == "toolCall"]
            if message["stopReason"] == "pauseTurn":
                continue
            if message["stopReason"] != "toolUse" or not calls:
                return
            for call in calls:
                transcript["messages"].append(await tools.call(call))

    async def step(self, index: int, step: JSON) -> None:
        """One user prompt, run to the end of its turn, then persisted; a research step instead runs
        :class:`~replaykit.reference.research.Research` (its result goes to the outcome, not the
        transcript)."""
        if "research" in step:
            await self.research_step(index, step)
            return
        transcript = cast(JSON, self.transcript)
        steps.rebuild_system(transcript, self.settings.system, self.settings.tools, wire.now_ms())
        target = _target(step, self.settings.reserve)
        transcript["messages"].append({"role": "user", "content": step["prompt"], "timestamp": wire.now_ms()})
        tools = Tools(self.settings.tools, self.settings.cwd,
                      lambda prompt: self.subagent(prompt, target, index), self.client)
        try:
            await self.turn(transcript, target, index, tools)
        finally:
            await tools.close()
        self.persist()

    async def research_step(self, index: int, step: JSON) -> None:
        """Search, then a cited answer verified against the evidence (replaykit.reference.research)."""
        target = _target(step, self.settings.reserve)

        async def obey(transcript: JSON) -> AssistantMessage:  # the defect of injected-instruction-obeyed
            transcript["tools"] = self.settings.tools
            tools = Tools(self.settings.tools, self.settings.cwd, None)
            try:
                await self.turn(transcript, target, index, tools)
            finally:
                await tools.close()
            return cast(AssistantMessage, transcript["messages"][-1])

        research = Research(step, index, self.client, lambda t: self.request(t, target, index), obey)
        self.research.append(research.result)
        await research.run()

    async def subagent(self, prompt: str, target: ProviderModel, step: int) -> str:
        """A delegated sub-task: a new transcript on ``prompt``, the tools minus delegation; its last text."""
        enabled = [tool for tool in self.settings.tools if tool.get("name") not in DELEGATION]
        transcript: JSON = {"version": 1, "system": cast(JSON, self.transcript).get("system"),
                            "tools": enabled, "messages": [{"role": "user", "content": prompt,
                                                            "timestamp": wire.now_ms()}]}
        tools = Tools(enabled, self.settings.cwd, None, self.client)
        await self.turn(transcript, target, step, tools)
        last = transcript["messages"][-1]
        return "".join(block.get("text", "") for block in last["content"] if block["type"] == "text")


def _target(step: JSON, reserve: int) -> ProviderModel:
    """The step's provider on its ``api`` (default: the provider's first, ``replaykit.routes.MODEL_APIS``)."""
    provider = step["provider"]
    api = step.get("api") or MODEL_APIS[provider]
    return ProviderModel(provider, api, step["model"], max_tokens=max(reserve, 1))


# ---------------------------------------------------------------- failures and retries


def failure(exc: BaseException) -> ErrorInfo:
    """How ``exc`` is reported: its own classification when it carries one, else provenance's."""
    if isinstance(exc, wire.ProviderEvent):
        return exc.info
    return classify(exc)


def should_retry(info: ErrorInfo) -> bool:
    """Whether to try again after ``info``: its retryability (replaykit.provenance), nothing else."""
    if info.status == 400 and mutant("retry-on-400"):
        return True
    if info.status == 529 and mutant("no-retry-on-529"):
        return False
    if info.provenance == "local" and mutant("local-error-retried"):
        return True
    return info.retryable


def backoff(exc: BaseException, attempt: int) -> float:
    """Seconds to wait before retry ``attempt``: the provider's ``retry-after-ms`` / ``retry-after`` when it
    sent one, else 0.2 s doubling, at most 8 s."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return min(float(header(headers, name) or "x") / scale, 60.0)
        except ValueError:
            continue
    return float(min(0.2 * 2 ** (attempt - 1), 8.0))


# ---------------------------------------------------------------- the run and its outcome


# The reference speaks plain HTTP to the fake provider on loopback: a TLS context that trusts no authority
# (any TLS connection fails), made once, instead of the system's trust store loaded for each of the client's
# proxy transports (the protocol's proxy variables give it four: 0.2 s of every run).
_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


async def run_async(data: JSON) -> JSON:
    """Run a target input (a dict of contracts/replaykit/target-input.schema.json); return the outcome."""
    active()  # an unknown REPLAYKIT_MUTANT fails before anything runs
    settings = InputSettings.of(data)
    async with httpx.AsyncClient(timeout=httpx.Timeout(settings.idle_timeout), verify=_TLS) as client:
        state = HarnessRun(settings, client)
        recovery = durable.Recovery.of(data.get("recovery"))
        if recovery is not None and settings.state_dir is not None:
            return await _durable(state, durable.Keeper(state, recovery, str(data.get("scenario") or "run"),
                                                        settings.state_dir, lambda step: _target(
                                                            step, settings.reserve)), data)
        try:
            with CtrlC() as ctrl_c:
                state.restore(data.get("transcript"))
                for index, step in enumerate(data["steps"]):
                    await ctrl_c.within(step.get("cancelAfterMs"), state.step(index, step))
        except (Exception, asyncio.CancelledError) as exc:
            return _outcome(state, failure(exc))
        return _outcome(state, None)


async def _durable(state: HarnessRun, keeper: durable.Keeper, data: JSON) -> JSON:
    """The steps as durable operations: restored from the store when it holds one (a restart), else from
    the input; the outcome carries the receipts, and ``unanswered`` when an operation settled so."""
    stored = (keeper.state / STORE).is_file()
    try:
        with CtrlC() as ctrl_c:
            state.restore(None if stored else data.get("transcript"))
            for index, step in enumerate(data["steps"]):
                await ctrl_c.within(step.get("cancelAfterMs"), keeper.step(index, step))
    except durable.Unanswered as settled:
        return {**_outcome(state, None), "status": "unanswered", "reason": settled.reason,
                "receipts": keeper.receipts}
    except (Exception, asyncio.CancelledError) as exc:
        return {**_outcome(state, failure(exc)), "receipts": keeper.receipts}
    return {**_outcome(state, None), "receipts": keeper.receipts}


class CtrlC:
    """A user's Ctrl-C for the whole run: SIGINT (the runner sends it at a step's ``cancelOn``) cancels the
    running step, or the next one when it comes between steps, so the run ends ``aborted`` / CANCELLED and
    still writes its outcome. Installed whatever SIGINT's disposition was (``asyncio.run``'s own handler is
    not, when SIGINT was ignored at start). Only the main thread takes signals: elsewhere SIGINT is left as
    it is."""

    def __init__(self) -> None:
        self.task: asyncio.Future[None] | None = None
        self.pressed = False
        self.loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> CtrlC:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not the main thread
            loop.add_signal_handler(signal.SIGINT, self.press)
            self.loop = loop
        return self

    def __exit__(self, *exc: object) -> None:
        if self.loop is not None:
            self.loop.remove_signal_handler(signal.SIGINT)

    def press(self) -> None:
        """Cancel the running step (or the next)."""
        self.pressed = True
        if self.task is not None:
            self.task.cancel()

    async def within(self, cancel_after_ms: int | None, work: Any) -> None:
        """Run ``work`` (a step); cancel it on SIGINT, or ``cancel_after_ms`` after it starts, when given."""
        task = self.task = asyncio.ensure_future(work)
        if self.pressed:
            task.cancel()
        timer = asyncio.get_running_loop().call_later(cancel_after_ms / 1000, task.cancel) \
            if cancel_after_ms is not None else None
        try:
            await task
        finally:
            self.task = None
            if timer is not None:
                timer.cancel()


def _outcome(state: HarnessRun, error: ErrorInfo | None) -> JSON:
    if error is not None:
        print(f"replaykit.reference: {error.code}: {error.message}", file=sys.stderr)
        if error.code != "CANCELLED" and error.retryable:
            error = dataclasses.replace(error, retryable=False)  # retries used up
    status = "ok" if error is None else error.outcome
    outcome = {"status": status, "error": error.to_json() if error else None, "transcript": state.transcript,
               "persistWrites": state.persist_writes, "estimates": state.estimates}
    return outcome | ({"research": state.research} if state.research else {})


def run(data: JSON) -> JSON:
    """Run a target input and return its outcome (contracts/replaykit/target-outcome.schema.json)."""
    return asyncio.run(run_async(data))
