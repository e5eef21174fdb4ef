"""Fixtures of the end-to-end session suite.

The heart of it is :class:`Wire`: a recording, validating wrapper around the
two ends of an in-memory pair. It records every message each side *sends*
(encoded to JSON as it would go on a wire, whichever memory mode is used) and
validates all of them against the official MCP schema of the negotiated
protocol version:

* requests and notifications against the definition of their method, and
  against the side allowed to send them;
* results against the result definition of the request they answer (ids are
  tracked per direction);
* error responses against the JSON-RPC envelope, and their id must be one the
  other side used (or ``null``);
* capability conformance of what a side initiates: a server-to-client
  request or notification needs the capability it is gated on (the client's
  ``sampling``/``roots``/``elicitation``, ``sampling.tools`` for tool-enabled
  sampling, ``elicitation.url`` for URL mode; the server's
  ``tools.listChanged``, ``logging``, ``resources.subscribe``...), and so
  does a client notification (``roots.listChanged``);
* from 2025-06-18, the ``structuredContent`` of a ``tools/call`` result
  against the ``outputSchema`` the tool was listed with.

Validation runs when a connection block (``connect``, ``open_raw_client``,
``open_raw_server``) exits, inside the test body, so a schema violation fails
the test itself and a strict ``xfail`` can hold it (if the block raised, the
problems are added as a note to that exception); the ``wires`` fixture
validates at teardown any wire that was never validated. Messages a test
sends on purpose outside the protocol are sent inside
``wire.unchecked(side)``; raw bytes (``send_raw``) are recorded, never
validated, but the ids they carry count for checking the answers.

Tests taking ``version`` run once per handshake version (a test may
parametrize ``version`` itself to narrow it), and through ``connect`` once
per memory mode (``mode``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import attrs
import jsonschema
import pytest
import trio

from trio_mcp.actors import Peer
from trio_mcp.actors._client import ClientSession, open_session
from trio_mcp.actors._server import ServerSession
from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    V2025_06_18,
    MethodNotFound,
    encode,
    has_capability,
    lookup,
    raw_or_none,
)
from trio_mcp.server import LowLevelServer
from trio_mcp.transports import memory_pair

try:  # run from the repository root or from tests/
    from recording import Inbox, RecordingStream
    from schema_check import validate_definition, validate_message
except ImportError:  # pragma: no cover
    from tests.recording import Inbox, RecordingStream  # noqa: F401 (Inbox: for the tests)
    from tests.schema_check import validate_definition, validate_message

MODES = ("zero-copy", "bytes", "inline")
#: Seconds; a hang guard that a passing test never reaches.
TIMEOUT = 10


# --------------------------------------------------------------------------
# The recording, validating wire


@attrs.define
class Sent:
    """One message a side sent, as JSON (``None`` for raw garbage)."""

    side: str  # "client" | "server"
    data: Any
    raw: bytes | None = None
    checked: bool = True
    batch: list[dict[str, Any]] | None = None
    #: One answer of a batch answer (a JSON array: recorded item by item).
    in_batch_answer: bool = False

    def request_ids(self) -> Iterator[tuple[Any, str]]:
        """(id, method) of the requests in this frame; for raw frames, any
        readable id counts (an invalid request is answered with its id)."""
        for item in [self.data] if self.batch is None else self.batch:
            if not isinstance(item, dict) or "id" not in item:
                continue
            if "method" in item or (self.raw is not None and "result" not in item and "error" not in item):
                try:
                    hash(item["id"])
                except TypeError:
                    continue
                yield item["id"], str(item.get("method"))

    @property
    def method(self) -> str | None:
        return self.data.get("method") if isinstance(self.data, dict) else None

    @property
    def is_request(self) -> bool:
        return isinstance(self.data, dict) and "method" in self.data and "id" in self.data

    @property
    def is_notification(self) -> bool:
        return isinstance(self.data, dict) and "method" in self.data and "id" not in self.data


def _other(side: str) -> str:
    return "server" if side == "client" else "client"


class Wire:
    """What both sides of one connection sent, and the schema check of it."""

    def __init__(self, *, fallback_version: str) -> None:
        self.fallback_version = fallback_version
        self.sent: list[Sent] = []
        self._unchecked: dict[str, int] = {"client": 0, "server": 0}
        self.validated = False

    # -- recording

    def record(self, side: str, message: Any, related: Any = None) -> Sent:
        try:
            data = json.loads(encode(message))
        except Exception as exc:  # the transport will refuse it too
            data = {"unencodable": repr(exc)}
        if isinstance(data, list):  # a batch answer: each answer checked as one
            entries = [
                Sent(side, item, checked=self._unchecked[side] == 0, in_batch_answer=True) for item in data
            ]
            self.sent.extend(entries)
            return entries[-1]
        entry = Sent(side, data, checked=self._unchecked[side] == 0)
        self.sent.append(entry)
        return entry

    def record_raw(self, side: str, raw: bytes) -> Sent:
        try:  # a readable request id still counts as used (its error answer is checked)
            data = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, list):  # a batch: keep its request ids
            entry = Sent(
                side, None, raw=bytes(raw), checked=False, batch=[d for d in data if isinstance(d, dict)]
            )
        else:
            entry = Sent(side, data if isinstance(data, dict) else None, raw=bytes(raw), checked=False)
        self.sent.append(entry)
        return entry

    def forget(self, entry: Sent) -> None:
        """Drop a record whose send failed (nothing went on the wire)."""
        for i in range(len(self.sent) - 1, -1, -1):
            if self.sent[i] is entry:
                del self.sent[i]
                return

    @contextmanager
    def unchecked(self, side: str) -> Iterator[None]:
        """Messages ``side`` sends in this block are recorded, not validated
        (deliberately invalid input). Their answers are still validated."""
        self._unchecked[side] += 1
        try:
            yield
        finally:
            self._unchecked[side] -= 1

    # -- queries

    def messages(self, side: str | None = None, *, method: str | None = None) -> list[dict[str, Any]]:
        return [
            s.data
            for s in self.sent
            if s.data is not None
            and (side is None or s.side == side)
            and (method is None or s.method == method)
        ]

    def notifications(self, side: str, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages(side, method=method) if "id" not in m]

    def requests(self, side: str, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages(side, method=method) if "id" in m]

    def responses(self, side: str) -> list[dict[str, Any]]:
        return [m for m in self.messages(side) if "method" not in m]

    def response_to(self, side: str, request: dict[str, Any]) -> dict[str, Any] | None:
        """The answer ``side`` sent to ``request`` (sent by the other side)."""
        for m in self.responses(side):
            if m.get("id") == request["id"]:
                return m
        return None

    def _initialize(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        request = next((m for m in self.messages("client", method="initialize") if "id" in m), None)
        if request is None:
            return None, None
        answer = self.response_to("server", request)
        return request, answer

    @property
    def version(self) -> str:
        """The negotiated version (else the offered one, else the fallback)."""
        request, answer = self._initialize()
        if answer is not None and isinstance(answer.get("result"), dict):
            negotiated = answer["result"].get("protocolVersion")
            if negotiated in HANDSHAKE_VERSIONS:
                return negotiated
        if request is not None:
            offered = (request.get("params") or {}).get("protocolVersion")
            if offered in HANDSHAKE_VERSIONS:
                return offered
        return self.fallback_version

    def capabilities(self, side: str) -> dict[str, Any]:
        request, answer = self._initialize()
        if side == "client":
            return ((request or {}).get("params") or {}).get("capabilities") or {}
        return ((answer or {}).get("result") or {}).get("capabilities") or {}

    # -- validation

    def validate(self) -> None:
        """Validate every recorded message; raises AssertionError on the first failure."""
        self.validated = True
        version = self.version
        pending: dict[str, dict[Any, str]] = {"client": {}, "server": {}}  # requester -> id -> method
        request_of: dict[str, dict[Any, Any]] = {"client": {}, "server": {}}  # requester -> id -> request
        for item in self.sent:
            for ident, method in item.request_ids():
                pending[item.side].setdefault(ident, method)
                if item.data is not None and item.data.get("id") == ident:
                    request_of[item.side].setdefault(ident, item.data)
        problems: list[str] = []
        for index, item in enumerate(self.sent):
            data = item.data
            if data is None:
                continue
            side = item.side
            if not item.checked:
                continue
            where = f"message #{index} sent by the {side}"
            try:
                if isinstance(data, dict) and "method" in data:
                    validate_message(data, version, sender=side)  # type: ignore[arg-type]
                    self._check_capability(side, data, version)
                elif isinstance(data, dict) and "result" in data:
                    method = pending[_other(side)].get(data.get("id"))
                    if method is None:
                        raise AssertionError(
                            f"result for id {data.get('id')!r}, which the {_other(side)} never used"
                        )
                    request = request_of[_other(side)].get(data.get("id"))
                    if method == "tools/call" and "task" in ((request or {}).get("params") or {}):
                        # a task-augmented call (2025-11-25) is answered with its task
                        validate_message(data, version, sender=side)  # type: ignore[arg-type]
                        validate_definition(data["result"], version, "CreateTaskResult")
                        continue
                    validate_message(data, version, method=method, sender=side)  # type: ignore[arg-type]
                    if method == "tools/call" and version >= V2025_06_18:  # outputSchema exists
                        self._check_structured_content(
                            data["result"], request_of[_other(side)].get(data["id"])
                        )
                elif isinstance(data, dict) and "error" in data and data.get("id") is None:
                    _check_null_id_error(data)
                else:
                    validate_message(data, version)
                    ident = data.get("id") if isinstance(data, dict) else None
                    if ident not in pending[_other(side)]:
                        raise AssertionError(
                            f"error answer for id {ident!r}, which the {_other(side)} never used"
                        )
            except AssertionError as exc:
                problems.append(f"{where} (MCP {version}): {exc}")
        if problems:
            raise AssertionError(f"{len(problems)} invalid message(s):\n" + "\n".join(problems))

    def output_schemas(self) -> dict[str, Any]:
        """Each listed tool's outputSchema, from the tools/list results on the wire."""
        listed: dict[str, Any] = {}
        for request in self.requests("client", "tools/list"):
            answer = self.response_to("server", request)
            for tool in ((answer or {}).get("result") or {}).get("tools", []):
                if isinstance(tool, dict) and "outputSchema" in tool:
                    listed[tool.get("name")] = tool["outputSchema"]
        return listed

    def _check_structured_content(self, result: Any, request: Any) -> None:
        """MCP: a tool with an outputSchema MUST return structured results
        that conform to it (checked for tools listed on this wire)."""
        if not isinstance(result, dict) or result.get("isError") is True or not isinstance(request, dict):
            return
        name = (request.get("params") or {}).get("name")
        schema = self.output_schemas().get(name)
        if schema is None:
            return
        if "structuredContent" not in result:
            raise AssertionError(f"tool {name!r} has an outputSchema but its result has no structuredContent")
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(schema).iter_errors(result["structuredContent"])
        )
        if error is not None:
            raise AssertionError(
                f"structuredContent of tool {name!r} does not conform to its outputSchema: {error.message}"
            )

    def _check_capability(self, side: str, data: dict[str, Any], version: str) -> None:
        method = data["method"]
        if side == "client" and "id" in data:
            return  # client requests: the server enforces (tests probe it on purpose)
        spec = lookup(method)
        path = None if spec is None else spec.capability_in(version)
        if path is None:
            return
        owner, *rest = path
        self._require(owner, rest, method)
        params = data.get("params") or {}
        if method == "sampling/createMessage" and "tools" in params:
            # 2025-11-25: "Servers MUST NOT send tool-enabled sampling requests
            # to clients that have not declared ... sampling.tools"
            self._require("client", ["sampling", "tools"], f"{method} with tools")
        if method == "elicitation/create" and params.get("mode") == "url":
            self._require("client", ["elicitation", "url"], f"{method} in URL mode")

    def _require(self, owner: str, path: list[str], what: str) -> None:
        caps = self.capabilities(owner)
        if not has_capability(caps, path):
            raise AssertionError(
                f"{what!r} needs the {owner} capability {'.'.join(path)!r}, which was not declared "
                f"(declared: {json.dumps(caps, sort_keys=True)})"
            )


