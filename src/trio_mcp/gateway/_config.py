"""Configuration files of MCP hosts, as each host writes them, read into typed entries.

::

    {
      "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files", "${userHome}"], "env": {"DEBUG": "1"}},
        "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}},
        "old": {"url": "https://example.com/sse", "type": "sse", "excludeTools": ["delete_*"]},
        "off": {"command": "server-x", "enabled": false}
      }
    }

Rules:

* Formats (see :mod:`._formats`): JSON, JSONC (comments, trailing commas),
  TOML, YAML. The servers sit under one of :data:`WRAPPER_KEYS`
  (``mcpServers`` of Claude Desktop, Cursor, Gemini, Windsurf, mcp-proxy and
  Continue (a list with ``name``); ``servers`` of VS Code; ``context_servers``
  of Zed; ``mcp_servers`` of Codex; ``mcp`` of opencode; ``extensions`` of
  Goose). A bare object of servers is refused: it is indistinguishable from a
  typo.
* Spellings (:mod:`._dialects`): ``command``/``cmd`` (a string, or opencode's
  list, or Zed's ``{"path", "args", "env"}``), ``args``, ``env``/``envs``/
  ``environment``, ``cwd``, ``envFile``; ``url``/``httpUrl``/``serverUrl``/
  ``uri``; ``type``/``transport``/``transportType``; ``disabled``/``enabled``;
  ``headers``/``http_headers``; ``timeout`` (seconds; milliseconds in Gemini's
  ``settings.json``); tool filters ``includeTools``/``enabled_tools`` and
  ``excludeTools``/``disabled_tools``/``disabledTools``, and the gateway's own
  ``includePrompts``/``excludePrompts``/``includeResources``/``excludeResources``
  (glob patterns; resources match their URI or URI template).
* A URL entry's ``auth``: ``{"type": "bearer", "tokenEnv": VAR}`` or
  ``{"type": "client_credentials", "clientId", "clientSecretEnv" | "clientKey",
  "scope"}`` (the OAuth grant, Streamable HTTP); secrets come from the
  environment, named, never from the file.
* A remote transport comes from the type or, without one, from the URL
  (``ws(s)://`` → WebSocket, a path ending in ``/sse`` → SSE, else Streamable
  HTTP); Gemini's ``httpUrl`` is Streamable HTTP and its ``url`` SSE.
* Variables in strings: ``${VAR}``, ``${VAR:-default}``, ``${env:VAR}``,
  ``${workspaceFolder}``, ``${workspaceFolderBasename}``, ``${userHome}``,
  ``${pathSeparator}`` and ``${input:ID}`` (VS Code ``inputs``: the value of
  ``inputs={"ID": ...}`` (``--input ID=VALUE``) or of the environment variable
  ``TRIO_MCP_INPUT_ID``, upper-cased, non-alphanumerics as ``_``). Anything
  unset is an error naming it.
* Server names become the prefix of tool names (``name__tool``) and the
  authority of resource URIs (``gateway://name/…``), so they must match
  ``[A-Za-z0-9_.-]+`` and must not contain ``__``.
* A stdio server gets its ``env`` on top of a small safe subset of our
  environment (``HOME``, ``PATH``, locale…), not our whole environment,
  unless ``inherit_env=True``.

A key no host uses is a warning naming it (:attr:`GatewayConfig.warnings`).
Every problem raises one :class:`ConfigError` naming the file, the line, the
server and the field; nothing is started from a file that fails.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

import attrs

from ..actors._connection import TransportActor, TransportFactory
from ..actors._host import SEPARATOR
from ..auth import ClientCredentials
from ._dialects import (
    WRAPPER_KEYS,
    AuthFields,
    RawEntry,
    Variables,
    entries_of,
    json_kind,
    structure_entry,
)
from ._formats import Document, FormatError, parse_document, read_document

__all__ = [
    "ConfigError",
    "Filter",
    "GatewayConfig",
    "RemoteEntry",
    "RemoteTransport",
    "ServerEntry",
    "StdioEntry",
    "load_config",
    "parse_config",
]

RemoteTransport = Literal["http", "sse", "ws"]
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]+")


class ConfigError(ValueError):
    """A configuration that cannot be used: ``file``, ``line``, ``server`` and ``field`` say where."""

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        field: str | None = None,
        file: str | None = None,
        line: int | None = None,
        wrapper: str = "mcpServers",
    ) -> None:
        self.server = server
        self.field = field
        self.file = file
        self.line = line
        self.reason = message
        where = ".".join(p for p in (wrapper, server, field) if p) if server else field
        prefix = ":".join(str(p) for p in (file, line) if p is not None)
        text = f"{where}: {message}" if where else message
        super().__init__(f"{prefix}: {text}" if prefix else text)


def _frozen_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _patterns(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _entries(value: Iterable[StdioEntry | RemoteEntry]) -> tuple[StdioEntry | RemoteEntry, ...]:
    return tuple(value)


@attrs.frozen
class Filter:
    """Which names of a server are shown: all (``include`` None) or those
    matching an ``include`` glob, less those matching an ``exclude`` glob."""

    include: tuple[str, ...] | None = attrs.field(default=None, converter=_patterns)
    exclude: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    def allows(self, name: str) -> bool:
        if self.include is not None and not any(fnmatch.fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)

    @property
    def everything(self) -> bool:
        return self.include is None and not self.exclude


@attrs.frozen(kw_only=True)
class Filters:
    """A server's tool, prompt and resource filters."""

    tools: Filter = Filter()
    prompts: Filter = Filter()
    resources: Filter = Filter()


