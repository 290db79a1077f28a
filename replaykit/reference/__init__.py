"""The reference target: a small, correct agent harness built on replaykit's library, and its mutants.

It speaks the target protocol: :func:`run` takes a target input
(``contracts/replaykit/target-input.schema.json``) and returns the outcome
(``contracts/replaykit/target-outcome.schema.json``); ``python -m replaykit.reference`` does the same with
the files named by ``REPLAYKIT_INPUT`` and ``REPLAYKIT_OUTCOME``. Requests go over httpx as raw wire data
(no provider SDK) to the URLs of ``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL`` and ``REPLAYKIT_AZURE_BASE_URL``.

Each step of the input, in order::

    restore     the input's transcript, or the store ($REPLAYKIT_STATE_DIR/transcript.json) when it is null
    validate    replaykit.transcript.restore: LOCAL_REQUEST_ERROR (validation), no request, no write
    rebuild     the system prompt and tools of the input, logged in systemHistory
    project     replaykit.replay: search blocks verbatim to their provider, a text projection to another;
                display-only records and other providers' opaque blocks left out
    check       the request against its provider's contract, shapes and rules (replaykit.contracts):
                LOCAL_REQUEST_ERROR (validation), no request, when the provider would refuse it
    estimate    replaykit.estimate, anchored on valid usage; refused above contextWindow - reserve
    request     streamed, retried up to maxRetries when replaykit.provenance says retryable;
                idleTimeoutMs is the longest wait for the next bytes
    parse       replaykit.sse + the transcript converters; citations checked (replaykit.citations)
    append      then the local tools the model called (read, task, task_wait, web_search), and again
    persist     atomically, once the turn is over (persistWrites counts the writes)

A step with ``research`` is a research step instead (:mod:`~replaykit.reference.research`): search, evidence
records, one cited answer verified against them (:mod:`~replaykit.reference.evidence`); its result is the
outcome's ``research`` entry.

The parts: :mod:`~replaykit.reference.harness` (the run, retries, the outcome),
:mod:`~replaykit.reference.steps` (validate, project, estimate, citations),
:mod:`~replaykit.reference.wire` (one request and its stream), :mod:`~replaykit.reference.tools` (``read``,
``task``, ``task_wait``), :mod:`~replaykit.reference.websearch` (``web_search`` over Cloudflare Web Search, at
``REPLAYKIT_WEBSEARCH_BASE_URL``) and :mod:`~replaykit.reference.defects` (the named defects,
``REPLAYKIT_MUTANT``).
"""

from __future__ import annotations

from replaykit.reference.defects import MUTANTS, mutant
from replaykit.reference.harness import run, run_async

__all__ = ["MUTANTS", "mutant", "run", "run_async"]
