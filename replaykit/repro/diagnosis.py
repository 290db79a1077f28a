"""Where a reported transcript first fails: restore, projection, the request, estimation, as a harness runs.

:func:`diagnose` appends the follow-up prompt a replay sends, then runs :func:`replaykit.transcript.restore`,
:func:`replaykit.replay.projection`, the provider's request contract (rules before shapes, a rule named by its
rulebook id and worded by :func:`replaykit.contracts.refusal`) and :func:`replaykit.estimate.estimate`, and
stops at the first failure with its JSON pointer (else the shortest failing prefix of ``messages``).
Its target is the last assistant turn's provider, API and model. Called by :mod:`replaykit.repro`; the order
and its reasons are in docs/architecture/repro.md.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

from replaykit import contracts
from replaykit.errors import LocalRequestError
from replaykit.estimate import estimate
from replaykit.jsondoc import JSON
from replaykit.redact import safe_message
from replaykit.reference.wire import wire_body
from replaykit.replay import Note, Projection, ProviderModel, projection
from replaykit.repro.band import Band, policy_band
from replaykit.routes import API_ROUTES, MODEL_APIS, PROVIDER_APIS
from replaykit.transcript import restore

__all__ = ["DEFAULT_MODEL", "PROMPT", "REPLAYED", "REPORTED", "RESERVE", "Diagnosis", "Failure", "diagnose",
           "follow_up", "target_of"]

PROMPT = "Please continue."
DEFAULT_MODEL = "claude-sonnet-4-6"
RESERVE = 16384  # the scenario's default reserve: the max_tokens the reference harness sends
Kind = Literal["contract violation", "projection error", "request violation", "estimator exception"]
#: The requests a request violation is found in: the input itself, or the replay of the transcript.
REPORTED, REPLAYED = "the reported request", "the request replaying the transcript"


@dataclass(frozen=True)
class Failure:
    """The first failure: its ``kind``, the JSON ``pointer`` (into the transcript; for a request violation
    into the ``request`` named) and what is wrong (for a broken rule, the provider's own message). A request
    violation also names its ``rule`` (a rulebook id; "" for a shape), the rule's statement and the
    provider's answer (``statement``), and the ``others`` rules the request breaks (``id at pointer``)."""

    kind: Kind
    pointer: str
    message: str
    rule: str = ""
    request: str = ""
    statement: str = ""
    others: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{f'rule {self.rule}' if self.rule else self.kind} at {self.pointer or '/'}: {self.message}"


@dataclass(frozen=True)
class Diagnosis:
    """What a replay of the transcript does: the ``failure`` (None: restore, projection and estimate pass),
    the ``target``, the request ``body`` a correct harness sends for the follow-up (None when it sends
    none), what the projection leaves out (``notes``), the ``tokens`` replaykit's estimator counts and the
    ``band`` of estimates a sound estimator makes (:mod:`replaykit.repro.band`)."""

    target: ProviderModel
    failure: Failure | None = None
    body: JSON | None = None
    notes: tuple[Note, ...] = ()
    tokens: int | None = None
    band: Band | None = None


def target_of(transcript: object, provider: str | None = None, model: str | None = None,
              api: str | None = None) -> ProviderModel:
    """The provider, API and model of the last assistant turn; without one, ``provider``, ``model`` and
    ``api`` (the request's), else Anthropic ``claude-sonnet-4-6``. An API the provider does not serve is
    its default one."""
    messages = transcript.get("messages") if isinstance(transcript, dict) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "assistant" \
                and message.get("provider") in MODEL_APIS:
            provider, model, api = message["provider"], message.get("model") or model, message.get("api")
            break
    provider = provider if provider in MODEL_APIS else "anthropic"
    model = model if isinstance(model, str) and model else DEFAULT_MODEL
    api = api if api in PROVIDER_APIS[provider] else MODEL_APIS[provider]
    return ProviderModel(provider, api, model, max_tokens=RESERVE)  # type: ignore[arg-type]


def follow_up(transcript: JSON, timestamp: float) -> JSON:
    """``transcript`` with the follow-up prompt appended (a copy)."""
    grown = copy.deepcopy(transcript)
    grown["messages"] = [*grown["messages"], {"role": "user", "content": PROMPT, "timestamp": timestamp}]
    return grown


def diagnose(transcript: object, source: str, provider: str | None = None,
             model: str | None = None, request: object = None, api: str | None = None) -> Diagnosis:
    """Restore, project, check and estimate ``transcript`` with the follow-up prompt; the first failure. The
    target is :func:`target_of` the transcript (``provider``, ``model`` and ``api``: the request's, when it
    came in one); ``request``: the reported request body it came from, checked before the replayed one."""
    target = target_of(transcript, provider, model, api)
    try:
        restored = restore(transcript, source=source)
    except LocalRequestError as exc:
        return Diagnosis(target, Failure("contract violation", exc.pointer, _said(exc, source)))
    grown = follow_up(dict(restored), _last_time(dict(restored)))
    try:
        built = projection(grown, target)
    except LocalRequestError as exc:
        return Diagnosis(target, Failure("projection error", exc.pointer, _said(exc, source)))
    broken = (_broken(request, REPORTED, target, shapes=False) if isinstance(request, dict) else None) \
        or _broken(wire_body(built.body, target), REPLAYED, target, shapes=True)
    if broken is not None:
        return Diagnosis(target, broken, built.body, built.notes)
    try:
        tokens = estimate(grown, target).tokens
    except Exception as exc:  # an estimator's defect, whatever it raises, is what is being pinpointed
        return Diagnosis(target, _estimator_failure(grown, target, exc, source), built.body, built.notes)
    return _passed(target, built, tokens, policy_band(grown, target))


def _broken(body: JSON, request: str, target: ProviderModel, *, shapes: bool) -> Failure | None:
    """The first broken rule of ``body`` (its provider's request contract), else with ``shapes`` its first
    shape violation; with the other rules it breaks."""
    kinds = API_ROUTES[target.provider, target.api].contracts
    found = [v for v in contracts.validate(kinds.request, body) if v.severity == "error"] if kinds else []
    first = next((v for v in found if v.rule), None) or (next(iter(found), None) if shapes else None)
    if first is None:
        return None
    others = tuple(dict.fromkeys(f"{v.rule} at {v.pointer}" for v in found
                                 if v.rule and v.rule != first.rule))
    spec = contracts.rule_spec(first.rule) if first.rule else None
    if spec is None:
        return Failure("request violation", first.pointer, first.message, request=request, others=others)
    answer = contracts.refusal(spec, body)
    statement = f"{spec.statement.rstrip('.')} (the provider answers {answer.status} {answer.type})"
    return Failure("request violation", first.pointer, safe_message(answer.message), first.rule, request,
                   statement, others)


def _passed(target: ProviderModel, built: Projection, tokens: int, band: Band) -> Diagnosis:
    return Diagnosis(target, None, built.body, built.notes, tokens, band)


def _said(exc: Exception, source: str) -> str:
    """The exception's own message, without the place (said apart) and the file (the input's)."""
    text = str(exc)
    if isinstance(exc, LocalRequestError):
        text = text.removeprefix(f"{exc.phase} error" + (f" at {exc.pointer}" if exc.pointer else "") + ": ")
    return safe_message(text.removeprefix(f"{source}: "))


def _last_time(transcript: JSON) -> float:
    stamps = [message.get("timestamp") for message in transcript["messages"]
              if isinstance(message.get("timestamp"), int | float)]
    return max(stamps, default=0) + 1000


def _estimator_failure(grown: JSON, target: ProviderModel, exc: Exception, source: str) -> Failure:
    pointer = getattr(exc, "pointer", "") or _first_failing_message(grown, target)
    return Failure("estimator exception", pointer, f"{type(exc).__name__}: {_said(exc, source)}")


def _first_failing_message(grown: JSON, target: ProviderModel) -> str:
    """``/messages/N``: the first message whose inclusion makes the estimate raise ("" when none does)."""
    for count in range(1, len(grown["messages"]) + 1):
        try:
            estimate({**grown, "messages": grown["messages"][:count]}, target)
        except Exception:  # the same defect, found on a shorter transcript
            return f"/messages/{count - 1}"
    return ""
