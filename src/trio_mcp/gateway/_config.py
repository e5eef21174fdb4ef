"""The ``mcpServers`` configuration file, as MCP hosts already write it.

::

    {
      "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files", "/tmp"], "env": {"DEBUG": "1"}},
        "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "old": {"url": "https://example.com/sse", "type": "sse"},
        "off": {"command": "server-x", "disabled": true}
      }
    }

Rules:

* The servers are the object under ``"mcpServers"`` (or ``"servers"``, the
  key some editors use). A bare top-level object of servers is *not*
  accepted: it is indistinguishable from a typo, so it gets a clear error.
* An entry with ``"command"`` is a stdio server (``args``, ``env``, ``cwd``
  optional; ``"type": "stdio"`` allowed). An entry with ``"url"`` is a remote
  one; its transport comes from ``"type"`` or ``"transport"`` (``http``,
  ``streamable-http``, ``streamableHttp``, ``sse``, ``ws``, ``websocket``) or,
  when neither is given, from the URL (``ws(s)://`` → WebSocket, a path
  ending in ``/sse`` → SSE, anything else → Streamable HTTP).
* ``"disabled": true`` skips the entry. Keys this module does not know
  (``autoApprove``, ``timeout``, ``description``…) are ignored.
* Server names become the prefix of tool names (``name__tool``) and the
  authority of resource URIs (``gateway://name/…``), so they must match
  ``[A-Za-z0-9_.-]+`` and must not contain ``__``.
* ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``,
  ``cwd``, ``url`` and ``headers`` are replaced from the environment (``environ``)
  when the file is read; an unset variable without a default is an error.
  No other ``$`` syntax is interpreted (``$VAR`` stays as written).
* A stdio server gets its ``env`` on top of a small safe subset of our
  environment (``HOME``, ``PATH``, locale…), not our whole environment,
  unless ``inherit_env=True``.

Every problem raises :class:`ConfigError` naming the server and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import attrs

from ..actors._connection import TransportActor, TransportFactory
from ..actors._host import SEPARATOR

__all__ = [
    "ConfigError",
    "GatewayConfig",
    "RemoteEntry",
    "RemoteTransport",
    "ServerEntry",
    "StdioEntry",
    "load_config",
    "parse_config",
]

RemoteTransport = Literal["http", "sse", "ws"]

#: Spellings of each remote transport found in the wild.
TRANSPORT_NAMES: Final[Mapping[str, RemoteTransport]] = MappingProxyType(
    {
        "http": "http",
        "streamable-http": "http",
        "streamable_http": "http",
        "streamablehttp": "http",
        "sse": "sse",
        "ws": "ws",
        "websocket": "ws",
    }
)
#: Keys the servers may sit under, in order of preference.
WRAPPER_KEYS: Final = ("mcpServers", "servers")
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]+")
_VAR: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(ValueError):
    """A configuration that cannot be used: ``server`` and ``field`` say where."""

    def __init__(self, message: str, *, server: str | None = None, field: str | None = None) -> None:
        self.server = server
        self.field = field
        self.reason = message
        where = ".".join(p for p in ("mcpServers", server, field) if p) if server else field
        super().__init__(f"{where}: {message}" if where else message)


def _frozen_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class StdioEntry:
    """A server started as a subprocess speaking MCP on its stdin/stdout."""

    name: str
    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    env: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)
    cwd: str | None = None
    #: Merge ``env`` onto our whole environment (not just the safe subset).
    inherit_env: bool = False

    def transport_factory(self, **params: Any) -> TransportFactory:
        """A factory of fresh :class:`StdioTransport` actors (one per restart);
        ``params`` go to :class:`StdioServerParameters` (``close_grace``…)."""
        from ..transports.stdio import StdioServerParameters, StdioTransport

        server = StdioServerParameters(
            command=self.command,
            args=self.args,
            env=dict(self.env),
            cwd=self.cwd,
            inherit_env=self.inherit_env,
            name=self.name,
            **params,
        )
        return lambda: StdioTransport(server)


@attrs.frozen(kw_only=True)
class RemoteEntry:
    """A server reached over the network."""

    name: str
    url: str
    transport: RemoteTransport = "http"
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)

    def transport_factory(self, **options: Any) -> TransportFactory:
        """A factory of fresh client transports; ``options`` go to the
        transport's constructor (``connect_timeout``…)."""
        url, headers = self.url, dict(self.headers)
        make: Callable[[], TransportActor]
        if self.transport == "ws":
            from ..transports.websocket import WebSocketTransport

            def make() -> TransportActor:
                return WebSocketTransport(url, headers=headers, name=self.name, **options)
        elif self.transport == "sse":
            from ..transports.sse import SseTransport

            def make() -> TransportActor:
                return SseTransport(url, headers=headers, **options)
        else:
            from ..transports.http import StreamableHttpTransport

            def make() -> TransportActor:
                return StreamableHttpTransport(url, headers=headers, **options)

        return make


