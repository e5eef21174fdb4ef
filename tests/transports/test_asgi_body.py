"""Reading a request body without waiting (``body_nowait``), as hypercorn's
trio worker hands it over: the messages queued on a trio memory channel."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp.transports._asgi import Disconnected, HttpError, WholeBody, body_nowait, read_body

LIMIT = 1000


def queued(*messages: dict[str, Any]) -> tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]:
    put, take = trio.open_memory_channel[Any](len(messages) + 1)
    for message in messages:
        put.send_nowait(message)
    return put, take


def part(body: bytes, more: bool) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


async def test_a_body_of_its_content_length_is_whole_without_the_message_that_ends_it() -> None:
    # hypercorn queues the body with more_body, and the empty message that
    # ends it a scheduling turn later: the body is whole once its length is in.
    _, take = queued(part(b'{"a":1}', True), part(b"", False))
    assert body_nowait(take.receive, {"content-length": "7"}, LIMIT) == (b'{"a":1}', True)
    assert take.receive_nowait() == part(b"", False)  # left for whoever reads on


async def test_a_body_in_parts_is_gathered_up_to_its_length() -> None:
    _, take = queued(part(b"12", True), part(b"345", True))
    assert body_nowait(take.receive, {"content-length": "5"}, LIMIT) == (b"12345", True)


async def test_a_body_not_all_there_is_finished_by_read_body() -> None:
    put, take = queued(part(b"12", True))
    body, whole = body_nowait(take.receive, {"content-length": "5"}, LIMIT)
    assert (body, whole) == (b"12", False)
    put.send_nowait(part(b"345", False))
    with trio.fail_after(5):
        assert await read_body(take.receive, {"content-length": "5"}, LIMIT, start=body) == b"12345"


async def test_without_a_length_the_body_is_whole_only_at_its_last_message() -> None:
    _, take = queued(part(b"12", True))
    assert body_nowait(take.receive, {}, LIMIT) == (b"12", False)
    _, take = queued(part(b"12", True), part(b"3", False))
    assert body_nowait(take.receive, {}, LIMIT) == (b"123", True)


async def test_too_large_and_disconnected_bodies_are_refused() -> None:
    _, take = queued(part(b"x" * 10, False))
    with pytest.raises(HttpError) as info:
        body_nowait(take.receive, {"content-length": str(LIMIT + 1)}, LIMIT)
    assert info.value.status == 413
    _, take = queued(part(b"x" * (LIMIT + 1), True))
    with pytest.raises(HttpError):
        body_nowait(take.receive, {}, LIMIT)
    _, take = queued(part(b"12", True), {"type": "http.disconnect"})
    with pytest.raises(Disconnected):
        body_nowait(take.receive, {"content-length": "5"}, LIMIT)


async def test_a_receive_that_is_not_a_memory_channel_s_is_not_read() -> None:
    async def receive() -> dict[str, Any]:
        raise AssertionError("must not be called")  # pragma: no cover

    assert body_nowait(receive, {"content-length": "5"}, LIMIT) == (b"", False)


async def test_a_whole_body_is_taken_at_once_then_the_receive_waits_for_its_client_to_go() -> None:
    gone = trio.Event()
    receive = WholeBody(b'{"a":1}', gone.wait)
    assert body_nowait(receive, {"content-length": "7"}, LIMIT) == (b'{"a":1}', True)
    # Taken once: a second look finds nothing queued, and receive waits for the client to go.
    assert body_nowait(receive, {}, LIMIT) == (b"", False)
    with trio.move_on_after(0.05) as waited:
        await receive()
    assert waited.cancelled_caught
    gone.set()
    assert await receive() == {"type": "http.disconnect"}
    with pytest.raises(HttpError) as too_large:
        body_nowait(WholeBody(b"x" * (LIMIT + 1), gone.wait), {}, LIMIT)
    assert too_large.value.status == 413
    # Read by receive instead (any ASGI app's way): the body, then the disconnect.
    other = WholeBody(b"{}", gone.wait)
    assert await other() == part(b"{}", False)
    assert await other() == {"type": "http.disconnect"}
