"""Connections that survive their servers (in memory; real subprocesses are
covered with the stdio transport)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_mcp import ConnectionClosed
from trio_mcp.actors._connection import (
    Connected,
    Connection,
    ConnectionFailed,
    ConnectionSettings,
    Disconnected,
    HealthCheckFailed,
    ListsRefreshed,
    ReconnectScheduled,
)
from trio_mcp.protocol import Root
from trio_mcp.server import Context, MCPServer
from trio_mcp.supervision import Backoff
from trio_mcp.testing import InMemoryServer

FAST = ConnectionSettings(
    backoff=Backoff(initial=0.05, maximum=0.2, reset_after=5.0),
    reconnect_wait=5.0,
    start_retries=2,
)


# Sync handlers run inline: these tests run on the autojump clock, which would jump
# ahead while a worker thread runs.
def make_app() -> tuple[MCPServer, dict[str, trio.Event]]:
    app = MCPServer("flaky")
    gates: dict[str, trio.Event] = {}

    @app.tool(inline=True)
    def echo(text: str) -> str:
        return text

    @app.tool
    async def block(key: str) -> str:
        gates[key] = trio.Event()
        await gates[key].wait()
        return "released"

    @app.resource("mem://{name}", inline=True)
    def item(name: str) -> str:
        return name

    @app.tool
    async def roots(ctx: Context) -> list[str]:
        return [r.uri for r in await ctx.list_roots()]

    return app, gates


async def drain(conn: Connection) -> list[object]:
    out = []
    while True:
        try:
            out.append(conn.events().receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return out


async def test_kill_mid_call_fails_the_call_at_once_then_reconnects(autojump_clock: trio.abc.Clock) -> None:
    app, gates = make_app()
    servers = InMemoryServer(app)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(servers, name="flaky", settings=FAST).run)
            assert (await conn.call_tool("echo", {"text": "a"})).content[0].text == "a"
            failure: list[BaseException] = []

            async def in_flight() -> None:
                try:
                    await conn.call_tool("block", {"key": "k"})
                except ConnectionClosed as exc:
                    failure.append(exc)

            nursery.start_soon(in_flight)
            await trio.testing.wait_all_tasks_blocked()
            assert "k" in gates
            killed_at = trio.current_time()
            await servers.current.kill()
            await trio.testing.wait_all_tasks_blocked()
            assert failure and isinstance(failure[0], ConnectionClosed)
            assert trio.current_time() - killed_at < 1.0
            # the next call waits for the restart and succeeds on a new instance
            assert (await conn.call_tool("echo", {"text": "b"})).content[0].text == "b"
            assert len(servers.instances) == 2
            kinds = [type(e) for e in await drain(conn)]
            assert kinds.index(Connected) < kinds.index(Disconnected) < kinds.index(ReconnectScheduled)
            assert kinds.count(Connected) == 2
            nursery.cancel_scope.cancel()


async def test_restores_subscriptions_log_level_and_roots(autojump_clock: trio.abc.Clock) -> None:
    app, _ = make_app()
    servers = InMemoryServer(app)
    updates: list[str] = []

    async def on_update(uri: str) -> None:
        updates.append(uri)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(
                Connection(
                    servers, settings=FAST, roots=[Root(uri="file:///a")], on_resource_updated=on_update
                ).run
            )
            await conn.subscribe_resource("mem://x")
            await conn.set_logging_level("warning")
            await conn.set_roots([Root(uri="file:///b")])
            await servers.current.kill()
            await conn.ping()  # waits for the reconnect
            session = servers.current.session
            assert len(servers.instances) == 2
            assert session.subscriptions == {"mem://x"}
            assert session.log_level == "warning"
            assert (await conn.call_tool("roots")).structured_content == {"result": ["file:///b"]}
            app.resource_updated("mem://x")
            await trio.testing.wait_all_tasks_blocked()
            assert updates == ["mem://x"]
            nursery.cancel_scope.cancel()


async def test_lists_refreshed_on_connect_and_on_change(autojump_clock: trio.abc.Clock) -> None:
    app, _ = make_app()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(InMemoryServer(app), settings=FAST).run)
            assert {t.name for t in conn.tools} == {"echo", "block", "roots"}

            @app.tool(inline=True)
            def late() -> str:
                return "late"

            await trio.testing.wait_all_tasks_blocked()
            assert "late" in {t.name for t in conn.tools}
            assert any(isinstance(e, ListsRefreshed) and e.tools == 4 for e in await drain(conn))
            app.remove_tool("late")
            nursery.cancel_scope.cancel()


async def test_start_failure_gives_up_without_a_crash_loop(autojump_clock: trio.abc.Clock) -> None:
    app, _ = make_app()
    servers = InMemoryServer(app, fail_starts=100)
    conn = Connection(servers, name="broken", settings=FAST)
    with trio.fail_after(30):
        with pytest.raises(ConnectionClosed, match="gave up"):
            await conn.run()
    assert len(servers.instances) == FAST.start_retries + 1
    events = await drain(conn)
    assert isinstance(events[-1], ConnectionFailed)
    with pytest.raises(ConnectionClosed, match="gave up"):
        await conn.call_tool("echo", {"text": "x"})


async def test_start_failure_then_recovery(autojump_clock: trio.abc.Clock) -> None:
    app, _ = make_app()
    servers = InMemoryServer(app, fail_starts=2)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(servers, settings=FAST).run)
            assert (await conn.call_tool("echo", {"text": "ok"})).content[0].text == "ok"
            assert len(servers.instances) == 3
            nursery.cancel_scope.cancel()


async def test_hung_server_is_restarted_by_the_health_check(autojump_clock: trio.abc.Clock) -> None:
    app, _ = make_app()
    servers = InMemoryServer(app)
    settings = ConnectionSettings(
        backoff=FAST.backoff, ping_interval=1.0, ping_timeout=0.5, reconnect_wait=10.0
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(servers, settings=settings).run)
            servers.current.hang()
            await trio.sleep(3)
            assert len(servers.instances) >= 2
            assert (await conn.call_tool("echo", {"text": "back"})).content[0].text == "back"
            reasons = [e.reason for e in await drain(conn) if isinstance(e, Disconnected)]
            assert any(HealthCheckFailed.__name__ in r for r in reasons), reasons
            nursery.cancel_scope.cancel()


async def test_calls_fail_clearly_when_the_server_stays_down(autojump_clock: trio.abc.Clock) -> None:
    app, _ = make_app()
    servers = InMemoryServer(app)
    settings = ConnectionSettings(
        backoff=Backoff(initial=100.0, maximum=100.0, reset_after=5.0), reconnect_wait=2.0
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(servers, settings=settings).run)
            # Every later start fails: the backoff's jitter may retry within the
            # 2 s (its delay is anywhere in [0, 100] s), and the server stays down.
            servers.fail_starts = 1_000_000
            await servers.current.kill()
            start = trio.current_time()
            with pytest.raises(ConnectionClosed, match="not reconnected within 2.0 s"):
                await conn.call_tool("echo", {"text": "x"})
            assert trio.current_time() - start == pytest.approx(2.0)
            nursery.cancel_scope.cancel()