@attrs.frozen(kw_only=True)
class StdioEntry:
    """A server started as a subprocess speaking MCP on its stdin/stdout."""

    name: str
    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    env: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)
    cwd: str | None = None
    #: Merge ``env`` onto our whole environment (not just the safe subset).
    inherit_env: bool = False
    filters: Filters = Filters()
    #: Seconds a forwarded request may take (None: the gateway's default).
    timeout: float | None = None

    def transport_factory(self, **params: Any) -> TransportFactory:
        """A factory of fresh :class:`StdioTransport` actors (one per restart);
        ``params`` go to :class:`StdioServerParameters` (``close_grace``…)."""
        from ..transports.stdio import StdioServerParameters, StdioTransport

        fields: dict[str, Any] = {
            "command": self.command,
            "args": self.args,
            "env": dict(self.env),
            "cwd": self.cwd,
            "inherit_env": self.inherit_env,
            "name": self.name,
        }
        server = StdioServerParameters(**fields, **params)
        return lambda: StdioTransport(server)

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


@attrs.frozen(kw_only=True)
class RemoteEntry:
    """A server reached over the network."""

    name: str
    url: str
    transport: RemoteTransport = "http"
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)
    filters: Filters = Filters()
    timeout: float | None = None
    #: The OAuth client_credentials grant authorizes every request (Streamable HTTP).
    credentials: ClientCredentials | None = attrs.field(default=None, hash=False)
    #: Space-separated scopes to request with ``credentials``.
    scope: str | None = None

    def transport_factory(self, **options: Any) -> TransportFactory:
        """A factory of fresh client transports; ``options`` go to the
        transport's constructor (``connect_timeout``…). With ``credentials``
        the transports share one :class:`~trio_mcp.auth.OAuthClientAuth`, so
        a restart reuses its token."""
        url, headers = self.url, dict(self.headers)
        if self.credentials is not None:
            from ..auth import OAuthClientAuth

            scopes = self.scope.split() if self.scope else None
            options["auth"] = OAuthClientAuth(url, client_credentials=self.credentials, scopes=scopes)
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

    def describe(self) -> str:
        return f"{self.transport} {self.url}"


