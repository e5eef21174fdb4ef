"""The app the scale-out tests serve with ``trio-mcp run … -t http`` (one or
several processes): every answer tells which process gave it.

* ``pid()``: the serving process's id.
* ``ask()``: one sampling question (a 2026-07-28 input-required round), then
  the answer and the process that received it.
* ``freeze(report, release)``: blocks this process's whole event loop, on
  purpose, so that it can neither accept a connection nor answer one: it
  writes its id into the FIFO ``report`` (the test reading it knows the
  process is frozen), then reads the FIFO ``release`` until the test closes it.
* ``hold()`` / ``release()``: a call that stays in flight (after one
  progress notification) until ``release`` is called in the same process.

With ``SCALE_APP_FAIL_IF=PATH`` in the environment, importing it fails once
``PATH`` exists.
"""

from __future__ import annotations

import os

import trio

from trio_mcp.server import Context, MCPServer

#: A file whose existence makes this module fail to import (a worker that cannot start).
FAIL_IF = os.environ.get("SCALE_APP_FAIL_IF")
if FAIL_IF and os.path.exists(FAIL_IF):
    raise RuntimeError(f"told to fail: {FAIL_IF} exists")

app = MCPServer("scale-test")
_released = trio.Event()
#: Bound of a held call (the test releases it much sooner).
HOLD_BOUND = 60.0


@app.tool
async def pid() -> int:
    """This process's id."""
    return os.getpid()


@app.tool
async def ask(ctx: Context) -> str:
    """One sampling question (the same in every process: a retry answers it anywhere)."""
    answer = await ctx.sample("a question", max_tokens=10)
    text = getattr(answer.content, "text", "")
    return f"{text} (answered in {os.getpid()})"


@app.tool
async def freeze(report: str, release: str) -> int:
    """Block the whole process until the FIFO ``release`` is closed."""
    with open(report, "w") as out:  # noqa: ASYNC230 - blocking the loop is the point
        out.write(str(os.getpid()))
    with open(release) as wait:  # noqa: ASYNC230
        wait.read()
    return os.getpid()


@app.tool
async def hold(ctx: Context) -> str:
    """Stay in flight until ``release`` (one progress notification first)."""
    await ctx.report_progress(1, 2, "holding")
    with trio.fail_after(HOLD_BOUND):
        await _released.wait()
    await ctx.report_progress(2, 2, "released")
    return "held and released"


@app.tool
async def release() -> str:
    """End the held calls."""
    _released.set()
    return "released"
