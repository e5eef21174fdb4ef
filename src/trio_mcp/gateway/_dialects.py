"""Each host's spellings of a server entry, turned into one typed entry with cattrs.

An entry is read in three steps: its keys are mapped from the host's
spelling to ours (:data:`SPELLINGS`; a key no host uses is a note, the
caller's warning), the result is structured by a strict cattrs converter
(a string is a string, a list a list: no silent coercion) whose detailed
validation errors become messages naming the field *as the file spells it*,
and then variables are substituted and the transport is told.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, NoReturn, get_args
from urllib.parse import urlsplit

import attrs
import cattrs
from cattrs.cols import list_structure_factory, mapping_structure_factory

__all__ = [
    "SPELLINGS",
    "TRANSPORT_NAMES",
    "WRAPPER_KEYS",
    "AUTH_TYPES",
    "AuthFields",
    "EntryFields",
    "Note",
    "RawEntry",
    "Variables",
    "entries_of",
    "json_kind",
    "structure_entry",
]

#: Keys the servers may sit under, in order of preference.
WRAPPER_KEYS: Final = ("mcpServers", "servers", "context_servers", "mcp_servers", "mcp", "extensions")

#: A host's key → our field (a dotted path for the filters).
SPELLINGS: Final[Mapping[str, str]] = {
    "command": "command",
    "cmd": "command",  # Goose
    "args": "args",
    "env": "env",
    "envs": "env",  # Goose
    "environment": "env",  # opencode
    "cwd": "cwd",
    "envFile": "env_file",  # VS Code, Cursor
    "env_file": "env_file",
    "url": "url",
    "httpUrl": "url",  # Gemini: Streamable HTTP
    "serverUrl": "url",  # Windsurf
    "uri": "url",  # Goose
    "type": "transport",
    "transport": "transport",
    "transportType": "transport",  # mcp-proxy
    "headers": "headers",
    "http_headers": "headers",  # Codex
    "timeout": "timeout",
    "tool_timeout_sec": "timeout",  # Codex
    "disabled": "disabled",
    "enabled": "enabled",  # mcp-proxy, Codex, opencode, Goose
    "includeTools": "tools.include",  # Gemini
    "enabled_tools": "tools.include",  # Codex
    "excludeTools": "tools.exclude",  # Gemini
    "disabled_tools": "tools.exclude",  # Codex
    "disabledTools": "tools.exclude",  # Windsurf
    "includePrompts": "prompts.include",
    "excludePrompts": "prompts.exclude",
    "includeResources": "resources.include",
    "excludeResources": "resources.exclude",
    "bearer_token_env_var": "bearer_token_env_var",  # Codex
    "auth": "auth",  # ours: {"type": "bearer" | "client_credentials", ...}
    "env_vars": "env_vars",  # Codex
}
#: Keys hosts write that mean nothing to a gateway: read silently.
IGNORED: Final = frozenset(
    {
        "autoApprove",
        "alwaysAllow",
        "description",
        "trust",
        "name",
        "source",
        "settings",
        "bundled",
        "env_keys",
        "available_tools",
        "display_name",
        "startup_timeout_sec",
        "startup_timeout_ms",
        "oauth",
        "oauthResource",
        "gallery",
        "version",
        "disabledReason",
    }
)
#: Spellings of each remote transport found in the wild.
TRANSPORT_NAMES: Final[Mapping[str, str]] = {
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
    "ws": "ws",
    "websocket": "ws",
}
_STDIO_NAMES: Final = frozenset({"stdio", "local"})  # opencode: local
_REMOTE_ANY: Final = frozenset({"remote"})  # opencode: told from the URL
_NOT_SERVERS: Final = frozenset({"builtin", "platform", "frontend", "inline_python"})  # Goose
_VAR: Final = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen
class RawEntry:
    """One server as the file wrote it."""

    name: str
    data: Any


@attrs.frozen
class Note:
    """Something to warn about, at ``field`` of the entry."""

    text: str
    field: str | None = None


Fail = Callable[..., Exception]


def entries_of(servers: Any, key: str, fail: Fail) -> list[RawEntry]:
    """The entries under the wrapper ``key``: an object by name, or
    Continue's list of objects with a ``name``."""
    if isinstance(servers, dict):
        return [RawEntry(str(name), raw) for name, raw in servers.items()]
    if isinstance(servers, list):
        out = []
        for i, raw in enumerate(servers):
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                raise fail(f"entry {i} of the list of servers needs a 'name' string", None, f"{key}[{i}]")
            out.append(RawEntry(_slug(raw["name"]), raw))
        return out
    raise fail(
        f"must be an object of servers by name (or a list of servers with a 'name'), not {json_kind(servers)}",
        None,
        key,
    )


