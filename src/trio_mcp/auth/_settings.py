"""The bounds of the OAuth client, in one typed object."""

from __future__ import annotations

import attrs

from .._util import check_positive, numeric_fields

__all__ = ["OAuthClientSettings"]


@attrs.frozen(kw_only=True)
class OAuthClientSettings:
    """Every bound of the OAuth client, named. Times in seconds."""

    #: One OAuth HTTP exchange (a metadata document, a registration, a token request).
    request_timeout: float = 10.0
    #: The authorization handler's whole ``authorize`` call (a user logging in).
    authorization_timeout: float = 300.0
    #: Re-authorizations on ``403 insufficient_scope`` for one request.
    max_step_ups: int = 2
    #: Refresh (or re-authorize) this long before the access token expires
    #: (at most half its lifetime).
    expiry_margin: float = 30.0
    #: Largest metadata document or token response accepted, in bytes.
    max_document_size: int = 1 << 20
    #: Accept ``http://`` authorization server URLs on non-loopback hosts
    #: (``http://localhost`` and ``http://127.0.0.1`` are always accepted).
    allow_insecure_http: bool = False

    def __attrs_post_init__(self) -> None:
        numbers = numeric_fields(self)
        check_positive(self, [n for n in numbers if n != "max_step_ups"], nonnegative=["max_step_ups"])
