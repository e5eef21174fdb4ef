"""The JSON-RPC peer actor over the in-memory transport (both modes).

Deterministic: ordering comes from events and
``trio.testing.wait_all_tasks_blocked``, time from ``autojump_clock``, and
every test body runs under ``trio.fail_after``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import msgspec
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from trio_mcp.actors import ExitReason, InboundRequest, Peer, PeerLimits
from trio_mcp.protocol import (
    ConnectionClosed,
    ErrorResponse,
    InternalError,
    InvalidMessage,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    Request,
    ResourceNotFound,
    Response,
    ServerOverloaded,
    UrlElicitationRequired,
    encode,
    raw_or_none,
)
from trio_mcp.transports import TransportClosed, TransportError, memory_pair

MODES = ["zero-copy", "bytes"]
TIMEOUT = 5  # seconds; a hang guard, never reached by a passing test


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


# --------------------------------------------------------------------- helpers

Handler = Callable[[InboundRequest], Awaitable[Any]]


class App:
    """A dispatcher made of plain async functions; records what it sees."""

    def __init__(self, handlers: dict[str, Handler] | None = None) -> None:
        self.handlers = handlers or {}
        self.calls: list[str] = []
        self.notifications: list[tuple[str, Any]] = []
        self.inline: dict[str, Callable[[Any], None]] = {}
        self.on_notification: Callable[[str, Any], Awaitable[None]] | None = None

    async def handle_request(self, request: InboundRequest) -> Any:
        self.calls.append(request.method)
        handler = self.handlers.get(request.method)
        if handler is None:
            raise MethodNotFound(f"no handler for {request.method}")
        return await handler(request)

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notifications.append((method, raw_or_none(params)))
        if self.on_notification is not None:
            await self.on_notification(method, params)

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        handler = self.inline.get(method)
        if handler is None:
            return False
        handler(params)
        return True


def plain(frame: Any) -> Any:
    """A frame as JSON builtins, whatever the mode."""
    if isinstance(frame, list):
        return [plain(f) for f in frame]
    if isinstance(frame, InvalidMessage):
        return {"invalid": frame.error.code, "id": frame.id}
    return json.loads(encode(frame))


class Tap:
    """Wraps a stream and records every frame sent and received."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[Any] = []
        self.received: list[Any] = []
        self.before_receive: Callable[[], None] | None = None
        self.on_receive: Callable[[Any], None] | None = None

    async def send(self, message: Any) -> None:
        await self.inner.send(message)
        self.sent.append(plain(message))

    async def receive(self) -> Any:
        if self.before_receive is not None:
            self.before_receive()
        frame = await self.inner.receive()
        self.received.append(plain(frame))
        if self.on_receive is not None:
            self.on_receive(frame)
        return frame

    async def aclose(self) -> None:
        await self.inner.aclose()


def answers_to(frames: list[Any], ident: Any) -> list[Any]:
    return [f for f in frames if "method" not in f and f.get("id") == ident]


def cancels(frames: list[Any]) -> list[Any]:
    return [f["params"]["requestId"] for f in frames if f.get("method") == "notifications/cancelled"]


@attrs.define
class Running:
    """A peer's ``run`` in a task, with how it ended."""

    peer: Peer
    result: ExitReason | None = None
    error: BaseException | None = None
    finished_at: float | None = None
    done: trio.Event = attrs.field(factory=trio.Event)