ServerEntry = StdioEntry | RemoteEntry


@attrs.frozen
class GatewayConfig:
    """The enabled servers, in file order, and the names of the disabled ones."""

    servers: tuple[ServerEntry, ...] = attrs.field(converter=tuple)
    disabled: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.servers)


# ----------------------------------------------------------------- parsing


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None, inherit_env: bool = False
) -> GatewayConfig:
    """Read and parse a configuration file (see the module's rules)."""
    where = os.fspath(path)
    try:
        text = Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the configuration file: {exc}", field=where) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", field=where
        ) from None
    return parse_config(data, environ=environ, inherit_env=inherit_env)


def parse_config(
    data: Any, *, environ: Mapping[str, str] | None = None, inherit_env: bool = False
) -> GatewayConfig:
    """Parse the decoded JSON of a configuration (see the module's rules).

    ``environ`` is where ``${VAR}`` is looked up (default: ``os.environ``)."""
    env = os.environ if environ is None else environ
    if not isinstance(data, dict):
        raise ConfigError(f"the configuration must be a JSON object, not {_kind(data)}")
    key = next((k for k in WRAPPER_KEYS if k in data), None)
    if key is None:
        raise ConfigError(
            "no 'mcpServers' object at the top level (a bare object of servers is not accepted: "
            'wrap it as {"mcpServers": {...}})'
        )
    servers = data[key]
    if not isinstance(servers, dict):
        raise ConfigError(f"must be an object of servers by name, not {_kind(servers)}", field=key)
    entries: list[ServerEntry] = []
    disabled: list[str] = []
    for name, raw in servers.items():
        _check_name(name)
        if not isinstance(raw, dict):
            raise ConfigError(f"must be an object, not {_kind(raw)}", server=name)
        off = raw.get("disabled", False)
        if not isinstance(off, bool):
            raise ConfigError(f"must be true or false, not {_kind(off)}", server=name, field="disabled")
        if off:
            disabled.append(name)
            continue
        entries.append(_entry(name, raw, env, inherit_env))
    return GatewayConfig(entries, disabled)


def _check_name(name: str) -> None:
    if not name:
        raise ConfigError("a server name must not be empty", field="mcpServers")
    if SEPARATOR in name:
        raise ConfigError(
            f"the name must not contain {SEPARATOR!r}: it separates server and tool in 'server{SEPARATOR}tool'",
            server=name,
        )
    if not _NAME.fullmatch(name):
        raise ConfigError(
            "the name may hold only letters, digits, '_', '.' and '-' (it prefixes tool names)", server=name
        )


