"""In-process recording with vcrpy or pytest-recording, the replaykit way: :func:`vcr_config`.

``vcr_config()`` returns the keyword arguments of vcrpy's ``use_cassette`` (what pytest-recording's
``vcr_config`` fixture returns): redaction of each request and response (:func:`replaykit.redact.redact`),
strict matching, and a :class:`Persister` that reads and writes through :mod:`replaykit.cassette` and never
writes a cassette in which a key is still found. vcrpy is imported only when a cassette is read or written
(``pip install replaykit[vcr]``); the details and examples are in docs/architecture/modules.md.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

from replaykit import cassette as cassettes
from replaykit.cassette import Cassette, Interaction, Request, Response
from replaykit.contracts import check_interaction
from replaykit.errors import CassetteError, located
from replaykit.jsondoc import JSON
from replaykit.record.capture import secrets_line, violation_line
from replaykit.record.tape import WARNINGS, recorded_with
from replaykit.redact import redact, scan
from replaykit.routes import provider_of

__all__ = ["MATCH_ON", "Persister", "redact_request", "redact_response", "vcr_config"]

MATCH_ON = ("method", "scheme", "host", "port", "path", "query", "body")
_NOWHERE = "http://replaykit.invalid/"  # the URI of a response redacted alone (never sent anywhere)


def vcr_config(**overrides: object) -> JSON:
    """The ``use_cassette`` keyword arguments of replaykit's redaction, matching and serializer (see the
    module docstring); ``overrides`` are added (``record_mode="once"``...)."""
    return {
        "before_record_request": redact_request,
        "before_record_response": redact_response,
        "decode_compressed_response": True,
        "match_on": MATCH_ON,
        "persister": Persister,
        **overrides,
    }


def _headers(values: Any) -> dict[str, list[str]]:
    return {str(name): [str(v) for v in (vs if isinstance(vs, list | tuple) else [vs])]
            for name, vs in values.items()}


def _bytes(body: Any) -> bytes | None:
    return body.encode("utf-8") if isinstance(body, str) else body


def redact_request(request: Any) -> Any:
    """vcrpy's ``before_record_request``: a copy of ``request`` with every secret scrubbed."""
    ours = Request(request.method, request.uri, _headers(request.headers), _bytes(request.body))
    clean = redact(Cassette([Interaction(ours, Response(200))])).interactions[0].request
    out = copy.deepcopy(request)
    out.uri, out.body = clean.uri, clean.body
    out.headers = {name: ", ".join(values) for name, values in clean.headers.items()}
    return out


def redact_response(response: JSON) -> JSON:
    """vcrpy's ``before_record_response``: a copy of ``response`` (vcrpy's dict) with every secret
    scrubbed."""
    status = response.get("status") or {}
    body = _bytes((response.get("body") or {}).get("string")) or b""
    ours = Response(int(status.get("code", 200)), str(status.get("message") or ""),
                    _headers(response.get("headers") or {}), body)
    clean = redact(Cassette([Interaction(Request("GET", _NOWHERE), ours)])).interactions[0].response
    out = copy.deepcopy(response)
    out["headers"] = clean.headers
    out["body"] = {**(out.get("body") or {}), "string": clean.body}
    return out


def _recorded(text: str, path: Path) -> Cassette:
    """vcrpy's YAML for ``path`` as a replaykit recording: redacted, marked, its contract warnings listed;
    a key still found refuses the write."""
    import vcr  # type: ignore[import-untyped]

    tape = redact(cassettes.loads(text, path, cache=False))
    left = scan(tape)
    if left:
        found = secrets_line(left)
        raise CassetteError(located(path, None, f"not written: a key survived redaction ({found})",
                                    "scrub it with a before_record hook, and rotate the key"))
    tape.meta.origin, tape.meta.provider = "recorded", provider_of(
        (item.request.method, item.request.uri) for item in tape.interactions)
    versions = f" vcr_config (vcrpy {vcr.__version__}, "
    tape.meta.recorded_with = recorded_with().replace(" record (", versions, 1)
    lines = [violation_line(index, v) for index, item in enumerate(tape.interactions)
             for v in check_interaction(item)]
    if lines:
        tape.meta.extra[WARNINGS] = lines
        for line in lines:
            print(f"replaykit: {path}: contract warning: {line}", file=sys.stderr)
    return tape


class Persister:
    """vcrpy's persister interface (``load_cassette`` / ``save_cassette``) on replaykit's reader and
    writer; vcrpy's serializer is used only to turn its requests and responses into YAML and back."""

    @classmethod
    def load_cassette(cls, cassette_path: Any, serializer: object) -> object:
        """The requests and responses of the cassette at ``cassette_path``, read by replaykit."""
        from vcr.persisters.filesystem import CassetteNotFoundError  # type: ignore[import-untyped]
        from vcr.serialize import deserialize  # type: ignore[import-untyped]
        from vcr.serializers import yamlserializer  # type: ignore[import-untyped]

        path = Path(cassette_path)
        if not path.is_file() or not path.stat().st_size:
            raise CassetteNotFoundError()
        return deserialize(cassettes.dumps(cassettes.load(path)), yamlserializer)

    @staticmethod
    def save_cassette(cassette_path: Any, cassette_dict: JSON, serializer: object) -> None:
        """Write the cassette with replaykit, atomically (see the module docstring)."""
        from vcr.serialize import serialize
        from vcr.serializers import yamlserializer

        path = Path(cassette_path)
        cassettes.save(_recorded(serialize(cassette_dict, yamlserializer), path), path)
