"""Secret names: the headers, JSON fields and query parameters whose value is a secret whatever its shape,
and the user's :class:`Rules` on top of them.

Names are compared in one normal form: ``apiKey`` / ``X-Api-Key`` / ``API_KEY`` / ``AWSSecretKey`` become
``api_key`` / ``x_api_key`` / ``api_key`` / ``aws_secret_key``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from replaykit.redact.shapes import PLACEHOLDER

__all__ = [
    "CREDENTIAL_HEADERS",
    "NAME_NEEDLES",
    "SECRET_HEADERS",
    "Rules",
    "is_secret_field",
    "is_secret_query",
]

#: Headers that carry a credential: their value is a secret whatever its shape (an Azure key, a Basic
#: credential). A custom header with a secret name (``x-upstream-api-key``) is one too.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key",
                                "cf-aig-authorization"})
#: Headers scrubbed by the redactor and in the fake provider's journal: the credentials, and what ties
#: traffic to an account or a session (organization, project, cookies; a finding only when a key of a known
#: shape sits in them).
SECRET_HEADERS = CREDENTIAL_HEADERS | {"openai-organization", "openai-project", "cookie", "set-cookie"}

_TOKEN_OWNERS = "access|refresh|id|auth|authorization|api|bearer|session|security|oauth|tunnel|github|hf|bot"
_SECRET_FIELD = re.compile(
    r"^(?:[a-z0-9]+_)*(?:api_?key|secret|secret_key|secret_value|secret_access_key|password|passwd|passphrase"
    rf"|private_key|access_key|credentials?|authorization|(?:{_TOKEN_OWNERS})_token)$|^token$"
)
#: Every secret field name (of :func:`is_secret_field`) holds one of these once lower-cased, as written: a
#: quick test that a text holds no secret name.
NAME_NEEDLES = ("key", "secret", "pass", "credential", "authorization", "token")
_SECRET_QUERY = re.compile(
    r"^(?:key|sig|signature|auth|code_verifier|x_amz_(?:signature|credential|security_token)"
    r"|x_goog_(?:signature|credential))$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _normal_name(name: str) -> str:
    """``apiKey`` / ``X-Api-Key`` / ``API_KEY`` → ``api_key`` / ``x_api_key`` / ``api_key``."""
    return _CAMEL.sub("_", name).replace("-", "_").replace(".", "_").lower()


@functools.lru_cache(maxsize=4096)
def is_secret_field(name: str) -> bool:
    """True when a JSON field of this name holds a secret by default (``apiKey`` yes, ``max_tokens`` no)."""
    return bool(_SECRET_FIELD.match(_normal_name(name)))


def is_secret_query(name: str) -> bool:
    """True when a query parameter of this name holds a secret by default (``key``, ``api_key``, ``sig``…)."""
    normal = _normal_name(name)
    return bool(_SECRET_QUERY.match(normal) or _SECRET_FIELD.match(normal))


@dataclass(frozen=True, slots=True)
class Rules:
    """User rules, applied on top of the defaults.

    ``headers``, ``query`` and ``fields`` are extra names (case-insensitive); ``field_pattern`` is a regex
    searched in JSON field names (case-insensitive); ``substitutions`` are ``(regex, replacement)`` pairs
    applied to the URI, every header value and the text of every body, before the field rules.
    """

    headers: tuple[str, ...] = ()
    query: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    field_pattern: str | None = None
    substitutions: tuple[tuple[str, str], ...] = ()
    placeholder: str = PLACEHOLDER

    def secret_header(self, name: str) -> bool:
        """True when header ``name`` is scrubbed (a secret header, a credential-named one, or a user's)."""
        lowered = name.lower()
        return lowered in SECRET_HEADERS or self.credential_header(name)

    def credential_header(self, name: str) -> bool:
        """True when header ``name`` holds a credential whatever the shape of its value."""
        lowered = name.lower()
        users = {header.lower() for header in self.headers}
        return lowered in CREDENTIAL_HEADERS or lowered in users or is_secret_field(name)

    def secret_query(self, name: str) -> bool:
        """True when query parameter ``name`` is scrubbed."""
        return is_secret_query(name) or name.lower() in {q.lower() for q in self.query}

    def secret_field(self, name: str) -> bool:
        """True when the string value of JSON field ``name`` is scrubbed."""
        if is_secret_field(name) or name.lower() in {f.lower() for f in self.fields}:
            return True
        return bool(self.field_pattern and re.search(self.field_pattern, name, re.IGNORECASE))

    def substitute(self, text: str) -> str:
        """``text`` with every user substitution applied."""
        for pattern, replacement in self.substitutions:
            text = re.sub(pattern, replacement, text)
        return text


DEFAULT_RULES = Rules()
