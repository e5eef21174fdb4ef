"""One bounded OAuth HTTP exchange (a metadata document, a registration, a
token request): time and size limited, its failures reduced to a reason that
carries no secret."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import msgspec
import trio

from ._discovery import is_loopback
from ._errors import DiscoveryError
from ._http import new_client
from ._models import _ErrorResponse
from ._settings import OAuthClientSettings

__all__ = [
    "Unreachable",
    "check_secure",
    "describe_error",
    "error_of",
    "exchange",
    "exchange_with_headers",
    "fetch_document",
    "oauth_http",
]

_T = TypeVar("_T")


class Unreachable(Exception):
    """An OAuth HTTP exchange did not complete (the reason, no secrets)."""


async def exchange_with_headers(
    http: httpx.AsyncClient, settings: OAuthClientSettings, method: str, url: str, **kwargs: Any
) -> tuple[int, bytes, httpx.Headers]:
    """One bounded OAuth HTTP exchange: (status, body, headers). Raises :class:`Unreachable`."""
    timeout = settings.request_timeout
    limit = settings.max_document_size
    try:
        with trio.fail_after(timeout):
            async with http.stream(method, url, follow_redirects=method == "GET", **kwargs) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise Unreachable(f"answer larger than {limit} bytes")
                return response.status_code, bytes(body), response.headers
    except trio.TooSlowError:
        raise Unreachable(f"no answer within {timeout}s") from None
    except httpx.HTTPError as exc:
        raise Unreachable(type(exc).__name__) from None


async def exchange(
    http: httpx.AsyncClient, settings: OAuthClientSettings, method: str, url: str, **kwargs: Any
) -> tuple[int, bytes]:
    """One bounded OAuth HTTP exchange: (status, body). Raises :class:`Unreachable`."""
    status, body, _ = await exchange_with_headers(http, settings, method, url, **kwargs)
    return status, body


async def fetch_document(
    http: httpx.AsyncClient, settings: OAuthClientSettings, url: str, kind: type[_T], failures: list[str]
) -> _T | None:
    """A JSON document of ``kind`` at ``url``, or ``None`` (the reason appended to ``failures``)."""
    try:
        status, body = await exchange(http, settings, "GET", url, headers={"accept": "application/json"})
    except Unreachable as exc:
        failures.append(f"{url}: {exc}")
        return None
    if status != 200:
        failures.append(f"HTTP {status} from {url}")
        return None
    try:
        return msgspec.json.decode(body, type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        failures.append(f"invalid document at {url}: {exc}")
        return None


@asynccontextmanager
async def oauth_http(
    settings: OAuthClientSettings, given: httpx.AsyncClient | None
) -> AsyncIterator[httpx.AsyncClient]:
    """The client for one flow's OAuth requests: the ``given`` one, else a short-lived one."""
    if given is not None:
        yield given
        return
    async with new_client(settings.request_timeout) as client:
        yield client


def check_secure(settings: OAuthClientSettings, url: str, what: str) -> None:
    """``https``, or ``http`` on a loopback host (or anywhere, ``allow_insecure_http``)."""
    scheme = urlsplit(url).scheme.lower()
    insecure_ok = is_loopback(url) or settings.allow_insecure_http
    if scheme == "https" or (scheme == "http" and insecure_ok):
        return
    raise DiscoveryError(f"the {what} {url!r} is not an https URL")


def error_of(body: bytes) -> _ErrorResponse | None:
    """The OAuth error response in ``body``, if it is one."""
    try:
        return msgspec.json.decode(body, type=_ErrorResponse, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def describe_error(error: _ErrorResponse | None) -> str:
    """``", code: description"`` for a message (the description cut short), or ``""``."""
    if error is None or not error.error:
        return ""
    text = f", {error.error}"
    if error.error_description:
        text += f": {error.error_description[:200]}"
    return text
