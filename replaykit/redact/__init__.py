"""Scrub secrets from cassettes, and find the ones left behind.

:func:`redact` returns a new cassette with every secret scrubbed, :func:`scan` reports each secret with a
masked excerpt (never the secret): one walk over the cassette (:mod:`replaykit.redact.cassette_walk`) finds
them in every place they can sit (URIs, headers, JSON and text bodies, SSE events, metadata), under every
disguise (as written, URL-encoded, base64-encoded). By default it scrubs:

* credential headers (:data:`CREDENTIAL_HEADERS`, and any header with a secret name) whatever their shape,
  ``Authorization: Bearer REDACTED`` keeping its scheme; identifying headers (organization, project,
  cookies: :data:`SECRET_HEADERS`);
* secret query parameters (``?key=``, ``api_key``, ``access_token``, ``sig``, ``X-Amz-Signature``…), URL
  passwords, and the Cloudflare account id of ``/client/v4/accounts/{id}/`` (replaced by
  :data:`ACCOUNT_PLACEHOLDER`, the shape of a real id, obviously not one);
* the values of secret-named JSON fields (``api_key``, ``apiKey``, ``client_secret``, ``password``,
  ``access_token``, ``token``…; ``client_secret.value``), in request and response bodies and in the JSON
  ``data`` of each SSE event. Usage counters (``input_tokens``, ``max_tokens``…), ``encrypted_content``,
  ``signature`` and ``prompt_cache_key`` are not secrets: kept;
* every key of a known shape anywhere else (:mod:`replaykit.redact.shapes`: Anthropic, OpenAI, Cloudflare,
  AWS, GitHub, Google, Slack, JWT, bearer, Basic, PEM, and values labelled as secrets in text).

:class:`Rules` adds user rules on top. Bodies are rewritten only where something changed. A redacted
cassette's fingerprint is that of its redacted traffic (recomputed on save). :func:`safe_message` makes any
text safe to print; :func:`scan_text` searches a raw file; :func:`redact_document` scrubs a parsed JSON
document (a reported transcript) by the same walk.
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
