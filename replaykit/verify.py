"""Verify cassettes: parse errors, secrets, SSE framing, contracts, citations (the ``verify`` library).

:func:`verify_paths` loads every cassette named and returns a :class:`Report` of :class:`FileResult` s, each
with its :class:`~replaykit.findings.Finding` list, in bounded memory. The seam: a check is a function
``check(path, cassette) -> list[Finding]`` run on every cassette that parsed; :data:`CHECKS` lists them in
order (add one line there), and callers may pass their own tuple (``checks=CHECKS + (my_check,)``). Called by
``replaykit verify`` and qualify; the bounds are in docs/architecture/modules.md.
"""

from __future__ import annotations

import codecs
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from replaykit import cassette as cassettes
from replaykit import citations, contracts, jsondoc, redact, routes
from replaykit.cassette import Cassette, Interaction
from replaykit.errors import CassetteError, ContractError
from replaykit.findings import Finding
from replaykit.jsondoc import JSON
from replaykit.transcript import ConversionError, chat_final_completion, gemini_final_response

__all__ = [
    "CHECKS",
    "Check",
    "FileResult",
    "Report",
    "check_citations",
    "check_contracts",
    "check_fingerprint",
    "check_secrets",
    "check_sse_framing",
    "secret_finding",
    "verify_file",
    "verify_paths",
]

@dataclass(slots=True)
class FileResult:
    """The verdict on one file (``interactions``, ``fingerprint``, ``origin`` empty when it did not parse)."""

    path: str
    interactions: int = 0
    fingerprint: str | None = None
    origin: str | None = None
    provider: str | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity == "error" for f in self.findings)

    def to_json(self) -> JSON:
        """The result as a JSON object."""
        return {"path": self.path, "interactions": self.interactions, "fingerprint": self.fingerprint,
                "origin": self.origin, "provider": self.provider, "ok": self.ok,
                "findings": [f.to_json() for f in self.findings]}


@dataclass(slots=True)
class Report:
    """Every file verified, in order."""

    files: list[FileResult] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        """All findings of all files."""
        return [finding for result in self.files for finding in result.findings]

    @property
    def ok(self) -> bool:
        """True when every file is ok."""
        return all(result.ok for result in self.files)

    def summary(self) -> JSON:
        """Counts: files, interactions, findings (errors, warnings, expected, by code) and the verdict."""
        found = self.findings
        errors = sum(f.severity == "error" for f in found)
        expected = sum(f.severity == "expected" for f in found)
        return {"files": len(self.files), "interactions": sum(r.interactions for r in self.files),
                "findings": len(found), "errors": errors, "warnings": len(found) - errors - expected,
                "expected": expected, "by_code": dict(sorted(Counter(f.code for f in found).items())),
                "ok": self.ok}

    def to_json(self) -> JSON:
        """``{"files": [...], "summary": {...}}``: the document ``replaykit verify --json`` prints."""
        return {"files": [r.to_json() for r in self.files], "summary": self.summary()}


Check = Callable[[Path, Cassette], list[Finding]]
Secret = redact.SecretFinding


# ---------------------------------------------------------------- checks


def _place(item: Interaction, index: int) -> str:
    return str(item.line) if item.line else f"interactions[{index}]"


def check_secrets(path: Path, cassette: Cassette) -> list[Finding]:
    """Keys in the cassette's traffic and metadata (with their field), then any others in the raw text."""
    in_model = redact.scan(cassette)
    in_text = _text_secrets(path)
    for found in in_model:  # each key found in the traffic hides ONE raw-text sighting: its own
        sighting = _sighting(found, in_text)
        if sighting is not None:
            in_text.remove(sighting)
    return [secret_finding(path, found) for found in in_model + in_text]


def _sighting(found: Secret, in_text: list[Secret]) -> Secret | None:
    """The raw-text finding that is ``found`` itself: the same key, the first at or after its interaction."""
    key = _same(found)
    same = [seen for seen in in_text if _same(seen) == key]
    after = [seen for seen in same if (seen.line or 0) >= (found.line or 0)]
    return next(iter(after or same), None)


def _same(found: Secret) -> tuple[str, str]:
    """What identifies a key across the model and the raw text (where escaping may change its length)."""
    return found.kind, found.excerpt.partition("…")[0]


def _text_secrets(path: Path) -> list[Secret]:
    if not path.is_file():  # a FIFO would block the read forever
        return []
    try:
        text = _read_text(path)
    except OSError:
        return []
    return redact.scan_text(text, str(path))