def _slug(name: str) -> str:
    """A list entry's display name ("SQLite MCP") as a server name (``SQLite-MCP``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip()).strip("-")


# --------------------------------------------------------- typed entries


@attrs.define(kw_only=True)
class FilterFields:
    include: list[str] | None = None
    exclude: list[str] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AuthFields:
    """A remote entry's ``auth`` object, spelled as in the file::

        {"type": "bearer", "tokenEnv": "VAR"}
        {"type": "client_credentials", "clientId": "ID", "clientSecretEnv": "VAR",
         "clientKey": "key.pem", "scope": "read write"}

    Secrets are named by environment variable, never written in the file."""

    type: str
    # camelCase as in the file, so that cattrs errors name the key the file spells
    tokenEnv: str | None = None
    clientId: str | None = None
    clientSecretEnv: str | None = None
    clientKey: str | None = None
    scope: str | None = None
    #: Read from ``clientSecretEnv`` when the entry is read (never shown).
    secret: str | None = attrs.field(default=None, repr=False, init=False)


#: The ``auth`` types and the keys each needs and allows.
AUTH_TYPES: Final[Mapping[str, tuple[frozenset[str], frozenset[str]]]] = {
    "bearer": (frozenset({"tokenEnv"}), frozenset({"tokenEnv"})),
    "client_credentials": (
        frozenset({"clientId"}),
        frozenset({"clientId", "clientSecretEnv", "clientKey", "scope"}),
    ),
}


@attrs.define(kw_only=True)
class EntryFields:
    """A server entry in our spelling, typed (the cattrs target)."""

    command: str | None = None
    args: list[str] = attrs.Factory(list)
    env: dict[str, str] = attrs.Factory(dict)
    cwd: str | None = None
    env_file: str | None = None
    url: str | None = None
    transport: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    timeout: float | None = None
    disabled: bool | None = None
    enabled: bool | None = None
    tools: FilterFields = attrs.Factory(FilterFields)
    prompts: FilterFields = attrs.Factory(FilterFields)
    resources: FilterFields = attrs.Factory(FilterFields)
    bearer_token_env_var: str | None = None
    env_vars: list[str] = attrs.Factory(list)
    auth: AuthFields | None = None


def json_kind(value: Any) -> str:
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


def _strict(kind: type, wanted: str) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _: Any) -> Any:
        if type(value) is bool and kind is not bool:
            raise TypeError(f"must be {wanted}, not {json_kind(value)}")
        if not isinstance(value, kind):
            raise TypeError(f"must be {wanted}, not {json_kind(value)}")
        number: Any = value
        return float(number) if wanted == "a number" else value

    return hook


def _converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(bool, _strict(bool, "true or false"))
    conv.register_structure_hook(float, _strict((int, float), "a number"))  # type: ignore[arg-type]

    def lists(type_: Any) -> Any:
        base = list_structure_factory(type_, conv)
        (item,) = get_args(type_)
        wanted = "a list of strings" if item is str else "a list"

        def hook(value: Any, cl: Any) -> Any:
            if type(value) is not list:
                raise TypeError(f"must be {wanted}, not {json_kind(value)}")
            return base(value, cl)

        return hook

    def mappings(type_: Any) -> Any:
        base = mapping_structure_factory(type_, conv)

        def hook(value: Any, cl: Any) -> Any:
            if type(value) is not dict:
                raise TypeError(f"must be an object of strings, not {json_kind(value)}")
            return base(value, cl)

        return hook

    conv.register_structure_hook_factory(lambda t: getattr(t, "__origin__", None) is list, lists)
    conv.register_structure_hook_factory(lambda t: getattr(t, "__origin__", None) is dict, mappings)
    return conv


_CONVERTER: Final = _converter()
_PATH_PART: Final = re.compile(r"\.([^.\[]+)|\[['\"]?([^\]'\"]+)['\"]?\]")


def _message(exc: BaseException, _type: Any) -> str:
    if isinstance(exc, (TypeError, ValueError)):
        return str(exc)
    if isinstance(exc, KeyError):
        return "missing"
    return cattrs.v.format_exception(exc, _type)


def _first_error(exc: BaseException) -> tuple[list[str], str]:
    """(the path as parts, message) of the first error cattrs found."""
    text = cattrs.transform_error(exc, path="$", format_exception=_message)[0]
    message, _, path = text.rpartition(" @ ")
    return [a or b for a, b in _PATH_PART.findall(path[1:])], message


def _spelled(parts: list[str], origin: Mapping[str, str]) -> str:
    """A field path in the file's spelling: ``tools.include[0]`` → ``includeTools[0]``."""
    split = 2 if parts and parts[0] in ("tools", "prompts", "resources") and len(parts) > 1 else 1
    ours = ".".join(parts[:split])
    out = origin.get(ours, ours)
    for part in parts[split:]:
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


