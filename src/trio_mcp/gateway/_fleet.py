"""Opening a gateway and keeping its fleet in step with its configuration file.

::

    async with open_gateway("mcp.json", watch=1.0) as gateway:   # reloads on change
        await serve(gateway, ...)
        ...
        await gateway.fleet.reload()                              # or at once (SIGHUP)

A reload reads the file again and applies the difference: added servers
start, removed ones stop cleanly (stdin closed, then SIGTERM, then SIGKILL,
each bounded), changed ones restart, and a change of filters or timeout
only is applied in place; untouched servers keep their sessions and their
calls in flight. Clients get ``list_changed``. A file that fails to read or
validate changes nothing: the running fleet stays as it was and the reason
is logged and kept in :attr:`Fleet.last`.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from .._util import collapse_groups, describe
from ..actors._connection import ConnectionSettings
from ..actors._host import ConsentPolicy, Host
from ..protocol import McpError
from ._config import ConfigError, GatewayConfig, ServerEntry, StdioEntry, load_config, parse_config
from ._gateway import GATEWAY_SETTINGS, Gateway, GatewayStartError

__all__ = ["Fleet", "GatewaySource", "ReloadOutcome", "open_gateway"]

log = logging.getLogger("trio_mcp.gateway")

GatewaySource = GatewayConfig | Mapping[str, Any] | Iterable[ServerEntry] | str | os.PathLike[str]


@attrs.frozen
class ReloadOutcome:
    """What one reload did (``error`` set: it failed and changed nothing)."""

    attempt: int
    error: str | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()


def _entries(source: GatewaySource) -> tuple[tuple[ServerEntry, ...], str | None]:
    if isinstance(source, GatewayConfig):
        return source.servers, source.source
    if isinstance(source, (str, os.PathLike)):
        return load_config(source).servers, os.fspath(source)
    if isinstance(source, Mapping):
        return parse_config(dict(source)).servers, None
    entries = tuple(source)
    names = [e.name for e in entries]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"servers named more than once: {', '.join(dupes)}")
    return entries, None


def _same_process(old: ServerEntry, new: ServerEntry) -> bool:
    """Whether ``new`` differs from ``old`` only where no restart is needed."""
    return type(old) is type(new) and attrs.evolve(new, filters=old.filters, timeout=old.timeout) == old


class Fleet:
    """The gateway's servers, started, stopped and reloaded (see the module).

    ``load`` reads the configuration again (None: no reloads)."""

    def __init__(
        self,
        gateway: Gateway,
        nursery: trio.Nursery,
        *,
        stdio_options: Mapping[str, Any],
        remote_options: Mapping[str, Any],
        load: Callable[[], GatewayConfig] | None = None,
        path: str | None = None,
    ) -> None:
        self.gateway = gateway
        self.path = path
        self._nursery = nursery
        self._options = {"stdio": dict(stdio_options), "remote": dict(remote_options)}
        self._load = load
        self._lock = trio.Lock()
        self._attempts = 0
        self._attempted = trio.Event()
        self._wanted = trio.Event()
        #: The outcome of the last reload (None before the first).
        self.last: ReloadOutcome | None = None

    @property
    def host(self) -> Host:
        return self.gateway.host

    # ------------------------------------------------------ one server

    async def start(self, entry: ServerEntry) -> None:
        """Start ``entry``'s server; with the gateway's settings this returns
        at once and the server is retried until it comes up. With settings
        that give up, a start failure is recorded in ``gateway.failed``."""
        options = self._options["stdio" if isinstance(entry, StdioEntry) else "remote"]
        self.gateway.entries[entry.name] = entry
        try:
            # Its sessions observe as the gateway's do: a call's trace goes on to the server.
            conn = await self.host.add_server(
                entry.name, entry.transport_factory(**options), instrumentation=self.gateway.instrumentation
            )
        except McpError as exc:  # a start failure (ConnectionClosed): it never stops the others
            reason = describe(exc)
            self.gateway.entries.pop(entry.name, None)
            self.gateway.failed[entry.name] = reason
            log.warning("gateway: server %s could not be started and is left out: %s", entry.name, reason)
            return
        self._nursery.start_soon(self.gateway.watch, conn)

    async def stop(self, name: str) -> None:
        """Stop a server and wait until it is gone (bounded by its shutdown settings)."""
        self.gateway.entries.pop(name, None)
        self.gateway.failed.pop(name, None)
        if name in self.host.servers:
            await self.host.remove_server(name)

    async def settle(self, names: Iterable[str], timeout: float) -> None:
        """Wait (at most ``timeout`` s) for each server's first attempt; note the ones that failed."""
        with trio.move_on_after(timeout):
            async with trio.open_nursery() as waiting:
                for name in names:
                    conn = self.host.servers.get(name)
                    if conn is not None:
                        waiting.start_soon(conn.wait_settled)
        for name in names:
            conn = self.host.servers.get(name)
            if conn is not None and conn.state == "down":
                reason = conn.last_error or "start failed"
                self.gateway.failed[name] = reason
                log.warning("gateway: server %s could not start (retrying with backoff): %s", name, reason)

    # ------------------------------------------------------ reloads

    async def apply(self, config: GatewayConfig) -> ReloadOutcome:
        """Make the running fleet the one ``config`` describes."""
        async with self._lock:
            gateway = self.gateway
            old = dict(gateway.entries)
            new = {e.name: e for e in config.servers}
            removed = [n for n in old if n not in new]
            added = [n for n in new if n not in old]
            changed = [n for n in new if n in old and new[n] != old[n]]
            restarted = [n for n in changed if not _same_process(old[n], new[n])]
            updated = [n for n in changed if n not in restarted]
            async with trio.open_nursery() as stopping:
                for name in [*removed, *restarted]:
                    stopping.start_soon(self.stop, name)
            for name in updated:
                gateway.entries[name] = new[name]
            for name in [*added, *restarted]:
                await self.start(new[name])
            gateway.order = list(new)
            settings = self.host.settings
            if settings is not None and settings.retry_forever:
                await self.settle([*added, *restarted], settings.start_timeout)
            gateway.publish_changes()
            self._attempts += 1
            return ReloadOutcome(
                self._attempts, None, tuple(added), tuple(removed), tuple(restarted), tuple(updated)
            )

    async def reload(self) -> ReloadOutcome:
        """Read the configuration again and apply it; a failure changes nothing."""
        if self._load is None:
            raise RuntimeError("this gateway was not opened from a file: nothing to reload")
        try:
            config = self._load()
            if not config.servers:
                raise ConfigError("no servers to start (is every server disabled?)")
        except ConfigError as exc:
            self._attempts += 1
            outcome = ReloadOutcome(self._attempts, str(exc))
            log.error("gateway: reload failed, the running fleet is unchanged: %s", exc)
        else:
            for warning in config.warnings:
                log.warning("gateway: %s", warning)
            outcome = await self.apply(config)
            log.info(
                "gateway: reloaded: added %s, removed %s, restarted %s, updated %s",
                list(outcome.added),
                list(outcome.removed),
                list(outcome.restarted),
                list(outcome.updated),
            )
        self.last = outcome
        self._attempted.set()
        self._attempted = trio.Event()
        return outcome

    def request_reload(self) -> None:
        """Have :meth:`watch` reload now (what SIGHUP does)."""
        self._wanted.set()

    async def wait_reloads(self, count: int) -> ReloadOutcome:
        """Wait until ``count`` reloads were attempted in all; the last outcome."""
        while self._attempts < count or self.last is None:
            await self._attempted.wait()
        return self.last

    @property
    def reloads(self) -> int:
        """Reloads attempted so far."""
        return self._attempts

    async def watch(self, interval: float) -> None:
        """Reload when the file's content changes (checked every ``interval``
        s) or when :meth:`request_reload` is called."""
        if self.path is None:
            raise RuntimeError("this gateway was not opened from a file: nothing to watch")
        seen = _fingerprint(self.path)
        while True:
            with trio.move_on_after(interval):
                await self._wanted.wait()
            asked = self._wanted.is_set()
            self._wanted = trio.Event()
            now = _fingerprint(self.path)
            if asked or now != seen:
                seen = now
                await self.reload()


