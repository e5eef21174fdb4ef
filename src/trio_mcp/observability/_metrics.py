"""Prometheus metrics of an MCP server: :class:`Metrics`.

One :class:`Metrics` holds its own ``prometheus_client.CollectorRegistry``
(never the process-wide one: several servers in one process do not collide)
and fills it from two places:

* a server middleware (:meth:`Metrics.middleware`, installed by
  :meth:`Metrics.instrument`) counting each request by method and outcome,
  timing it by method and tool, and counting the requests in flight. On the
  hot path it only adds to plain integers (no lock, no label lookup); the
  Prometheus families are built from them when ``/metrics`` is scraped;
* collectors run at scrape time, reading what the runtime counts anyway:
  each tracked session's peer (:meth:`Metrics.track`: queue depths and
  overload refusals, -32001), the network server's statistics (added with
  :meth:`Metrics.add_source`), and, for a gateway, each backing server
  (:meth:`Metrics.watch_servers`).

Label values are bounded: ``method`` is a known MCP method (others are
``other``); ``tool`` is the name of a tool that answered with a result (an
unknown tool's error answer is ``other``), the first ``max_tool_labels`` such
names, the rest ``other``; ``outcome`` is ``ok``, ``tool_error`` (a result
with ``isError``), ``error`` (a JSON-RPC error answer) or ``cancelled``.
``ping`` is answered by the peer itself and is not counted.

``prometheus_client`` is imported when a :class:`Metrics` is made, never by
importing this module.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import msgspec

from ..protocol import METHODS

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

    from ..actors._middleware import Next
    from ..actors._server import Context, ServerSession

__all__ = [
    "DEFAULT_BUCKETS",
    "OTHER",
    "BackingServer",
    "Metrics",
    "MetricsSettings",
    "MetricSource",
]

#: The label value of a method or tool not named on its own.
OTHER: Final = "other"
#: Upper bounds (seconds) of the request-latency histogram's buckets.
DEFAULT_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

#: A scrape-time source of metric families (see :meth:`Metrics.add_source`).
MetricSource = Callable[[], Iterable["Metric"]]


@attrs.frozen(kw_only=True)
class MetricsSettings:
    """The names and bounds of :class:`Metrics`."""

    #: Prefix of every metric name.
    namespace: str = "trio_mcp"
    #: Upper bounds (seconds) of the latency buckets, increasing.
    buckets: tuple[float, ...] = attrs.field(default=DEFAULT_BUCKETS, converter=tuple)
    #: Distinct tool names given a label of their own; later ones are ``other``.
    max_tool_labels: int = 256

    def __attrs_post_init__(self) -> None:
        if not self.buckets or list(self.buckets) != sorted(set(self.buckets)):
            raise ValueError("MetricsSettings.buckets must be distinct, increasing bounds")
        if self.max_tool_labels < 0:
            raise ValueError("MetricsSettings.max_tool_labels must not be negative")
        if not self.namespace.replace("_", "a").isalnum() or self.namespace[0].isdigit():
            raise ValueError(f"MetricsSettings.namespace {self.namespace!r} is not a metric name prefix")


class BackingServer(Protocol):
    """What :meth:`Metrics.watch_servers` reads of each backing server (a
    gateway's ``server_statistics()`` values)."""

    @property
    def connected(self) -> bool: ...
    @property
    def restarts(self) -> int: ...
    @property
    def reconnect_delay(self) -> float: ...
    @property
    def calls(self) -> int: ...
    @property
    def errors(self) -> int: ...


class _Named(msgspec.Struct):
    """The ``name`` of a ``tools/call``'s params; the rest is skipped unread."""

    name: str


_read_name: Final = msgspec.json.Decoder(_Named)


def _tool_name(params: Any) -> str | None:
    """The tool a ``tools/call`` names (params as the peer holds them: raw
    JSON, a Struct, or a dict), or None."""
    if type(params) is msgspec.Raw:
        try:
            return _read_name.decode(params).name
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
    name = params.get("name") if isinstance(params, dict) else getattr(params, "name", None)
    return name if isinstance(name, str) else None


class _Series:
    """The requests of one (method, tool, outcome): their count, and their
    latencies as counts per bucket and a sum."""

    __slots__ = ("buckets", "count", "total")

    def __init__(self, size: int) -> None:
        self.buckets = [0] * size
        self.total = 0.0
        self.count = 0


#: The families of a gateway's backing servers: (name suffix, counter?, help, value).
_BACKING_FAMILIES: Final[tuple[tuple[str, bool, str, Callable[[BackingServer], float]], ...]] = (
    ("up", False, "1 when the backing server is connected", lambda s: 1 if s.connected else 0),
    ("restarts", True, "Restarts scheduled for the backing server", lambda s: s.restarts),
    (
        "reconnect_delay_seconds",
        False,
        "Delay before the backing server's pending restart (0 when connected)",
        lambda s: 0.0 if s.connected else s.reconnect_delay,
    ),
    ("calls", True, "Calls forwarded to the backing server", lambda s: s.calls),
    (
        "call_errors",
        True,
        "Forwarded calls that failed: unavailable, timed out, or an error answer",
        lambda s: s.errors,
    ),
)


class Metrics:
    """Prometheus metrics of one server (see the module).

    ``registry``: where to register (a fresh ``CollectorRegistry`` by
    default); register your own metrics there too and they are served with
    these. Options are :class:`MetricsSettings` fields (or ``settings=``)."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        settings: MetricsSettings | None = None,
        **options: Any,
    ) -> None:
        from prometheus_client.registry import CollectorRegistry

        if settings is None:
            settings = MetricsSettings(**options)
        elif options:
            settings = attrs.evolve(settings, **options)
        self.settings = settings
        self._bounds = list(settings.buckets)
        self._prefix = f"{settings.namespace}_"
        #: Requests by (method, tool, outcome); tool is "" for methods other
        #: than tools/call. Summed by (method, outcome) and (method, tool) when scraped.
        self._series: dict[tuple[str, str, str], _Series] = {}
        self._tools: set[str] = set()
        self._max_tools = settings.max_tool_labels
        self.in_flight = 0
        self._sessions: set[ServerSession] = set()
        self._retired_overloaded = 0
        self._sources: list[MetricSource] = []
        self.registry: CollectorRegistry = CollectorRegistry() if registry is None else registry
        self.registry.register(self)

    # ------------------------------------------------------------- hot path

    async def middleware(self, ctx: Context, call_next: Next) -> Any:
        """The server middleware that counts and times each request."""
        request = ctx.request
        method = request.method
        if method not in METHODS:
            method = OTHER
        self.in_flight += 1
        outcome = "error"
        start = perf_counter()
        try:
            result = await call_next()
            outcome = "tool_error" if getattr(result, "is_error", None) is True else "ok"
            return result
        except BaseException as exc:
            if not isinstance(exc, Exception):
                outcome = "cancelled"
            raise
        finally:
            elapsed = perf_counter() - start
            self.in_flight -= 1
            tool = ""
            if method == "tools/call":
                tool = OTHER
                if outcome == "ok" or outcome == "tool_error":
                    name = _tool_name(request.params)
                    if name is not None:
                        if name in self._tools:
                            tool = name
                        elif len(self._tools) < self._max_tools:
                            self._tools.add(name)
                            tool = name
            key = (method, tool, outcome)
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = _Series(len(self._bounds) + 1)
            series.buckets[bisect_left(self._bounds, elapsed)] += 1
            series.total += elapsed
            series.count += 1

    def instrument(self, app: Any) -> Any:
        """Count the requests of ``app`` (a server app, or a factory of one):
        its middleware chain gets :meth:`middleware` first (outermost), for
        the sessions started from now on. Returns the app, or a factory that
        instruments each app it makes. A gateway app (one with
        ``server_statistics()``) is also watched (:meth:`watch_servers`).
        The middleware is the app's: every session of it counts here, whichever
        server hosts it (give each served app its own :class:`Metrics`)."""
        if hasattr(app, "request_handlers"):
            self._add_middleware(app)
            servers = getattr(app, "server_statistics", None)
            if callable(servers):
                self.watch_servers(servers)
            return app
        if callable(app):
            factory = app

            def instrumented() -> Any:
                # Each app made counts here; a per-session app is not watched as a gateway.
                return self._add_middleware(factory())

            return instrumented
        raise TypeError("instrument() takes a server app or a factory returning one")

    def _add_middleware(self, app: Any) -> Any:
        chain = tuple(getattr(app, "middleware", ()))
        if self.middleware not in chain:
            app.middleware = (self.middleware, *chain)
        return app

    # ------------------------------------------------------- scrape-time data

    def track(self, session: ServerSession) -> None:
        """Read ``session``'s peer at each scrape (queues, overload refusals)
        until :meth:`untrack`."""
        self._sessions.add(session)

    def untrack(self, session: ServerSession) -> None:
        """Stop reading ``session``; its refusals stay counted."""
        if session in self._sessions:
            self._sessions.discard(session)
            self._retired_overloaded += session.peer.statistics().requests_overloaded

    def add_source(self, source: MetricSource) -> None:
        """Have ``source()`` add metric families at each scrape (a network
        server's own statistics, read when asked)."""
        self._sources.append(source)

    def watch_servers(self, servers: Callable[[], Mapping[str, BackingServer]]) -> None:
        """Report each backing server of a gateway at each scrape:
        ``servers()`` maps each name to its :class:`BackingServer` figures."""
        self.add_source(lambda: self._backing(servers()))

    def name(self, suffix: str) -> str:
        """A metric's full name: the namespace, then ``suffix``."""
        return self._prefix + suffix

    # --------------------------------------------------------------- export

    def describe(self) -> list[Metric]:
        """Nothing: the families are known only at scrape time (no clash check)."""
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

        name = self.name
        requests = CounterMetricFamily(
            name("requests"), "MCP requests answered, by method and outcome", labels=["method", "outcome"]
        )
        counts: dict[tuple[str, str], int] = {}
        for (method, _, outcome), series in self._series.items():
            counts[method, outcome] = counts.get((method, outcome), 0) + series.count
        for labels, count in sorted(counts.items()):
            requests.add_metric(list(labels), count)
        yield requests
        yield self._histogram()
        yield GaugeMetricFamily(name("requests_in_flight"), "MCP requests being served", value=self.in_flight)
        queued_requests = queued_notifications = overloaded = 0
        for session in self._sessions:
            stats = session.peer.statistics()
            queued_requests += stats.requests_queued
            queued_notifications += stats.notifications_queued
            overloaded += stats.requests_overloaded
        queues = GaugeMetricFamily(
            name("queue_depth"), "Messages waiting in bounded queues, by queue", labels=["queue"]
        )
        queues.add_metric(["requests"], queued_requests)
        queues.add_metric(["notifications"], queued_notifications)
        rejections = CounterMetricFamily(
            name("overload_rejections"),
            "Requests refused because a bound was reached, by reason",
            labels=["reason"],
        )
        rejections.add_metric(["handler_queue"], overloaded + self._retired_overloaded)
        extra: list[Metric] = []
        for source in self._sources:
            for family in source():
                # A source's samples of these two families join the ones above.
                if family.name == queues.name:
                    queues.samples.extend(family.samples)
                elif family.name == rejections.name:
                    rejections.samples.extend(family.samples)
                else:
                    extra.append(family)
        yield queues
        yield rejections
        yield from extra

    def _histogram(self) -> Metric:
        from prometheus_client.metrics_core import HistogramMetricFamily

        family = HistogramMetricFamily(
            self.name("request_duration_seconds"),
            "Time to answer an MCP request, by method and tool (tool: tools/call only)",
            labels=["method", "tool"],
        )
        merged: dict[tuple[str, str], tuple[list[int], float]] = {}
        for (method, tool, _), series in self._series.items():
            counts, total = merged.get((method, tool), ([0] * len(series.buckets), 0.0))
            merged[method, tool] = (
                [a + b for a, b in zip(counts, series.buckets, strict=True)],
                total + series.total,
            )
        bounds = [*(repr(float(b)) for b in self._bounds), "+Inf"]
        for labels, (counts, total) in sorted(merged.items()):
            cumulative = list(itertools.accumulate(counts))
            family.add_metric(list(labels), list(zip(bounds, cumulative, strict=True)), total)
        return family

    def _backing(self, servers: Mapping[str, BackingServer]) -> Iterator[Metric]:
        from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

        ordered = sorted(servers.items())
        for suffix, counter, doc, read in _BACKING_FAMILIES:
            kind = CounterMetricFamily if counter else GaugeMetricFamily
            family = kind(self.name(f"gateway_server_{suffix}"), doc, labels=["server"])
            for server, stats in ordered:
                family.add_metric([server], read(stats))
            yield family

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """The registry in the text format ``accept`` asks for (Prometheus
        text by default, OpenMetrics when asked): ``(body, content type)``."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type
