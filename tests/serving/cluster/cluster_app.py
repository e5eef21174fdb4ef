"""The app every node of the cluster tests serves (``trio-mcp run cluster_app.py:app``).

Its tools say where they run (``where``: the node's id, from the
``CLUSTER_TEST_NODE`` environment variable), stream progress (``countdown``),
ask the client (``ask``: sampling, then elicitation, then roots), wait to be
cancelled and count it (``slow``, ``cancelled``), and broadcast a list change
(``announce``).
"""

from __future__ import annotations

import os

import trio

from trio_mcp.server import Context, MCPServer

app = MCPServer("cluster-test")
NODE = os.environ.get("CLUSTER_TEST_NODE", "?")
cancelled_calls = [0]


@app.tool
def where() -> str:
    return NODE


@app.tool
async def countdown(ctx: Context, n: int = 10, delay: float = 0.05) -> str:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
        await trio.sleep(delay)
    return f"counted {n} on {NODE}"


@app.tool
async def ask(ctx: Context) -> str:
    sampled = await ctx.sample("say something", max_tokens=10)
    text = getattr(sampled.content, "text", "?")
    elicited = await ctx.elicit("your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    name = (elicited.content or {}).get("name", "?")
    roots = await ctx.list_roots()
    return f"{text}|{name}|{','.join(str(r.uri) for r in roots)}|{NODE}"


@app.tool
async def slow() -> str:
    try:
        await trio.sleep(60)
    except trio.Cancelled:
        cancelled_calls[0] += 1
        raise
    return "slept"


@app.tool
def cancelled() -> int:
    return cancelled_calls[0]


@app.tool
def announce() -> str:
    app.broadcast_nowait("notifications/tools/list_changed")
    return NODE


@app.resource("memo://note")
def note() -> str:
    return f"a note from {NODE}"
