"""DNS-rebinding protection: check ``Host`` and ``Origin`` against allow-lists.

A web page from ``evil.example`` whose name was re-pointed at 127.0.0.1 can
make a browser talk to a local server; its requests then carry
``Host: evil.example`` (and an ``Origin`` of that page). A local server that
answers only the names it is known by is safe from that.

Allow-list entries:

* hosts: ``"localhost"`` (any port) or ``"localhost:8080"`` (that port only);
  IPv6 literals in brackets, ``"[::1]"``. ``"*"`` allows every host;
  :data:`ANY_IP` allows every IP-address literal (a browser sends one only
  to a page loaded from that address, so it cannot be a rebound name).
* origins: a host name as above (``http``/``https``, any port) or a full
  origin ``"https://app.example.com"`` / ``"http://localhost:3000"`` (that
  scheme, host and port). ``"*"`` allows every origin.

An ``Origin`` is parsed strictly (RFC 6454: ``scheme "://" host [":" port]``):
userinfo (``http://[::1]:1@evil.example``), a path, a query, a fragment, an
empty or malformed host or port, and ``null`` never match; a value that does
not parse is refused, whatever the allow-list says (``"*"`` aside).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Final

__all__ = [
    "ANY_IP",
    "LOCAL_HOSTS",
    "WILDCARD_BINDS",
    "HostPolicy",
    "parse_origin",
    "split_host",
    "wildcard_hosts",
]

#: The default allow-list: the loopback names, any port.
LOCAL_HOSTS: Final = ("localhost", "127.0.0.1", "[::1]")

#: An allowed-hosts entry that admits any IP-address literal (``10.0.0.5:8000``, ``[fe80::1]``).
ANY_IP: Final = "<ip-address>"

#: Addresses that bind every interface.
WILDCARD_BINDS: Final = ("0.0.0.0", "::")


def wildcard_hosts() -> tuple[str, ...]:
    """The ``Host`` names a server bound to every interface answers by
    default: the loopback names, this machine's host name and fully
    qualified name, and any IP address (a ``Host`` that is an address cannot
    come from a rebound DNS name)."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()} - {""}
    return (*LOCAL_HOSTS, *sorted(names - set(LOCAL_HOSTS)), ANY_IP)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") else name)
    except ValueError:
        return False
    return True


def split_host(value: str) -> tuple[str, str | None]:
    """``"Host"`` header value -> (lower-case host name, port or None).

    IPv6 literals keep their brackets: ``"[::1]:80"`` -> ``("[::1]", "80")``.
    """
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        return host, (rest[1:] if rest.startswith(":") and rest[1:] else None)
    host, sep, port = value.rpartition(":")
    if not sep:
        return value, None
    if ":" in host:  # a bare IPv6 literal, no port
        return f"[{value}]", None
    return host, port or None


class HostPolicy:
    """Decides whether a request's ``Host`` and ``Origin`` are acceptable."""

    def __init__(self, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]) -> None:
        self._any_host = False
        self._any_ip = False
        self._hosts: set[tuple[str, str | None]] = set()
        for entry in allowed_hosts:
            if entry == "*":
                self._any_host = True
            elif entry == ANY_IP:
                self._any_ip = True
            else:
                self._hosts.add(split_host(entry))
        self._any_origin = False
        self._origin_hosts: set[str] = set()
        self._origins: set[tuple[str, str, int | None]] = set()
        for entry in allowed_origins:
            if entry == "*":
                self._any_origin = True
            elif "://" in entry:
                origin = parse_origin(entry)
                if origin is None:
                    raise ValueError(f"not an origin (scheme://host[:port]): {entry!r}")
                self._origins.add(origin)
            else:
                self._origin_hosts.add(split_host(entry)[0])

    def host_allowed(self, host: str | None) -> bool:
        if self._any_host:
            return True
        if not host:
            return False
        name, port = split_host(host)
        if (name, None) in self._hosts or (port is not None and (name, port) in self._hosts):
            return True
        return self._any_ip and _is_ip(name)

    def origin_allowed(self, origin: str | None) -> bool:
        """A request without ``Origin`` (not from a browser page) is allowed;
        one whose ``Origin`` does not parse strictly is not."""
        if origin is None or self._any_origin:
            return True
        parsed = parse_origin(origin)
        if parsed is None:
            return False
        if parsed in self._origins:
            return True
        scheme, host, _ = parsed
        return scheme in ("http", "https") and host in self._origin_hosts


#: ``scheme "://" host [":" port]`` and at most a trailing ``/``; the host a
#: bracketed IPv6 literal or a name / IPv4 address (no userinfo, no path).
_ORIGIN: Final = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://"
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?)"
    r"(?::(?P<port>[0-9]{1,5}))?/?"
)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def parse_origin(value: str) -> tuple[str, str, int | None] | None:
    """An ``Origin`` header -> (scheme, host, port), lower-case, the
    scheme's default port made explicit; None when it is not exactly an
    origin (``null``, userinfo, a path, a bad host or port...)."""
    match = _ORIGIN.fullmatch(value.strip().lower())
    if match is None:
        return None
    scheme, host, port_text = match.group("scheme", "host", "port")
    if host.startswith("[") and host.count(":") < 2:
        return None  # brackets hold an IPv6 literal only
    port = int(port_text) if port_text is not None else _DEFAULT_PORTS.get(scheme)
    if port is not None and port > 65535:
        return None
    return scheme, host, port
