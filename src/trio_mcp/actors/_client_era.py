"""A client session's protocol era: which one it speaks and how it asks in it.

:class:`_Negotiation` (a mixin of :class:`~._client.ClientSession`) picks the
era: pinned, remembered (:data:`ERA_CACHE`) or probed with ``server/discover``,
falling back to the ``initialize`` handshake; it performs that handshake,
builds the ``_meta`` every stateless request carries, and sends a stateless
request (:meth:`_Negotiation._call_modern`): a -32022 answer naming the
versions the server speaks is retried once with the newest common one (or the
session falls back to ``initialize``), and input-required results are answered
by the session's handlers, then retried (at most :data:`MAX_INPUT_ROUNDS` rounds).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import msgspec
import trio
from msgspec import UNSET

from ..protocol import (
    HANDSHAKE_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    RESULT_INPUT_REQUIRED,
    V2025_03_26,
    ClientCapabilities,
    CreateMessageRequest,
    DiscoverResult,
    ElicitRequest,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    InputRequiredResult,
    InvalidParams,
    ListRootsRequest,
    ListRootsResult,
    McpError,
    MethodNotFound,
    Root,
    ServerCapabilities,
    SubscribeRequestParams,
    UnsupportedProtocolVersion,
    coerce,
    result_type_of,
)
from ._peer import Peer, ProgressCallback

if TYPE_CHECKING:
    from ._client import ElicitationHandler, SamplingHandler

__all__ = ["DISCOVER_PROBE_TIMEOUT", "ERA_CACHE", "MAX_INPUT_ROUNDS", "Era"]

log = logging.getLogger("trio_mcp.client")

#: The most input-required rounds one stateless request may take.
MAX_INPUT_ROUNDS: Final = 16
#: Seconds the ``server/discover`` probe may take before the client falls
#: back to ``initialize`` (a server that ignores unknown requests).
DISCOVER_PROBE_TIMEOUT: Final = 5.0

Era = Literal["auto", "handshake", "modern"]


class _EraCache:
    """Verdicts of era probes, per server key (bounded, oldest evicted)."""

    max_entries = 256

    def __init__(self) -> None:
        self._verdicts: dict[str, str] = {}

    def get(self, key: str | None) -> str | None:
        return None if key is None else self._verdicts.get(key)

    def set(self, key: str | None, era: str) -> None:
        if key is None:
            return
        self._verdicts.pop(key, None)
        if len(self._verdicts) >= self.max_entries:
            self._verdicts.pop(next(iter(self._verdicts)))
        self._verdicts[key] = era

    def forget(self, key: str | None) -> None:
        if key is not None:
            self._verdicts.pop(key, None)

    def clear(self) -> None:
        self._verdicts.clear()


#: Era verdicts shared by every client in this process.
ERA_CACHE: Final = _EraCache()


class _Negotiation:
    """The era half of :class:`~._client.ClientSession` (see the module doc),
    which owns the state named below."""

    name: str
    peer: Peer
    era_setting: Era
    era: str | None
    server_key: str | None
    discover_timeout: float
    #: Whether the last probe ran out of time (not refused: maybe just late).
    _probe_lapsed: bool = False
    offered_version: str
    protocol_version: str | None
    client_info: Implementation
    server_info: Implementation | None
    server_capabilities: ServerCapabilities
    instructions: str | None
    sampling_handler: SamplingHandler | None
    elicitation_handler: ElicitationHandler | None
    on_tools_changed: Callable[[], Awaitable[None]] | None
    on_prompts_changed: Callable[[], Awaitable[None]] | None
    on_resources_changed: Callable[[], Awaitable[None]] | None
    _roots: list[Root] | None
    _log_level: str | None
    _meta_cache: tuple[Any, dict[str, Any]] | None
    _listen_scope: trio.CancelScope | None
    _modern_subscriptions: set[str]
    _renegotiating: trio.Lock

    if TYPE_CHECKING:

        def capabilities(self) -> ClientCapabilities: ...

        async def _relisten(self) -> None: ...

        def _call(
            self, method: str, params: Any, result_type: Any, on_progress: Any = None
        ) -> Awaitable[Any]: ...

    async def _connect(self) -> None:
        """Pick the era: pinned, cached, or probed with ``server/discover``
        (falling back to ``initialize`` on anything but a modern answer)."""
        era = self.era_setting
        if era == "auto":
            era = cast(Era, ERA_CACHE.get(self.server_key) or "auto")
        cached = self.era_setting == "auto" and era != "auto"
        if era == "handshake":
            try:
                await self._initialize()
            except McpError:
                if not cached:
                    raise
                ERA_CACHE.forget(self.server_key)  # the verdict went stale: probe again
                if not await self._discover(strict=False):
                    raise
        elif era == "modern":
            if not await self._discover(strict=not cached):
                ERA_CACHE.forget(self.server_key)  # the verdict went stale: the server left the era
                await self._initialize()
        elif not await self._discover(strict=False):
            try:
                await self._initialize()
            except UnsupportedProtocolVersion:
                if not self._probe_lapsed:
                    raise
                # The probe was only late (a server slow to start): the server
                # took it, and now refuses the handshake. Ask again, unbounded.
                log.info("%s: initialize refused after a late probe; probing again", self.name)
                await self._discover(strict=True)
        if self.era == "modern" and (
            self.on_tools_changed or self.on_prompts_changed or self.on_resources_changed
        ):
            await self._relisten()  # list changes arrive in both eras without asking
        ERA_CACHE.set(self.server_key, self.era or "handshake")

    def _modern_meta(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``_meta`` every stateless request carries. Built once and
        shared (read-only) until the version or log level changes."""
        cached = self._meta_cache
        key = (self.protocol_version, self._log_level)
        if cached is None or cached[0] != key:
            meta: dict[str, Any] = {
                META_PROTOCOL_VERSION: self.protocol_version or MODERN_VERSIONS[-1],
                META_CLIENT_CAPABILITIES: msgspec.to_builtins(self.capabilities()),
                META_CLIENT_INFO: msgspec.to_builtins(self.client_info),
            }
            if self._log_level is not None:
                meta[META_LOG_LEVEL] = self._log_level
            cached = self._meta_cache = (key, meta)
        if extra:
            return {**cached[1], **extra}
        return cached[1]

    async def _discover(
        self, *, strict: bool, version: str = MODERN_VERSIONS[-1], retry: bool = True
    ) -> bool:
        """Probe; True when the server answered as a modern server. A -32022
        answer naming the versions the server supports is retried once with
        the newest common one (a handshake one: False, and ``initialize``
        offers it, unless ``strict``)."""
        params = {"_meta": self._modern_meta({META_PROTOCOL_VERSION: version})}
        try:
            # Bounded when probing (a server that ignores unknown requests must
            # not stall the fallback); not when the era is pinned: then this is
            # simply the first request (an OAuth login may run inside it), and
            # its deadline is the caller's cancel scope.
            with trio.fail_after(self.discover_timeout if not strict else math.inf):
                raw = await self.peer.request("server/discover", params, stateless=True)
            result = coerce(raw, DiscoverResult)
        except UnsupportedProtocolVersion as exc:
            choice = self._common_version(exc) if retry else None
            if choice in MODERN_VERSIONS:
                log.info("%s: server/discover with %s refused; retrying with %s", self.name, version, choice)
                return await self._discover(strict=strict, version=choice, retry=False)
            if choice is not None and not strict:
                log.info("%s: the server speaks %s: falling back to initialize", self.name, choice)
                self.offered_version = choice
                return False
            if strict:
                raise UnsupportedProtocolVersion(
                    f"the server does not speak the stateless era: {exc}", data=exc.data
                ) from None
            return False
        except (McpError, msgspec.ValidationError, msgspec.DecodeError, trio.TooSlowError) as exc:
            self._probe_lapsed = type(exc) is trio.TooSlowError
            if strict:
                raise UnsupportedProtocolVersion(
                    f"the server does not speak the stateless era: {exc}"
                ) from None
            return False
        common = [v for v in MODERN_VERSIONS if v in result.supported_versions]
        if not common:
            if strict:
                raise UnsupportedProtocolVersion(
                    f"the server supports {result.supported_versions}; this client speaks {list(MODERN_VERSIONS)}",
                    data={"supported": list(MODERN_VERSIONS), "requested": result.supported_versions},
                )
            return False
        self.era = "modern"
        self.protocol_version = common[-1]
        self.server_capabilities = result.capabilities
        self.instructions = None if result.instructions is UNSET else result.instructions
        info = result.meta.get(META_SERVER_INFO) if isinstance(result.meta, dict) else None
        if isinstance(info, dict):
            try:
                self.server_info = msgspec.convert(info, Implementation)
            except msgspec.ValidationError:
                pass
        return True

    def _common_version(self, exc: McpError) -> str | None:
        """The newest version this client and the server (``data.supported`` of a
        -32022 answer) both speak: a stateless one first, else a handshake one
        no newer than ``protocol_version`` (what this client was told to offer)."""
        data = exc.data
        supported = data.get("supported") if isinstance(data, dict) else None
        if not isinstance(supported, list):
            return None
        modern = [v for v in MODERN_VERSIONS if v in supported]
        if modern:
            return modern[-1]
        handshake = [v for v in HANDSHAKE_VERSIONS if v in supported and v <= self.offered_version]
        return handshake[-1] if handshake else None

    async def _renegotiate(self, exc: UnsupportedProtocolVersion, sent: str | None) -> str | None:
        """After a stateless request sent with version ``sent`` was answered
        -32022: "modern" (send it again, ``protocol_version`` is now the
        common stateless version), "handshake" (the session fell back to
        ``initialize``) or None (nothing in common: give up)."""
        async with self._renegotiating:
            if self.era != "modern":
                return "handshake"  # another request already fell back
            if self.protocol_version != sent:
                return "modern"  # another request already switched versions
            choice = self._common_version(exc)
            if choice in MODERN_VERSIONS:
                log.info("%s: %s refused by the server; retrying with %s", self.name, sent, choice)
                self.protocol_version = choice
                return "modern"
            if choice is None or self.era_setting == "modern":
                return None
            log.info(
                "%s: the server no longer speaks %s; falling back to initialize with %s",
                self.name,
                sent,
                choice,
            )
            await self._fall_back_to_handshake(choice)
            return "handshake"

    async def _fall_back_to_handshake(self, version: str) -> None:
        if self._listen_scope is not None:
            self._listen_scope.cancel()
            self._listen_scope = None
        self.offered_version = version
        await self._initialize()
        ERA_CACHE.set(self.server_key, "handshake")
        subscribed, self._modern_subscriptions = sorted(self._modern_subscriptions), set()
        for uri in subscribed:  # what subscriptions/listen watched, the handshake way
            try:
                await self._call("resources/subscribe", SubscribeRequestParams(uri=uri), None)
            except McpError as exc:
                log.warning("%s: resource %r no longer watched: %s", self.name, uri, exc)

    async def _initialize(self) -> None:
        params = InitializeRequestParams(
            protocol_version=self.offered_version,
            capabilities=self.capabilities(),
            client_info=self.client_info,
        )
        result: InitializeResult = await self.peer.request(
            "initialize", params, result_type=InitializeResult, cancellable=False
        )
        if result.protocol_version not in HANDSHAKE_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"server answered protocol version {result.protocol_version!r}; "
                f"this client supports {', '.join(HANDSHAKE_VERSIONS)}",
                data={"supported": list(HANDSHAKE_VERSIONS), "requested": result.protocol_version},
            )
        self.era = "handshake"
        self.protocol_version = result.protocol_version
        self.peer.batch_arrays = result.protocol_version == V2025_03_26  # the one version with batches
        self.server_info = result.server_info
        self.server_capabilities = result.capabilities
        self.instructions = None if result.instructions is UNSET else result.instructions
        await self.peer.notify("notifications/initialized")

    async def _call_modern(
        self, method: str, params: Any, result_type: Any, on_progress: ProgressCallback | None
    ) -> Any:
        """A stateless request: ``_meta`` carries version and capabilities;
        input-required results are answered by the same handlers as the
        handshake era's server-to-client requests, then retried."""
        own: Any = None
        if isinstance(params, msgspec.Struct) and "input_responses" in params.__struct_fields__:
            # tools/call, prompts/get, resources/read: stay a Struct (no dict round trip)
            own = params.meta if isinstance(params.meta, dict) else None  # type: ignore[attr-defined]
            data: Any = msgspec.structs.replace(params, meta=self._modern_meta(own))
            base: Any = None
        else:
            base = _params_dict(params)
            data = dict(base)
            data["_meta"] = self._modern_meta(base.get("_meta"))
        renegotiated = False
        rounds = 0
        while rounds < MAX_INPUT_ROUNDS:
            sent = self.protocol_version
            try:
                raw = await self.peer.request(method, data, on_progress=on_progress, stateless=True)
            except UnsupportedProtocolVersion as exc:
                if renegotiated:
                    raise
                renegotiated = True
                outcome = await self._renegotiate(exc, sent)
                if outcome is None:
                    raise
                if outcome == "handshake":  # the same call again (the middleware saw it once)
                    return await type(self)._call(self, method, params, result_type, on_progress)
                # The same round again, under the new version.
                if base is None:
                    data = msgspec.structs.replace(data, meta=self._modern_meta(own))
                else:
                    data = {**data, "_meta": self._modern_meta(base.get("_meta"))}
                continue
            rounds += 1
            if result_type_of(raw) != RESULT_INPUT_REQUIRED:
                if result_type is None:
                    return None
                try:
                    return coerce(raw, result_type)
                except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                    raise InvalidParams(f"malformed result for {method}: {exc}") from None
            need = coerce(raw, InputRequiredResult)
            responses: dict[str, Any] = {}
            for key, question in ({} if need.input_requests is UNSET else need.input_requests).items():
                responses[key] = await self._answer(question)
            # A fresh object each round: what was sent is never changed.
            if base is None:
                data = msgspec.structs.replace(
                    data, input_responses=responses, request_state=need.request_state
                )
            else:
                data = {**data, "inputResponses": responses}
                if need.request_state is not UNSET:
                    data["requestState"] = need.request_state
                else:
                    data.pop("requestState", None)
        raise InvalidParams(f"{method}: more than {MAX_INPUT_ROUNDS} input-required rounds")

    async def _answer(self, question: Any) -> Any:
        # A tagged InputRequest: the tag is the method it stands for.
        method = type(question).__struct_config__.tag
        if isinstance(question, CreateMessageRequest) and self.sampling_handler is not None:
            return await self.sampling_handler(question.params)
        if isinstance(question, ElicitRequest) and self.elicitation_handler is not None:
            return await self.elicitation_handler(question.params)
        if isinstance(question, ListRootsRequest) and self._roots is not None:
            return ListRootsResult(roots=list(self._roots))
        raise MethodNotFound(f"the server asked for {method}, which this client does not offer")


def _params_dict(params: Any) -> dict[str, Any]:
    if params is UNSET or params is None:
        return {}
    if isinstance(params, dict):
        return dict(params)
    return cast(dict[str, Any], msgspec.to_builtins(params))
