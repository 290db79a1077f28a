"""The estimator property suite: invariants every replay-aware token estimator must keep.

An estimator is a callable ``(transcript, target) -> int | float`` loaded from ``module:function``, or a
command speaking the JSON Lines estimator protocol (:class:`CommandEstimator`). :data:`PROPERTIES` holds the
suite (each with a ``name`` and a one-line ``statement``); :func:`run` checks them with Hypothesis
(:mod:`replaykit.strategies`) and returns one :class:`Outcome` each, a failure carrying the shrunk transcript.
Called by ``replaykit properties`` and qualify; the pytest example and what each property catches are in
docs/architecture/modules.md.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
import select
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Protocol

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from replaykit import callables
from replaykit import strategies as rs
from replaykit.contracts import validate
from replaykit.errors import UsageError
from replaykit.estimate import Chars, ExactModeUnavailable, body_chars, o200k_base, o200k_tokens, to_target
from replaykit.jsondoc import JSON
from replaykit.replay import project

__all__ = [
    "ACCURACY",
    "PROPERTIES",
    "CommandEstimator",
    "ContentError",
    "Estimator",
    "EstimatorFailed",
    "Failure",
    "Outcome",
    "Property",
    "PropertyFailed",
    "PropertyViolation",
    "accuracy",
    "dumps",
    "open_estimator",
    "run",
    "selected",
]



class Estimator(Protocol):
    """An estimator under test: ``(transcript, target) -> tokens``."""

    def __call__(self, transcript: JSON, target: JSON, /) -> int | float: ...


class EstimatorFailed(Exception):
    """The estimator raised, answered ``{"error"}``, broke the protocol or returned a non-number."""


class PropertyViolation(Exception):
    """One example broke a property: ``detail`` says how; ``transcript`` and ``target`` are the input."""

    def __init__(self, detail: str, transcript: JSON, target: JSON) -> None:
        super().__init__(detail)
        self.detail, self.transcript, self.target = detail, transcript, target


@dataclass(frozen=True, slots=True)
class Failure:
    """A property's failure on its shrunk example."""

    detail: str
    transcript: JSON
    target: JSON


class PropertyFailed(AssertionError):
    """Raised by :meth:`Property.verify`: the statement, what went wrong and the shrunk transcript as JSON."""