_READ = 1 << 20  # bytes read at a time


def _read_text(path: Path) -> str:
    """The file as text (undecodable bytes replaced), read a MiB at a time into one text, which CPython grows
    in place: the file's bytes are never held whole beside it."""
    text = ""
    for piece in _decoded_pieces(path):
        text += piece
    return text


def _decoded_pieces(path: Path) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with path.open("rb") as handle:
        while chunk := handle.read(_READ):
            yield decoder.decode(chunk)
    yield decoder.decode(b"", final=True)


def secret_finding(path: Path, found: Secret) -> Finding:
    """A secret finding: placed at its line, its field named in the message, the key masked."""
    index = found.interaction
    field_name = found.field if index is None else f"interactions[{index}].{found.field}"
    place = str(found.line) if found.line else field_name
    where = "" if found.field.startswith("line ") else f"{field_name}: "
    message = f"{where}{redact.kind_label(found.kind)} {found.excerpt}"
    fix = f"run `replaykit redact --in-place {path}` and rotate the key"
    return Finding("error", "secret", message, str(path), place, fix=fix)


_STREAMS_JSON = re.compile(r"/v1/messages|/responses|/chat/completions|/openai/|:streamGenerateContent")
_JSON_PROVIDERS = {"anthropic", "openai", "azure", "gemini", "vertex"}
_DONE = "[DONE]"


def _streams_json(cassette: Cassette, item: Interaction) -> bool:
    """True when the provider streams JSON in every ``data:`` (Anthropic, OpenAI, Azure OpenAI, Gemini)."""
    if cassette.meta.provider in _JSON_PROVIDERS:
        return True
    return bool(_STREAMS_JSON.search(item.request.uri.partition("?")[0]))


def check_sse_framing(path: Path, cassette: Cassette) -> list[Finding]:
    """Streams with no events, a last event lacking its blank line, non-JSON data where JSON is streamed (or
    JSON nested deeper than :data:`replaykit.jsondoc.MAX_DEPTH`)."""
    found: list[Finding] = []
    for index, item in enumerate(cassette.interactions):
        if item.response.is_stream:
            problems = _framing(item, _streams_json(cassette, item))
            found += [Finding("error", "sse-framing", f"interactions[{index}].response.body{message}",
                              str(path), _place(item, index)) for message in problems]
    return found


def _framing(item: Interaction, wants_json: bool) -> list[str]:
    """The stream's problems, its events read one at a time (a long stream is never held parsed whole)."""
    not_json: list[str] = []
    dispatched, last, index = False, None, -1
    for index, last in enumerate(item.response.iter_events()):
        if last.data is not None:
            dispatched = True
            problem = _json_problem(last.data) if wants_json else None
            if problem is not None:
                not_json.append(f"/events[{index}]: {problem}")
    if last is None or not dispatched:
        return [": a text/event-stream body with no events; record the stream again or fix its content-type"]
    if last.terminated:
        return not_json
    return [f"/events[{index}]: the last event lacks its terminating blank line; end the body with an empty "
            "line", *not_json]


def _json_problem(data: str) -> str | None:
    """Why ``data`` is not the JSON a provider streams (``None`` when it is), parsed with a depth limit."""
    if data.strip() == _DONE:
        return None
    try:
        jsondoc.loads(data)
    except jsondoc.TooDeep as exc:
        return f"data: {exc}; no provider streams such JSON"
    except ValueError:
        return f"data is not JSON ({len(data)} characters); this provider streams JSON"
    return None


def check_fingerprint(path: Path, cassette: Cassette) -> list[Finding]:
    """A stored ``replaykit.fingerprint`` that no longer matches the traffic (hand-edited): a warning."""
    stored, actual = cassette.meta.fingerprint, _fingerprint(cassette)
    if stored is None or stored == actual:
        return []
    message = f"stored fingerprint {stored[:19]}… does not match the traffic ({actual[:19]}…)"
    return [Finding("warning", "fingerprint", message, str(path), "replaykit.fingerprint",
                    fix="the file was edited by hand: load and save it to refresh")]


# The fingerprint verify_file computed for the cassette it is checking (a long body's takes a while to hash).
_FINGERPRINT: ContextVar[tuple[Cassette, str] | None] = ContextVar("replaykit_fingerprint", default=None)


def _fingerprint(cassette: Cassette) -> str:
    known = _FINGERPRINT.get()
    return known[1] if known is not None and known[0] is cassette else cassette.fingerprint()


