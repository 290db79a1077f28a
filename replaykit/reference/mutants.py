"""The named mutants of the reference harness: each a real defect of its class, switched on by name.

``REPLAYKIT_MUTANT=<name>`` in the environment makes the harness run with that one defect; the code asks
:func:`mutant` at the exact place the defect lives (``if mutant("retry-on-400"): ...``), so each defect is
one reading of the code away from the correct behaviour. :data:`MUTANTS` names them, each with its defect in
one sentence; a scenario proves it can fail by killing the mutants it names in ``kills:``.

The environment is read on every call, so a test may set the variable for one run in-process.
"""

from __future__ import annotations

import os

from replaykit.errors import UsageError

__all__ = ["ENV", "MUTANTS", "active", "mutant"]

ENV = "REPLAYKIT_MUTANT"

MUTANTS: dict[str, str] = {
    "estimator-assumes-name": "the estimate step reads block['name'] on every non-text block, so it crashes "
                              "on a nameless web_search_tool_result",
    "search-not-estimated": "the estimate skips hostedSearch blocks, so search results count as 0 tokens",
    "no-cjk-correction": "the estimate counts every character as a quarter token, CJK included",
    "timestamp-refresh-invalidates-usage": "a system prompt rebuilt unchanged (a newer systemHistory "
                                           "timestamp) is taken for a change, so the usage anchor is dropped",
    "usage-double-count": "the estimate adds the anchor's usage and counts the anchored prefix again",
    "estimate-error-to-zero": "a failed estimate step (a budget refusal included) counts 0 tokens and the "
                              "request goes out anyway",
    "local-error-retried": "a local error (LOCAL_REQUEST_ERROR) is retried like a transient provider error",
    "search-dropped-on-replay": "hostedSearch blocks are left out of the request replayed to the provider "
                                "that produced them",
    "internal-fields-leak": "the transcript's own bookkeeping (version, systemHistory) is spread into the "
                            "provider request body",
    "reject-nameless-legacy": "validation demands a name on every search block's wire form, so a stored "
                              "nameless web_search_tool_result is rejected",
    "accept-corrupt-container": "a content that is not a block list is wrapped into a list instead of being "
                                "rejected, and the request goes out",
    "reject-display-only": "a display-only hostedSearch record (no raw) fails validation instead of being "
                           "left out of the replay",
    "non-url-citation-accepted": "an answer's citations are kept unchecked, a document citation in a web "
                                 "search answer included",
    "cancel-reported-as-error": "a cancelled sub-task is reported as a failed one, so a cancelled run ends "
                                "with status error",
    "retry-on-400": "a 400 is retried like a transient error",
    "no-retry-on-529": "a 529 overloaded response is not retried",
    "opaque-block-dropped": "opaque providerBlocks (code execution and its results) are left out of the "
                            "request replayed to their own provider",
    "search-error-swallowed": "a failed web_search (402, 429, 5xx, 400, a timeout) is shown to the model as "
                              "an empty result list instead of an error saying what to do next",
    "model-chooses-provider": "the web_search tool takes a `provider` from the model's arguments over the "
                              "host's option",
    "description-not-trimmed": "web_search shows the model whole result descriptions, past "
                               "maxDescriptionChars",
    "limit-not-capped": "web_search sends the limit the model asks for, above the host's limit",
    "abort-becomes-failure": "a web_search cancelled mid-request becomes a failed tool result and the turn "
                             "goes on, instead of the run ending aborted",
    "empty-results-reported-as-error": "a web_search that finds nothing is reported to the model as a "
                                       "failure instead of 0 results",
    "search-options-unchecked": "the web_search host options are not checked when the tool is created, so "
                                "an out-of-range option goes out with the search",
    # durable turns (replaykit.reference.durable)
    "partial-dropped-on-recovery": "after an interruption the partial message is thrown away and the model "
                                   "is asked again from scratch instead of continuing it",
    "tool-rerun-without-opt-in": "a tool call cut short is run again whatever its tool declares, not only "
                                 "with recovery: rerun",
    "recovery-unbounded": "interruptions without progress are recovered from forever: maxAttempts is never "
                          "enforced",
    "duplicate-submit-requests": "an operation id submitted again is run again (a second request) instead of "
                                 "returning its receipt",
    # research steps (replaykit.reference.research, replaykit.reference.evidence)
    "unknown-source-accepted": "a citation whose sourceId names no evidence record is kept and shown as a "
                               "source",
    "model-url-rendered": "a source is linked to the URL the model wrote in its citation instead of its "
                          "evidence record's",
    "injected-instruction-obeyed": "the answer request offers the harness's tools and runs the tool calls "
                                   "of the reply, so text from a search result can reach an action",
    "answers-without-evidence": "the model is asked and its reply shown with fewer than two evidence "
                                "records, after a failed search, or when the reply cites nothing",
    "fallback-unbounded": "after a capacity failure the second search provider is tried again and again "
                          "instead of once",
    "claim-support-unchecked": "a citation naming a known record is accepted whatever its claim says",
    "uncited-claim-kept": "a claim cited with no source id is shown as part of the answer",
    "dedupe-drops-parameters": "evidence dedupe ignores every query parameter, so two different pages of "
                               "one path merge into one record",
    "deadline-per-stage": "every research stage gets the whole deadline again instead of what is left",
    "no-fallback": "a capacity failure of the first search provider ends the step; the second is never tried",
}


def active() -> str | None:
    """The mutant named by ``REPLAYKIT_MUTANT`` (None when unset or empty); an unknown name is a
    :class:`~replaykit.errors.UsageError` listing the known ones."""
    name = os.environ.get(ENV, "").strip()
    if not name:
        return None
    if name not in MUTANTS:
        raise UsageError(f"{ENV}={name!r} is no mutant of the reference; use one of: {', '.join(MUTANTS)}")
    return name


def mutant(name: str) -> bool:
    """True when the harness runs as mutant ``name`` (a name of :data:`MUTANTS`, checked)."""
    if name not in MUTANTS:
        raise UsageError(f"mutant({name!r}): no such mutant; use one of: {', '.join(MUTANTS)}")
    return active() == name