def _entry(name: str, raw: dict[str, Any], environ: Mapping[str, str], inherit_env: bool) -> ServerEntry:
    has_command, has_url = "command" in raw, "url" in raw
    if has_command and has_url:
        raise ConfigError(
            "give either 'command' (stdio) or 'url' (remote), not both", server=name, field="url"
        )
    kind = _transport_name(name, raw)
    if has_command:
        if kind not in (None, "stdio"):
            raise ConfigError(
                f"type {kind!r} needs a 'url'; a server with a 'command' is a stdio server",
                server=name,
                field="type",
            )
        return _stdio(name, raw, environ, inherit_env)
    if has_url:
        if kind == "stdio":
            raise ConfigError("a stdio server needs a 'command', not a 'url'", server=name, field="command")
        return _remote(name, raw, kind, environ)
    raise ConfigError(
        "missing: a server needs either 'command' (a stdio server) or 'url' (a remote server)",
        server=name,
        field="command",
    )


def _transport_name(name: str, raw: dict[str, Any]) -> str | None:
    given = {k: raw[k] for k in ("type", "transport") if k in raw}
    for field, value in given.items():
        if not isinstance(value, str):
            raise ConfigError(f"must be a string, not {_kind(value)}", server=name, field=field)
    values = {v.lower() for v in given.values()}
    if len(values) > 1:
        raise ConfigError(
            f"'type' ({given['type']!r}) and 'transport' ({given['transport']!r}) disagree",
            server=name,
            field="type",
        )
    if not values:
        return None
    value = values.pop()
    if value != "stdio" and value not in TRANSPORT_NAMES:
        field = next(iter(given))
        known = ", ".join(["stdio", *TRANSPORT_NAMES])
        raise ConfigError(
            f"unknown transport type {given[field]!r}; known: {known}", server=name, field=field
        )
    return value


def _stdio(name: str, raw: dict[str, Any], environ: Mapping[str, str], inherit_env: bool) -> StdioEntry:
    command = _string(name, "command", raw["command"], environ)
    if not command:
        raise ConfigError("must not be empty", server=name, field="command")
    args = raw.get("args", [])
    if not isinstance(args, list):
        raise ConfigError(f"must be a list of strings, not {_kind(args)}", server=name, field="args")
    cwd = raw.get("cwd")
    return StdioEntry(
        name=name,
        command=command,
        args=[_string(name, f"args[{i}]", a, environ) for i, a in enumerate(args)],
        env=_strings(name, "env", raw.get("env", {}), environ),
        cwd=None if cwd is None else _string(name, "cwd", cwd, environ),
        inherit_env=inherit_env,
    )


def _remote(name: str, raw: dict[str, Any], kind: str | None, environ: Mapping[str, str]) -> RemoteEntry:
    url = _string(name, "url", raw["url"], environ)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        raise ConfigError(f"{url!r} is not an http(s):// or ws(s):// URL", server=name, field="url")
    websocket = parts.scheme in ("ws", "wss")
    if kind is None:
        transport: RemoteTransport = (
            "ws" if websocket else "sse" if parts.path.rstrip("/").endswith("/sse") else "http"
        )
    else:
        transport = TRANSPORT_NAMES[kind]
    if websocket != (transport == "ws"):
        wanted = "ws:// or wss://" if transport == "ws" else "http:// or https://"
        raise ConfigError(f"a {transport} server needs a {wanted} URL, not {url!r}", server=name, field="url")
    return RemoteEntry(
        name=name,
        url=url,
        transport=transport,
        headers=_strings(name, "headers", raw.get("headers", {}), environ),
    )


def _strings(name: str, field: str, value: Any, environ: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"must be an object of strings, not {_kind(value)}", server=name, field=field)
    return {k: _string(name, f"{field}.{k}", v, environ) for k, v in value.items()}


def _string(name: str, field: str, value: Any, environ: Mapping[str, str]) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"must be a string, not {_kind(value)}", server=name, field=field)

    def substitute(match: re.Match[str]) -> str:
        var, default = match.group(1), match.group(2)
        if var in environ:
            return environ[var]
        if default is not None:
            return default
        raise ConfigError(
            f"${{{var}}} is not set in the environment (write ${{{var}:-default}} for a default)",
            server=name,
            field=field,
        )

    return _VAR.sub(substitute, value)


def _kind(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