def check_contracts(path: Path, cassette: Cassette) -> list[Finding]:
    """Every interaction against its contracts (:func:`replaykit.contracts.check_interaction`), one finding
    per violation, under the cassette's profile (:func:`replaykit.contracts.profile_of`).

    A finding's place is ``interactions[i]`` or ``interactions[i]:events[j]``, its message
    ``request|response /json/pointer message``. A deliberately off-contract fixture lists what it breaks
    under ``replaykit: {x-expected-violations: ["response /items/1/url", ...]}`` (``<part> <pointer>``, or
    ``<place> <part> <pointer>`` for one interaction or event): those are ``expected`` (never failing; the
    pytest plugin leaves them out of a test's report), and a listed violation that no longer occurs is an
    error. A request that breaks a rulebook rule where the recorded response is the rule's own refusal (its
    status) is ``expected`` too: the recording shows the provider enforcing it. Traffic on a route no
    contract covers is a warning, and so is a rule the profile relaxes; event data that is not JSON is left
    to :func:`check_sse_framing`, so one defect
    makes one finding.
    """
    try:
        profile = contracts.profile_of(cassette)
    except ContractError as exc:
        message, _, fix = str(exc).partition("replaykit.profile: ")[2].partition("; ")
        return [Finding("error", "contract", message, str(path), "replaykit.profile", fix=fix)]
    expected = contracts.expected_violations(cassette)
    unmet = set(expected)
    found: list[Finding] = []
    for index, item in enumerate(cassette.interactions):
        for violation in contracts.check_interaction(item, profile=profile):
            if violation.keyword == "json" and violation.event is not None:
                continue  # event data that is not JSON is check_sse_framing's finding
            listed = contracts.expected_keys(index, violation) & expected
            unmet -= listed
            if _refused_as_recorded(item, violation):
                found.append(_refused_finding(path, index, violation, item.response.status))
                continue
            found.append(_contract_finding(path, index, violation, bool(listed)))
    if unmet:  # a listed key may name a citation finding instead
        unmet -= {key for index, finding in _cited(cassette, profile) for key in _keys(index, finding)}
    gone = f"is listed in {contracts.EXPECTED_VIOLATIONS} but no longer occurs"
    return found + [Finding("error", "contract", f"{key} {gone}", str(path),
                            f"replaykit.{contracts.EXPECTED_VIOLATIONS}", fix="remove it from the list")
                    for key in sorted(unmet)]


def _contract_finding(path: Path, index: int, violation: contracts.Violation, listed: bool) -> Finding:
    message = f"{violation.part} {violation.pointer or '/'} {violation.message}"
    place = contracts.place(index, violation)
    if listed:
        return Finding("expected", "contract", message, str(path), place,
                       note=f"listed in {contracts.EXPECTED_VIOLATIONS}")
    note = _leniency(violation)
    return Finding("warning" if note else "error", "contract", message, str(path), place, note=note)


def _refused_as_recorded(item: Interaction, violation: contracts.Violation) -> bool:
    """Whether the recording itself shows the provider refusing a request that breaks a rule: the rule's
    real status is the recorded one (a recorded 404 for ``store: false`` with an item by id, say)."""
    spec = contracts.rule_spec(violation.rule) if violation.part == "request" and violation.rule else None
    return spec is not None and spec.error.status == item.response.status


def _refused_finding(path: Path, index: int, violation: contracts.Violation, status: int) -> Finding:
    message = f"{violation.part} {violation.pointer or '/'} {violation.message}"
    return Finding("expected", "contract", message, str(path), contracts.place(index, violation),
                   note=f"the recorded response refuses it too (HTTP {status}): it records the rule")


def _leniency(violation: contracts.Violation) -> str:
    """Why a violation is only a warning ("" when it is an error)."""
    if violation.keyword == "route":
        return "no contract covers this route"
    return "relaxed by the cassette's profile" if violation.severity == "warning" else ""


def check_citations(path: Path, cassette: Cassette) -> list[Finding]:
    """The citations of every Gemini generateContent and Chat Completions answer (a stream's: what its
    chunks add up to), by :func:`replaykit.citations.verify_gemini_response` and
    :func:`~replaykit.citations.verify_chat_completion` under the cassette's profile; a finding's message is
    ``response /json/pointer message``. An answer that cannot be read is left to the other checks. A
    deliberately bad fixture (a support naming no chunk, for a scenario) lists the finding's ``response
    /json/pointer`` in ``x-expected-violations``, as for :func:`check_contracts`: it is ``expected``."""
    try:
        profile = contracts.profile_of(cassette)
    except ContractError:
        return []  # check_contracts reports the unknown profile
    expected = contracts.expected_violations(cassette)
    return [Finding("expected" if _keys(index, finding) & expected else finding.severity, finding.code,
                    f"response {finding.place} {finding.message}", str(path),
                    _place(cassette.interactions[index], index))
            for index, finding in _cited(cassette, profile)]


