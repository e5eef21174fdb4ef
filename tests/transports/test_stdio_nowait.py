"""A stdio stream's writes made without a schedule point (``send_nowait``):
on a pipe and on the Unix socketpair that libuv-based hosts (Node) give
their servers, a short line goes out at once, whole, and a full buffer
takes nothing (the caller then sends it the usual way)."""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec
import pytest
import trio

from trio_mcp.protocol import Response
from trio_mcp.transports.stdio import stdio_server_stream


@contextmanager
def _fds(kind: str) -> Iterator[tuple[int, int, int, int]]:
    """(the stream's stdin, its stdout, our end writing to stdin, our end reading stdout)."""
    if kind == "pipes":
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        try:
            yield r_in, w_out, w_in, r_out
        finally:
            for fd in (r_in, w_in, r_out, w_out):
                os.close(fd)
    else:
        ours, theirs = socket.socketpair()
        try:
            yield theirs.fileno(), theirs.fileno(), ours.fileno(), ours.fileno()
        finally:
            ours.close()
            theirs.close()


def _read_all(fd: int) -> bytes:
    data = b""
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("kind", ["pipes", "socketpair"])
async def test_send_nowait_writes_a_short_line_at_once_and_a_full_buffer_takes_nothing(kind: str) -> None:
    with _fds(kind) as (stdin, stdout, _, reader):
        async with stdio_server_stream(stdin=stdin, stdout=stdout, protect_stdout=False) as stream:
            # At once, without a schedule point: readable before this task yields.
            assert stream.send_nowait(Response(id=1, result={}))
            assert _read_all(reader) == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'

            # Lines of nearly PIPE_BUF bytes until the buffer is full: each one
            # is written whole or refused whole.
            text = "x" * (select.PIPE_BUF - 64)
            sent = 0
            while stream.send_nowait(Response(id=sent, result={"t": text})):
                sent += 1
                assert sent < 10_000, "the buffer never filled"
            assert sent > 0
            refused = Response(id=sent, result={"t": text})
            assert not stream.send_nowait(refused)
            data = b""
            while len(data.splitlines()) < sent:
                with trio.fail_after(10):
                    await trio.lowlevel.wait_readable(reader)
                data += os.read(reader, 1 << 16)
            lines = data.splitlines()
            assert len(lines) == sent and data.endswith(b"\n")
            assert [msgspec.json.decode(line)["id"] for line in lines] == list(range(sent))
            assert all(msgspec.json.decode(line)["result"]["t"] == text for line in lines)
            assert _read_all(reader) == b""  # nothing of the refused line

            # Room again: the refused line, sent the usual way, arrives whole.
            with trio.fail_after(10):
                await stream.send(refused)
            assert msgspec.json.decode(_read_all(reader))["id"] == sent
