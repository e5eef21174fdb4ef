"""The host: isolation, aggregation, routing, policies and consent."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_mcp.actors._host import (
    Approve,
    ConsentPolicy,
    ConsentRequest,
    Deny,
    Host,
    Modify,
    SamplingDenied,
    ToolCallDenied,
)
from trio_mcp.protocol import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    InvalidParams,
    LoggingMessageNotificationParams,
    Root,
    TextContent,
    ToolAnnotations,
)
from trio_mcp.server import Context, MCPServer
from trio_mcp.testing import InMemoryServer


def make_server(name: str, log: list[tuple[str, str]]) -> MCPServer:
    app = MCPServer(name)

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        return name

    @app.tool(annotations=ToolAnnotations(destructive_hint=True))
    def wipe() -> str:
        return f"{name} wiped"

    @app.tool
    async def ask(ctx: Context) -> str:
        result = await ctx.sample(f"question from {name}", max_tokens=5)
        return result.content.text

    @app.tool
    async def roots(ctx: Context) -> list[str]:
        return [r.uri for r in await ctx.list_roots()]

    @app.tool
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return answer.action

    @app.tool
    async def shout(ctx: Context) -> str:
        await ctx.info(f"hello from {name}")
        return "ok"

    return app


TRUST_ALL = ConsentPolicy(trusted_servers=frozenset({"alpha", "beta", "gamma"}))


class RecordingLLM:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def create_message(self, server: str, params: CreateMessageRequestParams) -> CreateMessageResult:
        text = params.messages[0].content.text
        self.seen.append((server, text))
        return CreateMessageResult(
            role="assistant", content=TextContent(text=f"llm answered {server}"), model="m"
        )


async def test_registry_routing_and_isolation() -> None:
    log: list[tuple[str, str]] = []
    llm = RecordingLLM()

    async def approve_all(request: ConsentRequest) -> bool:
        return True

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host(llm=llm, consent=approve_all).run)
            await host.add_server(
                "alpha", InMemoryServer(make_server("alpha", log)), roots=[Root(uri="file:///a")]
            )
            await host.add_server(
                "beta", InMemoryServer(make_server("beta", log)), roots=[Root(uri="file:///b")]
            )
            names = {t.name for t in host.tools()}
            assert {"alpha__whoami", "beta__whoami", "alpha__wipe", "beta__wipe"} <= names
            assert (await host.call_tool("alpha__whoami")).content[0].text == "alpha"
            assert (await host.call_tool("beta__whoami")).content[0].text == "beta"
            # each server sees only its own roots and its own sampling traffic
            assert (await host.call_tool("alpha__roots", {})).structured_content == {"result": ["file:///a"]}
            assert (await host.call_tool("beta__roots", {})).structured_content == {"result": ["file:///b"]}
            assert (await host.call_tool("beta__ask")).content[0].text == "llm answered beta"
            assert llm.seen == [("beta", "question from beta")]
            with pytest.raises(InvalidParams):
                await host.call_tool("gamma__whoami")
            with pytest.raises(InvalidParams):
                await host.call_tool("alpha__nope")
            nursery.cancel_scope.cancel()


async def test_list_changes_are_followed() -> None:
    log: list[tuple[str, str]] = []
    app = make_server("alpha", log)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host().run)
            await host.add_server("alpha", InMemoryServer(app))

            @app.tool
            def fresh() -> str:
                return "new"

            await trio.testing.wait_all_tasks_blocked()
            assert "alpha__fresh" in {t.name for t in host.tools()}
            await host.remove_server("alpha")
            await trio.testing.wait_all_tasks_blocked()
            assert host.tools() == []
            nursery.cancel_scope.cancel()


async def test_consent_is_annotation_aware() -> None:
    asked: list[ConsentRequest] = []
    verdict = {"ok": False}

    async def consent(request: ConsentRequest) -> bool:
        asked.append(request)
        return verdict["ok"]

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host(consent=consent).run)
            await host.add_server("alpha", InMemoryServer(make_server("alpha", [])))
            # read-only: no question asked
            assert (await host.call_tool("alpha__whoami")).content[0].text == "alpha"
            assert asked == []
            with pytest.raises(ToolCallDenied):
                await host.call_tool("alpha__wipe")
            assert [(r.server, r.tool) for r in asked] == [("alpha", "wipe")]
            assert asked[0].annotations is not None and asked[0].annotations.destructive_hint is True
            verdict["ok"] = True
            assert (await host.call_tool("alpha__wipe")).content[0].text == "alpha wiped"
            nursery.cancel_scope.cancel()


async def test_without_a_consent_hook_destructive_tools_are_refused_unless_trusted() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(
                Host(consent_policy=ConsentPolicy(trusted_servers=frozenset({"beta"}))).run
            )
            await host.add_server("alpha", InMemoryServer(make_server("alpha", [])))
            await host.add_server("beta", InMemoryServer(make_server("beta", [])))
            with pytest.raises(ToolCallDenied, match="no consent hook"):
                await host.call_tool("alpha__wipe")
            assert (await host.call_tool("beta__wipe")).content[0].text == "beta wiped"
            nursery.cancel_scope.cancel()


async def test_sampling_policy_approves_modifies_and_denies() -> None:
    llm = RecordingLLM()
    decisions = {"alpha": Approve(), "beta": Deny("no budget")}

    async def policy(server: str, params: CreateMessageRequestParams) -> object:
        if server == "gamma":
            msg = params.messages[0]
            return Modify(
                CreateMessageRequestParams(
                    messages=[type(msg)(role=msg.role, content=TextContent(text="rewritten"))], max_tokens=1
                )
            )
        return decisions[server]

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host(llm=llm, sampling_policy=policy, consent_policy=TRUST_ALL).run)
            for name in ("alpha", "beta", "gamma"):
                await host.add_server(name, InMemoryServer(make_server(name, [])))
            assert (await host.call_tool("alpha__ask")).content[0].text == "llm answered alpha"
            denied = await host.call_tool("beta__ask")
            assert denied.is_error and "no budget" in denied.content[0].text
            await host.call_tool("gamma__ask")
            assert llm.seen == [("alpha", "question from alpha"), ("gamma", "rewritten")]
            assert SamplingDenied.code == -32600
            nursery.cancel_scope.cancel()


async def test_elicitation_goes_through_the_policy_with_the_server_name() -> None:
    seen: list[str] = []

    async def ui(server: str, params: ElicitRequestParams) -> ElicitResult:
        seen.append(server)
        return ElicitResult(action="accept" if server == "alpha" else "decline", content={"ok": True})

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host(elicitation_policy=ui, consent_policy=TRUST_ALL).run)
            await host.add_server("alpha", InMemoryServer(make_server("alpha", [])))
            await host.add_server("beta", InMemoryServer(make_server("beta", [])))
            assert (await host.call_tool("alpha__confirm")).content[0].text == "accept"
            assert (await host.call_tool("beta__confirm")).content[0].text == "decline"
            assert seen == ["alpha", "beta"]
            nursery.cancel_scope.cancel()


async def test_notifications_stay_with_their_server() -> None:
    got: dict[str, list[str]] = {"alpha": [], "beta": []}
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host(consent_policy=TRUST_ALL).run)
            for name in ("alpha", "beta"):

                async def on_log(p: LoggingMessageNotificationParams, name: str = name) -> None:
                    got[name].append(p.data)

                await host.add_server(name, InMemoryServer(make_server(name, [])), on_log=on_log)
            await host.call_tool("alpha__shout")
            await host.call_tool("beta__shout")
            await trio.testing.wait_all_tasks_blocked()
            assert got == {"alpha": ["hello from alpha"], "beta": ["hello from beta"]}
            nursery.cancel_scope.cancel()