def _cited(cassette: Cassette, profile: contracts.Profile) -> Iterator[tuple[int, Finding]]:
    """Each citation finding of the cassette's Gemini and Chat Completions answers, with its interaction."""
    for index, item in enumerate(cassette.interactions):
        api = routes.classify_uri(item.request.method, item.request.uri).api
        answer = _answer(item, api) if api in _CITED and item.response.status < 400 else None
        if answer is not None:
            checked = citations.verify_gemini_response(answer) if api == "gemini-generate" else (
                citations.verify_chat_completion(answer, profile))
            yield from ((index, finding) for finding in checked)


def _keys(index: int, finding: Finding) -> set[str]:
    """The ``x-expected-violations`` entries that name a citation finding of interaction ``index``."""
    return {f"response {finding.place}", f"interactions[{index}] response {finding.place}"}


_CITED = ("gemini-generate", "openai-chat")


def _answer(item: Interaction, api: str | None) -> JSON | None:
    """The answer of a Gemini or Chat Completions exchange (a stream's final one), or None when unreadable."""
    try:
        if item.response.is_stream:  # read one event at a time: only the answer they add up to is held
            chunks: object = (event.json() for event in item.response.iter_events()
                              if event.data is not None and event.data.strip() != _DONE)
        else:
            chunks = item.response.json()
        if isinstance(chunks, dict):
            return chunks
        if not isinstance(chunks, list | Iterator):
            return None
        return gemini_final_response(chunks) if api == "gemini-generate" else chat_final_completion(chunks)
    except (ValueError, ConversionError):
        return None


# Every check run on a cassette that parsed, in order. Add a check: one line here (see the module docstring).
CHECKS: tuple[Check, ...] = (
    check_secrets,
    check_sse_framing,
    check_fingerprint,
    check_contracts,
    check_citations,
)


# ---------------------------------------------------------------- running


def verify_file(path: str | os.PathLike[str], checks: Iterable[Check] = CHECKS,
                profile: str | None = None, max_body: int = cassettes.MAX_BODY) -> FileResult:
    """Verify one cassette file: a ``parse`` finding if it does not load, else every check's findings.

    ``profile`` (a name of :data:`replaykit.contracts.PROFILES`) overrides the cassette's own
    ``replaykit.profile`` for this run; a compressed body that decodes to more than ``max_body`` bytes is a
    parse finding.
    """
    target = Path(path)
    try:
        loaded = cassettes.load(target, max_body=max_body)
        if profile is not None:
            loaded.meta.extra["profile"] = contracts.resolve_profile(profile).name
    except CassetteError as exc:
        result = FileResult(str(target), findings=[_parse_finding(target, exc)])
        result.findings += [secret_finding(target, found) for found in _text_secrets(target)]
        return result
    fingerprint = loaded.fingerprint()
    result = FileResult(str(target), len(loaded.interactions), fingerprint, loaded.meta.origin,
                        loaded.meta.provider)
    token = _FINGERPRINT.set((loaded, fingerprint))
    try:
        for check in checks:
            result.findings += check(target, loaded)
    finally:
        _FINGERPRINT.reset(token)
    return result


def _parse_finding(path: Path, exc: CassetteError) -> Finding:
    """Split the ``file:place: message`` text of a CassetteError into a finding."""
    text, prefix = str(exc), f"{path}:"
    rest = text[len(prefix):].lstrip() if text.startswith(prefix) else text
    place, sep, message = rest.partition(": ")
    if sep and re.fullmatch(r"\d+|interactions\[\d+\]", place):
        return Finding("error", "parse", message, str(path), place)
    return Finding("error", "parse", rest, str(path))


def verify_paths(paths: Iterable[str | os.PathLike[str]], checks: Iterable[Check] = CHECKS,
                 profile: str | None = None, max_body: int = cassettes.MAX_BODY) -> Report:
    """Verify every cassette under ``paths`` (see :func:`verify_file` for ``profile`` and ``max_body``); a
    missing path, a folder without cassettes or something not a regular file is a UsageError."""
    chosen = tuple(checks)
    return Report([verify_file(path, chosen, profile, max_body) for path in cassettes.named_paths(paths)])
