"""Resources end to end: list, templates, read (text and blob), template
matching, subscriptions and ``notifications/resources/updated``, errors."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from trio_mcp.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    Icon,
    InternalError,
    InvalidParams,
    ResourceContents,
    ResourceNotFound,
)
from trio_mcp.server import Image, MCPServer

from .conftest import TIMEOUT, Inbox

PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * 8


def resources_app(**options) -> MCPServer:
    app = MCPServer("resources", **options)

    @app.resource(
        "memo://readme",
        title="Read me",
        description="The readme",
        mime_type="text/markdown",
        icons=[Icon(src="https://example.com/r.png")],
    )
    def readme() -> str:
        return "# Hello"

    @app.resource("memo://data.bin")
    def data() -> bytes:
        return b"\x00\xffbinary"

    @app.resource("memo://logo.png")
    def logo() -> Image:
        return Image(PNG)

    @app.resource("memo://config.json")
    def config() -> dict:
        return {"debug": True, "level": 3}

    @app.resource("memo://many")
    def many() -> list:
        return [
            ResourceContents.from_text("memo://many#1", "one"),
            ResourceContents.from_blob("memo://many#2", b"two", mime_type="application/x-two"),
        ]

    @app.resource("memo://broken")
    def broken() -> str:
        raise RuntimeError("disk on fire")

    @app.resource("greet://{name}", description="A greeting", mime_type="text/plain")
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @app.resource("users://{uid}/posts/{pid}")
    def post(uid: int, pid: int) -> dict:
        return {"uid": uid, "pid": pid, "sum": uid + pid}

    @app.resource("files://{+path}")
    def file(path: str) -> str:
        return f"file at {path}"

    return app


async def test_list_resources_and_templates(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(resources_app()) as conn:
            resources = {r.uri: r for r in await conn.client.list_all_resources()}
            assert set(resources) == {
                "memo://readme",
                "memo://data.bin",
                "memo://logo.png",
                "memo://config.json",
                "memo://many",
                "memo://broken",
            }
            readme = resources["memo://readme"]
            assert (readme.name, readme.title, readme.description, readme.mime_type) == (
                "readme",
                "Read me",
                "The readme",
                "text/markdown",
            )
            assert readme.icons == [Icon(src="https://example.com/r.png")]
            templates = {t.uri_template: t for t in await conn.client.list_all_resource_templates()}
            assert set(templates) == {"greet://{name}", "users://{uid}/posts/{pid}", "files://{+path}"}
            greet = templates["greet://{name}"]
            assert (greet.name, greet.description, greet.mime_type) == ("greet", "A greeting", "text/plain")


async def test_read_text_blob_and_json(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(resources_app()) as conn:
            (text,) = (await conn.client.read_resource("memo://readme")).contents
            assert (text.uri, text.text, text.mime_type) == ("memo://readme", "# Hello", "text/markdown")
            assert text.blob is msgspec.UNSET

            (blob,) = (await conn.client.read_resource("memo://data.bin")).contents
            assert blob.text is msgspec.UNSET
            assert blob.blob_bytes() == b"\x00\xffbinary"
            assert blob.mime_type == "application/octet-stream"

            (image,) = (await conn.client.read_resource("memo://logo.png")).contents
            assert base64.b64decode(image.blob) == PNG and image.mime_type == "image/png"

            (cfg,) = (await conn.client.read_resource("memo://config.json")).contents
            assert json.loads(cfg.text) == {"debug": True, "level": 3}
            assert cfg.mime_type == "application/json"

            one, two = (await conn.client.read_resource("memo://many")).contents
            assert (one.uri, one.text) == ("memo://many#1", "one")
            assert (two.uri, two.blob_bytes(), two.mime_type) == (
                "memo://many#2",
                b"two",
                "application/x-two",
            )


async def test_template_matching(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(resources_app()) as conn:
            (c,) = (await conn.client.read_resource("greet://Ada")).contents
            assert (c.uri, c.text, c.mime_type) == ("greet://Ada", "Hello, Ada!", "text/plain")
            (c,) = (await conn.client.read_resource("greet://J%C3%BCrgen")).contents
            assert c.text == "Hello, Jürgen!"
            (c,) = (await conn.client.read_resource("users://7/posts/35")).contents
            assert json.loads(c.text) == {"uid": 7, "pid": 35, "sum": 42}
            (c,) = (await conn.client.read_resource("files://etc/hosts")).contents
            assert c.text == "file at etc/hosts"


@pytest.mark.parametrize("uri", ["memo://nope", "greet://", "greet://a/b", "unknown://x", "users://1/posts"])
async def test_unknown_resource_is_resource_not_found(connect, uri: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(resources_app()) as conn:
            with pytest.raises(ResourceNotFound) as caught:
                await conn.client.read_resource(uri)
            assert caught.value.code == RESOURCE_NOT_FOUND
            assert uri in caught.value.message
            assert caught.value.data == {"uri": uri}
            assert (await conn.client.read_resource("memo://readme")).contents[0].text == "# Hello"


async def test_template_variable_of_the_wrong_type_is_invalid_params(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(resources_app()) as conn:
            with pytest.raises(InvalidParams) as caught:
                await conn.client.read_resource("users://seven/posts/1")
            assert caught.value.code == INVALID_PARAMS
            assert "uid" in caught.value.message


async def test_a_failing_resource_is_an_internal_error_and_the_session_keeps_serving(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(resources_app()) as conn:
            with pytest.raises(InternalError) as caught:
                await conn.client.read_resource("memo://broken")
            assert caught.value.code == INTERNAL_ERROR
            assert "disk on fire" in caught.value.message
            assert (await conn.client.read_resource("memo://readme")).contents[0].text == "# Hello"


async def test_resources_pagination(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("paged", page_size=2)
        for i in range(5):
            app.resource(f"memo://r{i}")(lambda: "x")
            app.resource(f"tpl{i}://{{v}}")(lambda v: v)
        async with connect(app) as conn:
            first = await conn.client.list_resources()
            assert [r.uri for r in first.resources] == ["memo://r0", "memo://r1"]
            assert isinstance(first.next_cursor, str)
            assert [r.uri for r in await conn.client.list_all_resources()] == [
                f"memo://r{i}" for i in range(5)
            ]
            assert [t.uri_template for t in await conn.client.list_all_resource_templates()] == [
                f"tpl{i}://{{v}}" for i in range(5)
            ]
            with pytest.raises(InvalidParams):
                await conn.client.list_resources("not-a-cursor")
            with pytest.raises(InvalidParams):
                await conn.client.list_resource_templates("not-a-cursor")


# ------------------------------------------------------------- subscriptions


async def test_subscribe_updated_unsubscribe(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = resources_app()
        updates = Inbox()
        async with connect(app, on_resource_updated=updates) as conn:
            await conn.client.subscribe_resource("memo://readme")
            await conn.client.subscribe_resource("greet://Ada")  # a templated URI
            assert conn.server.subscriptions == {"memo://readme", "greet://Ada"}

            app.resource_updated("memo://readme")
            app.resource_updated("memo://data.bin")  # not subscribed: nothing sent
            app.resource_updated("greet://Ada")
            assert await updates.wait_for(2) == ["memo://readme", "greet://Ada"]

            await conn.client.unsubscribe_resource("memo://readme")
            assert conn.server.subscriptions == {"greet://Ada"}
            app.resource_updated("memo://readme")  # unsubscribed: nothing sent
            app.resource_updated("greet://Ada")
            assert await updates.wait_for(3) == ["memo://readme", "greet://Ada", "greet://Ada"]
            await wait_all_tasks_blocked()
            assert len(updates) == 3
            sent = conn.wire.notifications("server", "notifications/resources/updated")
            assert [n["params"]["uri"] for n in sent] == ["memo://readme", "greet://Ada", "greet://Ada"]
            # Unsubscribing what is not subscribed is harmless.
            await conn.client.unsubscribe_resource("memo://never")


async def test_updates_reach_only_the_sessions_subscribed(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = resources_app()
        first, second = Inbox(), Inbox()
        async with (
            connect(app, on_resource_updated=first) as a,
            connect(app, on_resource_updated=second) as b,
        ):
            await a.client.subscribe_resource("memo://readme")
            await b.client.subscribe_resource("memo://config.json")
            app.resource_updated("memo://readme")
            app.resource_updated("memo://config.json")
            assert await first.wait_for(1) == ["memo://readme"]
            assert await second.wait_for(1) == ["memo://config.json"]
            await wait_all_tasks_blocked()
            assert (first.items, second.items) == (["memo://readme"], ["memo://config.json"])


async def test_subscribe_to_an_unknown_resource_is_resource_not_found(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(resources_app()) as conn:
            with pytest.raises(ResourceNotFound):
                await conn.client.subscribe_resource("memo://nope")
            assert conn.server.subscriptions == set()


async def test_subscriptions_end_with_the_session(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = resources_app()
        async with connect(app) as conn:
            await conn.client.subscribe_resource("memo://readme")
            server = conn.server
        assert server not in app.sessions
        app.resource_updated("memo://readme")  # no session left: a no-op