ServerEntry = StdioEntry | RemoteEntry


@attrs.frozen
class GatewayConfig:
    """The enabled servers, in file order, the names of the disabled ones,
    and the warnings reading the file gave (unknown keys…)."""

    servers: tuple[ServerEntry, ...] = attrs.field(converter=_entries)
    disabled: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    warnings: tuple[str, ...] = attrs.field(default=(), converter=_strings, eq=False)
    source: str | None = attrs.field(default=None, eq=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.servers)

    def describe(self) -> str:
        """The fleet this configuration runs, one line per server (``--check``)."""
        out = []
        for entry in self.servers:
            kind = "stdio" if isinstance(entry, StdioEntry) else "remote"
            line = f"{entry.name}: {kind} {entry.describe()}"
            for what in ("tools", "prompts", "resources"):
                f: Filter = getattr(entry.filters, what)
                if not f.everything:
                    inc = "*" if f.include is None else ",".join(f.include)
                    exc = f" except {','.join(f.exclude)}" if f.exclude else ""
                    line += f"; {what}: {inc}{exc}"
            out.append(line)
        out.extend(f"{name}: disabled" for name in self.disabled)
        return "\n".join(out)


# ----------------------------------------------------------------- parsing


def load_config(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    inherit_env: bool = False,
    inputs: Mapping[str, str] | None = None,
) -> GatewayConfig:
    """Read and parse a configuration file (see the module's rules)."""
    where = os.fspath(path)
    try:
        document = read_document(where)
    except FormatError as exc:
        raise ConfigError(exc.reason, file=where, line=exc.line) from None
    return _parse(document, environ, inherit_env, inputs)


def parse_config(
    data: Any,
    *,
    environ: Mapping[str, str] | None = None,
    inherit_env: bool = False,
    inputs: Mapping[str, str] | None = None,
    text: str | None = None,
    path: str | None = None,
) -> GatewayConfig:
    """Parse decoded configuration data (or, with ``text``, the text of a
    file; ``path`` names it in messages and tells its format).

    ``environ`` is where ``${VAR}`` is looked up (default: ``os.environ``)."""
    if text is not None:
        try:
            document = parse_document(text, path=path)
        except FormatError as exc:
            raise ConfigError(exc.reason, file=path, line=exc.line) from None
    else:
        document = Document(data, "", "json", path)
    return _parse(document, environ, inherit_env, inputs)


def _workspace(path: str | None) -> Path:
    """The folder ``${workspaceFolder}`` means: the project of a file in a
    host's dot-folder (``.vscode/mcp.json`` → the project), else the file's folder."""
    if path is None:
        return Path.cwd()
    folder = Path(path).resolve().parent
    return folder.parent if folder.name.startswith(".") else folder


