"""Scrub secrets from cassettes, and find the ones left behind.

:func:`redact` returns a new cassette with every secret scrubbed, :func:`scan` reports each secret with a
masked excerpt (never the secret), both by one walk over the cassette's URIs, headers, bodies, SSE events
and metadata, as written, URL- or base64-encoded; key shapes are in :mod:`replaykit.redact.shapes`.
:class:`Rules` adds user rules; :func:`safe_message`, :func:`scan_text` and :func:`redact_document` serve the
other callers. What is scrubbed by default: docs/architecture/redact.md.
"""

from replaykit.redact.cassette_walk import (
    SecretFinding,
    redact,
    redact_document,
    redact_header,
    scan,
    scan_text,
)
from replaykit.redact.names import (
    CREDENTIAL_HEADERS,
    SECRET_HEADERS,
    Rules,
    is_secret_field,
    is_secret_query,
)
from replaykit.redact.shapes import (
    ACCOUNT_PLACEHOLDER,
    KINDS,
    PLACEHOLDER,
    SECRET_KINDS,
    excerpt,
    kind_label,
    mask,
    safe_message,
)

__all__ = [
    "ACCOUNT_PLACEHOLDER",
    "CREDENTIAL_HEADERS",
    "KINDS",
    "PLACEHOLDER",
    "SECRET_HEADERS",
    "SECRET_KINDS",
    "Rules",
    "SecretFinding",
    "excerpt",
    "is_secret_field",
    "is_secret_query",
    "kind_label",
    "mask",
    "redact",
    "redact_document",
    "redact_header",
    "safe_message",
    "scan",
    "scan_text",
]