# ---------------------------------------------------------------- variables


@attrs.frozen
class Variables:
    """Where ``${...}`` is looked up."""

    environ: Mapping[str, str]
    inputs: Mapping[str, str]
    declared_inputs: frozenset[str]
    builtins: Mapping[str, str]
    base: Path

    def substitute(self, value: str, where: str, fail: Callable[[str, str], Exception]) -> str:
        def one(match: re.Match[str]) -> str:
            body = match.group(1)
            if body.startswith("input:"):
                return self._input(body[6:], where, fail)
            if body.startswith("env:"):
                var = body[4:]
                if var in self.environ:
                    return self.environ[var]
                raise fail(f"${{env:{var}}} is not set in the environment", where)
            if body in self.builtins:
                return self.builtins[body]
            var, sep, default = body.partition(":-")
            if not _ENV_NAME.fullmatch(var):
                raise fail(f"unknown variable ${{{body}}}", where)
            if var in self.environ:
                return self.environ[var]
            if sep:
                return default
            raise fail(
                f"${{{var}}} is not set in the environment (write ${{{var}:-default}} for a default)", where
            )

        return _VAR.sub(one, value)

    def _input(self, ident: str, where: str, fail: Callable[[str, str], Exception]) -> str:
        if ident in self.inputs:
            return self.inputs[ident]
        env_name = "TRIO_MCP_INPUT_" + re.sub(r"[^A-Za-z0-9]", "_", ident).upper()
        if env_name in self.environ:
            return self.environ[env_name]
        declared = (
            "" if ident in self.declared_inputs else " (and no input of that id is declared in 'inputs')"
        )
        raise fail(
            f"input {ident!r} has no value{declared}: pass --input {ident}=VALUE or set {env_name}", where
        )


# ----------------------------------------------------------------- entries