def _parse(
    document: Document,
    environ: Mapping[str, str] | None,
    inherit_env: bool,
    inputs: Mapping[str, str] | None,
) -> GatewayConfig:
    env = os.environ if environ is None else environ
    file = document.path
    wrapper = "mcpServers"

    def fail(message: str, server: str | None = None, field: str | None = None) -> ConfigError:
        return ConfigError(
            message,
            server=server,
            field=field,
            file=file,
            line=document.line_of(server, field) if server else None,
            wrapper=wrapper,
        )

    data = document.data
    if not isinstance(data, dict):
        raise fail(f"the configuration must be an object, not {json_kind(data)}")
    key = next((k for k in WRAPPER_KEYS if k in data), None)
    if key is None:
        raise fail(
            "no servers found: expected one of "
            + ", ".join(repr(k) for k in WRAPPER_KEYS)
            + ' at the top level (a bare object of servers is not accepted: wrap it as {"mcpServers": {...}})'
        )
    wrapper = key
    home = env.get("HOME") or str(Path.home())
    folder = _workspace(file)
    variables = Variables(
        environ=env,
        inputs=dict(inputs or {}),
        declared_inputs=_declared_inputs(data.get("inputs")),
        builtins={
            "workspaceFolder": str(folder),
            "workspaceFolderBasename": folder.name,
            "userHome": home,
            "pathSeparator": os.sep,
            "/": os.sep,
        },
        base=folder,
    )
    gemini = key == "mcpServers" and file is not None and Path(file).name == "settings.json"
    warnings: list[str] = []
    raw_entries: list[RawEntry] = entries_of(data[key], key, fail)
    entries: list[ServerEntry] = []
    disabled: list[str] = []
    for raw in raw_entries:
        _check_name(raw.name, key, fail)
        if raw.name in {e.name for e in entries} | set(disabled):
            raise fail("this server is named more than once", raw.name)
        fields, notes = structure_entry(raw, fail, variables, gemini=gemini)
        for note in notes:
            line = document.line_of(raw.name, note.field)
            at = ":".join(str(p) for p in (file, line) if p is not None)
            warnings.append(f"{at + ': ' if at else ''}{key}.{raw.name}: {note.text}")
        if fields is None or fields.disabled:
            disabled.append(raw.name)
            continue
        filters = Filters(
            tools=Filter(fields.tools.include, fields.tools.exclude),
            prompts=Filter(fields.prompts.include, fields.prompts.exclude),
            resources=Filter(fields.resources.include, fields.resources.exclude),
        )
        entry: ServerEntry
        if fields.command is not None:
            entry = StdioEntry(
                name=raw.name,
                command=fields.command,
                args=fields.args,
                env=fields.env,
                cwd=fields.cwd,
                inherit_env=inherit_env,
                filters=filters,
                timeout=fields.timeout,
            )
        else:
            assert fields.url is not None
            transport: RemoteTransport = (
                "ws" if fields.transport == "ws" else "sse" if fields.transport == "sse" else "http"
            )
            entry = RemoteEntry(
                name=raw.name,
                url=fields.url,
                transport=transport,
                headers=fields.headers,
                filters=filters,
                timeout=fields.timeout,
                **_client_credentials(fields.auth, transport, raw.name, fail),
            )
        entries.append(entry)
    return GatewayConfig(entries, disabled, warnings, file)


def _client_credentials(
    auth: AuthFields | None, transport: RemoteTransport, name: str, fail: Callable[..., ConfigError]
) -> dict[str, Any]:
    """The ``credentials`` and ``scope`` of a RemoteEntry from ``auth`` of type
    client_credentials (checked by the dialect; the key file is read here)."""
    if auth is None or auth.type != "client_credentials":
        return {}
    if transport != "http":
        raise fail("'client_credentials' works with Streamable HTTP servers", name, "auth.type")
    assert auth.clientId is not None
    key = None
    if auth.clientKey is not None:
        try:
            key = Path(auth.clientKey).read_bytes()
        except OSError as exc:
            raise fail(f"cannot read the key: {exc.strerror}", name, "auth.clientKey") from None
    try:
        credentials = ClientCredentials(client_id=auth.clientId, client_secret=auth.secret, private_key=key)
    except ValueError as exc:
        raise fail(str(exc), name, "auth") from None
    return {"credentials": credentials, "scope": auth.scope}


def _declared_inputs(value: Any) -> frozenset[str]:
    if not isinstance(value, list):
        return frozenset()
    return frozenset(i["id"] for i in value if isinstance(i, dict) and isinstance(i.get("id"), str))


def _check_name(name: str, wrapper: str, fail: Callable[..., ConfigError]) -> None:
    if not name:
        raise fail("a server name must not be empty", None, wrapper)
    if SEPARATOR in name:
        raise fail(
            f"the name must not contain {SEPARATOR!r}: it separates server and tool in 'server{SEPARATOR}tool'",
            name,
        )
    if not _NAME.fullmatch(name):
        raise fail("the name may hold only letters, digits, '_', '.' and '-' (it prefixes tool names)", name)