def _check_null_id_error(data: dict[str, Any]) -> None:
    """An error answer to a frame whose id could not be read.

    JSON-RPC 2.0 requires ``"id": null`` there, which the MCP schemas do not
    model (before 2025-11-25 the id is a required string or integer; from
    2025-11-25 it may be absent, not null), so check the envelope by hand."""
    error = data.get("error")
    if set(data) != {"jsonrpc", "id", "error"} or data["jsonrpc"] != "2.0":
        raise AssertionError(f"malformed error answer: {data!r}")
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        raise AssertionError(f"malformed error object: {data!r}")


@contextmanager
def validating(wire: Wire) -> Iterator[None]:
    """Validate ``wire`` when the block exits. If the block raised, the
    schema problems (if any) become a note on that exception instead."""
    try:
        yield
    except BaseException as exc:
        try:
            wire.validate()
        except AssertionError as invalid:
            exc.add_note(f"(also, the wire did not validate: {invalid})")
        raise
    wire.validate()


# --------------------------------------------------------------------------
# Connections


@attrs.define
class Conn:
    client: ClientSession
    server: ServerSession
    wire: Wire
    client_stream: RecordingStream
    server_stream: RecordingStream

    @property
    def version(self) -> str:
        assert self.client.protocol_version is not None
        return self.client.protocol_version


