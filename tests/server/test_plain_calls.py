"""The plain path of ``tools/call`` over stdio (``ToolRegistry._plain_call``,
stepped by the peer's read loop): the same answers as the general path, the
same admission, cancellation and fairness rules.

Each test serves an :class:`MCPServer` over a pair of pipes (a real
:class:`StdioStream`, the stream the plain path is for) and speaks raw JSON
lines to it. The app's ``tools/call`` handler is wrapped to count the calls
that took the plain path, so a test sees which path answered.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import attrs
import msgspec
import trio
import trio.testing

from trio_mcp import PeerLimits
from trio_mcp.actors import ServerSession
from trio_mcp.protocol import Request, ServerOverloaded
from trio_mcp.server import Context, MCPServer
from trio_mcp.transports.stdio import StdioStream

TIMEOUT = 30.0
VERSION = "2025-11-25"


class Point(msgspec.Struct):
    x: int
    y: int


def make_app(*, middleware: bool = False) -> tuple[MCPServer, trio.Event, list[str]]:
    """The app the tests serve; the event lets ``wait`` go, the list records
    what the middleware saw (when there is one)."""
    seen: list[str] = []

    async def record(ctx: Context, call_next: Any) -> Any:
        seen.append(ctx.method)
        return await call_next()

    app = MCPServer("plain", "1.0", middleware=[record] if middleware else [])
    release = trio.Event()

    @app.tool(structured_output=False)
    async def echo(text: str) -> str:
        return text

    @app.tool()
    async def add(a: int, b: int = 1) -> int:
        return a + b

    @app.tool()
    async def norm(p: Point) -> dict[str, int]:
        return {"l1": abs(p.x) + abs(p.y)}

    @app.tool()
    async def fail() -> str:
        raise ValueError("no luck")

    @app.tool(structured_output=False)
    async def who(ctx: Context, tag: str) -> str:
        return json.dumps(
            {
                "tag": tag,
                "id": ctx.request_id,
                "method": ctx.method,
                "meta": ctx.meta,
                "params": ctx.params,
                "version": ctx.protocol_version,
                "client": ctx.client_info.name if ctx.client_info else None,
                "same_session": ctx.session.state is ctx.session.state,
            }
        )

    @app.tool(inline=True, structured_output=False)
    def shout(text: str) -> str:
        return text.upper()

    @app.tool(structured_output=False)
    def threaded(text: str) -> str:
        return text[::-1]

    @app.tool(structured_output=False)
    async def wait(text: str) -> str:
        await release.wait()
        return text

    @app.tool(structured_output=False)
    async def forever() -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    return app, release, seen


def count_plain(app: MCPServer) -> list[int]:
    """Wrap the app's plain path of ``tools/call``: the list counts the calls it took."""
    taken = [0]
    handler = app.request_handlers["tools/call"]
    plain = handler.plain
    assert plain is not None

    def counting(session: ServerSession, request: Request) -> Coroutine[Any, Any, Any] | None:
        coro = plain(session, request)
        if coro is not None:
            taken[0] += 1
        return coro

    app.request_handlers["tools/call"] = attrs.evolve(handler, plain=counting)
    return taken


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(ident: int, name: str, arguments: Any = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


class Client:
    """The test's ends of the pipes: raw lines in, answers out by id."""

    def __init__(self, to_server: trio.lowlevel.FdStream, from_server: trio.lowlevel.FdStream) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self.buf = b""
        self.answers: dict[Any, dict[str, Any]] = {}

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.to_server.send_all(b"".join(_line(m) for m in messages))

    async def answer(self, ident: Any) -> dict[str, Any]:
        while ident not in self.answers:
            self.buf += await self.from_server.receive_some()
            *lines, self.buf = self.buf.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if "id" in msg:
                    self.answers[msg["id"]] = msg
        return self.answers.pop(ident)

    async def initialize(self) -> None:
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "plain-test", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        assert "result" in await self.answer("init")


@asynccontextmanager
async def served(
    app: MCPServer, limits: PeerLimits | None = None
) -> AsyncIterator[tuple[ServerSession, Client]]:
    """``app`` served over pipes by one session, initialized."""
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    stream = StdioStream(to_server_r, from_server_w, name="served")
    client = Client(trio.lowlevel.FdStream(to_server_w), trio.lowlevel.FdStream(from_server_r))
    try:
        async with trio.open_nursery() as nursery:
            session = ServerSession(app, stream, limits=limits, name="served")
            await nursery.start(session.run)
            await client.initialize()
            yield session, client
            nursery.cancel_scope.cancel()
    finally:
        for closable in (stream, client.to_server, client.from_server):
            await closable.aclose()


#: Calls whose answers the plain path must give exactly as the general path does.
CASES: list[dict[str, Any]] = [
    call(1, "echo", {"text": "hi"}),
    call(2, "echo", {"text": 3}),  # wrong type
    call(3, "echo", {}),  # missing argument
    call(4, "echo"),  # no arguments at all
    call(5, "echo", {"text": "hi", "extra": True}),  # an unknown argument
    call(6, "add", {"a": 2}),  # structured output, a default
    call(7, "add", {"a": True}),  # a bool is no int
    call(8, "norm", {"p": {"x": -3, "y": 4}}),  # a Struct argument
    call(9, "norm", {"p": {"x": "3", "y": 4}}),  # a wrong type inside it
    call(10, "fail"),  # the tool raises
    call(11, "nope", {}),  # unknown tool
    call(12, "shout", {"text": "hi"}),  # an inline sync tool
    call(13, "threaded", {"text": "abc"}),  # a sync tool in a worker thread
    call(14, "who", {"tag": "t"}),  # takes a Context
    call(15, "who", {"tag": "t"}, _meta={"progressToken": "p1", "note": 1}),  # with _meta
    {"jsonrpc": "2.0", "id": 16, "method": "tools/call", "params": {"name": "echo", "arguments": None}},
    {"jsonrpc": "2.0", "id": 17, "method": "tools/call", "params": {"name": "echo", "arguments": [1]}},
    {"jsonrpc": "2.0", "id": 18, "method": "tools/call", "params": {"name": 5}},
    {"jsonrpc": "2.0", "id": 19, "method": "tools/call", "params": {}},
    {"jsonrpc": "2.0", "id": 20, "method": "tools/call"},
    {
        "jsonrpc": "2.0",
        "id": "s",
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "é"}},
    },
]