def structure_entry(
    raw: RawEntry, fail: Fail, variables: Variables, *, gemini: bool = False
) -> tuple[EntryFields | None, list[Note]]:
    """The typed, substituted entry (None: not a server we run) and notes."""
    name = raw.name
    data = raw.data

    def error(message: str, field: str | None = None) -> NoReturn:
        raise fail(message, name, field)

    if not isinstance(data, dict):
        error(f"must be an object, not {json_kind(data)}")
    data = dict(data)
    nested = data.pop("config", None)  # Goose's nested form
    if isinstance(nested, dict):
        data = {**nested, **data}
    notes: list[Note] = []
    payload: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in data.items():
        ours = SPELLINGS.get(key)
        if ours is None:
            if key not in IGNORED:
                notes.append(Note(f"unknown key {key!r} (ignored)", key))
            continue
        if ours in origin:
            error(f"{origin[ours]!r} and {key!r} say the same thing: give one", key)
        origin[ours] = key
        head, _, tail = ours.partition(".")
        if tail:
            payload.setdefault(head, {})[tail] = value
        else:
            payload[ours] = value
    kind = payload.get("transport")
    if isinstance(kind, str) and kind.lower() in _NOT_SERVERS:
        notes.append(
            Note(f"a {kind!r} extension is part of its host, not an MCP server: skipped", origin["transport"])
        )
        return None, notes
    _reshape_command(payload, origin, error)
    try:
        fields = _CONVERTER.structure(payload, EntryFields)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        parts, message = _first_error(exc)
        error(message, _spelled(parts, origin))
    if fields.disabled is not None and fields.enabled is not None and fields.disabled == fields.enabled:
        error("'disabled' and 'enabled' disagree", origin["enabled"])
    if fields.disabled is None:
        fields.disabled = fields.enabled is False
    _substitute(fields, origin, variables, error)
    _tell_transport(fields, origin, error, gemini=gemini, httpurl=origin.get("url") == "httpUrl")
    if fields.timeout is not None:
        if not fields.timeout > 0:
            error("must be a positive number of seconds", origin["timeout"])
        if gemini and origin["timeout"] == "timeout":
            fields.timeout /= 1000.0  # Gemini writes milliseconds
    return fields, notes


def _check_auth(
    fields: EntryFields, origin: Mapping[str, str], variables: Variables, error: Callable[..., NoReturn]
) -> None:
    """The ``auth`` object: a known type with its keys, on a URL entry, its
    environment variables set; a bearer token becomes the Authorization header."""
    auth = fields.auth
    assert auth is not None
    at = origin.get("auth", "auth")
    if fields.url is None:
        error("applies to URL servers, not to a command", at)
    if auth.type not in AUTH_TYPES:
        error(f"must be one of {', '.join(map(repr, AUTH_TYPES))}, not {auth.type!r}", f"{at}.type")
    needed, allowed = AUTH_TYPES[auth.type]
    given = {k for k in ("tokenEnv", "clientId", "clientSecretEnv", "clientKey", "scope") if getattr(auth, k)}
    for key in sorted(needed - given):
        error(f"missing: {auth.type!r} needs it", f"{at}.{key}")
    for key in sorted(given - allowed):
        error(f"does not apply to {auth.type!r}", f"{at}.{key}")
    if auth.type == "client_credentials" and not (auth.clientSecretEnv or auth.clientKey):
        error("'client_credentials' needs 'clientSecretEnv' or 'clientKey'", at)
    for key in ("tokenEnv", "clientSecretEnv"):
        var = getattr(auth, key)
        if var is not None and not variables.environ.get(var):
            error(f"{var} is not set in the environment", f"{at}.{key}")
    if auth.tokenEnv is not None:
        if "Authorization" in fields.headers or fields.bearer_token_env_var is not None:
            error("the Authorization header is given twice: give 'auth' or the header", at)
        fields.headers["Authorization"] = f"Bearer {variables.environ[auth.tokenEnv]}"
    if auth.clientSecretEnv is not None:
        auth.secret = variables.environ[auth.clientSecretEnv]
    if auth.clientKey is not None:
        auth.clientKey = str(variables.base / auth.clientKey)


def _reshape_command(payload: dict[str, Any], origin: dict[str, str], error: Callable[..., NoReturn]) -> None:
    """opencode's ``command: [cmd, *args]`` and Zed's ``command: {path, args, env}``."""
    command = payload.get("command")
    if isinstance(command, list):
        if not command or "args" in payload:
            error("a command list needs at least the program, and no separate 'args'", origin["command"])
        payload["command"], payload["args"] = command[0], command[1:]
    elif isinstance(command, dict):
        inner = dict(command)
        payload["command"] = inner.pop("path", None)
        if payload["command"] is None:
            error("missing: the command object needs a 'path'", f"{origin['command']}.path")
        for key in ("args", "env"):
            if key in inner:
                payload[key] = inner.pop(key)
                origin.setdefault(key, f"{origin['command']}.{key}")
        if inner:
            error(f"unknown key {min(inner)!r} in the command object", origin["command"])


