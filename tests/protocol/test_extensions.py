"""The extensions framework (SEP-2133): an extension registers its methods
(typed params and results) in the registry, both sides declare it under
``capabilities.extensions`` in both eras, and a server serves its methods like
core ones; an unregistered method does not exist in the stateless era."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from trio_mcp.protocol import (
    CLIENT_TO_SERVER,
    EXTENSIONS,
    METHODS,
    TASKS_EXTENSION,
    TASKS_EXTENSION_ID,
    ClientCapabilities,
    MethodNotFound,
    MethodSpec,
    RequestParams,
    Result,
    declared_extension,
    method_available,
    register_extension,
    with_extensions,
)
from trio_mcp.protocol._extensions import Extension
from trio_mcp.server import Context, LowLevelServer
from trio_mcp.testing import connected

ECHO_ID = "com.example/echo"


class ShoutParams(RequestParams, kw_only=True):
    text: str


class ShoutResult(Result, kw_only=True):
    text: str


ECHO = register_extension(
    Extension(
        id=ECHO_ID,
        methods=(
            MethodSpec(
                method="echo/shout",
                kind="request",
                direction=CLIENT_TO_SERVER,
                params_type=ShoutParams,
                result_type=ShoutResult,
                extension=ECHO_ID,
            ),
        ),
        types={"ShoutParams": ShoutParams, "ShoutResult": ShoutResult},
    )
)


def test_registration() -> None:
    assert EXTENSIONS[ECHO_ID] is ECHO and register_extension(ECHO) is ECHO  # idempotent
    assert METHODS["echo/shout"].extension == ECHO_ID
    assert method_available("echo/shout", "2026-07-28", sender="client")
    assert not method_available("echo/shout", "2026-07-28", sender="server")
    assert TASKS_EXTENSION.method_names() >= {"tasks/get", "tasks/update", "tasks/cancel"}
    assert not method_available("tasks/result", "2026-07-28") and method_available(
        "tasks/result", "2025-11-25"
    )
    with pytest.raises(ValueError, match="already registered"):
        register_extension(Extension(id=ECHO_ID))
    with pytest.raises(ValueError, match="already a method of"):
        register_extension(
            Extension(
                id="com.example/other",
                methods=(attrs.evolve(METHODS["tools/call"], extension="com.example/other"),),
            )
        )


def test_declaring() -> None:
    caps = with_extensions(ClientCapabilities(), [ECHO_ID])
    assert declared_extension(caps, ECHO_ID) == {}
    assert declared_extension(caps, TASKS_EXTENSION_ID) is None
    caps = with_extensions(caps, {TASKS_EXTENSION_ID: {"x": 1}})
    assert caps.extensions == {ECHO_ID: {}, TASKS_EXTENSION_ID: {"x": 1}}


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_both_sides_declare_and_the_method_is_served(era: str) -> None:
    app = LowLevelServer("ext", extensions={ECHO_ID: {"loud": True}})
    seen: list[dict[str, Any] | None] = []

    async def shout(ctx: Context, params: ShoutParams) -> ShoutResult:
        seen.append(declared_extension(ctx.client_capabilities, ECHO_ID))
        return ShoutResult(text=params.text.upper())

    app.set_request_handler("echo/shout", ShoutParams, shout)
    with trio.fail_after(10):
        async with connected(app, mode="bytes", era=era, extensions={ECHO_ID: {}}) as client:
            assert declared_extension(client.server_capabilities, ECHO_ID) == {"loud": True}
            if era == "modern":
                result = await client._call_modern("echo/shout", {"text": "hi"}, ShoutResult, None)
            else:
                result = await client.peer.request("echo/shout", {"text": "hi"}, result_type=ShoutResult)
            assert result.text == "HI" and seen == [{}]
            with pytest.raises(MethodNotFound):
                if era == "modern":
                    await client._call_modern("echo/unregistered", {}, None, None)
                else:
                    await client.peer.request("echo/unregistered", {})
