"""A stdio server that fails under the public client: the caller gets one
typed error, never an exception group, and the cause chain keeps the detail.

Each case runs ``fixtures/faulty_server.py FAULT WHEN``: a bare server that
fails in one way (exits, is killed, writes garbage, half a line or an
overlong one before exiting, closes its stdout while it lives, ...) instead
of answering ``initialize`` or the first ``tools/call``. Two public ways in:
:func:`trio_mcp.open_session` over a :class:`StdioTransport` in the caller's
own nursery, and the CLI's ``open_target``. Real processes, real time;
every wait bounded.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from trio_mcp import ConnectionClosed, InternalError, McpError, open_session
from trio_mcp.cli._targets import open_target
from trio_mcp.transports import TransportError
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

FAULTY = str(Path(__file__).parent / "fixtures" / "faulty_server.py")
TIMEOUT = 10.0
#: What each fault says in the error the caller gets.
FAULTS = {
    "exit": "exited with status 5",
    "kill": "was killed by SIGKILL",
    "garbage-exit": "exited with status 6",
    "partial-exit": "exited with status 7",
    "huge-exit": "exited with status 8",
    "close-stdout": "closed its stdout",
    "stderr-exit": "out of cheese",
    "error-exit": "broken",
    "wrong-id-exit": "exited with status 11",
    "exit-0": "exited with status 0",
}
MAX_LINE = 1 << 20  # the client's line limit here: huge-exit writes 2 MiB


def _params(fault: str, when: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[FAULTY, fault, when],
        max_line_bytes=MAX_LINE,
        eof_grace=2.0,
        close_grace=2.0,
        term_grace=0.5,
    )


async def via_open_session(fault: str, when: str) -> BaseException:
    """The library's way: a transport in the caller's nursery, ``open_session``
    over it; what the ``async with`` raised."""
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(StdioTransport(_params(fault, when)).run)
        with pytest.raises(BaseException) as info:
            async with open_session(stream) as session:
                await session.call_tool("anything")
        nursery.cancel_scope.cancel()
    return info.value


async def via_open_target(fault: str, when: str) -> BaseException:
    """The CLI's way (``trio-mcp call … -- command``)."""
    with pytest.raises(BaseException) as info:
        async with open_target([sys.executable, FAULTY, fault, when]) as session:
            await session.call_tool("anything")
    return info.value


WAYS: dict[str, Callable[[str, str], Awaitable[BaseException]]] = {
    "open_session": via_open_session,
    "open_target": via_open_target,
}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("when", ["init", "call"])
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_failing_server_gives_the_caller_one_typed_error(fault: str, when: str, way: str) -> None:
    expected: type[Exception] = InternalError if fault == "error-exit" else ConnectionClosed
    with trio.fail_after(TIMEOUT):
        error = await WAYS[way](fault, when)
    assert type(error) is expected, repr(error)
    assert isinstance(error, McpError)
    # The detail (exit status, stderr, what broke) is in the message or the cause chain.
    chain = []
    cause: BaseException | None = error
    while cause is not None:
        chain.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    assert any(FAULTS[fault] in text for text in chain), chain
    if expected is ConnectionClosed and when == "call":
        # The transport's failure that closed the session is the call's cause.
        assert isinstance(error.__cause__, TransportError), repr(error.__cause__)
