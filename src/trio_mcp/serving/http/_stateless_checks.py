"""The checks of a stateless (2026-07-28 era) request before it is served:
the validation ladder (``_meta`` envelope, mirrored headers, removed
methods) and the ``Mcp-Param-*`` headers of a ``tools/call``.

A request's params are decoded once (:func:`typed_request`): into its
handler's params type when the shared app has one, so the checks, the
session (``_meta``) and the handler all read that one decoding; the
ladder's fast rung (:func:`mirrors_plainly`) accepts the usual request with
a few comparisons, and anything it does not accept goes down the whole
ladder (:func:`rejection`) for its precise answer.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct

from ...actors._peer import InboundRequest
from ...protocol import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    HeaderMismatch,
    InvalidParams,
    McpError,
    MethodNotFound,
    Request,
    coerce,
    lookup,
    method_available,
)
from ...transports._asgi import Scope
from ...transports.http._headers import (
    METHOD_HEADER,
    NAME_BEARING,
    NAME_HEADER,
    PARAM_PREFIX,
    InvalidParamHeader,
    ParamHeaderMap,
    header_mismatch,
    param_header_map,
    param_map_mismatch,
)
from ...transports.http._headers import _Params as _HeaderParams
from ._config import VERSION_HEADER

__all__ = ["ParamHeaderCheck", "mirrors_plainly", "rejection", "request_parts", "typed_request"]

log = logging.getLogger("trio_mcp.http.server")


class _AnyMeta(Struct):
    meta: Any = msgspec.field(default=None, name="_meta")


class _Parts(Struct):
    """What the checks of a stateless request read of its params, decoded once."""

    meta: Any = msgspec.field(default=None, name="_meta")
    name: Any = None
    uri: Any = None
    task_id: Any = msgspec.field(default=None, name="taskId")
    arguments: Any = None


def request_parts(request: Request) -> _Parts | None:
    """The params of ``request`` for the checks below (None when they are not
    an object: each check then reads them on its own, and answers)."""
    try:
        return coerce(request.params, _Parts)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


#: Per (method, params type): a decoder of that type when its decoding carries
#: every field the checks read (``_meta``, and the field a name-bearing
#: method mirrors in ``Mcp-Name``), else None.
_TYPED: dict[tuple[str, Any], msgspec.json.Decoder[Any] | None] = {}
#: Most (method, type) pairs remembered in _TYPED.
_TYPED_CACHE: Final = 256


def _typed_decoder(method: str, params_type: Any) -> msgspec.json.Decoder[Any] | None:
    fields = getattr(params_type, "__struct_fields__", None)
    field = NAME_BEARING.get(method)
    usable = (
        isinstance(params_type, type)
        and fields is not None
        and "meta" in fields
        and (field is None or field in fields)
    )
    decoder = msgspec.json.Decoder(params_type) if usable else None
    if len(_TYPED) >= _TYPED_CACHE:
        _TYPED.clear()
    _TYPED[(method, params_type)] = decoder
    return decoder


def typed_request(request: Request, app: Any) -> tuple[Request, _Parts | None]:
    """``request`` and its :func:`request_parts`, its params decoded once:
    into the params type of ``app``'s handler of its method when there is
    one (a Struct with ``_meta``) and they decode to it; the request then
    carries that Struct, which the session and the handler take as it is.
    Otherwise ``request`` itself and its parts decoded for the checks."""
    params = request.params
    if app is not None and type(params) is Raw:
        method = request.method
        handler = app.request_handlers.get(method)
        if handler is None:
            return request, request_parts(request)
        key = (method, handler.params_type)
        decoder = _TYPED[key] if key in _TYPED else _typed_decoder(method, handler.params_type)
        if decoder is not None:
            try:
                typed = decoder.decode(params)
            except (msgspec.ValidationError, msgspec.DecodeError):
                return request, request_parts(request)  # the ladder or the session answers
            meta = typed.meta
            if type(meta) is dict:
                name = getattr(typed, "name", None)
                uri = getattr(typed, "uri", None)
                task_id = getattr(typed, "task_id", None)
                arguments = getattr(typed, "arguments", None)
                parts = _Parts(  # what the checks read, absent fields as None
                    meta=meta,
                    name=None if name is UNSET else name,
                    uri=None if uri is UNSET else uri,
                    task_id=None if task_id is UNSET else task_id,
                    arguments=None if arguments is UNSET else arguments,
                )
                return Request(id=request.id, method=method, params=typed), parts
    return request, request_parts(request)


def mirrors_plainly(headers: dict[str, str], request: Request, parts: _Parts | None) -> bool:
    """The ladder's fast rung: True when :func:`rejection` surely has nothing
    to say (``_meta`` carries a version of this era and the capabilities, the
    headers mirror the body literally, the method is of this era). False
    says nothing: the whole ladder then decides."""
    if parts is None:
        return False
    meta = parts.meta
    if type(meta) is not dict or META_CLIENT_CAPABILITIES not in meta:
        return False
    version = meta.get(META_PROTOCOL_VERSION)
    if version not in MODERN_VERSIONS or headers.get(VERSION_HEADER) != version:
        return False
    # Each header literally its value (a value starting "=?" may be base64-wrapped).
    method = request.method
    if headers.get(METHOD_HEADER) != method or method.startswith("=?") or _REMOVED.get(method) is not False:
        return False
    field = NAME_BEARING.get(method)
    if field is not None:
        value = getattr(parts, field)
        if value is not None and (
            type(value) is not str or headers.get(NAME_HEADER) != value or value.startswith("=?")
        ):
            return False
    return True


def _envelope_problem(request: Request, parts: _Parts | None) -> tuple[int, McpError] | None:
    if parts is not None:
        meta = parts.meta
    else:
        try:
            meta = coerce(request.params, _AnyMeta).meta
        except (msgspec.ValidationError, msgspec.DecodeError):
            meta = None
    if not isinstance(meta, dict):
        return 400, InvalidParams(
            "params._meta must be an object carrying the protocol version and client capabilities"
        )
    missing = [k for k in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if k not in meta]
    if missing:
        return 400, InvalidParams(f"params._meta is missing {', '.join(missing)}")
    return None


def _header_problem(
    headers: dict[str, str], request: Request, parts: _Parts | None
) -> tuple[int, McpError] | None:
    message: Any = request
    if parts is not None and isinstance(parts.meta, dict):  # the params already decoded
        params = _HeaderParams(meta=parts.meta, name=parts.name, uri=parts.uri, task_id=parts.task_id)
        message = Request(id=request.id, method=request.method, params=params)
    problem = header_mismatch(headers, message)
    return None if problem is None else (400, HeaderMismatch(problem))


#: Per method name: whether this era removed it (see _removed_method).
_REMOVED: dict[str, bool] = {}
#: Most method names remembered in _REMOVED (unknown names are the client's).
_REMOVED_CACHE: Final = 256


def _removed_method(request: Request) -> tuple[int, McpError] | None:
    # Known methods that this era removed (initialize, ping, logging/setLevel,
    # resources/subscribe, ...): the registry knows; unknown ones reach the
    # session, whose -32601 is sent with 404 too (ERROR_STATUS).
    method = request.method
    removed = _REMOVED.get(method)
    if removed is None:
        removed = lookup(method) is not None and not method_available(
            method, MODERN_VERSIONS[-1], sender="client"
        )
        if len(_REMOVED) >= _REMOVED_CACHE:
            _REMOVED.clear()
        _REMOVED[method] = removed
    if removed:
        return 404, MethodNotFound(f"Method not found: {method} (not part of protocol {MODERN_VERSIONS[-1]})")
    return None


def rejection(
    headers: dict[str, str], request: Request, parts: _Parts | None = None
) -> tuple[int, McpError] | None:
    """The validation ladder of a stateless request, first failure wins:
    ``_meta`` envelope (-32602), mirrored headers (-32020), the method exists
    in this era (404, -32601); the session checks the version (-32022) and
    capabilities (-32021), answered with HTTP 400. ``parts``: its
    :func:`request_parts`, when already read."""
    if mirrors_plainly(headers, request, parts):
        return None
    return (
        _envelope_problem(request, parts)
        or _header_problem(headers, request, parts)
        or _removed_method(request)
    )


class _CallOnly(Struct):
    name: Any = None
    arguments: Any = None


#: Most ``tools/list`` pages read to find a called tool's input schema.
_SCHEMA_LIST_PAGES: Final = 100


def _param_map_or_none(schema: Any) -> ParamHeaderMap | None:
    try:
        return param_header_map(schema)
    except InvalidParamHeader:
        return None  # not enforced: clients drop such a tool


def _duplicated_params(scope: Scope) -> frozenset[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for raw_name, _ in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        if name.startswith(PARAM_PREFIX):
            (twice if name in seen else seen).add(name)
    return frozenset(twice)


class ParamHeaderCheck:
    """The last rung of a stateless ``tools/call``: its ``Mcp-Param-*``
    headers against the called tool's ``x-mcp-header`` annotations."""

    def __init__(self) -> None:
        #: The app whose tools were read last, its ``tools`` list, and per
        #: name the Tool or (annotations or None, input schema) once asked;
        #: valid while the app keeps that very list (an MCPServer builds a
        #: new one on every change).
        self._tools: tuple[weakref.ref[Any], Any, dict[str, Any]] | None = None

    async def problem(
        self,
        server_session: Any,
        scope: Scope,
        headers: dict[str, str],
        request: Request,
        parts: _Parts | None = None,
    ) -> str | None:
        """Why the ``Mcp-Param-*`` headers of a stateless ``tools/call`` do not
        mirror its arguments (None when they do, or when nothing can be checked:
        malformed params, which the session answers, or an unlisted tool)."""
        call: _Parts | _CallOnly
        if parts is not None:
            call = parts
        else:
            try:
                call = coerce(request.params, _CallOnly)
            except (msgspec.ValidationError, msgspec.DecodeError):
                return None
        arguments = {} if call.arguments is None else call.arguments
        if not isinstance(call.name, str) or not isinstance(arguments, dict):
            return None
        if not arguments and not any(name.startswith(PARAM_PREFIX) for name in headers):
            return None  # nothing in the body, nothing in the headers
        found = await self._tool_annotations(server_session, call.name, request)
        if found is None:
            return None
        header_map, schema = found
        if not header_map:
            return None  # no annotations: no Mcp-Param-* header is checked
        duplicated = _duplicated_params(scope)
        return param_map_mismatch(header_map, schema, arguments, headers, duplicated=duplicated)

    async def _tool_annotations(
        self, server_session: Any, name: str, request: Request
    ) -> tuple[ParamHeaderMap | None, Any] | None:
        """The ``x-mcp-header`` annotations (None when invalid) and input schema
        of tool ``name`` as the app lists it; None when it lists no such tool.

        An :class:`~trio_mcp.server.MCPServer` listing its own tools: from
        ``app.tools`` (cached per list). Any other ``tools/list`` handler: its
        pages, asked through the request's session with the request's ``_meta``."""
        app = server_session.app
        handler = app.request_handlers.get("tools/list")
        if handler is None:
            return None
        tools = getattr(app, "tools", None)
        if isinstance(tools, list) and handler.fn == getattr(app, "_list_tools", None):
            cached = self._tools
            if cached is None or cached[1] is not tools or cached[0]() is not app:
                cached = self._tools = (weakref.ref(app), tools, {t.name: t for t in tools})
            entries = cached[2]
            entry = entries.get(name)
            if entry is None:
                return None
            if not isinstance(entry, tuple):  # a Tool: its annotations, worked out once
                entry = entries[name] = (_param_map_or_none(entry.input_schema), entry.input_schema)
            return entry
        schema = await self._listed_schema(server_session, name, request)
        return None if schema is None else (_param_map_or_none(schema), schema)

    async def _listed_schema(self, server_session: Any, name: str, request: Request) -> Any:
        params = request.params
        if isinstance(params, Struct):  # decoded once already (see typed_request)
            meta = getattr(params, "meta", None)
            meta = None if meta is UNSET else meta
        else:
            try:
                meta = coerce(params, _AnyMeta).meta
            except (msgspec.ValidationError, msgspec.DecodeError):
                return None
        listing_params: dict[str, Any] = {"_meta": meta}
        seen: set[str] = set()
        for page in range(_SCHEMA_LIST_PAGES):
            listing = Request(
                id=f"{request.id}:tools/list:{page}", method="tools/list", params=listing_params
            )
            try:
                result = await server_session.handle_request(InboundRequest(server_session.peer, listing))
                data = msgspec.to_builtins(result)
            except Exception as exc:  # fail open: the call itself still gets its answer (or error)
                log.debug("Mcp-Param-* headers not checked: listing the tools failed: %r", exc)
                return None
            if not isinstance(data, dict):
                return None
            for tool in data.get("tools") or ():
                if isinstance(tool, dict) and tool.get("name") == name:
                    return tool.get("inputSchema")
            cursor = data.get("nextCursor")
            if not isinstance(cursor, str) or cursor in seen:
                return None
            seen.add(cursor)
            listing_params = {"_meta": meta, "cursor": cursor}
        return None