def _substitute(
    fields: EntryFields, origin: Mapping[str, str], variables: Variables, error: Callable[..., NoReturn]
) -> None:
    def sub(value: str, where: str) -> str:
        return variables.substitute(value, where, lambda message, at: _raiser(error, message, at))

    spelled = origin.get
    if fields.command is not None:
        fields.command = sub(fields.command, spelled("command", "command"))
    fields.args = [sub(a, f"{spelled('args', 'args')}[{i}]") for i, a in enumerate(fields.args)]
    fields.env = {k: sub(v, f"{spelled('env', 'env')}.{k}") for k, v in fields.env.items()}
    fields.headers = {k: sub(v, f"{spelled('headers', 'headers')}.{k}") for k, v in fields.headers.items()}
    for attr in ("cwd", "url", "env_file"):
        value = getattr(fields, attr)
        if value is not None:
            setattr(fields, attr, sub(value, spelled(attr, attr)))
    for var in fields.env_vars:  # Codex: pass these through from our environment
        if var in variables.environ:
            fields.env.setdefault(var, variables.environ[var])
    if fields.bearer_token_env_var is not None:
        var = fields.bearer_token_env_var
        if var not in variables.environ:
            error(f"{var} is not set in the environment", "bearer_token_env_var")
        fields.headers.setdefault("Authorization", f"Bearer {variables.environ[var]}")
    if fields.auth is not None:
        _check_auth(fields, origin, variables, error)
    if fields.env_file is not None:
        file_env = _read_env_file(variables.base / fields.env_file, error, spelled("env_file", "env_file"))
        fields.env = {**file_env, **fields.env}


def _raiser(error: Callable[..., NoReturn], message: str, where: str) -> Exception:
    error(message, where)


def _read_env_file(path: Path, error: Callable[..., NoReturn], where: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#`` comments, ``export``, quotes) of a dotenv file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        error(f"cannot read the env file: {exc}", where)
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not _ENV_NAME.fullmatch(key):
            error(f"{path}:{number}: not a KEY=VALUE line", where)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def _tell_transport(
    fields: EntryFields,
    origin: Mapping[str, str],
    error: Callable[..., NoReturn],
    *,
    gemini: bool,
    httpurl: bool,
) -> None:
    """Stdio (``transport`` None) or a remote transport, checked against the URL."""
    type_field = origin.get("transport", "type")
    kind = None if fields.transport is None else fields.transport.lower()
    if fields.command is not None and fields.url is not None:
        error("give either a command (stdio) or a URL (remote), not both", origin["url"])
    if fields.command is not None:
        if kind not in (None, *_STDIO_NAMES):
            error(
                f"type {fields.transport!r} needs a 'url'; a server with a command is a stdio server",
                type_field,
            )
        if not fields.command:
            error("must not be empty", origin["command"])
        fields.transport = None
        return
    if fields.url is None:
        if kind in _STDIO_NAMES:
            error("missing: a stdio server needs a 'command'", "command")
        error(
            "missing: a server needs either 'command' (a stdio server) or 'url' (a remote server)", "command"
        )
    url_field = origin["url"]
    parts = urlsplit(fields.url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        error(f"{fields.url!r} is not an http(s):// or ws(s):// URL", url_field)
    websocket = parts.scheme in ("ws", "wss")
    if kind in _STDIO_NAMES:
        error("a stdio server needs a 'command', not a URL", "command")
    if kind is None or kind in _REMOTE_ANY:
        if httpurl:
            transport = "http"
        elif websocket:
            transport = "ws"
        elif gemini or parts.path.rstrip("/").endswith("/sse"):
            transport = "sse"  # Gemini's "url" is its SSE spelling
        else:
            transport = "http"
    elif kind in TRANSPORT_NAMES:
        transport = TRANSPORT_NAMES[kind]
    else:
        known = ", ".join(["stdio", "local", "remote", *TRANSPORT_NAMES])
        error(f"unknown transport type {fields.transport!r}; known: {known}", type_field)
    if websocket != (transport == "ws"):
        wanted = "ws:// or wss://" if transport == "ws" else "http:// or https://"
        error(f"a {transport} server needs a {wanted} URL, not {fields.url!r}", url_field)
    fields.transport = transport
