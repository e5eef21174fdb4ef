"""Property: whatever garbage arrives, the server peer answers exactly what
JSON-RPC 2.0 prescribes (-32700 / -32600 / -32601 / -32602, nothing for
notifications and responses), and keeps serving.

Bytes mode; frames are injected with ``send_raw`` and the answers read raw
from the other end.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trio_mcp.actors import InboundRequest, Peer
from trio_mcp.protocol import ErrorResponse, MethodNotFound, Response, raw_or_none
from trio_mcp.transports import memory_pair

_ABSENT = object()


class Echo:
    """``echo`` answers its params; ``ping`` is the peer's own; the rest is -32601."""

    async def handle_request(self, request: InboundRequest) -> Any:
        if request.method == "echo":
            return {"echo": raw_or_none(request.params)}
        raise MethodNotFound(f"Method not found: {request.method}")

    async def handle_notification(self, method: str, params: Any) -> None:
        return None

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False


# ----------------------------------------------------------------------- oracle


def _answer_for(v: Any, in_flight: set[Any]) -> list[tuple[Any, ...]]:
    """The answers JSON-RPC 2.0 prescribes for one JSON value of a frame."""
    if not isinstance(v, dict):
        return [(None, -32600)]
    ident = v.get("id", _ABSENT)
    valid_id = type(ident) in (int, str)
    rid = ident if valid_id else None
    if v.get("jsonrpc", _ABSENT) != "2.0":
        if "method" in v:
            return [(rid, -32600)] if "id" in v else []  # never answer a notification
        if "result" in v or "error" in v:
            return []  # never answer a response
        return [(rid, -32600)]
    has_error = "error" in v and v["error"] is not None  # "error": null is JSON-RPC 1.0 noise
    if ("result" in v) + has_error + ("method" in v) > 1:
        # a request, a result or an error, never two: answered only when it may be a request
        return [(rid, -32600)] if "method" in v and "id" in v else []
    if "method" in v:
        method = v["method"]
        if type(method) is not str:
            return [(rid, -32600)]
        params = v.get("params", _ABSENT)
        if params is not _ABSENT and not isinstance(params, dict):
            if "id" not in v:
                return []
            return [(rid, -32602 if isinstance(params, list) else -32600)]
        if "id" not in v:
            return []
        if not valid_id:
            return [(None, -32600)]
        if ident in in_flight:  # the first one with this id is still being served
            return [(ident, -32600)]
        in_flight.add(ident)
        if method == "ping":
            return [(ident, "result", {})]
        if method == "echo":
            return [(ident, "result", {"echo": None if params is _ABSENT else params})]
        return [(ident, -32601)]
    return [] if "result" in v or "error" in v else [(rid, -32600)]


def prescribed(value: Any) -> list[tuple[Any, ...]]:
    if isinstance(value, list):
        if not value:
            return [(None, -32600)]
        in_flight: set[Any] = set()  # a batch is admitted in one go
        return [a for item in value for a in _answer_for(item, in_flight)]
    return _answer_for(value, set())


def _plain_json(v: Any) -> bool:
    """JSON that Python's parser and msgspec read alike."""
    if isinstance(v, float):
        return abs(v) != float("inf")
    if isinstance(v, int) and not isinstance(v, bool):
        return -(2**63) <= v <= 2**64
    if isinstance(v, str):
        return all(not 0xD800 <= ord(c) <= 0xDFFF for c in v)
    if isinstance(v, list):
        return all(_plain_json(x) for x in v)
    if isinstance(v, dict):
        return all(_plain_json(k) and _plain_json(x) for k, x in v.items())
    return True


def expected_answers(data: bytes) -> list[tuple[Any, ...]]:
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_reject)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return [(None, -32700)]
    assume(_plain_json(value))
    return prescribed(value)


def _reject(name: str) -> Any:
    raise ValueError(name)


def observed(frame: Any) -> tuple[Any, ...]:
    if type(frame) is ErrorResponse:
        return (frame.id, frame.error.code)
    assert type(frame) is Response, f"the peer sent {frame!r}"
    return (frame.id, "result", raw_or_none(frame.result))


