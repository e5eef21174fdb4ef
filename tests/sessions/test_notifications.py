"""Notifications end to end: logging and its level, list_changed when
tools/prompts/resources are registered while serving, resources/updated,
progress, and cancellation from the client's cancel scope."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from trio_mcp.protocol import (
    INVALID_PARAMS,
    CreateMessageRequestParams,
    CreateMessageResult,
    InvalidParams,
    LoggingMessageNotificationParams,
    TextContent,
)
from trio_mcp.server import Context, MCPServer

from .conftest import TIMEOUT, Inbox

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def logging_app() -> MCPServer:
    app = MCPServer("logs")

    @app.tool
    async def log_all(ctx: Context) -> str:
        for level in LEVELS:
            await ctx.log(level, {"level": level, "n": LEVELS.index(level)}, logger="test.logger")
        return "logged"

    @app.tool
    async def log_helpers(ctx: Context) -> str:
        await ctx.debug("d")
        await ctx.info("i")
        await ctx.warning("w")
        await ctx.error("e", logger="errors")
        return "ok"

    return app


# ------------------------------------------------------------------ logging


async def test_every_level_is_sent_when_no_level_was_set(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        logs = Inbox()
        async with connect(logging_app(), on_log=logs) as conn:
            await conn.client.call_tool("log_all")
            received: list[LoggingMessageNotificationParams] = await logs.wait_for(len(LEVELS))
            assert [m.level for m in received] == LEVELS
            assert all(m.logger == "test.logger" for m in received)
            assert received[3].data == {"level": "warning", "n": 3}


@pytest.mark.parametrize("threshold", LEVELS)
async def test_set_level_filters_notifications(connect, threshold: str) -> None:
    with trio.fail_after(TIMEOUT):
        logs = Inbox()
        async with connect(logging_app(), on_log=logs) as conn:
            await conn.client.set_logging_level(threshold)
            assert conn.server.log_level == threshold
            await conn.client.call_tool("log_all")
            expected = LEVELS[LEVELS.index(threshold) :]
            received = await logs.wait_for(len(expected))
            await wait_all_tasks_blocked()
            assert [m.level for m in received] == expected
            sent = conn.wire.notifications("server", "notifications/message")
            assert [n["params"]["level"] for n in sent] == expected


async def test_level_can_be_changed_during_the_session(connect) -> None:
    with trio.fail_after(TIMEOUT):
        logs = Inbox()
        async with connect(logging_app(), on_log=logs) as conn:
            await conn.client.set_logging_level("error")
            await conn.client.call_tool("log_helpers")
            await conn.client.set_logging_level("debug")
            await conn.client.call_tool("log_helpers")
            received = await logs.wait_for(5)
            await wait_all_tasks_blocked()
            assert [(m.level, m.data, m.logger) for m in received] == [
                ("error", "e", "errors"),
                ("debug", "d", msgspec.UNSET),
                ("info", "i", msgspec.UNSET),
                ("warning", "w", msgspec.UNSET),
                ("error", "e", "errors"),
            ]


async def test_invalid_level_is_invalid_params(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(logging_app()) as conn:
            with conn.wire.unchecked("client"), pytest.raises(InvalidParams) as caught:
                await conn.client.peer.request("logging/setLevel", {"level": "loud"})
            assert caught.value.code == INVALID_PARAMS
            assert conn.server.log_level is None


async def test_logging_an_unknown_level_is_a_tool_error(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("bad-log")

        @app.tool
        async def shout(ctx: Context) -> str:
            await ctx.log("loud", "x")
            return "unreachable"

        async with connect(app) as conn:
            result = await conn.client.call_tool("shout")
            assert result.is_error is True and "loud" in result.content[0].text
            assert conn.wire.notifications("server", "notifications/message") == []


# ------------------------------------------------------------ list_changed


def _seed_app() -> MCPServer:
    app = MCPServer("live")
    app.tool(name="first_tool")(lambda: "1")
    app.prompt(name="first_prompt")(lambda: "1")
    app.resource("memo://first")(lambda: "1")
    return app


async def test_list_changed_when_registering_while_serving(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        app = _seed_app()
        tools, prompts, resources = Inbox(), Inbox(), Inbox()
        async with connect(
            app,
            on_tools_changed=tools.signal("tools"),
            on_prompts_changed=prompts.signal("prompts"),
            on_resources_changed=resources.signal("resources"),
        ) as conn:
            assert [t.name for t in await conn.client.list_all_tools()] == ["first_tool"]

            @app.tool
            def second_tool() -> str:
                return "2"

            await tools.wait_for(1)
            assert [t.name for t in await conn.client.list_all_tools()] == ["first_tool", "second_tool"]
            assert (await conn.client.call_tool("second_tool")).content[0].text == "2"

            app.remove_tool("first_tool")
            await tools.wait_for(2)
            assert [t.name for t in await conn.client.list_all_tools()] == ["second_tool"]

            @app.prompt
            def second_prompt() -> str:
                return "2"

            await prompts.wait_for(1)
            assert [p.name for p in await conn.client.list_all_prompts()] == ["first_prompt", "second_prompt"]

            @app.resource("memo://second")
            def second() -> str:
                return "2"

            @app.resource("tpl://{x}")
            def templ(x: str) -> str:
                return x

            await resources.wait_for(2)
            assert [r.uri for r in await conn.client.list_all_resources()] == [
                "memo://first",
                "memo://second",
            ]
            assert [t.uri_template for t in await conn.client.list_all_resource_templates()] == ["tpl://{x}"]

            await wait_all_tasks_blocked()
            assert (len(tools), len(prompts), len(resources)) == (2, 1, 2)
            for method in ("tools", "prompts", "resources"):
                sent = conn.wire.notifications("server", f"notifications/{method}/list_changed")
                assert sent and all(set(n) <= {"jsonrpc", "method", "params"} for n in sent)


async def test_list_changed_goes_to_every_session(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = _seed_app()
        a_seen, b_seen = Inbox(), Inbox()
        async with (
            connect(app, on_tools_changed=a_seen.signal(1)) as a,
            connect(app, on_tools_changed=b_seen.signal(1)) as b,
        ):
            app.tool(name="late")(lambda: "late")
            await a_seen.wait_for(1)
            await b_seen.wait_for(1)
            assert [t.name for t in await a.client.list_all_tools()][-1] == "late"
            assert [t.name for t in await b.client.list_all_tools()][-1] == "late"


async def test_list_changed_only_for_declared_capabilities(connect) -> None:
    """A session whose handshake declared no tools (none were registered)
    must not be sent ``notifications/tools/list_changed`` (the wire check
    flags a notification of an undeclared capability)."""
    with trio.fail_after(TIMEOUT):
        app = MCPServer("prompts-only")
        app.prompt(name="p")(lambda: "p")
        prompts = Inbox()
        async with connect(app, on_prompts_changed=prompts.signal(1)) as conn:
            assert "tools" not in conn.wire.capabilities("server")
            app.tool(name="late_tool")(lambda: "x")
            app.prompt(name="q")(lambda: "q")  # declared: this one is due
            await prompts.wait_for(1)
            await wait_all_tasks_blocked()
            assert conn.wire.notifications("server", "notifications/tools/list_changed") == []


async def test_no_list_changed_before_the_session_is_initialized(wires) -> None:
    """Registrations between initialize and notifications/initialized are
    not announced (the client is not ready for notifications)."""
    from .conftest import open_raw_client

    with trio.fail_after(TIMEOUT):
        app = _seed_app()
        async with open_raw_client(app, wires) as raw:
            await raw.initialize(initialized=False)
            app.tool(name="early")(lambda: "x")
            await raw.peer.ping()
            await wait_all_tasks_blocked()
            assert raw.wire.notifications("server", "notifications/tools/list_changed") == []
            await raw.peer.notify("notifications/initialized")
            await raw.peer.ping()
            app.tool(name="later")(lambda: "x")
            await raw.peer.ping()
            await wait_all_tasks_blocked()
            assert len(raw.wire.notifications("server", "notifications/tools/list_changed")) == 1


# -------------------------------------------------------- resources/updated


async def test_resource_updated_notifications(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        app = _seed_app()
        updates = Inbox()
        async with connect(app, on_resource_updated=updates) as conn:
            await conn.client.subscribe_resource("memo://first")
            app.resource_updated("memo://first")
            assert await updates.wait_for(1) == ["memo://first"]
            (note,) = conn.wire.notifications("server", "notifications/resources/updated")
            assert note["params"] == {"uri": "memo://first"}
            await conn.client.unsubscribe_resource("memo://first")
            app.resource_updated("memo://first")
            await wait_all_tasks_blocked()
            assert len(updates) == 1


# ----------------------------------------------------------------- progress


def progress_app() -> MCPServer:
    app = MCPServer("progress")

    @app.tool
    async def work(ctx: Context, steps: int) -> str:
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        await ctx.report_progress(steps + 0.5)  # no total, no message
        return f"token={ctx.progress_token!r}"

    return app


async def test_progress_is_reported_in_order_before_the_result(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        progress = Inbox()
        async with connect(progress_app()) as conn:
            result = await conn.client.call_tool("work", {"steps": 3}, on_progress=progress)
            # All delivered before the call returned.
            assert progress.items == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3"), (3.5, None, None)]
            (request,) = conn.wire.requests("client", "tools/call")
            token = request["params"]["_meta"]["progressToken"]
            assert result.content[0].text == f"token={token!r}"
            sent = conn.wire.notifications("server", "notifications/progress")
            assert [n["params"]["progressToken"] for n in sent] == [token] * 4
            assert sent[0]["params"] == {
                "progressToken": token,
                "progress": 1,
                "total": 3,
                "message": "step 1",
            }
            assert sent[3]["params"] == {"progressToken": token, "progress": 3.5}


async def test_no_progress_without_a_token(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(progress_app()) as conn:
            result = await conn.client.call_tool("work", {"steps": 3})
            assert result.content[0].text == "token=None"
            await wait_all_tasks_blocked()
            assert conn.wire.notifications("server", "notifications/progress") == []


async def test_progress_of_concurrent_calls_is_kept_apart(connect) -> None:
    with trio.fail_after(TIMEOUT):
        inboxes = {n: Inbox() for n in (2, 4, 6)}
        async with connect(progress_app()) as conn:
            async with trio.open_nursery() as nursery:
                for n, inbox in inboxes.items():
                    nursery.start_soon(
                        lambda n=n, inbox=inbox: conn.client.call_tool(
                            "work", {"steps": n}, on_progress=inbox
                        )
                    )
            for n, inbox in inboxes.items():
                assert [p for p, _, _ in inbox.items] == [*range(1, n + 1), n + 0.5]


async def test_a_failing_progress_callback_does_not_fail_the_call(connect) -> None:
    with trio.fail_after(TIMEOUT):

        async def broken(progress: float, total: Any, message: Any) -> None:
            raise RuntimeError("callback bug")

        async with connect(progress_app()) as conn:
            result = await conn.client.call_tool("work", {"steps": 2}, on_progress=broken)
            assert result.content[0].text.startswith("token=")


# ------------------------------------------------------------- cancellation


def cancellation_app(state: dict[str, Any]) -> MCPServer:
    app = MCPServer("cancel")

    @app.tool
    async def block(ctx: Context) -> str:
        state["started"].set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            state["cancelled"] = True
            raise
        finally:
            state["finished"].set()
        return "unreachable"  # pragma: no cover

    @app.tool
    async def block_in_sampling(ctx: Context) -> str:
        state["started"].set()
        try:
            await ctx.sample("never answered")
        except trio.Cancelled:
            state["cancelled"] = True
            raise
        finally:
            state["finished"].set()
        return "unreachable"  # pragma: no cover

    @app.tool
    def quick() -> str:
        return "quick"

    return app


def _state() -> dict[str, Any]:
    return {"started": trio.Event(), "finished": trio.Event(), "cancelled": False}


async def test_client_cancel_scope_sends_cancelled_and_cancels_the_handler(
    connect, version: str, mode: str
) -> None:
    with trio.fail_after(TIMEOUT):
        state = _state()
        async with connect(cancellation_app(state)) as conn:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn.client.call_tool, "block")
                    await state["started"].wait()
                    scope.cancel()
            assert scope.cancelled_caught
            await state["finished"].wait()
            assert state["cancelled"] is True
            (request,) = conn.wire.requests("client", "tools/call")
            notes = conn.wire.notifications("client", "notifications/cancelled")
            if mode == "inline":
                assert notes == []  # served in the caller's task: cancelled with it
            else:
                (note,) = notes
                assert note["params"]["requestId"] == request["id"]
                assert isinstance(note["params"].get("reason"), str)
            # A cancelled request is never answered, and the session goes on.
            assert (await conn.client.call_tool("quick")).content[0].text == "quick"
            await wait_all_tasks_blocked()
            assert conn.wire.response_to("server", request) is None
            assert conn.server.peer.statistics().requests_cancelled_by_peer == (0 if mode == "inline" else 1)


async def test_client_deadline_cancels_the_call(connect, mode: str) -> None:
    with trio.fail_after(TIMEOUT):
        state = _state()
        async with connect(cancellation_app(state)) as conn:
            with trio.move_on_after(TIMEOUT / 4) as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn.client.call_tool, "block")
                    await state["started"].wait()
                    scope.deadline = trio.current_time()  # expire now: a deadline, not cancel()
            assert scope.cancelled_caught
            await state["finished"].wait()
            assert state["cancelled"] is True
            assert len(conn.wire.notifications("client", "notifications/cancelled")) == (mode != "inline")


async def test_cancellation_propagates_to_the_servers_own_request(connect, mode: str) -> None:
    """Client cancels tools/call -> the server handler is cancelled -> the
    server cancels the sampling request it had sent -> the client's sampling
    handler is cancelled."""
    with trio.fail_after(TIMEOUT):
        state = _state()
        sampler_started, sampler_cancelled = trio.Event(), trio.Event()

        async def sampler(params: CreateMessageRequestParams) -> CreateMessageResult:
            sampler_started.set()
            try:
                await trio.sleep_forever()
            finally:
                sampler_cancelled.set()
            return CreateMessageResult(
                role="assistant", content=TextContent(text="x"), model="m"
            )  # pragma: no cover

        async with connect(cancellation_app(state), sampling_handler=sampler) as conn:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn.client.call_tool, "block_in_sampling")
                    await sampler_started.wait()
                    scope.cancel()
            await state["finished"].wait()
            await sampler_cancelled.wait()
            assert state["cancelled"] is True
            (sampling,) = conn.wire.requests("server", "sampling/createMessage")
            notes = conn.wire.notifications("server", "notifications/cancelled")
            if mode == "inline":
                assert notes == []  # the sampling request was served in the same task, cancelled with it
            else:
                (server_note,) = notes
                assert server_note["params"]["requestId"] == sampling["id"]
            await wait_all_tasks_blocked()
            assert conn.wire.response_to("client", sampling) is None
            assert (await conn.client.call_tool("quick")).content[0].text == "quick"


async def test_initialize_is_never_cancelled(wires) -> None:
    """Cancelling a client while its initialize is in flight sends no
    notifications/cancelled (MCP: initialize is never cancelled)."""
    from trio_mcp.actors._client import open_session

    from .conftest import initialize_result, open_raw_server

    with trio.fail_after(TIMEOUT):
        received, release = trio.Event(), trio.Event()

        async def slow_initialize(request: Any) -> Any:
            received.set()
            await release.wait()
            return initialize_result("2025-11-25")

        async with open_raw_server(wires, {"initialize": slow_initialize}) as fake:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:

                    async def open_client() -> None:
                        async with open_session(fake.client_stream):
                            await trio.sleep_forever()  # pragma: no cover

                    nursery.start_soon(open_client)
                    await received.wait()
                    scope.cancel()
            release.set()
            await wait_all_tasks_blocked()
            assert fake.wire.requests("client", "initialize")
            assert fake.wire.notifications("client", "notifications/cancelled") == []