async def start(nursery: trio.Nursery, peer: Peer) -> Running:
    running = Running(peer)

    async def runner(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            running.result = await peer.run(task_status=task_status)
        except trio.Cancelled:
            raise
        except BaseException as exc:  # recorded for the test to check
            running.error = exc
        finally:
            running.finished_at = trio.current_time()
            running.done.set()

    await nursery.start(runner)
    return running


@attrs.define
class Session:
    client: Peer
    server: Peer
    ctap: Tap
    stap: Tap
    crun: Running
    srun: Running
    nursery: trio.Nursery


@asynccontextmanager
async def session(
    mode: str,
    server_app: Any = None,
    *,
    client_app: Any = None,
    server_limits: PeerLimits | None = None,
    client_limits: PeerLimits | None = None,
    buffer: int = 64,
) -> AsyncIterator[Session]:
    a, b = memory_pair(mode=mode, buffer=buffer)  # type: ignore[arg-type]
    ctap, stap = Tap(a), Tap(b)
    client = Peer(ctap, client_app, limits=client_limits, name="client")
    server = Peer(stap, server_app, limits=server_limits, name="server")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            crun = await start(nursery, client)
            srun = await start(nursery, server)
            yield Session(client, server, ctap, stap, crun, srun, nursery)
            nursery.cancel_scope.cancel()


async def echo(request: InboundRequest) -> Any:
    return {"params": raw_or_none(request.params), "id": request.id}


class Point(msgspec.Struct):
    x: int
    y: int = 0


# ------------------------------------------------------------ request/response


async def test_request_response(mode: str) -> None:
    app = App({"echo": echo, "point": lambda r: _value(Point(1, 2))})
    async with session(mode, app) as s:
        result = await s.client.request("echo", {"a": [1, "x", None], "b": {"c": 1.5}})
        assert raw_or_none(result) == {"params": {"a": [1, "x", None], "b": {"c": 1.5}}, "id": 1}
        assert await s.client.request("echo", result_type=dict[str, Any]) == {"params": None, "id": 2}
        assert await s.client.request("point", result_type=Point) == Point(1, 2)
        # The other direction works too: the server is a full peer.
        client_app = App({"echo": echo})
        s.client.dispatcher = client_app
        assert raw_or_none(await s.server.request("echo", {"z": 1})) == {"params": {"z": 1}, "id": 1}
        stats = s.server.statistics()
        assert (stats.requests_served, stats.pending_calls, stats.handlers_running) == (3, 0, 0)
        assert s.client.statistics().pending_calls == 0
        assert app.calls == ["echo", "echo", "point"]


async def _value(value: Any) -> Any:
    return value


async def test_malformed_result_for_result_type(mode: str) -> None:
    app = App({"point": lambda r: _value({"x": "not an int"})})
    async with session(mode, app) as s:
        with pytest.raises(InternalError, match="malformed result for point"):
            await s.client.request("point", result_type=Point)


@pytest.mark.parametrize(
    "error",
    [
        InvalidParams("bad argument", data={"field": "x", "why": [1, 2]}),
        ResourceNotFound("no such resource", data={"uri": "file:///x"}),
        UrlElicitationRequired("open this", data={"elicitations": []}),
        InvalidRequest(),
        McpError("custom", code=-31000, data="text"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_error_answers_become_typed_errors(mode: str, error: McpError) -> None:
    async def fail(request: InboundRequest) -> Any:
        raise error

    async with session(mode, App({"fail": fail})) as s:
        with pytest.raises(McpError) as caught:
            await s.client.request("fail")
        got = caught.value
        assert type(got) is type(error)
        assert (got.code, got.message, got.data) == (error.code, error.message, error.data)
        assert s.server.statistics().requests_served == 1


async def test_method_not_found(mode: str) -> None:
    async with session(mode, App({"echo": echo})) as s:
        with pytest.raises(MethodNotFound, match="no handler for tools/nope"):
            await s.client.request("tools/nope", {"a": 1})
        # A peer without a dispatcher answers every request (but ping) so.
        with pytest.raises(MethodNotFound, match="Method not found: anything"):
            await s.server.request("anything")
        await s.server.ping()


async def test_handler_exceptions_become_internal_errors(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    async def boom(request: InboundRequest) -> Any:
        raise ValueError("boom: the disk is full")

    async def group(request: InboundRequest) -> Any:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_raise, KeyError("missing-key"))

    async def bare(request: InboundRequest) -> Any:
        raise RuntimeError

    app = App({"boom": boom, "group": group, "bare": bare, "echo": echo})
    async with session(mode, app) as s:
        with pytest.raises(InternalError) as caught:
            await s.client.request("boom")
        assert caught.value.code == -32603
        assert caught.value.message == "ValueError: boom: the disk is full"
        # A single-exception group is collapsed to its exception.
        with pytest.raises(InternalError, match=r"^\[-32603\] KeyError: 'missing-key'$"):
            await s.client.request("group")
        with pytest.raises(InternalError, match=r"^\[-32603\] RuntimeError$"):
            await s.client.request("bare")
        # The session keeps serving.
        assert raw_or_none(await s.client.request("echo", {"k": 1}))["params"] == {"k": 1}
        assert not s.server.closed and not s.srun.done.is_set()
    assert any("handler for boom failed" in r.getMessage() for r in caplog.records)


async def _raise(exc: BaseException) -> None:
    raise exc


async def test_unencodable_result_becomes_internal_error() -> None:
    # Only bytes mode encodes; one handler's bad result must not end the session.
    app = App({"bad": lambda r: _value({"x": object()}), "echo": echo})
    async with session("bytes", app) as s:
        with pytest.raises(InternalError, match="could not encode the answer to bad"):
            await s.client.request("bad")
        assert raw_or_none(await s.client.request("echo"))["id"] == 2
        assert not s.srun.done.is_set()


async def test_ping_both_ways(mode: str) -> None:
    async def never(request: InboundRequest) -> Any:
        raise AssertionError("ping never reaches the dispatcher")

    app = App({"ping": never})
    async with session(mode, app, client_app=App({"ping": never})) as s:
        assert await s.client.ping() is None
        assert await s.server.ping() is None
        assert raw_or_none(await s.client.request("ping")) == {}
        assert app.calls == []
        assert s.server.statistics().requests_served == 2


# ---------------------------------------------------------------- notifications


async def test_notifications_arrive_in_order(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    app = App()
    done = trio.Event()

    async def slow_consumer(method: str, params: Any) -> None:
        await trio.lowlevel.checkpoint()  # let the read loop run ahead
        if raw_or_none(params)["i"] == 3:
            raise RuntimeError("a failing notification handler")
        if len(app.notifications) == 50:
            done.set()

    app.on_notification = slow_consumer
    async with session(mode, app) as s:
        for i in range(50):
            await s.client.notify("notifications/message", {"i": i})
        await done.wait()
        assert app.notifications == [("notifications/message", {"i": i}) for i in range(50)]
        assert s.server.statistics().notifications_dropped == 0
        assert not any("id" in f for f in s.ctap.sent)  # notifications carry no id
        assert s.server.statistics().requests_served == 0 and s.stap.sent == []  # never answered
    assert any(
        "notification handler for notifications/message failed" in r.getMessage() for r in caplog.records
    )


async def test_notification_queue_is_bounded(mode: str) -> None:
    app = App()
    release = trio.Event()

    async def blocked(method: str, params: Any) -> None:
        await release.wait()

    app.on_notification = blocked
    limits = PeerLimits(max_queued_notifications=2)
    async with session(mode, app, server_limits=limits) as s:
        await s.client.notify("n", {"i": 0})
        await wait_all_tasks_blocked()  # the worker holds #0
        for i in range(1, 5):
            await s.client.notify("n", {"i": i})
        await wait_all_tasks_blocked()
        stats = s.server.statistics()
        assert (stats.notifications_queued, stats.notifications_dropped) == (2, 2)
        release.set()
        await s.client.ping()
        await wait_all_tasks_blocked()
        assert [p["i"] for _, p in app.notifications] == [0, 1, 2]


async def test_handle_notification_inline_precedes_later_requests(mode: str) -> None:
    state = {"initialized": False}
    app = App()

    async def check(request: InboundRequest) -> Any:
        return {"initialized": state["initialized"]}

    app.handlers["check"] = check
    app.inline["notifications/initialized"] = lambda params: state.update(initialized=True)

    async def slow_consumer(method: str, params: Any) -> None:
        await trio.sleep_forever()  # queued notifications would be handled too late

    app.on_notification = slow_consumer
    async with session(mode, app) as s:
        await s.client.notify("notifications/other")
        await wait_all_tasks_blocked()
        await s.client.notify("notifications/initialized")
        result = await s.client.request("check", result_type=dict[str, bool])
        assert result == {"initialized": True}
        assert app.notifications == [("notifications/other", None)]  # the inline one never queued


# --------------------------------------------------------------------- progress


async def test_progress_reaches_the_callback(mode: str) -> None:
    seen_meta: list[Any] = []

    async def work(request: InboundRequest) -> Any:
        seen_meta.append((request.progress_token, request.meta, raw_or_none(request.params)))
        await request.report_progress(0)
        for i in range(1, 6):
            await request.report_progress(i, total=5, message=f"step {i}")
        return {"done": True}

    client_app = App()
    async with session(mode, App({"work": work}), client_app=client_app) as s:
        reports: list[tuple[Any, ...]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await trio.lowlevel.checkpoint()  # a callback that yields must not lose reports
            reports.append((progress, total, message))

        result = await s.client.request(
            "work", {"arg": 1, "_meta": {"k": "v"}}, on_progress=on_progress, result_type=dict[str, bool]
        )
        assert result == {"done": True}
        assert reports == [(0, None, None)] + [(i, 5, f"step {i}") for i in range(1, 6)]
        token, meta, params = seen_meta[0]
        assert token == 1 and meta == {"k": "v", "progressToken": 1}
        assert params == {"arg": 1, "_meta": {"k": "v", "progressToken": 1}}
        # Several calls at once each get their own reports.
        many: dict[int, list[Any]] = {i: [] for i in range(4)}
        async with trio.open_nursery() as nursery:
            for i in range(4):

                async def one(i: int = i) -> None:
                    async def cb(p: float, t: float | None, m: str | None) -> None:
                        many[i].append(p)

                    await s.client.request("work", on_progress=cb)

                nursery.start_soon(one)
        assert all(reports == [0, 1, 2, 3, 4, 5] for reports in many.values())
        assert client_app.notifications == []  # all routed to the callbacks
        assert s.client.statistics().notifications_dropped == 0


async def test_progress_without_a_token_or_callback(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    async def work(request: InboundRequest) -> Any:
        assert request.progress_token is None
        await request.report_progress(1, 2)  # nobody asked: nothing is sent
        return {}

    async def late(request: InboundRequest) -> Any:
        await request.report_progress(1)
        return {}

    client_app = App()
    async with session(mode, App({"work": work, "late": late}), client_app=client_app) as s:
        await s.client.request("work")
        assert not [f for f in s.stap.sent if f.get("method") == "notifications/progress"]

        async def broken(p: float, t: float | None, m: str | None) -> None:
            raise RuntimeError("callback bug")

        await s.client.request("late", on_progress=broken)  # a failing callback is logged only
        # Progress for a call that is over goes to the dispatcher.
        await s.server.notify("notifications/progress", {"progressToken": 2, "progress": 3})
        await s.client.ping()
        await wait_all_tasks_blocked()
        assert client_app.notifications == [("notifications/progress", {"progressToken": 2, "progress": 3})]
    assert any("progress callback failed" in r.getMessage() for r in caplog.records)


# ----------------------------------------------------------------- cancellation


@pytest.mark.parametrize("mode", MODES)
async def test_cancelled_before_sent_sends_nothing(mode: str, autojump_clock: Any) -> None:
    a, raw = memory_pair(mode=mode, buffer=1)  # type: ignore[arg-type]
    client = Peer(a, name="client")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(client.run)
            first = trio.CancelScope()

            async def call(scope: trio.CancelScope, method: str) -> None:
                with scope:
                    await client.request(method)

            nursery.start_soon(call, first, "first")
            await wait_all_tasks_blocked()  # "first" fills the one-slot buffer
            second = trio.CancelScope()
            nursery.start_soon(call, second, "second")
            await wait_all_tasks_blocked()  # "second" is stuck in send
            assert client.statistics().pending_calls == 2
            second.cancel()
            await wait_all_tasks_blocked()
            assert client.statistics().pending_calls == 1
            assert a.statistics()["buffered"] == 1
            assert plain(await raw.receive()) == {"jsonrpc": "2.0", "id": 1, "method": "first"}
            with trio.move_on_after(1) as quiet:  # virtual time: nothing else comes
                frame = await raw.receive()
            assert quiet.cancelled_caught, f"unexpected {plain(frame)}"
            # Contrast: a call cancelled after it was sent tells the other side.
            first.cancel()
            cancel = plain(await raw.receive())
            assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == 1
            nursery.cancel_scope.cancel()


async def test_caller_cancel_cancels_the_running_handler(mode: str) -> None:
    started, handler_cancelled = trio.Event(), trio.Event()

    async def slow(request: InboundRequest) -> Any:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            handler_cancelled.set()
            raise

    async with session(mode, App({"echo": echo, "slow": slow})) as s:
        await s.client.request("echo")  # id 1
        with trio.CancelScope() as scope:
            s.nursery.start_soon(_cancel_when, started, scope)
            await s.client.request("slow")  # id 2
        assert scope.cancelled_caught
        await handler_cancelled.wait()
        await wait_all_tasks_blocked()
        assert cancels(s.stap.received) == [2]
        assert s.client.statistics().pending_calls == 0
        stats = s.server.statistics()
        assert (stats.requests_cancelled_by_peer, stats.handlers_running) == (1, 0)
        await s.client.ping()
        assert answers_to(s.stap.sent, 2) == []  # a cancelled request is never answered
        assert s.client.statistics().unmatched_responses == 0


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    await wait_all_tasks_blocked()
    scope.cancel()


async def test_cancelled_handler_whose_cleanup_fails(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    # The handler's nursery raises Cancelled together with the cleanup's
    # error: the error is logged, the request stays unanswered, the session lives.
    started = trio.Event()

    async def fragile(request: InboundRequest) -> Any:
        async def child() -> None:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                raise RuntimeError("cleanup failed") from None

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
            started.set()
            await trio.sleep_forever()

    async with session(mode, App({"fragile": fragile, "echo": echo})) as s:
        with trio.CancelScope() as scope:
            s.nursery.start_soon(_cancel_when, started, scope)
            await s.client.request("fragile")
        await wait_all_tasks_blocked()
        assert not s.server.closed and not s.srun.done.is_set()
        assert raw_or_none(await s.client.request("echo"))["id"] == 2
        assert answers_to(s.stap.sent, 1) == []
        assert s.server.statistics().handlers_running == 0
    assert any("handler for fragile failed while cancelled" in r.getMessage() for r in caplog.records)


async def test_uncancellable_call_is_not_cancelled_remotely(mode: str) -> None:
    started, release = trio.Event(), trio.Event()

    async def slow(request: InboundRequest) -> Any:
        started.set()
        await release.wait()
        return {"finished": True}

    async with session(mode, App({"slow": slow})) as s:
        with trio.CancelScope() as scope:
            s.nursery.start_soon(_cancel_when, started, scope)
            await s.client.request("slow", cancellable=False)
        release.set()
        await s.client.ping()
        assert cancels(s.stap.received) == []
        assert answers_to(s.stap.sent, 1) == [{"jsonrpc": "2.0", "id": 1, "result": {"finished": True}}]
        assert s.client.statistics().unmatched_responses == 1  # answered after the caller left


@pytest.mark.parametrize("order", ["answer-then-cancel", "cancel-then-answer"])
async def test_answer_that_beats_the_cancel(mode: str, order: str) -> None:
    release = trio.Event()

    async def slow(request: InboundRequest) -> Any:
        await release.wait()
        return {"v": 42}

    async with session(mode, App({"slow": slow})) as s:
        scope = trio.CancelScope()
        delivered = False

        def on_receive(frame: Any) -> None:
            nonlocal delivered
            if type(frame) is Response and frame.id == 1:
                delivered = True
                if order == "cancel-then-answer":
                    scope.cancel()  # the caller is woken by the cancel; the answer is already here

        def before_receive() -> None:
            if delivered and order == "answer-then-cancel" and not scope.cancel_called:
                scope.cancel()  # the answer was delivered; the caller has not run yet

        s.ctap.on_receive, s.ctap.before_receive = on_receive, before_receive
        got: list[Any] = []
        with scope:
            s.nursery.start_soon(_set_when_blocked, release)
            got.append(await s.client.request("slow", result_type=dict[str, int]))
            await trio.lowlevel.checkpoint()
        assert scope.cancelled_caught
        assert got == ([{"v": 42}] if order == "answer-then-cancel" else [])
        await s.client.ping()
        assert cancels(s.stap.received) == []  # nothing to cancel: it was answered
        stats = s.client.statistics()
        assert (stats.unmatched_responses, stats.pending_calls) == (0, 0)
        assert not s.client.closed


async def _set_when_blocked(event: trio.Event) -> None:
    await wait_all_tasks_blocked()
    event.set()


async def test_peer_cancel_of_a_queued_request(mode: str) -> None:
    release = trio.Event()
    ran: list[str] = []

    async def block(request: InboundRequest) -> Any:
        await release.wait()
        return {"blocked": True}

    async def victim(request: InboundRequest) -> Any:
        ran.append("victim")
        return {}

    app = App({"block": block, "victim": victim})
    async with session(mode, app, server_limits=PeerLimits(max_concurrent_handlers=1)) as s:
        async with trio.open_nursery() as calls:
            calls.start_soon(s.client.request, "block")  # id 1 takes the only worker
            await wait_all_tasks_blocked()
            scope = trio.CancelScope()

            async def cancelled_call() -> None:
                with scope:
                    await s.client.request("victim")  # id 2 waits in the queue

            calls.start_soon(cancelled_call)
            await wait_all_tasks_blocked()
            assert s.server.statistics().requests_queued == 1
            scope.cancel()
            await wait_all_tasks_blocked()
            assert cancels(s.stap.received) == [2]
            assert s.server.statistics().requests_cancelled_by_peer == 1
            release.set()
        await s.client.ping()
        await wait_all_tasks_blocked()
        assert ran == [] and app.calls == ["block"]
        assert answers_to(s.stap.sent, 2) == []
        assert len(answers_to(s.stap.sent, 1)) == 1
        stats = s.server.statistics()
        assert (stats.requests_served, stats.requests_queued, stats.handlers_running) == (2, 0, 0)
        assert s.client.statistics().unmatched_responses == 0


async def test_initialize_is_never_cancelled(mode: str) -> None:
    started, release = trio.Event(), trio.Event()
    cancelled: list[Any] = []

    async def initialize(request: InboundRequest) -> Any:
        started.set()
        try:
            await release.wait()
        except trio.Cancelled:
            cancelled.append(request.id)
            raise
        return {"protocolVersion": "2025-06-18"}

    async with session(mode, App({"initialize": initialize})) as s:
        # The server ignores a cancel for initialize...
        async with trio.open_nursery() as calls:
            result: list[Any] = []
            calls.start_soon(lambda: _append(result, s.client.request("initialize", {"capabilities": {}})))
            await started.wait()
            await s.client.notify("notifications/cancelled", {"requestId": 1, "reason": "changed my mind"})
            await wait_all_tasks_blocked()
            assert cancelled == [] and s.server.statistics().requests_cancelled_by_peer == 0
            release.set()
        assert raw_or_none(result[0]) == {"protocolVersion": "2025-06-18"}
        # ...and the client never sends one: its caller just stops waiting.
        started, release = trio.Event(), trio.Event()
        with trio.CancelScope() as scope:
            s.nursery.start_soon(_cancel_when, started, scope)
            await s.client.request("initialize", {"capabilities": {}})  # id 2
        assert scope.cancelled_caught
        release.set()
        await s.client.ping()
        assert cancels(s.stap.received) == [1]  # only the hand-made one
        assert len(answers_to(s.stap.sent, 2)) == 1 and cancelled == []
        assert s.client.statistics().unmatched_responses == 1


async def _append(into: list[Any], awaitable: Awaitable[Any]) -> None:
    into.append(await awaitable)


@pytest.mark.parametrize(
    "params",
    [
        {"requestId": 999},
        {"requestId": "1"},  # a string id is not the integer id 1
        {"requestId": True},  # nor is true
        {"requestId": 1.5},
        {"requestId": None},
        {"requestId": [1]},  # unhashable
        {"requestId": {"id": 1}},  # unhashable
        {"reason": "no id"},
        {},
        None,
    ],
    ids=repr,
)
async def test_cancel_for_an_unknown_id_is_ignored(mode: str, params: Any) -> None:
    started, release = trio.Event(), trio.Event()

    async def block(request: InboundRequest) -> Any:
        started.set()
        await release.wait()
        return {"id": request.id}

    async with session(mode, App({"block": block})) as s:
        async with trio.open_nursery() as calls:
            result: list[Any] = []
            calls.start_soon(lambda: _append(result, s.client.request("block", result_type=dict[str, int])))
            await started.wait()
            if params is None:
                await s.client.notify("notifications/cancelled")
            else:
                await s.client.notify("notifications/cancelled", params)
            await wait_all_tasks_blocked()
            stats = s.server.statistics()
            assert (stats.requests_cancelled_by_peer, stats.handlers_running) == (0, 1)
            release.set()
        assert result == [{"id": 1}]
        await s.client.ping()
        assert not s.server.closed and not s.srun.done.is_set()


# --------------------------------------------------------------------- overload


async def test_overload_answers_at_once(mode: str) -> None:
    release = trio.Event()

    async def block(request: InboundRequest) -> Any:
        await release.wait()
        return {"n": raw_or_none(request.params)["n"]}

    limits = PeerLimits(max_concurrent_handlers=2, max_queued_requests=3)
    async with session(mode, App({"block": block}), server_limits=limits) as s:
        results: dict[int, Any] = {}

        async def call(n: int) -> None:
            try:
                results[n] = await s.client.request("block", {"n": n}, result_type=dict[str, int])
            except McpError as exc:
                results[n] = exc

        async with trio.open_nursery() as calls:
            for n in range(1, 7):
                calls.start_soon(call, n)
                await wait_all_tasks_blocked()
            assert list(results) == [6]
            assert type(results[6]) is ServerOverloaded and results[6].code == -32001
            stats = s.server.statistics()
            assert (stats.handlers_running, stats.workers, stats.requests_queued) == (2, 2, 3)
            assert (stats.requests_overloaded, stats.requests_served) == (1, 0)
            release.set()
        assert results == {**{n: {"n": n} for n in range(1, 6)}, 6: results[6]}
        stats = s.server.statistics()
        assert (stats.handlers_running, stats.requests_queued, stats.requests_served) == (0, 0, 5)
        # Capacity is back.
        assert await s.client.request("block", {"n": 7}, result_type=dict[str, int]) == {"n": 7}


@pytest.mark.parametrize(("size", "refused"), [(5, 0), (6, 1), (8, 3)])
async def test_overload_counts_a_burst_exactly(size: int, refused: int) -> None:
    # All requests of a batch arrive before any worker has started.
    release = trio.Event()

    async def block(request: InboundRequest) -> Any:
        await release.wait()
        return {}

    a, b = memory_pair(mode="bytes")
    server = Peer(
        b, App({"block": block}), limits=PeerLimits(max_concurrent_handlers=2, max_queued_requests=3)
    )
    server.batch_arrays = True
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            batch = [{"jsonrpc": "2.0", "id": i, "method": "block"} for i in range(1, size + 1)]
            await a.send_raw(json.dumps(batch).encode())
            await wait_all_tasks_blocked()
            stats = server.statistics()
            assert (stats.requests_overloaded, stats.handlers_running) == (refused, 2)
            release.set()
            # One array answers the whole batch, refusals included.
            frame = await a.receive()
            assert type(frame) is list and len(frame) == size
            answers = {m.id: m.error.code if type(m) is ErrorResponse else "ok" for m in frame}
            assert answers == {i: "ok" if i <= 5 else -32001 for i in range(1, size + 1)}
            nursery.cancel_scope.cancel()


# ---------------------------------------------------------------- duplicate ids


async def test_duplicate_inflight_id_is_an_invalid_request(mode: str) -> None:
    release = trio.Event()

    async def block(request: InboundRequest) -> Any:
        await release.wait()
        return {"params": raw_or_none(request.params)}

    a, b = memory_pair(mode=mode)  # type: ignore[arg-type]
    server = Peer(b, App({"block": block}))
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            await a.send(Request(id=1, method="block", params={"n": 1}))
            await a.send(Request(id="1", method="block", params={"n": 2}))  # another id
            await wait_all_tasks_blocked()
            await a.send(Request(id=1, method="block", params={"n": 3}))
            dup = plain(await a.receive())
            assert dup["id"] == 1 and dup["error"]["code"] == -32600
            assert "Duplicate request id" in dup["error"]["message"]
            release.set()
            got = {repr(f["id"]): f for f in [plain(await a.receive()) for _ in range(2)]}
            assert got == {
                "1": {"jsonrpc": "2.0", "id": 1, "result": {"params": {"n": 1}}},
                "'1'": {"jsonrpc": "2.0", "id": "1", "result": {"params": {"n": 2}}},
            }
            # Once answered, an id may be used again.
            await a.send(Request(id=1, method="ping"))
            assert plain(await a.receive()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
            assert server.statistics().requests_served == 3
            nursery.cancel_scope.cancel()


# -------------------------------------------------------------- transport death


class ScriptedStream:
    """A stream the test drives: it pushes frames or exceptions for ``receive``;
    ``send`` records. Its ``aclose`` does not wake ``receive`` (allowed by the
    transport contract) and may hang (``hang_on_close``)."""

    def __init__(self, *, hang_on_close: bool = False) -> None:
        self.push, self._inbox = trio.open_memory_channel[Any](16)
        self.sent: list[Any] = []
        self.closed = 0
        self.hang_on_close = hang_on_close

    async def send(self, message: Any) -> None:
        await trio.lowlevel.checkpoint()
        if self.closed:
            raise TransportClosed()
        self.sent.append(message)

    async def receive(self) -> Any:
        item = await self._inbox.receive()
        if isinstance(item, BaseException):
            raise item
        return item

    async def aclose(self) -> None:
        self.closed += 1
        if self.hang_on_close:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()


async def _fail_all_pending(peer: Peer, n: int, nursery: trio.Nursery) -> list[Any]:
    errors: list[Any] = []

    async def call(i: int) -> None:
        try:
            await peer.request("slow", {"i": i})
        except McpError as exc:
            errors.append(exc)

    for i in range(n):
        nursery.start_soon(call, i)
    await wait_all_tasks_blocked()
    assert peer.statistics().pending_calls == n and errors == []
    return errors


async def test_other_side_closing_fails_pending_calls(mode: str) -> None:
    async def slow(request: InboundRequest) -> Any:
        await trio.sleep_forever()

    async with session(mode, App({"slow": slow})) as s:
        async with trio.open_nursery() as calls:
            errors = await _fail_all_pending(s.client, 3, calls)
            await s.server.aclose()
            await wait_all_tasks_blocked()
            assert len(errors) == 3  # at once, no timeout involved
        assert all(type(e) is ConnectionClosed and e.code == -32000 for e in errors)
        assert "the other side closed the connection" in errors[0].message
        await s.crun.done.wait()
        await s.srun.done.wait()
        assert s.crun.result == ExitReason("eof", "the other side closed the connection")
        assert s.srun.result == ExitReason("closed", "closed locally")
        assert s.client.closed and s.server.closed
        # Later calls fail at once.
        with pytest.raises(ConnectionClosed):
            await s.client.request("slow")
        with pytest.raises(ConnectionClosed):
            await s.client.notify("n")
        with pytest.raises(ConnectionClosed):
            await s.server.ping()
        assert s.client.statistics().pending_calls == 0


async def test_local_aclose_fails_pending_calls(mode: str) -> None:
    # the handler returns the coroutine and the peer awaits it
    never = App({"slow": lambda r: trio.sleep_forever()})  # noqa: ASYNC105
    async with session(mode, never) as s:
        async with trio.open_nursery() as calls:
            errors = await _fail_all_pending(s.client, 2, calls)
            await s.client.aclose()
            await wait_all_tasks_blocked()
            assert len(errors) == 2
        assert all(type(e) is ConnectionClosed and "closed locally" in e.message for e in errors)
        await s.crun.done.wait()
        assert s.crun.result == ExitReason("closed", "closed locally")
        await s.client.aclose()  # idempotent
        with pytest.raises(ConnectionClosed):
            await s.client.request("x")


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (TransportError("wire cut"), "wire cut"),
        (trio.BrokenResourceError(), "stream closed under the reader"),
        (trio.ClosedResourceError(), "stream closed under the reader"),
    ],
    ids=["TransportError", "BrokenResourceError", "ClosedResourceError"],
)
async def test_broken_transport(failure: BaseException, reason: str) -> None:
    stream = ScriptedStream()
    peer = Peer(stream, name="client")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            running = await start(nursery, peer)
            async with trio.open_nursery() as calls:
                errors = await _fail_all_pending(peer, 3, calls)
                await stream.push.send(failure)
                await wait_all_tasks_blocked()
                assert len(errors) == 3
            await running.done.wait()
    assert all(type(e) is ConnectionClosed and reason in e.message for e in errors)
    assert type(running.error) is TransportError  # not wrapped in an ExceptionGroup
    assert reason in str(running.error)
    assert running.result is None
    with pytest.raises(ConnectionClosed, match=reason):
        await peer.request("x")


async def test_clean_eof_returns_an_exit_reason() -> None:
    stream = ScriptedStream()
    peer = Peer(stream)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            running = await start(nursery, peer)
            await stream.push.send(Request(id=1, method="ping"))
            await stream.push.aclose()
            await running.done.wait()
    assert running.result == ExitReason("eof", "the other side closed the connection")
    assert running.error is None
    assert [plain(m) for m in stream.sent] == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    await peer.wait_stopped()
    with pytest.raises(RuntimeError, match="runs once"):
        await peer.run()


async def test_aclose_is_idempotent_and_bounded(autojump_clock: Any) -> None:
    stream = ScriptedStream(hang_on_close=True)
    peer = Peer(stream, limits=PeerLimits(close_timeout=3))
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            running = await start(nursery, peer)
            t0 = trio.current_time()
            await peer.aclose()
            assert trio.current_time() - t0 == pytest.approx(3)
            await running.done.wait()
            await peer.aclose()
            assert trio.current_time() - t0 == pytest.approx(6)
    assert stream.closed == 2
    # The stream's receive never ended by itself: aclose stopped the peer.
    assert running.result == ExitReason("closed", "closed locally")
    assert repr(peer) == "<Peer peer closed>"


async def test_eof_drains_handlers_within_grace(mode: str, autojump_clock: Any) -> None:
    finished: list[tuple[str, float]] = []

    def sleeper(name: str, seconds: float) -> Handler:
        async def handler(request: InboundRequest) -> Any:
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                finished.append((f"{name} cancelled", trio.current_time()))
                raise
            finished.append((name, trio.current_time()))
            return {}

        return handler

    app = App({"quick": sleeper("quick", 1), "slow": sleeper("slow", 10)})
    async with session(mode, app, server_limits=PeerLimits(drain_grace=2)) as s:
        async with trio.open_nursery() as calls:
            calls.start_soon(_swallow, s.client.request("quick"))
            calls.start_soon(_swallow, s.client.request("slow"))
            await wait_all_tasks_blocked()
            assert s.server.statistics().handlers_running == 2
            t0 = trio.current_time()
            await s.client.aclose()  # the server sees EOF
        await s.srun.done.wait()
        assert s.srun.result == ExitReason("eof", "the other side closed the connection")
        assert finished == [("quick", t0 + 1), ("slow cancelled", t0 + 2)]
        assert s.srun.finished_at == t0 + 2
        assert s.server.statistics().handlers_running == 0


async def test_eof_with_nothing_running_returns_at_once(mode: str, autojump_clock: Any) -> None:
    async with session(mode, App()) as s:
        t0 = trio.current_time()
        await s.client.aclose()
        await s.srun.done.wait()
        assert s.srun.finished_at == t0
        assert s.srun.result is not None and s.srun.result.kind == "eof"


async def _swallow(awaitable: Awaitable[Any]) -> None:
    try:
        await awaitable
    except ConnectionClosed:
        pass


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_queued_requests must be positive"):
        PeerLimits(max_queued_requests=0)
    with pytest.raises(ValueError, match="drain_grace must be positive"):
        PeerLimits(drain_grace=-1)


async def test_invalid_frames_are_counted_and_answered() -> None:
    a, b = memory_pair(mode="bytes")
    server = Peer(b)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            await a.send_raw(b"{oops")
            await a.send_raw(b'{"jsonrpc":"2.0","method":"n","params":[1]}')  # a notification: no answer
            await a.send_raw(b'{"jsonrpc":"2.0","id":3,"method":"m","params":[1]}')
            first = plain(await a.receive())
            assert (first["id"], first["error"]["code"]) == (None, -32700)
            assert first["error"]["message"].startswith("Parse error")
            third = plain(await a.receive())
            assert (third["id"], third["error"]["code"]) == (3, -32602)
            stats = server.statistics()
            assert (stats.invalid_frames, stats.reads_paused) == (3, 0)
            nursery.cancel_scope.cancel()


# ---------------------------------------------------------------- batches


def batch_server(handlers: dict[str, Handler], *, arrays: bool = True) -> tuple[Any, Peer]:
    a, b = memory_pair(mode="bytes")
    server = Peer(b, App(handlers))
    server.batch_arrays = arrays
    return a, server


async def test_a_batch_is_answered_with_one_array_of_every_answer() -> None:
    async def echo(request: InboundRequest) -> Any:
        await trio.lowlevel.checkpoint()
        return {"echo": raw_or_none(request.params)}

    a, server = batch_server({"echo": echo})
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            batch = [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/whatever"},
                5,
                {"jsonrpc": "2.0", "id": "two", "method": "echo", "params": {"x": 2}},
                {"jsonrpc": "2.0", "id": 3, "method": "nope"},
            ]
            await a.send_raw(json.dumps(batch).encode())
            frame = await a.receive()
            assert type(frame) is list
            answers = {m.id: m for m in frame}
            assert set(answers) == {None, 1, "two", 3}  # no answer for the notification
            assert answers[None].error.code == -32600
            assert raw_or_none(answers["two"].result) == {"echo": {"x": 2}}
            assert answers[3].error.code == -32601
            await wait_all_tasks_blocked()
            with pytest.raises(trio.WouldBlock):
                a.receive_nowait()  # nothing else was sent
            nursery.cancel_scope.cancel()


async def test_a_batch_of_notifications_gets_no_answer() -> None:
    a, server = batch_server({})
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            batch = [
                {"jsonrpc": "2.0", "method": "notifications/a"},
                {"jsonrpc": "2.0", "method": "notifications/b"},
            ]
            await a.send_raw(json.dumps(batch).encode())
            await wait_all_tasks_blocked()
            with pytest.raises(trio.WouldBlock):
                a.receive_nowait()
            assert [m for m, _ in server.dispatcher.notifications] == ["notifications/a", "notifications/b"]
            nursery.cancel_scope.cancel()


async def test_a_cancelled_request_is_left_out_of_its_batch_answer() -> None:
    release = trio.Event()

    async def block(request: InboundRequest) -> Any:
        await release.wait()
        return {"done": True}

    a, server = batch_server({"block": block})
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            batch = [{"jsonrpc": "2.0", "id": i, "method": "block"} for i in (1, 2, 3)]
            await a.send_raw(json.dumps(batch).encode())
            await wait_all_tasks_blocked()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
            await a.send_raw(json.dumps(cancel).encode())
            await wait_all_tasks_blocked()
            release.set()
            frame = await a.receive()
            assert type(frame) is list
            assert sorted(m.id for m in frame) == [1, 3]
            nursery.cancel_scope.cancel()


async def test_an_unencodable_answer_in_a_batch_is_an_internal_error_beside_the_others() -> None:
    async def bad(request: InboundRequest) -> Any:
        return {"value": object()}

    a, server = batch_server({"bad": bad})
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            batch = [
                {"jsonrpc": "2.0", "id": 1, "method": "bad"},
                {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            ]
            await a.send_raw(json.dumps(batch).encode())
            frame = await a.receive()
            answers = {m.id: m for m in frame}
            assert answers[1].error.code == -32603 and "could not encode" in answers[1].error.message
            assert type(answers[2]) is Response
            nursery.cancel_scope.cancel()


async def test_without_batch_arrays_a_batch_is_answered_item_by_item() -> None:
    a, server = batch_server({}, arrays=False)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            batch = [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            ]
            await a.send_raw(json.dumps(batch).encode())
            first, second = await a.receive(), await a.receive()
            assert sorted([first.id, second.id]) == [1, 2]
            nursery.cancel_scope.cancel()