async def answers_of(app: MCPServer) -> list[dict[str, Any]]:
    async with served(app) as (_, client):
        await client.send(*CASES)
        return [await client.answer(case["id"]) for case in CASES]


async def test_the_plain_path_answers_every_call_as_the_general_path_does() -> None:
    with trio.fail_after(TIMEOUT):
        plain_app, _, _ = make_app()
        taken = count_plain(plain_app)
        plain = await answers_of(plain_app)
        general_app, _, seen = make_app(middleware=True)  # middleware: the general path, always
        general_taken = count_plain(general_app)
        general = await answers_of(general_app)
    assert plain == general
    # Valid calls of tools that run in this task took the plain path, no other.
    assert taken == [8]  # ids 1, 5, 6, 8, 10, 12, 14 and "s"
    assert general_taken == [0] and seen.count("tools/call") == len(CASES)
    # Spot checks of what they say (the same on both paths, as just shown).
    by_id = {a["id"]: a for a in plain}
    assert by_id[1]["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert "resultType" not in by_id[1]["result"]  # a handshake version has none
    assert by_id[2]["result"]["isError"] is True
    assert by_id[6]["result"]["structuredContent"] == {"result": 3}
    assert by_id[11]["error"]["code"] == -32602
    assert by_id[16]["error"]["code"] == -32602
    who = json.loads(by_id[14]["result"]["content"][0]["text"])
    assert who == {
        "tag": "t",
        "id": 14,
        "method": "tools/call",
        "meta": {},
        "params": {"name": "who", "arguments": {"tag": "t"}},
        "version": VERSION,
        "client": "plain-test",
        "same_session": True,
    }
    assert json.loads(by_id[15]["result"]["content"][0]["text"])["meta"] == {"progressToken": "p1", "note": 1}


async def test_a_non_ascii_call_takes_the_plain_path() -> None:
    app, _, _ = make_app()
    taken = count_plain(app)
    with trio.fail_after(TIMEOUT):
        async with served(app) as (_, client):
            await client.send(call(1, "echo", {"text": "héllo ✓"}))
            answer = await client.answer(1)
    assert answer["result"]["content"] == [{"type": "text", "text": "héllo ✓"}]
    assert taken == [1]


async def test_a_plain_handler_that_waits_is_answered_once_it_is_done() -> None:
    app, release, _ = make_app()
    taken = count_plain(app)
    with trio.fail_after(TIMEOUT):
        async with served(app) as (session, client):
            await client.send(call(1, "wait", {"text": "later"}), call(2, "echo", {"text": "now"}))
            # The waiting call does not hold up the one behind it.
            assert (await client.answer(2))["result"]["content"][0]["text"] == "now"
            assert session.peer.statistics().handlers_running == 1
            release.set()
            assert (await client.answer(1))["result"]["content"][0]["text"] == "later"
    assert taken == [2]


async def test_a_plain_handler_that_waits_is_cancelled_by_the_other_side() -> None:
    app, _, _ = make_app()
    taken = count_plain(app)
    with trio.fail_after(TIMEOUT):
        async with served(app) as (session, client):
            peer = session.peer
            await client.send(call(1, "forever"))
            while peer.statistics().handlers_running < 1:
                await trio.testing.wait_all_tasks_blocked()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            await client.send(cancel, call(2, "echo", {"text": "after"}))
            # Only the second is answered: a cancelled request never is.
            assert (await client.answer(2))["result"]["content"][0]["text"] == "after"
            while peer.statistics().handlers_running:
                await trio.testing.wait_all_tasks_blocked()
            stats = peer.statistics()
            assert stats.requests_cancelled_by_peer == 1, stats
            assert 1 not in client.answers
            # The id is free again once its call is gone.
            await client.send(call(1, "echo", {"text": "again"}))
            assert (await client.answer(1))["result"]["content"][0]["text"] == "again"
    assert taken == [3]


async def test_a_duplicate_id_of_a_waiting_plain_call_is_refused() -> None:
    app, release, _ = make_app()
    with trio.fail_after(TIMEOUT):
        async with served(app) as (_, client):
            await client.send(call(1, "wait", {"text": "first"}), call(1, "echo", {"text": "second"}))
            refusal = await client.answer(1)
            assert refusal["error"]["code"] == -32600 and "Duplicate" in refusal["error"]["message"]
            release.set()
            assert (await client.answer(1))["result"]["content"][0]["text"] == "first"


async def test_plain_calls_past_the_admission_capacity_get_busy_answers() -> None:
    """Capacity 3 (one handler, two queued): three waiting calls fill it, so the
    two calls behind them are refused at once, plain path or not."""
    waiting = 3
    app, release, _ = make_app()
    taken = count_plain(app)
    limits = PeerLimits(max_concurrent_handlers=1, max_queued_requests=2)
    with trio.fail_after(TIMEOUT):
        async with served(app, limits) as (session, client):
            await client.send(*(call(i, "wait", {"text": str(i)}) for i in range(waiting)))
            await client.send(call(10, "echo", {"text": "x"}), call(11, "wait", {"text": "y"}))
            for ident in (10, 11):
                assert (await client.answer(ident))["error"]["code"] == ServerOverloaded().code
            assert session.peer.statistics().requests_overloaded == 2
            release.set()
            for i in range(waiting):
                assert (await client.answer(i))["result"]["content"][0]["text"] == str(i)
            # Room again: the next call is served on the plain path.
            await client.send(call(12, "echo", {"text": "room"}))
            assert (await client.answer(12))["result"]["content"][0]["text"] == "room"
    assert taken[0] >= 1  # the first waiting call at least (the others queued behind it)


async def test_a_burst_of_plain_calls_on_one_session_does_not_starve_another() -> None:
    """Two sessions of one app in one process: while one is flooded with
    tools/call, the other's single call is answered long before the flood is."""
    burst = 20_000
    app, _, _ = make_app()
    with trio.fail_after(TIMEOUT):
        async with served(app) as (_, flooded), served(app) as (_, quiet):
            answered = [0]
            started = trio.Event()

            async def count_answers() -> None:
                while answered[0] < burst:
                    answered[0] += (await flooded.from_server.receive_some()).count(b"\n")
                    started.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(count_answers)
                flood = b"".join(_line(call(i, "echo", {"text": "flood"})) for i in range(burst))
                nursery.start_soon(flooded.to_server.send_all, flood)
                await started.wait()  # the flood is being served
                await quiet.send(call(1, "echo", {"text": "quiet"}))
                assert (await quiet.answer(1))["result"]["content"][0]["text"] == "quiet"
                assert answered[0] < burst / 2, "the quiet session waited for most of the flood"
                nursery.cancel_scope.cancel()


def test_a_tool_with_a_positional_only_parameter_takes_the_general_path() -> None:
    app = MCPServer("plain", "1.0")

    @app.tool()
    async def pos(a: int, /) -> int:
        return a

    @app.tool(task_support=None)
    async def kw(a: int) -> int:
        return a

    assert "pos" not in app._plain_tools and "kw" in app._plain_tools
    app.remove_tool("kw")
    assert "kw" not in app._plain_tools
