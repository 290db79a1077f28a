"""The research step of the reference harness: plan, search, evidence, a cited answer, verification.

A step with ``research`` runs plan, search (:mod:`~replaykit.reference.websearch`, a second provider once
after a capacity failure), evidence, answer (:mod:`~replaykit.reference.wire`) and verify
(:mod:`~replaykit.reference.evidence`) within one deadline (``deadlineMs``); its result is the outcome's
``research`` entry. Tool calls in the model's reply are counted, never run. A failure ends the run, named by
:func:`replaykit.provenance.research_code`. Called by the harness; the stages in full are in
docs/architecture/reference.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

import httpx

from replaykit.errors import CitationError, WebSearchError
from replaykit.jsondoc import JSON
from replaykit.provenance import RESEARCH_RETRYABLE, ResearchCode, classify, research_code
from replaykit.reference import evidence as ev
from replaykit.reference.defects import mutant
from replaykit.reference.websearch import SearchOptions, search
from replaykit.reference.wire import now_ms
from replaykit.search import Evidence
from replaykit.transcript import AssistantMessage

__all__ = ["Deadline", "Research"]

T = TypeVar("T")


class Deadline:
    """One deadline for the whole step: each stage gets what is left of it."""

    def __init__(self, total_ms: int | None) -> None:
        self.total = None if total_ms is None else total_ms / 1000
        self.end = None if self.total is None else time.monotonic() + self.total

    def left(self) -> float | None:
        """Seconds left (None: no deadline); the whole budget again for every stage under a mutant."""
        if self.total is None or self.end is None:
            return None
        return self.total if mutant("deadline-per-stage") else max(self.end - time.monotonic(), 0.0)

    async def within(self, work: Awaitable[T]) -> T:
        """``work``, cancelled with a :class:`TimeoutError` (DEADLINE_EXCEEDED) when the deadline passes
        (raised afresh: the cancellation it was raised from would make it CANCELLED)."""
        try:
            return await asyncio.wait_for(work, self.left())
        except TimeoutError:
            raise TimeoutError(f"the research step's deadline of {self.total:g} s passed") from None


# ---------------------------------------------------------------- the step


Ask = Callable[[JSON], Awaitable[AssistantMessage]]


class Research:
    """One research step: ``ask`` sends a transcript to the model (the harness's request, with its retries and
    estimate), ``client`` is the search's HTTP client; :attr:`result` is the outcome's ``research`` entry."""

    def __init__(self, step: JSON, index: int, client: httpx.AsyncClient, ask: Ask,
                 run_tools: Callable[[JSON], Awaitable[AssistantMessage]] | None = None) -> None:
        self.spec: JSON = step["research"]
        self.pointer = f"/steps/{index}/research"
        self.question: str = step["prompt"]
        self.client, self.ask, self.run_tools = client, ask, run_tools
        self.deadline = Deadline(self.spec.get("deadlineMs"))
        self.result: JSON = {"step": index, "queries": [], "searches": [], "evidence": [], "answer": None,
                             "claims": [], "sources": [], "unsupportedClaims": [], "rejected": [],
                             "withheld": [], "notes": [], "ignoredToolCalls": 0, "error": None}

    def fail(self, code: ResearchCode) -> None:
        """Record the step's failure class and its retryability."""
        self.result["error"] = {"code": code, "retryable": RESEARCH_RETRYABLE[code]}

    async def run(self) -> None:
        """Run the step; a search or model failure is recorded, then raised (it ends the run)."""
        stage: Literal["search", "model"] = "search"
        try:
            queries = ev.plan(self.question, self.spec.get("queries"))
            self.result["queries"] = queries
            records = await self.gather(queries)
            self.result["evidence"] = [record.to_json() for record in records]
            if len(records) < ev.MIN_EVIDENCE and not mutant("answers-without-evidence"):
                self.fail("insufficient_evidence")
                return
            stage = "model"
            self.answer(await self.deadline.within(self.reply(records)), records)
        except Exception as exc:
            self.fail(research_code(classify(exc), stage))
            raise

    async def gather(self, queries: Sequence[str]) -> list[Evidence]:
        """Every query's evidence, merged; under ``answers-without-evidence`` a failed search is passed
        over."""
        batches = []
        for query in queries:
            try:
                batches.append(await self.deadline.within(self.search(query)))
            except Exception:
                if not mutant("answers-without-evidence"):
                    raise
        return ev.merge(batches)

    async def search(self, query: str) -> Sequence[Evidence]:
        """One query on the first provider, then once on the second after a capacity failure."""
        providers: list[str] = list(self.spec.get("providers") or ["ceramic"])
        tries = 0
        while True:
            provider = providers[min(tries, len(providers) - 1)]
            host = {"provider": provider, "accountId": self.spec.get("accountId"),
                    "limit": self.spec.get("limit", 5)}
            options = SearchOptions.from_host(host, self.pointer)
            try:
                found = (await search(self.client, options, query)).evidence
            except WebSearchError as exc:
                self.result["searches"].append({"query": query, "provider": provider, "code": exc.code})
                info = classify(exc)
                again = research_code(info, "search") == "search_capacity" and exc.status is not None
                fallbacks_left = tries < len(providers) - 1 or (mutant("fallback-unbounded") and tries < 4)
                if not (again and fallbacks_left) or mutant("no-fallback"):
                    raise
                tries += 1
                continue
            self.result["searches"].append({"query": query, "provider": provider, "results": len(found)})
            return found

    async def reply(self, records: Sequence[Evidence]) -> AssistantMessage:
        """The model's reply to the question over ``records``: one request without tools (under
        ``injected-instruction-obeyed``, the harness's tools offered and their calls run)."""
        user = {"role": "user", "content": ev.prompt(self.question, records), "timestamp": now_ms()}
        transcript: JSON = {"version": 1, "system": ev.SYSTEM, "tools": [], "messages": [user]}
        if mutant("injected-instruction-obeyed") and self.run_tools is not None:
            return await self.run_tools(transcript)
        return await self.ask(transcript)

    def answer(self, message: AssistantMessage, records: Sequence[Evidence]) -> None:
        """Verify the reply into the result; a reply that fails verification is ``citation_failure``."""
        content = message["content"]
        self.result["ignoredToolCalls"] = sum(block["type"] == "toolCall" for block in content)
        text = "".join(str(block.get("text", "")) for block in content if block["type"] == "text")
        try:
            verified = ev.verify(ev.parse_answer(text), records)
        except CitationError as exc:
            self.result["notes"].append({"at": "", "code": "answer-shape", "message": str(exc)[:300]})
            if mutant("answers-without-evidence"):
                self.result["answer"] = text
                return
            self.fail("citation_failure")
            return
        self.result.update(verified.to_json())
        if verified.answer is None:
            self.fail("citation_failure")

