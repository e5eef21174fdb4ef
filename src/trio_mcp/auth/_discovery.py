"""Pure helpers of the OAuth client: ``WWW-Authenticate`` challenges, the
well-known URLs of RFC 9728 / RFC 8414 / OpenID discovery, resource matching.

Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, urlsplit, urlunsplit

import attrs

__all__ = [
    "Challenge",
    "as_metadata_urls",
    "bearer_challenge",
    "canonical_server_url",
    "is_loopback",
    "parse_challenges",
    "prm_urls",
    "resource_matches",
    "same_endpoint",
    "with_query",
]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*(?=[ \t]*(,|$))")
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}


@attrs.frozen
class Challenge:
    """One ``WWW-Authenticate`` challenge: its scheme (lower case) and its
    auth-params (names lower case)."""

    scheme: str
    params: dict[str, str] = attrs.field(factory=dict)

    @property
    def error(self) -> str | None:
        return self.params.get("error")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata")

    @property
    def scopes(self) -> list[str]:
        return (self.scope or "").split()


def _skip(text: str, i: int, chars: str = " \t") -> int:
    while i < len(text) and text[i] in chars:
        i += 1
    return i


def _quoted(text: str, i: int) -> tuple[str, int]:
    """The quoted-string starting at ``text[i] == '"'``; returns (value, end)."""
    out = []
    i += 1
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if c == '"':
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "".join(out), i  # unterminated: take the rest


def parse_challenges(values: Iterable[str]) -> list[Challenge]:
    """Every challenge of the ``WWW-Authenticate`` header values (RFC 9110
    §11.6.1): ``scheme [token68 | name=value, ...]``, several per value.
    Malformed parts are skipped, never raised on."""
    challenges: list[Challenge] = []
    for value in values:
        current: Challenge | None = None
        i = 0
        n = len(value)
        while i < n:
            i = _skip(value, i, " \t,")
            if i >= n:
                break
            match = _TOKEN.match(value, i)
            if match is None:
                i += 1
                continue
            name = match.group()
            j = _skip(value, match.end())
            if j < n and value[j] == "=":
                k = _skip(value, j + 1)
                if k < n and value[k] == '"':
                    param, i = _quoted(value, k)
                else:
                    end = k
                    while end < n and value[end] not in ", \t":
                        end += 1
                    param, i = value[k:end], end
                if current is not None:
                    current.params.setdefault(name.lower(), param)
                continue
            # A token not followed by "=": the scheme of a new challenge.
            current = Challenge(name.lower())
            challenges.append(current)
            i = j
            token68 = _TOKEN68.match(value, i)
            if token68 is not None:  # "Basic dXNlcg==": no auth-params
                i = token68.end()
    return challenges


def bearer_challenge(values: Iterable[str]) -> Challenge:
    """The ``Bearer`` challenge among ``values``, else a ``DPoP`` one (RFC 9449
    §7.1: a server that wants DPoP-bound tokens challenges with that scheme;
    it carries the same ``resource_metadata`` / ``scope``), else an empty one."""
    found = parse_challenges(values)
    for scheme in ("bearer", "dpop"):
        for challenge in found:
            if challenge.scheme == scheme:
                return challenge
    return Challenge("bearer")


def canonical_server_url(url: str) -> str:
    """``url`` without its fragment, scheme and host in lower case (the key
    tokens are stored under, and the fallback ``resource``)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def prm_urls(server_url: str) -> list[str]:
    """Where RFC 9728 puts the protected resource metadata of ``server_url``:
    the path-inserted well-known URL first (when the URL has a path), then
    the root one."""
    parts = urlsplit(server_url)
    origin = _origin(server_url)
    path = parts.path.rstrip("/")
    urls = []
    if path:
        urls.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{origin}/.well-known/oauth-protected-resource")
    return urls


def as_metadata_urls(issuer: str) -> list[str]:
    """The metadata URLs of an authorization server, in the MCP order: for an
    issuer with a path, RFC 8414 path insertion, OpenID path insertion, then
    OpenID path appending; for one without, RFC 8414 then OpenID."""
    parts = urlsplit(issuer)
    origin = _origin(issuer)
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]


def _port(parts: object) -> int | None:
    scheme = getattr(parts, "scheme", "").lower()
    try:
        port = getattr(parts, "port", None)
    except ValueError:
        return -1
    if port is None:
        return {"https": 443, "http": 80}.get(scheme)
    return int(port)


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether protected resource metadata naming ``resource`` may describe
    ``server_url``: same scheme, host and port, and ``resource``'s path is
    the server URL's path or a parent of it (on a segment boundary).
    A fragment in ``resource`` never matches (RFC 8707)."""
    try:
        r = urlsplit(resource)
        s = urlsplit(server_url)
    except ValueError:
        return False
    if r.fragment or not r.scheme or not r.netloc:
        return False
    if r.scheme.lower() != s.scheme.lower() or (r.hostname or "").lower() != (s.hostname or "").lower():
        return False
    if _port(r) != _port(s):
        return False
    rpath = r.path.rstrip("/")
    spath = s.path.rstrip("/")
    return spath == rpath or spath.startswith(rpath + "/")


def with_query(url: str, params: dict[str, str]) -> str:
    """``url`` with ``params`` appended to its query (its own query kept as is)."""
    parts = urlsplit(url)
    added = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())
    query = f"{parts.query}&{added}" if parts.query else added
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def is_loopback(url: str) -> bool:
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    return host in _LOOPBACK or host.startswith("127.")


def same_endpoint(url: str, redirect_uri: str) -> bool:
    """``url`` is ``redirect_uri`` plus a query (scheme, host, port, path equal)."""
    try:
        a = urlsplit(url)
        b = urlsplit(redirect_uri)
    except ValueError:
        return False
    return (
        a.scheme.lower() == b.scheme.lower()
        and (a.hostname or "").lower() == (b.hostname or "").lower()
        and _port(a) == _port(b)
        and (a.path or "/") == (b.path or "/")
    )
