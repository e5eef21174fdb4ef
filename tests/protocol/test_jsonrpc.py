"""The JSON-RPC envelope codec: every shape, every error code, and a property
check that :func:`decode` never raises and classifies like the spec says."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET, Raw

from trio_mcp.protocol import (
    ConnectionClosed,
    ErrorObject,
    ErrorResponse,
    InternalError,
    InvalidMessage,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    Notification,
    ParseError,
    Request,
    ResourceNotFound,
    Response,
    ServerOverloaded,
    UnsupportedProtocolVersion,
    UrlElicitationRequired,
    coerce,
    decode,
    encode,
    encode_line,
    error_from_code,
    error_response,
    raw_or_none,
)

MISSING = "<missing>"  # stands for an absent field in the descriptions below
_ABSENT = object()


def describe(msg: Any) -> Any:
    """A decoded frame as plain, comparable data."""
    if isinstance(msg, list):
        return [describe(m) for m in msg]
    if isinstance(msg, InvalidMessage):
        assert isinstance(msg.error, McpError)
        assert type(msg.error) is type(error_from_code(msg.error.code, "")), "most specific class"
        return ("invalid", msg.error.code, msg.id, msg.answer)

    def payload(value: Any) -> Any:
        if value is UNSET:
            return MISSING
        assert type(value) is Raw, "payloads stay raw until someone needs them"
        return raw_or_none(value)

    if type(msg) is Request:
        return ("request", msg.id, msg.method, payload(msg.params))
    if type(msg) is Notification:
        return ("notification", msg.method, payload(msg.params))
    if type(msg) is Response:
        return ("response", msg.id, payload(msg.result))
    if type(msg) is ErrorResponse:
        data = MISSING if msg.error.data is UNSET else msg.error.data
        return ("error", msg.id, msg.error.code, msg.error.message, data)
    raise AssertionError(f"decode returned {msg!r}")


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


# ----------------------------------------------------------------- valid shapes

VALID = [
    pytest.param(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "x", "arguments": {"a": [1, 2]}},
        },
        ("request", 1, "tools/call", {"name": "x", "arguments": {"a": [1, 2]}}),
        id="request-int-id",
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": "abc", "method": "ping"},
        ("request", "abc", "ping", MISSING),
        id="request-str-id",
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": "", "method": "m"}, ("request", "", "m", MISSING), id="request-empty-id"
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": 0, "method": "m"}, ("request", 0, "m", MISSING), id="request-zero-id"
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": -7, "method": "m"}, ("request", -7, "m", MISSING), id="request-neg-id"
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": 2**80, "method": "m"}, ("request", 2**80, "m", MISSING), id="request-big-id"
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {}},
        ("request", 1, "m", {}),
        id="request-empty-params",
    ),
    pytest.param(
        {"method": "m", "params": {"x": "é€😀"}, "id": 3, "jsonrpc": "2.0", "extra": [1]},
        ("request", 3, "m", {"x": "é€😀"}),
        id="request-any-order-non-ascii-extra-field",
    ),
    pytest.param(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ("notification", "notifications/initialized", MISSING),
        id="notification",
    ),
    pytest.param(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 0.5},
        },
        ("notification", "notifications/progress", {"progressToken": 1, "progress": 0.5}),
        id="notification-params",
    ),
    pytest.param({"jsonrpc": "2.0", "id": 1, "result": {}}, ("response", 1, {}), id="response"),
    pytest.param({"jsonrpc": "2.0", "id": "r", "result": None}, ("response", "r", None), id="response-null"),
    pytest.param(
        {"jsonrpc": "2.0", "id": 2, "result": [1, "a"]}, ("response", 2, [1, "a"]), id="response-array"
    ),
    pytest.param({"jsonrpc": "2.0", "id": 2, "result": 5}, ("response", 2, 5), id="response-scalar"),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}},
        ("error", 1, -32601, "nope", MISSING),
        id="error",
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": "s", "error": {"code": 7, "message": "m", "data": {"k": [1]}}},
        ("error", "s", 7, "m", {"k": [1]}),
        id="error-data",
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
        ("error", None, -32700, "Parse error", MISSING),
        id="error-null-id",
    ),
]


@pytest.mark.parametrize(("frame", "expected"), VALID)
def test_valid_shapes(frame: dict[str, Any], expected: Any) -> None:
    assert describe(decode(dumps(frame))) == expected
    # Every input type the transports use, and insignificant whitespace.
    text = json.dumps(frame, indent=2)
    assert describe(decode(text)) == expected
    assert describe(decode(bytearray(b" \r\n\t" + text.encode() + b"\n"))) == expected
    assert describe(decode(memoryview(dumps(frame)))) == expected


@pytest.mark.parametrize(
    "message",
    [
        Request(id=1, method="tools/list"),
        Request(id="x", method="m", params={"a": 1, "b": [None, True, 1.5]}),
        Notification(method="notifications/cancelled", params={"requestId": 1, "reason": "r"}),
        Notification(method="n"),
        Response(id=4, result={"content": []}),
        Response(id=4, result=None),
        ErrorResponse(id=None, error=ErrorObject(code=-32700, message="bad")),
        ErrorResponse(id=9, error=ErrorObject(code=-32001, message="busy", data={"retry": 1})),
    ],
)
def test_encode_decode_roundtrip(message: Any) -> None:
    wire = encode(message)
    assert json.loads(wire)["jsonrpc"] == "2.0"
    back = decode(wire)
    assert type(back) is type(message)
    assert json.loads(encode(back)) == json.loads(wire)
    assert encode(back) == wire  # Raw payloads are written back verbatim


def test_encode_omits_unset_and_encode_line() -> None:
    assert encode(Request(id=1, method="ping")) == b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert encode(Notification(method="n")) == b'{"jsonrpc":"2.0","method":"n"}'
    assert encode(ErrorResponse(id=1, error=ErrorObject(code=1, message="m"))) == (
        b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}'
    )
    buf = bytearray(b"x")
    encode_line(Request(id=1, method="ping"), buf)
    encode_line([Notification(method="a"), Notification(method="b")], buf)
    lines = bytes(buf).split(b"\n")
    assert lines[0] == b'x{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert json.loads(lines[1]) == [{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}]
    assert lines[2] == b""


# ---------------------------------------------------------------- parse errors

DEEP = 100_000


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"   ",
        b"{",
        b'{"jsonrpc":"2.0","method":"x"',
        b"nope",
        b"{'jsonrpc': '2.0'}",
        b'{"jsonrpc":"2.0","method":"x"} {}',
        b'{"jsonrpc":"2.0","method":"x",}',
        b"NaN",
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":NaN}}',
        b'"\\udc00"',
        b"[" * DEEP + b"]" * DEEP,
        b'{"a":' * DEEP + b"1" + b"}" * DEEP,
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b"[" * DEEP + b"]" * DEEP + b"}",
        b"[1, " + b'{"a":[' * DEEP + b"]}" * DEEP + b"]",
        b'"abc',
        b"tru",
        b"[1,",
        b"[1] x",
        b"1 2",
        b'"a" x',
        b"[{]",
    ],
    ids=lambda b: repr(b[:40]),
)
def test_bad_json_is_a_parse_error(data: bytes) -> None:
    msg = decode(data)
    assert describe(msg) == ("invalid", -32700, None, True)
    assert isinstance(msg.error, ParseError)
    assert msg.error.message.startswith("Parse error")


@pytest.mark.parametrize(
    "data",
    [
        b"\xff",
        b"\x80{}",
        b'"\xff"',  # a (non-object) string
        b'["\xc3\x28"]',  # inside a batch
        b'{"jsonrpc":"2.0","method":"\xed\xa0\x80"}',  # an encoded surrogate
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\xc3\x28"}}',  # inside raw params
        b'{"jsonrpc":"2.0","id":1,"result":"\xe2\x82"}',  # truncated sequence in a raw result
        b'{"jsonrpc":"2.0","method":"x","ignored":"\xc0\xaf"}',  # overlong, in a skipped field
        b"\xef\xbb\xbf{}",  # a byte order mark is not JSON
    ],
    ids=lambda b: repr(b[:40]),
)
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_invalid_utf8_is_a_parse_error(data: bytes, kind: Any) -> None:
    assert describe(decode(kind(data))) == ("invalid", -32700, None, True)


# ------------------------------------------------------------- invalid requests

R = {"jsonrpc": "2.0"}

INVALID = [
    # not an object
    pytest.param(1, -32600, None, True, id="number"),
    pytest.param("req", -32600, None, True, id="string"),
    pytest.param(None, -32600, None, True, id="null"),
    pytest.param(True, -32600, None, True, id="bool"),
    pytest.param({}, -32600, None, True, id="empty-object"),
    pytest.param(R, -32600, None, True, id="nothing-but-jsonrpc"),
    pytest.param({**R, "id": 4}, -32600, 4, True, id="id-only"),
    # bad jsonrpc member
    pytest.param({"id": 1, "method": "m"}, -32600, 1, True, id="request-no-jsonrpc"),
    pytest.param({"jsonrpc": "1.0", "id": "a", "method": "m"}, -32600, "a", True, id="request-jsonrpc-1.0"),
    pytest.param({"jsonrpc": 2.0, "id": 1, "method": "m"}, -32600, 1, True, id="request-jsonrpc-number"),
    pytest.param(
        {"jsonrpc": "1.0", "id": 1.5, "method": "m"}, -32600, None, True, id="request-jsonrpc-bad-id"
    ),
    pytest.param({"jsonrpc": "1.0", "method": "m"}, -32600, None, False, id="notification-jsonrpc-1.0"),
    pytest.param({"method": "m", "params": {}}, -32600, None, False, id="notification-no-jsonrpc"),
    pytest.param({"jsonrpc": "1.0", "id": 5, "result": 1}, -32600, 5, False, id="response-jsonrpc-1.0"),
    pytest.param({"id": 5, "error": {"code": 1, "message": "m"}}, -32600, 5, False, id="error-no-jsonrpc"),
    pytest.param({"jsonrpc": "1.0"}, -32600, None, True, id="jsonrpc-1.0-only"),
    # bad request ids
    pytest.param({**R, "id": 1.5, "method": "m"}, -32600, None, True, id="id-float"),
    pytest.param({**R, "id": 1.0, "method": "m"}, -32600, None, True, id="id-float-integral"),
    pytest.param({**R, "id": True, "method": "m"}, -32600, None, True, id="id-true"),
    pytest.param({**R, "id": False, "method": "m"}, -32600, None, True, id="id-false"),
    pytest.param({**R, "id": None, "method": "m"}, -32600, None, True, id="id-null"),
    pytest.param({**R, "id": {"a": 1}, "method": "m"}, -32600, None, True, id="id-object"),
    pytest.param({**R, "id": [1], "method": "m"}, -32600, None, True, id="id-array"),
    # bad methods (answered even without an id: JSON-RPC 2.0, section 7)
    pytest.param({**R, "id": 7, "method": 5}, -32600, 7, True, id="method-number"),
    pytest.param({**R, "id": 7, "method": None}, -32600, 7, True, id="method-null"),
    pytest.param({**R, "id": 7, "method": ["m"]}, -32600, 7, True, id="method-array"),
    pytest.param({**R, "method": 1, "params": "bar"}, -32600, None, True, id="method-number-no-id"),
    pytest.param({**R, "id": 1.5, "method": {}}, -32600, None, True, id="method-object-bad-id"),
    # params must be an object: array is -32602, a scalar is not a request at all
    pytest.param({**R, "id": 1, "method": "m", "params": [1, 2]}, -32602, 1, True, id="params-array"),
    pytest.param({**R, "id": 1, "method": "m", "params": []}, -32602, 1, True, id="params-empty-array"),
    pytest.param({**R, "method": "m", "params": [1]}, -32602, None, False, id="notification-params-array"),
    pytest.param({**R, "id": "q", "method": "m", "params": 3}, -32600, "q", True, id="params-number"),
    pytest.param({**R, "id": "q", "method": "m", "params": "s"}, -32600, "q", True, id="params-string"),
    pytest.param({**R, "id": "q", "method": "m", "params": True}, -32600, "q", True, id="params-bool"),
    pytest.param({**R, "id": "q", "method": "m", "params": None}, -32600, "q", True, id="params-null"),
    pytest.param({**R, "method": "m", "params": None}, -32600, None, False, id="notification-params-null"),
    pytest.param(
        {**R, "id": 2.5, "method": "m", "params": [1]}, -32602, None, True, id="params-array-bad-id"
    ),
]


@pytest.mark.parametrize(("frame", "code", "ident", "answer"), INVALID)
def test_invalid_messages(frame: Any, code: int, ident: Any, answer: bool) -> None:
    msg = decode(dumps(frame))
    assert describe(msg) == ("invalid", code, ident, answer)
    assert type(msg.error) is {-32600: InvalidRequest, -32602: InvalidParams}[code]
    # The error can be answered as is.
    assert json.loads(encode(error_response(msg.id, msg.error)))["error"]["code"] == code


RESPONSES = [
    pytest.param({**R, "result": 1}, id="result-no-id"),
    pytest.param({**R, "id": None, "result": 1}, id="result-null-id"),
    pytest.param({**R, "id": 1.5, "result": 1}, id="result-float-id"),
    pytest.param({**R, "id": True, "result": 1}, id="result-bool-id"),
    pytest.param({**R, "id": [], "result": 1}, id="result-array-id"),
    pytest.param({**R, "id": 1, "error": "boom"}, id="error-string"),
    pytest.param({**R, "id": 1, "error": None}, id="error-null"),
    pytest.param({**R, "id": 1, "error": [1]}, id="error-array"),
    pytest.param({**R, "id": 1, "error": {}}, id="error-empty"),
    pytest.param({**R, "id": 1, "error": {"message": "m"}}, id="error-no-code"),
    pytest.param({**R, "id": 1, "error": {"code": 1}}, id="error-no-message"),
    pytest.param({**R, "id": 1, "error": {"code": 1.5, "message": "m"}}, id="error-float-code"),
    pytest.param({**R, "id": 1, "error": {"code": True, "message": "m"}}, id="error-bool-code"),
    pytest.param({**R, "id": 1, "error": {"code": "1", "message": "m"}}, id="error-string-code"),
    pytest.param({**R, "id": 1, "error": {"code": 1, "message": 2}}, id="error-number-message"),
    pytest.param({**R, "error": {"code": 1, "message": "m"}}, id="error-no-id"),
    pytest.param({**R, "id": 1.5, "error": {"code": 1, "message": "m"}}, id="error-float-id"),
    pytest.param({**R, "id": {}, "error": {"code": 1, "message": "m"}}, id="error-object-id"),
]


@pytest.mark.parametrize("frame", RESPONSES)
def test_malformed_responses_are_never_answered(frame: Any) -> None:
    msg = decode(dumps(frame))
    assert describe(msg) == ("invalid", -32600, None, False)


def test_response_with_both_result_and_error_is_not_answered() -> None:
    msg = decode(dumps({**R, "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}))
    assert isinstance(msg, (Response, ErrorResponse)) or (isinstance(msg, InvalidMessage) and not msg.answer)


def test_params_check_reads_the_first_byte_after_whitespace() -> None:
    assert describe(decode(b'{"jsonrpc":"2.0","id":1,"method":"m","params":  \n [1]}')) == (
        "invalid",
        -32602,
        1,
        True,
    )
    assert describe(decode(b'{"jsonrpc":"2.0","id":1,"method":"m","params":\t{"a":1} }')) == (
        "request",
        1,
        "m",
        {"a": 1},
    )


# --------------------------------------------------------------------- batches


def test_batch_of_every_shape() -> None:
    frame = [
        {**R, "id": 1, "method": "sum", "params": {"a": 1}},
        {**R, "method": "notify_hello", "params": {"x": 7}},
        {**R, "id": "2", "method": "subtract", "params": [42, 23]},
        {"foo": "boo"},
        {**R, "id": 5, "result": 19},
        {**R, "id": None, "error": {"code": -32600, "message": "m"}},
        1,
        [],
        {**R, "method": "notifications/x"},
        {**R, "id": 9, "method": 9},
    ]
    out = decode(dumps(frame))
    assert isinstance(out, list)
    assert describe(out) == [
        ("request", 1, "sum", {"a": 1}),
        ("notification", "notify_hello", {"x": 7}),
        ("invalid", -32602, "2", True),
        ("invalid", -32600, None, True),
        ("response", 5, 19),
        ("error", None, -32600, "m", MISSING),
        ("invalid", -32600, None, True),
        ("invalid", -32600, None, True),
        ("notification", "notifications/x", MISSING),
        ("invalid", -32600, 9, True),
    ]


JSONRPC_SPEC_EXAMPLES = [
    # JSON-RPC 2.0, section 7: the frames whose answer is an error.
    (b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]', ("invalid", -32700, None, True)),
    (b'{"jsonrpc": "2.0", "method": 1, "params": "bar"}', ("invalid", -32600, None, True)),
    (
        b'[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method"]',
        ("invalid", -32700, None, True),
    ),
    (b"[]", ("invalid", -32600, None, True)),
    (b"[1]", [("invalid", -32600, None, True)]),
    (b"[1,2,3]", [("invalid", -32600, None, True)] * 3),
    (
        (
            b'[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},'
            b' {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]'
        ),
        # array params are -32602 in MCP, but notifications are never answered
        [("invalid", -32602, None, False)] * 2,
    ),
]


@pytest.mark.parametrize(("data", "want"), JSONRPC_SPEC_EXAMPLES)
def test_jsonrpc_spec_examples(data: bytes, want: Any) -> None:
    assert describe(decode(data)) == want


def test_batch_edge_cases() -> None:
    # An empty batch is one invalid request, answered with a null id.
    assert describe(decode(b"[]")) == ("invalid", -32600, None, True)
    assert describe(decode(b" [ ] ")) == ("invalid", -32600, None, True)
    # JSON-RPC 2.0, section 7: "[1,2,3]" is three invalid requests.
    assert describe(decode(b"[1,2,3]")) == [("invalid", -32600, None, True)] * 3
    assert describe(decode(b"[[]]")) == [("invalid", -32600, None, True)]
    # A broken batch is one parse error.
    assert describe(decode(b'[{"jsonrpc":"2.0","method":"sum"},{"jsonrpc":"2.0","method"]')) == (
        "invalid",
        -32700,
        None,
        True,
    )
    # Notifications only: nothing to answer.
    notes = decode(dumps([{**R, "method": "a"}, {**R, "method": "b", "params": {}}]))
    assert describe(notes) == [("notification", "a", MISSING), ("notification", "b", {})]


# ----------------------------------------------------------- coerce and errors


class Point(msgspec.Struct):
    x: int
    y: int = 0


def test_coerce() -> None:
    assert coerce(Raw(b'{"x":1,"y":2}'), Point) == Point(1, 2)
    p = Point(3)
    assert coerce(p, Point) is p  # zero-copy pass-through
    assert coerce({"x": 4}, Point) == Point(4)
    assert coerce(UNSET, dict[str, Any]) == {}
    assert coerce(None, dict[str, Any]) == {}
    assert coerce(Point(5, 6), dict[str, int]) == {"x": 5, "y": 6}
    assert coerce({"a": 1}, dict[str, Any]) == {"a": 1}
    with pytest.raises(msgspec.ValidationError):
        coerce(Raw(b'{"y":2}'), Point)
    with pytest.raises(msgspec.ValidationError):
        coerce({"x": "one"}, Point)
    with pytest.raises(msgspec.DecodeError):
        coerce(Raw(b"{"), Point)


ERROR_CLASSES = [
    (ParseError, -32700),
    (InvalidRequest, -32600),
    (MethodNotFound, -32601),
    (InvalidParams, -32602),
    (InternalError, -32603),
    (ServerOverloaded, -32001),
    (ResourceNotFound, -32002),
    (ConnectionClosed, -32000),
    (UrlElicitationRequired, -32042),
    (MissingClientCapability, -32021),
    (UnsupportedProtocolVersion, -32022),
]


@pytest.mark.parametrize(("cls", "code"), ERROR_CLASSES)
def test_errors_round_trip_to_their_class(cls: type[McpError], code: int) -> None:
    assert cls.code == code
    exc = cls("went wrong", data={"why": [1, 2]})
    wire = encode(error_response(7, exc))
    assert json.loads(wire) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": code, "message": "went wrong", "data": {"why": [1, 2]}},
    }
    back = decode(wire)
    assert type(back) is ErrorResponse
    again = back.error.to_exception()
    assert type(again) is cls
    assert (again.code, again.message, again.data) == (code, "went wrong", {"why": [1, 2]})
    assert str(again) == f"[{code}] went wrong"
    assert type(error_from_code(code, "m")) is cls


def test_unknown_error_code_keeps_its_code() -> None:
    exc = error_from_code(-31999, "custom", {"d": 1})
    assert type(exc) is McpError
    assert (exc.code, exc.message, exc.data) == (-31999, "custom", {"d": 1})
    assert McpError.code == -32603  # the override is per instance
    assert "code=-31999" in repr(exc)
    # No data: the member is omitted on the wire, and comes back as None.
    wire = encode(error_response(None, McpError("x", code=5)))
    assert json.loads(wire) == {"jsonrpc": "2.0", "id": None, "error": {"code": 5, "message": "x"}}
    assert decode(wire).error.to_exception().data is None
    # Raw data (zero-copy peers) is decoded too.
    assert ErrorObject(code=1, message="m", data=Raw(b"[1]")).to_exception().data == [1]
    assert InvalidParams().message == "Invalid params"


def test_raw_or_none() -> None:
    assert raw_or_none(Raw(b'{"a":[1]}')) == {"a": [1]}
    assert raw_or_none(UNSET) is None
    assert raw_or_none(Point(1)) == {"x": 1, "y": 0}
    assert raw_or_none({"b": 2}) == {"b": 2}


# ------------------------------------------------------------------ properties


def expected_item(v: Any) -> Any:
    """What JSON-RPC 2.0 says one decoded JSON value is (independent oracle)."""
    if not isinstance(v, dict):
        return ("invalid", -32600, None, True)
    ident = v.get("id", _ABSENT)
    valid_id = type(ident) in (int, str)
    rid = ident if valid_id else None
    if v.get("jsonrpc", MISSING) != "2.0":
        if "method" in v:
            answer = "id" in v  # a request is answered, a notification never
        else:
            answer = "result" not in v and "error" not in v  # a response never
        return ("invalid", -32600, rid, answer)
    if ("method" in v) + ("result" in v) + (v.get("error") is not None) > 1:
        # One of a request, a result or an error; answered only if it may be a request.
        return ("invalid", -32600, rid, "method" in v and "id" in v)
    if "method" in v:
        method = v["method"]
        if type(method) is not str:
            return ("invalid", -32600, rid, True)
        params = v.get("params", MISSING)
        if params is not MISSING and not isinstance(params, dict):
            return ("invalid", -32602 if isinstance(params, list) else -32600, rid, "id" in v)
        if "id" not in v:
            return ("notification", method, params)
        if not valid_id:
            return ("invalid", -32600, None, True)
        return ("request", ident, method, params)
    if "result" in v:
        if not valid_id:
            return ("invalid", -32600, None, False)
        return ("response", ident, v["result"])
    if "error" in v:
        err = v["error"]
        if not (
            isinstance(err, dict) and type(err.get("code")) is int and isinstance(err.get("message"), str)
        ):
            return ("invalid", -32600, None, False)
        if not (ident is None or valid_id):
            return ("invalid", -32600, None, False)
        return ("error", ident, err["code"], err["message"], err.get("data", MISSING))
    return ("invalid", -32600, rid, True)


def expected(v: Any) -> Any:
    if isinstance(v, list):
        return [expected_item(x) for x in v] if v else ("invalid", -32600, None, True)
    return expected_item(v)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
ids = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64),
    st.text(max_size=4),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.just({}),
    st.just([1]),
)
methods = st.one_of(
    st.sampled_from(["ping", "tools/list", "initialize", "notifications/x"]), st.text(max_size=6), json_values
)
params = st.one_of(
    st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    st.lists(json_values, max_size=3),
    scalars,
)
errors = st.one_of(
    st.fixed_dictionaries(
        {"code": st.integers(min_value=-33000, max_value=1000), "message": st.text(max_size=8)},
        optional={"data": json_values},
    ),
    st.dictionaries(st.sampled_from(["code", "message", "data"]), json_values, max_size=3),
    json_values,
)


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """Objects that look like JSON-RPC messages, right or subtly wrong."""
    obj: dict[str, Any] = draw(st.dictionaries(st.text(max_size=5), json_values, max_size=2))
    if draw(st.integers(0, 9)) > 0:
        obj["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0, None, ""]))
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


PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(st.binary(max_size=64) | st.builds(lambda b: b'{"jsonrpc":"2.0",' + b, st.binary(max_size=32)))
def test_decode_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    out = decode(data)
    assert isinstance(out, (Request, Notification, Response, ErrorResponse, InvalidMessage, list))
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_reject)
    except (UnicodeDecodeError, ValueError):
        assert describe(out) == ("invalid", -32700, None, True)
        return
    if _representable(value):
        assert describe(out) == expected(value)


def _reject(name: str) -> Any:
    raise ValueError(name)


def _representable(v: Any) -> bool:
    """Plain JSON that both parsers read alike (finite floats, no lone surrogates)."""
    if isinstance(v, float):
        return v not in (float("inf"), float("-inf"))
    if isinstance(v, str):
        try:
            v.encode()
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(v, list):
        return all(_representable(x) for x in v)
    if isinstance(v, dict):
        return all(_representable(k) and _representable(x) for k, x in v.items())
    return True


@PROPS
@given(json_values, st.booleans())
def test_decode_never_raises_on_arbitrary_json(value: Any, ascii_only: bool) -> None:
    out = decode(json.dumps(value, ensure_ascii=ascii_only).encode())
    assert describe(out) == expected(value)


@PROPS
@given(envelopes() | st.lists(envelopes(), max_size=4))
def test_decode_classifies_like_jsonrpc(value: Any) -> None:
    out = decode(dumps(value))
    assert describe(out) == expected(value)
    # Every answerable error can be answered.
    for item in out if isinstance(out, list) else [out]:
        if isinstance(item, InvalidMessage) and item.answer:
            assert decode(encode(error_response(item.id, item.error))).error.code == item.error.code