# ------------------------------------------------------------------- strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=10,
)
ids = st.one_of(
    st.integers(min_value=-3, max_value=3),
    st.sampled_from(["a", "1", ""]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.just({}),
    st.just([]),
)
methods = st.one_of(
    st.sampled_from(["ping", "echo", "tools/list", "notifications/initialized", "notifications/progress"]),
    st.text(max_size=6),
    json_values,
).filter(lambda m: m != "notifications/cancelled")  # it would legitimately silence a request
params = st.one_of(
    st.dictionaries(st.text(max_size=4), json_values, max_size=3), st.lists(json_values, max_size=2), scalars
)
errors = st.one_of(
    st.fixed_dictionaries({"code": st.integers(-33000, 0), "message": st.text(max_size=6)}),
    json_values,
)


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    obj: dict[str, Any] = draw(st.dictionaries(st.text(max_size=4), scalars, max_size=1))
    if draw(st.integers(0, 7)) > 0:
        obj["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2, None]))
    for key, strategy in (
        ("id", ids),
        ("method", methods),
        ("params", params),
        ("result", json_values),
        ("error", errors),
    ):
        if draw(st.booleans()):
            obj[key] = draw(strategy)
    return obj


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


frames = st.one_of(
    st.binary(max_size=24),
    st.sampled_from([b"", b"{", b"[", b"[]", b"[1,2]", b"null", b'"\xff"', b"[" * 5000 + b"]" * 5000]),
    json_values.map(_dumps),
    envelopes().map(_dumps),
    st.lists(envelopes(), max_size=4).map(_dumps),
)


# ------------------------------------------------------------------- the tests

READ_TIMEOUT = 10  # seconds; a hang guard only a failing example waits for (generous: loaded CI)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, min_size=1, max_size=5))
async def test_server_answers_garbage_as_jsonrpc_prescribes(garbage: list[bytes]) -> None:
    wanted = [expected_answers(data) for data in garbage]
    a, b = memory_pair(mode="bytes")
    server = Peer(b, Echo(), name="server")
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        for data, want in zip(garbage, wanted):
            await a.send_raw(data)
            got = []
            for _ in want:
                with trio.fail_after(READ_TIMEOUT):
                    got.append(observed(await a.receive()))
            assert sorted(got, key=repr) == sorted(want, key=repr), data
        # Nothing more was said, and a valid request is still served.
        await a.send_raw(b'{"jsonrpc":"2.0","id":"sentinel","method":"echo","params":{"ok":true}}')
        with trio.fail_after(READ_TIMEOUT):
            assert observed(await a.receive()) == ("sentinel", "result", {"echo": {"ok": True}})
        stats = server.statistics()
        assert not server.closed
        assert (stats.handlers_running, stats.pending_calls) == (0, 0)
        nursery.cancel_scope.cancel()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(envelopes(), st.lists(envelopes(), min_size=1, max_size=3)), min_size=1, max_size=4)
)
async def test_client_survives_garbage_while_a_call_is_pending(garbage: list[Any]) -> None:
    # The client side of a session: junk (stray responses, bad frames) arrives
    # while a call waits; the call still gets its own answer.
    a, b = memory_pair(mode="bytes")
    client = Peer(a, Echo(), name="client")
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        result: list[Any] = []

        async def call() -> None:
            result.append(await client.request("work", {"n": 1}))

        nursery.start_soon(call)
        with trio.fail_after(READ_TIMEOUT):
            request = await b.receive()
        assert request.method == "work"
        ident = request.id
        for value in garbage:
            # Keep the pending call's own id out of the junk: answering it is
            # the legitimate way to end the call.
            items = value if isinstance(value, list) else [value]
            assume(all(item.get("id") != ident for item in items))
            await b.send_raw(_dumps(value))
        await b.send_raw(_dumps({"jsonrpc": "2.0", "id": ident, "result": {"answer": 42}}))
        with trio.fail_after(READ_TIMEOUT):
            while not result:
                await trio.testing.wait_all_tasks_blocked()
                if not result:  # the client's own answers to the junk: drain them
                    await b.receive()
        assert raw_or_none(result[0]) == {"answer": 42}
        assert not client.closed
        nursery.cancel_scope.cancel()
