"""The stateless (2026-era) side of a server session: a request whose
version and client capabilities ride in its ``_meta``, ``server/discover``
and ``subscriptions/listen``. A mixin of :class:`~._server.ServerSession`,
which owns the state named below."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec
import trio
from msgspec import UNSET

from ..protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    METHODS,
    MODERN_VERSIONS,
    SUPPORTED_VERSIONS,
    ClientCapabilities,
    DiscoverResult,
    Implementation,
    InputRequiredResult,
    InvalidParams,
    MethodNotFound,
    ResourceNotFound,
    ServerCapabilities,
    SubscriptionFilter,
    SubscriptionsListenRequestParams,
    UnsupportedProtocolVersion,
    coerce,
    has_capability,
    is_modern,
    method_available,
)
from ._context import _LEVEL_RANK, LOG_LEVELS, Context
from ._modern import InputNeeded, ModernRequest, ProtocolFailure, RequestStateError, RequestStateKeys
from ._peer_inbound import InboundRequest

if TYPE_CHECKING:
    from ._server import RequestHandler, ServerApp

_T = TypeVar("_T")

#: Requests that exist only in the stateless era.
_MODERN_ONLY: Final = frozenset(
    m for m, spec in METHODS.items() if spec.kind == "request" and is_modern(spec.since)
)


def _declared(caps: ServerCapabilities, path: str) -> bool:
    """Whether ``caps`` declares the dotted wire-name ``path`` (e.g. ``resources.subscribe``)."""
    return has_capability(caps, path.split("."))


class _ModernServing:
    """The stateless era's requests (see the module doc)."""

    app: ServerApp
    _capabilities: ServerCapabilities
    _listeners: dict[int | str, SubscriptionFilter]
    _caps_cache: tuple[Any, bytes, ClientCapabilities] | None
    _info_cache: tuple[Any, bytes, Implementation] | None

    if TYPE_CHECKING:  # ServerSession's

        def _resolve(self, request: InboundRequest) -> tuple[RequestHandler, Any]: ...

        def _post(self, method: str, params: Any) -> None: ...

    async def _handle_modern(self, request: InboundRequest) -> Any:
        """A stateless 2026-era request: version and capabilities ride in ``_meta``."""
        method = request.method
        meta = request.meta
        version = meta.get(META_PROTOCOL_VERSION)
        if not isinstance(version, str):
            raise InvalidParams(
                f"{method}: _meta[{META_PROTOCOL_VERSION!r}] is required in this protocol era"
            )
        if version not in MODERN_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"Unsupported protocol version {version!r}",
                data={"supported": list(SUPPORTED_VERSIONS), "requested": version},
            )
        raw_caps = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(raw_caps, dict):
            raise InvalidParams(
                f"{method}: _meta[{META_CLIENT_CAPABILITIES!r}] is required in this protocol era"
            )
        caps = _cached(self._caps_cache, raw_caps)
        if caps is None:
            try:
                caps = msgspec.convert(raw_caps, ClientCapabilities)
            except msgspec.ValidationError as exc:
                raise InvalidParams(f"{method}: invalid client capabilities: {exc}") from None
            self._caps_cache = _cache_entry(raw_caps, caps)
        level = meta.get(META_LOG_LEVEL)
        if level is not None and (not isinstance(level, str) or level not in _LEVEL_RANK):
            raise InvalidParams(
                f"{method}: _meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}, not {level!r}"
            )
        client_info = None
        raw_info = meta.get(META_CLIENT_INFO)
        if isinstance(raw_info, dict):
            client_info = _cached(self._info_cache, raw_info)
            if client_info is None:
                try:
                    client_info = msgspec.convert(raw_info, Implementation)
                except msgspec.ValidationError:
                    client_info = None
                else:
                    self._info_cache = _cache_entry(raw_info, client_info)
        if method == "server/discover":
            return self._discover()
        if not method_available(method, version, sender="client"):
            raise MethodNotFound(f"Method not found: {method} (not part of protocol {version})")
        if method == "subscriptions/listen":
            return await self._listen(request, version)
        handler, params = self._resolve(request)
        keys = getattr(self.app, "request_state_keys", None)
        try:
            modern = ModernRequest(
                version=version,
                capabilities=caps,
                log_level=level,
                client_info=client_info,
                own_state=handler.own_request_state,
                input_responses=getattr(params, "input_responses", UNSET),
                request_state=getattr(params, "request_state", UNSET),
                keys=self._state_keys() if keys is None else keys,
            )
        except RequestStateError as exc:
            raise InvalidParams(str(exc)) from None
        try:
            return await handler.fn(Context(self, request, modern), params)  # type: ignore[arg-type]
        except InputNeeded as need:
            return InputRequiredResult(input_requests=need.requests, request_state=need.state)
        except ProtocolFailure as failure:
            raise failure.error from None
        except ResourceNotFound as exc:
            # This era reports an unknown resource as invalid params.
            raise InvalidParams(exc.message, data=exc.data) from None
        except BaseExceptionGroup as group:
            # A question asked from a child task arrives inside a group.
            for leaf in _group_leaves(group):
                if isinstance(leaf, InputNeeded):
                    return InputRequiredResult(input_requests=leaf.requests, request_state=leaf.state)
                if isinstance(leaf, ProtocolFailure):
                    raise leaf.error from None
            raise

    def _state_keys(self) -> RequestStateKeys:
        """The app's ``requestState`` keys; a random one for this process
        when it was given none (kept on the app, so every session agrees)."""
        keys = getattr(self.app, "request_state_keys", None)
        if keys is None:
            keys = RequestStateKeys.random()
            try:
                self.app.request_state_keys = keys  # type: ignore[attr-defined]
            except AttributeError:
                pass
        return keys

    def _discover(self) -> DiscoverResult:
        instructions = self.app.instructions
        caps = self._capabilities
        if caps.tasks is not UNSET:  # the 2025-11-25 slot: an extension from 2026-07-28
            caps = msgspec.structs.replace(caps, tasks=UNSET)
        return DiscoverResult(
            supported_versions=list(SUPPORTED_VERSIONS),
            capabilities=caps,
            instructions=UNSET if instructions is None else instructions,
            meta={META_SERVER_INFO: msgspec.to_builtins(self.app.info)},
        )

    async def _listen(self, request: InboundRequest, version: str) -> Any:
        """``subscriptions/listen``: acknowledge, then stream matching
        notifications until the client cancels (never answered then)."""
        try:
            params = coerce(request.params, SubscriptionsListenRequestParams)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InvalidParams(f"Invalid params for subscriptions/listen: {exc}") from None
        wanted = params.notifications
        honoured = SubscriptionFilter(
            tools_list_changed=True
            if wanted.tools_list_changed is True and _declared(self._capabilities, "tools")
            else UNSET,
            prompts_list_changed=True
            if wanted.prompts_list_changed is True and _declared(self._capabilities, "prompts")
            else UNSET,
            resources_list_changed=True
            if wanted.resources_list_changed is True and _declared(self._capabilities, "resources")
            else UNSET,
            resource_subscriptions=list(wanted.resource_subscriptions)
            if wanted.resource_subscriptions is not UNSET and _declared(self._capabilities, "resources")
            else UNSET,
        )
        sub_id = request.id
        # Register and queue the acknowledgement in one step: a change made
        # from now on is delivered after it, none is lost in between.
        self._listeners[sub_id] = honoured
        self._post(
            "notifications/subscriptions/acknowledged",
            {"notifications": honoured, "_meta": {META_SUBSCRIPTION_ID: sub_id}},
        )
        try:
            await trio.sleep_forever()
        finally:
            self._listeners.pop(sub_id, None)


def _cached(cache: tuple[Any, bytes, _T] | None, raw: dict[str, Any]) -> _T | None:
    """What ``cache`` made of ``raw`` (a ``_meta`` object a client sent):
    made of that very object (in-memory zero-copy clients share theirs), or
    of one with the same JSON (a client sends the same ones every time)."""
    if cache is None:
        return None
    if cache[0] is raw:
        return cache[2]
    try:
        same = msgspec.json.encode(raw) == cache[1]
    except (TypeError, ValueError, msgspec.EncodeError):
        return None
    return cache[2] if same else None


def _cache_entry(raw: dict[str, Any], made: _T) -> tuple[Any, bytes, _T] | None:
    try:
        return raw, msgspec.json.encode(raw), made
    except (TypeError, ValueError, msgspec.EncodeError):
        return None


def _group_leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in _group_leaves(inner)]
    return [group]
