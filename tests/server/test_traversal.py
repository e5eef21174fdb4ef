"""Resource templates refuse path traversal before the handler runs."""

from __future__ import annotations

import pytest
import trio

from trio_mcp import MCPServer
from trio_mcp.protocol import INVALID_PARAMS, McpError
from trio_mcp.server._traversal import traversal_problem
from trio_mcp.testing import connected

WAIT = 10.0

# (URI, the problem named) against file:///{+path}; the simple-variable template
# notes://{name} refuses the percent-encoded ones the same way.
PLUS_ATTACKS = [
    ("file:///../etc/passwd", "'..' path segment"),
    ("file:///docs/../../etc/passwd", "'..' path segment"),
    ("file:///docs/..", "'..' path segment"),
    ("file:///docs\\..\\..\\secret", "'..' path segment"),
    ("file:////etc/passwd", "absolute path"),
    ("file:///C:/Windows/win.ini", "absolute path"),
    ("file:///%2e%2e/etc/passwd", "'..' path segment"),
    ("file:///%2E%2E%2Fetc%2Fpasswd", "'..' path segment"),
    ("file:///docs%2F..%2F..%2Fsecret", "'..' path segment"),
    ("file:///%252e%252e/etc/passwd", "'..' path segment"),
    ("file:///%25252e%25252e%25252fsecret", "'..' path segment"),
    ("file:///%2Fetc%2Fpasswd", "absolute path"),
    ("file:///notes.txt%00.png", "NUL"),
    ("file:///notes.txt%2500.png", "NUL"),
]
SIMPLE_ATTACKS = [
    ("notes://..", "'..' path segment"),
    ("notes://%2e%2e", "'..' path segment"),
    ("notes://%2e%2e%2fsecret", "'..' path segment"),
    ("notes://%2Fetc%2Fpasswd", "absolute path"),
    ("notes://%252e%252e%252fsecret", "'..' path segment"),
    ("notes://a%00b", "NUL"),
]


def _app(calls: list[str]) -> MCPServer:
    app = MCPServer("files")

    @app.resource("file:///{+path}")
    def read_file(path: str) -> str:
        calls.append(path)
        return f"file {path}"

    @app.resource("notes://{name}")
    def note(name: str) -> str:
        calls.append(name)
        return f"note {name}"

    @app.resource("raw:///{+path}", allow_path_traversal=True)
    def raw(path: str) -> str:
        calls.append(path)
        return f"raw {path}"

    return app


@pytest.mark.parametrize(("uri", "problem"), PLUS_ATTACKS + SIMPLE_ATTACKS)
async def test_attack_is_refused_before_the_handler(uri: str, problem: str) -> None:
    calls: list[str] = []
    with trio.fail_after(WAIT):
        async with connected(_app(calls), mode="bytes") as client:
            with pytest.raises(McpError) as info:
                await client.read_resource(uri)
    assert info.value.code == INVALID_PARAMS
    assert problem in info.value.message
    assert "path traversal" in info.value.message and repr(uri) in info.value.message
    assert calls == []


@pytest.mark.parametrize(
    ("uri", "value"),
    [
        ("file:///docs/notes.txt", "docs/notes.txt"),
        ("file:///a/..b/c..d/...", "a/..b/c..d/..."),
        ("file:///100%25%20done.txt", "100% done.txt"),
        ("notes://my%20note", "my note"),
        ("notes://v1.2", "v1.2"),
    ],
)
async def test_ordinary_values_pass(uri: str, value: str) -> None:
    calls: list[str] = []
    with trio.fail_after(WAIT):
        async with connected(_app(calls)) as client:
            await client.read_resource(uri)
    assert calls == [value]


async def test_opt_out_lets_the_handler_see_the_value() -> None:
    calls: list[str] = []
    with trio.fail_after(WAIT):
        async with connected(_app(calls)) as client:
            result = await client.read_resource("raw:///../etc/passwd")
    assert calls == ["../etc/passwd"]
    assert result.contents[0].text == "raw ../etc/passwd"  # type: ignore[union-attr]


def test_problem_names_each_kind() -> None:
    assert traversal_problem("a/b") is None
    assert traversal_problem("..") == "has a '..' path segment"
    assert traversal_problem("/x") == "is an absolute path"
    assert traversal_problem("\\\\server\\share") == "is an absolute path"
    assert traversal_problem("a\x00") == "contains a NUL character"
    assert traversal_problem("%2e%2e") == "has a '..' path segment"
    deep = "%2e%2e"
    for _ in range(6):
        deep = deep.replace("%", "%25")
    assert traversal_problem(deep) == "is percent-encoded too many times over"
