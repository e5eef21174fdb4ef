"""The short-lived HTTP clients of the OAuth flow."""

from __future__ import annotations

import ssl
from functools import cache

import httpx

__all__ = ["new_client", "tls_context"]


@cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verification context, built once per process (building
    one loads the CA bundle: tens of milliseconds, far more on a busy machine)."""
    return httpx.create_ssl_context()


def new_client(timeout: float) -> httpx.AsyncClient:
    """A client for OAuth requests: ``timeout`` per operation, no redirects
    followed unless a request asks, the shared TLS context."""
    return httpx.AsyncClient(timeout=timeout, verify=tls_context())