class Wires:
    """Every wire a test opened; validated at teardown if the test did not."""

    def __init__(self, version: str = LATEST_HANDSHAKE_VERSION) -> None:
        self.version = version
        self.all: list[Wire] = []

    def new(self, version: str | None = None) -> Wire:
        wire = Wire(fallback_version=version or self.version)
        self.all.append(wire)
        return wire

    def recording_pair(
        self, mode: str, version: str | None = None
    ) -> tuple[RecordingStream, RecordingStream, Wire]:
        wire = self.new(version)
        client_end, server_end = memory_pair(mode=mode)  # type: ignore[arg-type]
        return RecordingStream(client_end, "client", wire), RecordingStream(server_end, "server", wire), wire


@asynccontextmanager
async def open_connection(
    app: LowLevelServer, wires: Wires, *, mode: str, protocol_version: str, **client_options: Any
) -> AsyncIterator[Conn]:
    client_end, server_end, wire = wires.recording_pair(mode, protocol_version)
    with validating(wire):
        async with app.running(), trio.open_nursery() as nursery:
            server = await app.start_session(server_end, nursery)
            async with open_session(
                client_end, protocol_version=protocol_version, **client_options
            ) as client:
                # The client has sent notifications/initialized; wait until the
                # server has read it, so that nothing it sends is dropped as early.
                await server.wait_initialized()
                yield Conn(client, server, wire, client_end, server_end)
            nursery.cancel_scope.cancel()