@dataclass(frozen=True, slots=True)
class ContentError:
    """The estimate's error against ``o200k_base`` on one kind of content: ``low`` and ``high`` over the
    ``examples`` checked (-0.1: 10% under)."""

    content: str
    examples: int
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one property: ``failure`` is None when it held on every example it could check;
    ``unchecked`` says why it could check none (the estimator failed on every one, or, when ``skipped``,
    the property could not run: the tokenizer it compares with is not installed). ``errors``: the error per
    kind of content of a property that measures one (:data:`ACCURACY`)."""

    name: str
    statement: str
    failure: Failure | None
    unchecked: str | None = None
    skipped: bool = False
    errors: tuple[ContentError, ...] = ()

    @property
    def status(self) -> str:
        """``pass``, ``fail``, ``skipped`` or ``unchecked``: only ``pass`` is a pass."""
        if self.failure:
            return "fail"
        return "skipped" if self.skipped else "unchecked" if self.unchecked else "pass"

    @property
    def passed(self) -> bool:
        """True when the property held on every example and at least one could be checked."""
        return self.status == "pass"


# ---------------------------------------------------------------- calling the estimator


def dumps(value: object, indent: int | None = None) -> str:
    """Strict JSON: NaN becomes null and +-infinity +-1e999 (which JSON parsers read back as infinities);
    compact, or indented by ``indent``."""
    separators = (",", ":") if indent is None else None
    text = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, allow_nan=True)
    return _NON_FINITE.sub(_finite_token, text)


_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|-?Infinity|NaN')


def _finite_token(match: re.Match[str]) -> str:
    token = match.group(0)
    return {"NaN": "null", "Infinity": "1e999", "-Infinity": "-1e999"}.get(token, token)


def _tokens(estimator: Estimator, transcript: JSON, target: JSON) -> float:
    try:
        tokens = estimator(copy.deepcopy(transcript), dict(target))
    except EstimatorFailed:
        raise
    except Exception as exc:  # any exception from the code under test is a finding
        raise EstimatorFailed(f"the estimator raised {type(exc).__name__}: {exc}") from exc
    if isinstance(tokens, bool) or not isinstance(tokens, int | float):
        raise EstimatorFailed(f"the estimator returned {tokens!r:.80}, not a number")
    return tokens


class _Case:
    """Calls the estimator for one example of a property.

    An estimator failure is ``never_raises``'s finding; any other property skips that example (so that each
    defect is reported by the property about it), and a property whose every example was skipped is
    reported as unchecked.
    """

    def __init__(self, estimator: Estimator, target: JSON, measures: _Measures | None = None) -> None:
        self.estimator, self.target, self.measures = estimator, target, measures or _Measures()

    def tokens(self, transcript: JSON) -> float:
        try:
            return _tokens(self.estimator, transcript, self.target)
        except EstimatorFailed:
            hypothesis.reject()

    def fail(self, detail: str, transcript: JSON) -> PropertyViolation:
        return PropertyViolation(detail, transcript, self.target)


class _Measures:
    """The errors a property measures, per kind of content, until its first violation (the examples
    Hypothesis tries while shrinking are not measures of the estimator)."""

    def __init__(self) -> None:
        self.errors: dict[str, list[float]] = {}
        self.closed = False

    def add(self, content: str, error: float) -> None:
        if not self.closed:
            self.errors.setdefault(content, []).append(error)

    def summary(self) -> tuple[ContentError, ...]:
        return tuple(ContentError(content, len(errors), min(errors), max(errors))
                     for content, errors in self.errors.items())


# ---------------------------------------------------------------- building examples


def _restamp(messages: list[JSON], start: int = 1_700_000_000_000) -> list[JSON]:
    for offset, message in enumerate(messages):
        message["timestamp"] = start + 1000 * offset
    return messages


def _transcript(head: JSON, messages: list[JSON]) -> JSON:
    return {"version": 1, "system": head.get("system"), "tools": head.get("tools", []),
            "messages": _restamp(copy.deepcopy(messages))}


@cache
def _unanchoring() -> st.SearchStrategy[JSON]:
    """Messages that never anchor: user, tool result, assistant turns with zero or non-finite usage."""
    kinds = st.sampled_from(["zero", "nan", "infinite"])
    spoiled = kinds.flatmap(lambda kind: rs.assistant_messages(usage=kind))
    return st.one_of(rs.user_messages(), rs.tool_result_messages(), spoiled)


@cache
def _anchor() -> st.SearchStrategy[JSON]:
    return rs.assistant_messages(usage="valid", stop_reasons=("stop", "length", "toolUse", "pauseTurn"))


@st.composite
def _anchored(draw: st.DrawFn) -> tuple[JSON, int]:
    """A transcript whose anchor (at the returned index) is followed only by messages that never anchor."""
    head = draw(rs.transcripts(max_messages=4))
    after = draw(st.lists(_unanchoring(), max_size=3))
    messages = [*head["messages"], draw(_anchor()), *after]
    return _transcript(head, messages), len(head["messages"])


def _grow(transcript: JSON, index: int, text: str) -> JSON:
    """``transcript`` with a user message saying ``text`` inserted at ``index``."""
    messages = copy.deepcopy(transcript["messages"])
    stamp = messages[min(index, len(messages) - 1)]["timestamp"] if messages else 1_700_000_000_000
    messages.insert(index, {"role": "user", "content": text, "timestamp": stamp})
    return {**transcript, "messages": messages}


@cache
def _ascii() -> st.SearchStrategy[str]:
    """Text of at least 4 characters, so that it always weighs at least one token."""
    return st.text("abcdefghijklmnopqrstuvwxyz ", min_size=4, max_size=80)


def _append(transcript: JSON, *messages: JSON) -> JSON:
    both = copy.deepcopy([*transcript["messages"], *messages])
    return {**transcript, "messages": _restamp(both)}


def _projected(transcript: JSON, target: JSON) -> Iterable[Chars]:
    """The characters of each part (system, tools, messages) of what ``project`` emits."""
    return body_chars(project(transcript, to_target(target))).values()


def _reference(transcript: JSON, target: JSON) -> int:
    """The heuristic applied to what ``project`` emits, with no anchoring: system + tools + messages."""
    return sum(chars.tokens for chars in _projected(transcript, target))


def _chars(transcript: JSON, target: JSON) -> int:
    return sum(chars.other + chars.cjk for chars in _projected(transcript, target))


# ---------------------------------------------------------------- the properties


def _never_raises(case: _Case, data: st.DataObject) -> None:
    transcript = data.draw(rs.transcripts(), label="transcript")
    if data.draw(st.booleans(), label="system rebuilt"):
        transcript = data.draw(rs.system_changes(transcript), label="change")[1]
    try:
        _tokens(case.estimator, transcript, case.target)
    except EstimatorFailed as exc:
        raise case.fail(str(exc), transcript) from exc


def _finite(case: _Case, data: st.DataObject) -> None:
    transcript = data.draw(rs.transcripts(), label="transcript")
    tokens = case.tokens(transcript)
    if not math.isfinite(tokens) or tokens < 0:
        raise case.fail(f"the estimate is {tokens!r}", transcript)


def _no_decrease(case: _Case, data: st.DataObject) -> None:
    search = data.draw(st.booleans(), label="search in the transcript")
    transcript = data.draw(rs.transcripts(search=search), label="transcript")
    low = case.tokens(transcript)
    for message in data.draw(st.lists(_unanchoring(), min_size=1, max_size=3), label="appended"):
        transcript = _append(transcript, message)
        high = case.tokens(transcript)
        if high < low:
            raise case.fail(f"appending the last message lowered the estimate from {low} to {high}",
                            transcript)
        low = high


def _search_chars(case: _Case, data: st.DataObject) -> None:
    before = data.draw(rs.transcripts(), label="transcript")
    turn = data.draw(rs.assistant_messages(usage="zero", stop_reasons=("stop", "toolUse"), search=False))
    search = data.draw(st.lists(rs.hosted_search_blocks(raw=True), min_size=1, max_size=3), label="search")
    at = data.draw(st.integers(0, len(turn["content"])), label="position")
    plain = _append(before, turn)
    searched = _append(before, {**turn, "content": turn["content"][:at] + search + turn["content"][at:]})
    added = _chars(searched, case.target) - _chars(plain, case.target)
    gained = case.tokens(searched) - case.tokens(plain)
    if gained < added // 4:
        raise case.fail(f"+{added} replayed search characters added {gained} tokens, "
                        f"expected at least {added // 4}", searched)


def _opaque_chars(case: _Case, data: st.DataObject) -> None:
    before = data.draw(rs.transcripts(), label="transcript")
    turn = data.draw(rs.assistant_messages(usage="zero", stop_reasons=("stop", "toolUse"), search=False,
                                           opaque=False))
    own = data.draw(st.booleans(), label="the target's own provider")
    provider = case.target["provider"] if own else None
    blocks = data.draw(st.lists(rs.provider_blocks(provider), min_size=1, max_size=3), label="opaque blocks")
    at = data.draw(st.integers(0, len(turn["content"])), label="position")
    plain = _append(before, turn)
    opaque = _append(before, {**turn, "content": turn["content"][:at] + blocks + turn["content"][at:]})
    added = _chars(opaque, case.target) - _chars(plain, case.target)
    gained = case.tokens(opaque) - case.tokens(plain)
    if added == 0 and gained != 0:
        raise case.fail(f"opaque blocks of another provider are never sent, yet they changed the estimate by "
                        f"{gained} tokens", opaque)
    if gained < added // 4:
        raise case.fail(f"+{added} replayed characters of opaque provider blocks added {gained} tokens, "
                        f"expected at least {added // 4}", opaque)


def _cjk_chars(case: _Case, data: st.DataObject) -> None:
    before = data.draw(rs.transcripts(), label="transcript")
    text, cjk = data.draw(rs.mixed_text(), label="text"), data.draw(rs.cjk_text(min_size=1), label="cjk")
    plain = _append(before, {"role": "user", "content": text})
    more = _append(before, {"role": "user", "content": text + cjk})
    gained = case.tokens(more) - case.tokens(plain)
    if gained < len(cjk) // 2:
        raise case.fail(f"+{len(cjk)} CJK characters added {gained} tokens, expected at least "
                        f"{len(cjk) // 2}", more)


def _anchor_once(case: _Case, data: st.DataObject) -> None:
    transcript, anchor = data.draw(_anchored(), label="anchored")
    at, text = data.draw(st.integers(0, anchor), label="at"), data.draw(_ascii(), label="text")
    grown = _grow(transcript, at, text)
    base, again = case.tokens(transcript), case.tokens(grown)
    if again != base:
        raise case.fail(f"growing the prefix the anchor covers changed the estimate from {base} to {again}",
                        grown)
    more = data.draw(st.integers(1, 10_000), label="extra usage")
    raised = copy.deepcopy(transcript)
    usage = raised["messages"][anchor]["usage"]
    usage["input"], usage["totalTokens"] = usage["input"] + more, usage["totalTokens"] + more
    if (bumped := case.tokens(raised)) != base + more:
        raise case.fail(f"raising the anchor's usage by {more} moved the estimate from {base} to {bumped}, "
                        f"not to {base + more}", raised)


def _spoil(message: JSON, how: str) -> None:
    if how in ("error", "aborted"):
        message["stopReason"] = how
    else:
        message["usage"] = {name: {"zero": 0, "nan": math.nan, "infinite": math.inf}[how]
                            for name in message["usage"]}


def _falls_back(case: _Case, data: st.DataObject) -> None:
    transcript, anchor = data.draw(_anchored(), label="anchored")
    how = data.draw(st.sampled_from(["zero", "nan", "infinite", "error", "aborted"]), label="spoiled as")
    for message in transcript["messages"]:
        if message["role"] == "assistant":
            _spoil(message, how if message is transcript["messages"][anchor] else "zero")
    text = data.draw(_ascii(), label="text")
    grown = _grow(transcript, data.draw(st.integers(0, anchor), label="at"), text)
    gained = case.tokens(grown) - case.tokens(transcript)
    if gained < len(text) // 4:
        raise case.fail(f"with {how} usage, +{len(text)} characters before it added {gained} tokens, "
                        f"expected at least {len(text) // 4}: the usage still anchors the estimate", grown)


def _matches_projection(case: _Case, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["zero", "nan", "infinite"]), label="usage")
    transcript = data.draw(rs.transcripts(usage=kind), label="transcript")
    tokens, expected = case.tokens(transcript), _reference(transcript, case.target)
    if tokens != expected:
        raise case.fail(f"the estimate is {tokens}; the heuristic over replay.project(...) gives {expected}",
                        transcript)


def _system_rebuild(case: _Case, data: st.DataObject) -> None:
    transcript, anchor = data.draw(_anchored(), label="anchored")
    kind, changed = data.draw(rs.system_changes(transcript), label="change")
    text = data.draw(_ascii(), label="text")
    before, after = case.tokens(changed), case.tokens(_grow(changed, anchor, text))
    if kind == "rebuild":
        original = case.tokens(transcript)
        if after != before or before != original:
            raise case.fail(f"an unchanged system rebuild dropped the anchor (estimate {original} before the "
                            f"rebuild, {before} after it, {after} with a longer prefix)", changed)
    elif after - before < len(text) // 4:
        raise case.fail(f"after a real {kind} change, +{len(text)} characters before the old anchor added "
                        f"{after - before} tokens: the stale usage still anchors the estimate", changed)


#: The name of the property that compares the estimate with o200k_base (:func:`accuracy`).
ACCURACY = "tracks_o200k"
#: The fewest o200k_base tokens content must add for its error to be judged: below, rounding dominates (an
#: OpenAI search replayed to Anthropic is a line of text).
_MIN_TOKENS = 50
_SEARCH_TOOL = "web_search"


def _searchless(messages: list[JSON]) -> list[JSON]:
    """``messages`` without their search content: hosted search blocks, citations, search tool calls and
    their results (a turn left empty is dropped)."""
    kept: list[JSON] = []
    for message in messages:
        if message["role"] == "toolResult" and message.get("toolName") == _SEARCH_TOOL:
            continue
        if message["role"] == "assistant":
            blocks = [{key: value for key, value in block.items() if key != "citations"}
                      for block in message["content"] if block["type"] != "hostedSearch"
                      and not (block["type"] == "toolCall" and block.get("name") == _SEARCH_TOOL)]
            if not blocks:
                continue
            message = {**message, "content": blocks}
        kept.append(message)
    return kept


def _o200k(transcript: JSON, target: JSON) -> int:
    return o200k_tokens(project(transcript, to_target(target)))


@cache
def _content_kinds() -> st.SearchStrategy[str]:
    """Search content half the time (the class budgets fail on), each kind of :data:`CONTENT_KINDS` else."""
    return st.one_of(st.just("search"), st.sampled_from(rs.CONTENT_KINDS))


def _accuracy(margins: tuple[float, float], case: _Case, data: st.DataObject) -> None:
    search_margin, band = margins
    kind = data.draw(_content_kinds(), label="content")
    base = data.draw(rs.transcripts(max_messages=3, usage="zero"), label="transcript")
    own = case.target["provider"] if kind == "opaque" else None  # an opaque block reaches its provider only
    rich = data.draw(rs.rich_messages(kind, own), label=kind)
    richer, plainer = _append(base, *rich), _append(base, *(_searchless(rich) if kind == "search" else []))
    exact = _o200k(richer, case.target) - _o200k(plainer, case.target)
    hypothesis.assume(exact >= _MIN_TOKENS)
    gained = case.tokens(richer) - case.tokens(plainer)
    error = (gained - exact) / exact
    case.measures.add(kind, error)
    low, high = (-search_margin, math.inf) if kind == "search" else (-band, band)
    if not low <= error <= high:
        case.measures.closed = True
        allowed = f"at most {search_margin:.0%} under" if kind == "search" else f"within +-{band:.0%}"
        raise case.fail(f"{kind} content adds {exact} tokens by o200k_base, {gained} by the estimate: "
                        f"{error:+.1%}, not {allowed}", richer)


def _tokenizer_missing() -> str | None:
    try:
        o200k_base()
    except ExactModeUnavailable as exc:
        return (f"skipped: {exc} (pip install 'replaykit-llm[exact]'), or leave {ACCURACY} out with "
                "--property")
    return None


def _first_violation(group: BaseExceptionGroup[BaseException]) -> PropertyViolation | None:
    for inner in group.exceptions:
        if isinstance(inner, PropertyViolation):
            return inner
        if isinstance(inner, BaseExceptionGroup) and (found := _first_violation(inner)) is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class Property:
    """One invariant: its ``name``, a one-line ``statement`` and the Hypothesis check behind it."""

    name: str
    statement: str
    check: Callable[[_Case, st.DataObject], None] = field(repr=False)
    #: Why the property cannot run here (a tokenizer not installed), or None.
    missing: Callable[[], str | None] = field(default=lambda: None, repr=False)

    def test(self, estimator: Estimator, max_examples: int = 100, seed: int | None = None, *,
             shrink: bool = True, measures: _Measures | None = None) -> Callable[[], None]:
        """The Hypothesis test of this property against ``estimator`` (raises PropertyViolation).

        ``shrink=False`` reports the first failing example as found, without minimising it (faster).
        ``measures`` collects the errors a property measures.
        """
        # Phase.explain is left out: its notes are never shown, and it cost 18 of a failing run's 29 s
        left_out = {Phase.explain} if shrink else {Phase.explain, Phase.shrink}
        phases = [phase for phase in Phase if phase not in left_out]
        config = settings(max_examples=max_examples, deadline=None, database=None, report_multiple_bugs=False,
                          verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck), phases=phases)

        @config
        @given(rs.targets(), st.data())
        def property_test(target: JSON, data: st.DataObject) -> None:
            self.check(_Case(estimator, target, measures), data)

        return hypothesis.seed(seed)(property_test) if seed is not None else property_test

    def outcome(self, estimator: Estimator, max_examples: int = 100, seed: int | None = None, *,
                shrink: bool = True) -> Outcome:
        """Run the property; a failure keeps the shrunk example. A property that cannot run here is skipped,
        with the reason: not a pass."""
        if (missing := self.missing()) is not None:
            return Outcome(self.name, self.statement, None, missing, skipped=True)
        measures = _Measures()
        try:
            self.test(estimator, max_examples, seed, shrink=shrink, measures=measures)()
        except PropertyViolation as violation:
            return self._failed(violation, "", measures)
        except Unsatisfiable:
            why = "the estimator failed on every example (see never_raises)"
            return Outcome(self.name, self.statement, None, why, errors=measures.summary())
        except BaseExceptionGroup as group:  # Hypothesis's FlakyFailure: it failed once, then passed
            first = _first_violation(group)
            if first is None:
                raise
            note = "(not reproducible: the estimator answered differently on a rerun) "
            return self._failed(first, note, measures)
        return Outcome(self.name, self.statement, None, errors=measures.summary())

    def _failed(self, found: PropertyViolation, note: str, measures: _Measures) -> Outcome:
        failure = Failure(note + found.detail, found.transcript, found.target)
        return Outcome(self.name, self.statement, failure, errors=measures.summary())

    def verify(self, estimator: Estimator, max_examples: int = 100, seed: int | None = None) -> None:
        """Run the property in a test: raises :class:`PropertyFailed` with the statement and the example."""
        outcome = self.outcome(estimator, max_examples, seed)
        if outcome.unchecked:
            raise PropertyFailed(f"{self.name}: {self.statement}\n{outcome.status}: {outcome.unchecked}")
        failure = outcome.failure
        if failure is not None:
            raise PropertyFailed(f"{self.name}: {self.statement}\n{failure.detail}\ntarget: "
                                 f"{dumps(failure.target)}\ntranscript: {dumps(failure.transcript)}")


def accuracy(search_margin: float = 0.10, band: float = 0.25) -> Property:
    """The property that compares the estimate with ``o200k_base`` (tiktoken, the ``exact`` extra) on
    real-looking content (:func:`replaykit.strategies.rich_messages`): what search content adds is never
    more than ``search_margin`` under what the tokenizer counts (there is no upper bound: a budget fails on
    the side that hurts), what opaque blocks, CJK, code and prose add is within ``band`` of it either way.

    For Anthropic targets ``o200k_base`` is a stated proxy (Anthropic's tokenizer is not public). Each
    example appends one kind of content to a transcript without usage and compares what the estimate and
    the tokenizer add; content under 50 tokens is not judged (rounding dominates). Without the extra the
    property is skipped, with the reason.
    """
    for name, value in (("search_margin", search_margin), ("band", band)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
            raise UsageError(f"{name}={value!r} must be a fraction from 0 to below 1 (0.1: 10%)")
    statement = (f"on real-looking content the estimate is never more than {search_margin:.0%} under "
                 f"o200k_base on search content, and within +-{band:.0%} of it on opaque blocks, CJK, code "
                 "and prose (a proxy for Anthropic)")
    return Property(ACCURACY, statement, partial(_accuracy, (float(search_margin), float(band))),
                    _tokenizer_missing)


PROPERTIES: tuple[Property, ...] = (
    Property("never_raises", "never raises on a contract-valid transcript (nameless search blocks and opaque "
             "provider blocks included)", _never_raises),
    Property("finite_non_negative", "the estimate is a finite, non-negative number", _finite),
    Property("no_decrease_on_append", "appending a message that carries no valid usage never lowers the "
             "estimate", _no_decrease),
    Property("search_chars_count", "+N replayed search characters add at least floor(N/4) tokens",
             _search_chars),
    Property("opaque_blocks_count", "an opaque provider block replayed to its own provider adds at least "
             "floor(N/4) tokens for its N characters; one meant for another provider adds none",
             _opaque_chars),
    Property("cjk_chars_count", "+k CJK characters add at least k/2 tokens (o200k_base counts 0.64 to 0.9 a "
             "character; English's quarter token is the defect)", _cjk_chars),
    Property("anchor_counted_once", "a valid usage anchor is counted once and the prefix it covers never "
             "again", _anchor_once),
    Property("invalid_usage_falls_back", "zero, non-finite, error or aborted usage anchors nothing: the "
             "prefix is estimated in full", _falls_back),
    Property("matches_projection", "without an anchor the estimate is replaykit.estimate's per-class rates "
             "over exactly what replay.project emits, system and tools included", _matches_projection),
    Property("system_rebuild", "an unchanged system rebuild keeps the anchor; a real instruction or tool "
             "change drops it", _system_rebuild),
    accuracy(),
)


def run(estimator: Estimator, *, max_examples: int = 100, seed: int | None = None,
        names: Iterable[str] | None = None, shrink: bool = True, search_margin: float = 0.10,
        band: float = 0.25) -> list[Outcome]:
    """Check every property (or those ``names``) against ``estimator``; one :class:`Outcome` each.

    ``seed`` makes the run repeatable (None: Hypothesis draws a random one); ``search_margin`` and ``band``
    are :func:`accuracy`'s.
    """
    chosen = selected(names, search_margin=search_margin, band=band)
    return [prop.outcome(estimator, max_examples, seed, shrink=shrink) for prop in chosen]


def selected(names: Iterable[str] | None, *, search_margin: float = 0.10,
             band: float = 0.25) -> list[Property]:
    """The properties ``names`` (None: all of :data:`PROPERTIES`), in that order, :func:`accuracy` with
    ``search_margin`` and ``band``; an unknown name is a :class:`~replaykit.errors.UsageError`."""
    known = {prop.name: prop for prop in PROPERTIES} | {ACCURACY: accuracy(search_margin, band)}
    wanted = list(known) if names is None else list(names)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise UsageError(f"unknown property {unknown[0]!r}; known: {', '.join(known)}")
    return [known[name] for name in wanted]


# ---------------------------------------------------------------- loading estimators


@contextlib.contextmanager
def open_estimator(spec: str | None, command: str | None) -> Iterator[tuple[str, Estimator]]:
    """The estimator named by ``spec`` (``module:function``) or, when ``spec`` is None, by ``command`` (a
    :class:`CommandEstimator`, stopped on exit), with its label (the spec or the command as given)."""
    if spec is not None:
        yield spec, callables.load_callable(spec)
        return
    if command is None:
        raise UsageError("name an estimator: --estimator MODULE:FUNCTION or --estimator-cmd CMD")
    with CommandEstimator(command) as running:
        yield command, running


def _split(command: str) -> list[str]:
    """``command`` split as a shell would (shlex); unbalanced quotes are a usage error."""
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"--estimator-cmd {command!r} cannot be split into words ({exc}); "
                         "balance its quotes") from exc


class CommandEstimator:
    """An estimator in another process, speaking JSON Lines on stdin / stdout (one request at a time).

    A process that exits or stays silent for ``timeout`` seconds fails the call and is restarted for the
    next one. Use as a context manager (or call :meth:`close`).
    """

    def __init__(self, command: str | Sequence[str], timeout: float = 10.0) -> None:
        self.argv = _split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise UsageError("--estimator-cmd must name a command")
        self.timeout, self.next_id = timeout, 0
        self.process: subprocess.Popen[bytes] | None = None
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the process's life
        self.pending = b""

    def __enter__(self) -> CommandEstimator:
        try:
            self._start()  # a command that cannot start is a usage error, before any property runs
        except UsageError:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, transcript: JSON, target: JSON) -> float:
        """Send one request and wait for its answer."""
        self.next_id += 1
        line = dumps({"id": self.next_id, "transcript": transcript, "target": target}) + "\n"
        answer = self._exchange(line.encode("utf-8"))
        return self._tokens(answer, self.next_id)

    def _start(self) -> subprocess.Popen[bytes]:
        if self.process is not None and self.process.poll() is None:
            return self.process
        self._stop()
        try:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self.stderr)
        except OSError as exc:
            raise UsageError(f"--estimator-cmd {shlex.join(self.argv)!r} cannot start: {exc}") from exc
        self.pending = b""
        return self.process

    def _exchange(self, line: bytes) -> bytes:
        process = self._start()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(line)
            process.stdin.flush()
        except BrokenPipeError:
            raise EstimatorFailed(self._died(process)) from None
        return self._read_line(process)

    def _read_line(self, process: subprocess.Popen[bytes]) -> bytes:
        assert process.stdout is not None
        fd = process.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                self._stop()
                raise EstimatorFailed(f"the estimator command gave no answer within {self.timeout} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EstimatorFailed(self._died(process))
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def _died(self, process: subprocess.Popen[bytes]) -> str:
        self._stop(self.timeout)
        code = process.returncode
        self.stderr.seek(0)
        tail = self.stderr.read()[-400:].decode("utf-8", "replace").strip()
        self.stderr.seek(0)
        self.stderr.truncate()
        return f"the estimator command exited with code {code}" + (f": {tail}" if tail else "")

    def _tokens(self, line: bytes, ident: int) -> float:
        try:
            answer = json.loads(line)
        except ValueError:
            raise EstimatorFailed(f"the estimator answered {line[:80]!r}, not a JSON line") from None
        violations = validate("replaykit.estimator-response", answer)
        if violations:
            raise EstimatorFailed(f"the estimator's answer {line[:80]!r} breaks the protocol: "
                                  f"{violations[0]}")
        if answer["id"] != ident:
            raise EstimatorFailed(f"the estimator answered id {answer['id']!r} to request {ident}")
        if "error" in answer:
            raise EstimatorFailed(f"the estimator answered error: {answer['error']}")
        tokens: float = answer["tokens"]
        return tokens

    def _stop(self, grace: float = 0.0) -> None:
        """End the process: close its stdin, wait ``grace`` seconds for it to exit, then kill it."""
        process, self.process = self.process, None
        if process is None:
            return
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        """Close the estimator's stdin, let it exit (or kill it after ``timeout``), drop the stderr file."""
        self._stop(self.timeout)
        self.stderr.close()