def _fingerprint(path: str) -> bytes | None:
    """A digest of the file's content (None when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return hashlib.blake2b(f.read(), digest_size=16).digest()
    except OSError:
        return None


@asynccontextmanager
async def open_gateway(
    config: GatewaySource,
    *,
    settings: ConnectionSettings | None = None,
    request_timeout: float = 300.0,
    stdio_options: Mapping[str, Any] | None = None,
    remote_options: Mapping[str, Any] | None = None,
    reload: Callable[[], GatewayConfig] | None = None,
    watch: float | None = None,
    **gateway_options: Any,
) -> AsyncIterator[Gateway]:
    """Start a Host with every configured server and yield the :class:`Gateway`.

    ``config``: a :class:`GatewayConfig`, the decoded JSON, a file path, or
    :class:`ServerEntry` objects. The servers start concurrently. With the
    gateway's settings (:data:`GATEWAY_SETTINGS`, ``retry_forever``) a server
    that cannot start is recorded in ``gateway.failed``, logged, and retried
    with backoff for as long as the gateway runs. With settings that give up,
    such a server is left out, and :class:`GatewayStartError` is raised when
    none starts. An empty configuration is a :class:`ConfigError`. Leaving
    the block stops every server (and its process).

    ``reload`` reads the configuration again for :meth:`Fleet.reload` (default:
    ``load_config`` of the file ``config`` came from, if any); ``watch``: check
    the file every ``watch`` seconds and reload it when it changed.
    ``stdio_options`` go to every :class:`StdioServerParameters`,
    ``remote_options`` to every network transport, ``gateway_options`` to
    :class:`Gateway`."""
    entries, path = _entries(config)
    if not entries:
        raise ConfigError("no servers to start (is every server disabled?)")
    if reload is None and path is not None:
        inherit = any(isinstance(e, StdioEntry) and e.inherit_env for e in entries)

        def reload() -> GatewayConfig:
            assert path is not None
            return load_config(path, inherit_env=inherit)

    names = [e.name for e in entries]
    chosen = settings or GATEWAY_SETTINGS
    # Forwarded calls skip the Host's consent hook: the gateway's own client decides consent.
    host = Host(settings=chosen, consent_policy=ConsentPolicy(trusted_servers=frozenset(names)))
    with collapse_groups():
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            gateway = Gateway(host, order=names, request_timeout=request_timeout, **gateway_options)
            fleet = Fleet(
                gateway,
                nursery,
                stdio_options=stdio_options or {},
                remote_options=remote_options or {},
                load=reload,
                path=path,
            )
            gateway.fleet = fleet
            async with trio.open_nursery() as starting:
                for entry in entries:
                    starting.start_soon(fleet.start, entry)
            if chosen.retry_forever:
                await fleet.settle(names, chosen.start_timeout)
            elif not host.servers:
                raise GatewayStartError(gateway.failed)
            gateway.publish_changes()
            if watch is not None:
                nursery.start_soon(fleet.watch, watch)
            try:
                yield gateway
            finally:
                nursery.cancel_scope.cancel()