@pytest.fixture(params=HANDSHAKE_VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def wires() -> Iterator[Wires]:
    recorded = Wires()
    yield recorded
    for wire in recorded.all:
        if not wire.validated:
            wire.validate()


ConnectFactory = Callable[..., Any]


@pytest.fixture
def connect(wires: Wires, version: str, mode: str) -> ConnectFactory:
    """``async with connect(app, **client_options) as conn:`` an initialized
    client session (``conn.client``) with ``app``'s session (``conn.server``),
    speaking ``version`` over a recorded, validated memory pair in ``mode``."""

    def factory(app: LowLevelServer, **client_options: Any) -> Any:
        client_options.setdefault("protocol_version", version)
        client_options.setdefault("mode", mode)
        m = client_options.pop("mode")
        return open_connection(app, wires, mode=m, **client_options)

    return factory


@pytest.fixture
def connect_bytes(wires: Wires, version: str) -> ConnectFactory:
    """``connect`` over a bytes-mode pair only (``send_raw`` needs one)."""

    def factory(app: LowLevelServer, **client_options: Any) -> Any:
        client_options.setdefault("protocol_version", version)
        return open_connection(app, wires, mode="bytes", **client_options)

    return factory


# --------------------------------------------------------------------------
# Helpers


class RawDispatcher:
    """A scripted dispatcher for a bare :class:`Peer` playing one side by hand."""

    def __init__(self, handlers: dict[str, Callable[[Any], Any]] | None = None) -> None:
        self.handlers = dict(handlers or {})
        self.notifications: list[tuple[str, Any]] = []

    async def handle_request(self, request: Any) -> Any:
        handler = self.handlers.get(request.method)
        if handler is None:
            raise MethodNotFound(f"Method not found: {request.method}")
        result = handler(request)
        if hasattr(result, "__await__"):
            result = await result
        return result

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notifications.append((method, raw_or_none(params)))

    def handle_notification_inline(self, method: str, params: Any) -> bool:
        return False


@attrs.define
class RawConn:
    """A bare client :class:`Peer` (no handshake done) talking to an app's session."""

    peer: Peer
    server: ServerSession
    wire: Wire
    client_stream: RecordingStream
    server_stream: RecordingStream

    async def initialize(self, version: str = LATEST_HANDSHAKE_VERSION, *, initialized: bool = True) -> Any:
        result = await self.peer.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        if initialized:
            await self.peer.notify("notifications/initialized")
        return raw_or_none(result)


@asynccontextmanager
async def open_raw_client(
    app: LowLevelServer, wires: Wires, *, mode: str = "bytes"
) -> AsyncIterator[RawConn]:
    client_end, server_end, wire = wires.recording_pair(mode)
    with validating(wire):
        async with app.running(), trio.open_nursery() as nursery:
            server = await app.start_session(server_end, nursery)
            peer = Peer(client_end, RawDispatcher(), name="raw-client")
            await nursery.start(peer.run)
            yield RawConn(peer, server, wire, client_end, server_end)
            await peer.aclose()
            nursery.cancel_scope.cancel()


@attrs.define
class RawServer:
    """A bare server :class:`Peer` scripted by a :class:`RawDispatcher`."""

    peer: Peer
    dispatcher: RawDispatcher
    wire: Wire
    client_stream: RecordingStream
    server_stream: RecordingStream


@asynccontextmanager
async def open_raw_server(
    wires: Wires, handlers: dict[str, Callable[[Any], Any]], *, mode: str = "bytes"
) -> AsyncIterator[RawServer]:
    client_end, server_end, wire = wires.recording_pair(mode)
    dispatcher = RawDispatcher(handlers)
    with validating(wire):
        async with trio.open_nursery() as nursery:
            peer = Peer(server_end, dispatcher, name="raw-server")
            await nursery.start(peer.run)
            yield RawServer(peer, dispatcher, wire, client_end, server_end)
            await peer.aclose()
            nursery.cancel_scope.cancel()


def initialize_result(version: str, **capabilities: Any) -> dict[str, Any]:
    """An initialize result a scripted server answers with."""
    return {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": "scripted", "version": "0"},
    }


def result_of(wire: Wire, side: str, request: dict[str, Any]) -> Any:
    answer = wire.response_to(side, request)
    assert answer is not None, f"the {side} never answered {request}"
    assert "result" in answer, f"the {side} answered {request} with an error: {answer}"
    return answer["result"]
