"""The JSON-RPC 2.0 envelope: typed messages and a one-pass codec.

Decoding classifies a frame by the fields present (a tagged union cannot tell
requests from responses) and keeps ``params`` / ``result`` as
:class:`msgspec.Raw`; the receiver decodes them with a cached per-method
decoder (:func:`coerce`) only when it needs them. Outgoing ``params`` and
``result`` may be Structs, plain builtins or ``Raw``: msgspec encodes all three.

Bad input never raises out of :func:`decode`: it returns an
:class:`InvalidMessage` carrying the JSON-RPC error to answer with.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Any, Final, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from ._errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    McpError,
    error_from_code,
)

__all__ = [
    "JSONRPC_VERSION",
    "ErrorObject",
    "ErrorResponse",
    "Frame",
    "InvalidMessage",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "coerce",
    "decode",
    "decode_utf8",
    "decoder_for",
    "encode",
    "encode_line",
    "encode_lines",
    "error_response",
    "raw_or_none",
]

JSONRPC_VERSION: Final = "2.0"
RequestId: TypeAlias = "int | str"


class Request(Struct, kw_only=True, frozen=True):
    """A request that expects a response."""

    jsonrpc: str = JSONRPC_VERSION
    id: int | str
    method: str
    params: Any = UNSET


class Notification(Struct, kw_only=True, frozen=True):
    """A one-way message: never answered."""

    jsonrpc: str = JSONRPC_VERSION
    method: str
    params: Any = UNSET


class Response(Struct, kw_only=True, frozen=True):
    """A successful answer to a request."""

    jsonrpc: str = JSONRPC_VERSION
    id: int | str
    result: Any


class ErrorObject(Struct, kw_only=True, frozen=True):
    code: int
    message: str
    data: Any = UNSET

    def to_exception(self) -> McpError:
        data = None if self.data is UNSET else self.data
        if isinstance(data, Raw):
            data = msgspec.json.decode(data)
        return error_from_code(self.code, self.message, data)


class ErrorResponse(Struct, kw_only=True, frozen=True):
    """An error answer; ``id`` is ``None`` when the request id was unreadable."""

    jsonrpc: str = JSONRPC_VERSION
    id: int | str | None
    error: ErrorObject


class InvalidMessage(Struct, frozen=True):
    """A frame that could not be used; answer ``error`` to ``id`` unless the
    frame was a notification (``answer`` false)."""

    id: int | str | None
    error: McpError
    answer: bool = True


Message: TypeAlias = "Request | Notification | Response | ErrorResponse"
Frame: TypeAlias = "Message | InvalidMessage | list[Message | InvalidMessage]"


class _Envelope(Struct):
    # Loosely typed on purpose: shape errors are reported as JSON-RPC errors
    # with the id recovered, not as decode failures.
    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Any = UNSET


_envelope_decoder: Final = msgspec.json.Decoder(_Envelope)
_batch_decoder: Final = msgspec.json.Decoder(list[Raw])
_any_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


def _valid_id(value: Any) -> bool:
    return (type(value) is int) or (type(value) is str)


def _classify(env: _Envelope) -> Message | InvalidMessage:
    ident = env.id
    method = env.method
    if env.jsonrpc != JSONRPC_VERSION:
        # Answer a request or an unclassifiable object, never a notification
        # or a response (answering a response could fail the sender's own
        # pending request that happens to carry the same id).
        if method is not UNSET:
            answer = ident is not UNSET
        else:
            answer = env.result is UNSET and env.error is UNSET
        return InvalidMessage(
            ident if _valid_id(ident) else None,
            error_from_code(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"'),
            answer=answer,
        )
    has_error = env.error is not UNSET and env.error is not None  # "error": null is JSON-RPC 1.0 noise
    if (env.result is not UNSET) + has_error + (method is not UNSET) > 1:
        # A request, a result or an error: one of them, never two. Answer
        # it only if it may be a request (never a response: see above).
        return InvalidMessage(
            ident if _valid_id(ident) else None,
            error_from_code(
                INVALID_REQUEST, 'Invalid request: "method", "result" and "error" exclude each other'
            ),
            answer=method is not UNSET and ident is not UNSET,
        )
    if method is not UNSET:
        if type(method) is not str:
            return InvalidMessage(
                ident if _valid_id(ident) else None,
                error_from_code(INVALID_REQUEST, 'Invalid request: "method" must be a string'),
            )
        params = env.params
        if params is not UNSET:
            first = memoryview(params)[0]
            if first != 0x7B:  # '{'
                code = INVALID_PARAMS if first == 0x5B else INVALID_REQUEST  # '['
                return InvalidMessage(
                    ident if _valid_id(ident) else None,
                    error_from_code(code, 'Invalid request: "params" must be an object'),
                    answer=ident is not UNSET,
                )
        if ident is UNSET:
            return Notification(method=method, params=params)
        if type(ident) is not int and type(ident) is not str:
            return InvalidMessage(
                None, error_from_code(INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
            )
        return Request(id=ident, method=method, params=params)
    if env.result is not UNSET:
        if not _valid_id(ident):
            return InvalidMessage(
                None, error_from_code(INVALID_REQUEST, "Response without a valid id"), answer=False
            )
        return Response(id=ident, result=env.result)
    if env.error is not UNSET:
        err = env.error
        if (
            not isinstance(err, dict)
            or type(err.get("code")) is not int
            or not isinstance(err.get("message"), str)
        ):
            return InvalidMessage(
                None, error_from_code(INVALID_REQUEST, "Malformed error object"), answer=False
            )
        if not (ident is None or _valid_id(ident)):
            return InvalidMessage(
                None, error_from_code(INVALID_REQUEST, "Error response with an invalid id"), answer=False
            )
        return ErrorResponse(
            id=ident,
            error=ErrorObject(code=err["code"], message=err["message"], data=err.get("data", UNSET)),
        )
    return InvalidMessage(
        ident if _valid_id(ident) else None,
        error_from_code(INVALID_REQUEST, "Invalid request: no method, result or error"),
    )


def _invalid_utf8(data: bytes | bytearray | memoryview | str) -> str | None:
    """Why ``data`` is not UTF-8, or None. msgspec checks only the strings it
    decodes; skipped fields, ``Raw`` payloads and the value of a non-object
    frame are not checked, so check the frame once (ASCII is the fast path)."""
    if type(data) is str:
        return None
    if isinstance(data, memoryview):
        data = data.tobytes()
    assert not isinstance(data, str)
    if data.isascii():
        return None
    try:
        codecs.utf_8_decode(data, "strict", True)
    except UnicodeDecodeError as exc:
        return f"Parse error: invalid UTF-8 at byte {exc.start}"
    return None


def decode(data: bytes | bytearray | memoryview | str) -> Frame:
    """Decode one wire frame. Never raises: bad input becomes InvalidMessage."""
    bad = _invalid_utf8(data)
    if bad is not None:
        return InvalidMessage(None, error_from_code(PARSE_ERROR, bad))
    return decode_utf8(data)


def decode_utf8(data: bytes | bytearray | memoryview | str) -> Frame:
    """:func:`decode` of a frame known to be valid UTF-8 (e.g. one checked
    ASCII with the rest of its read): the same result, one check less."""
    try:
        env = _envelope_decoder.decode(data)
        method = env.method
        if type(method) is str and env.jsonrpc == JSONRPC_VERSION and env.result is UNSET:
            # The commonest frame, a well-formed request, at once (else _classify says what it is).
            ident = env.id
            params = env.params
            if (
                (type(ident) is int or type(ident) is str)
                and env.error is UNSET
                and (params is UNSET or (type(params) is Raw and memoryview(params)[0] == 0x7B))  # '{'
            ):
                return Request(id=ident, method=method, params=params)
        elif method is UNSET and env.result is not UNSET and env.jsonrpc == JSONRPC_VERSION:
            # The commonest frame a client reads, a plain success answer.
            ident = env.id
            error = env.error
            if (type(ident) is int or type(ident) is str) and (error is UNSET or error is None):
                return Response(id=ident, result=env.result)
        return _classify(env)
    except msgspec.ValidationError:
        pass  # valid JSON, but not an object: maybe a batch
    except msgspec.DecodeError as exc:
        return InvalidMessage(None, error_from_code(PARSE_ERROR, f"Parse error: {exc}"))
    except RecursionError:
        return InvalidMessage(None, error_from_code(PARSE_ERROR, "Parse error: nested too deeply"))
    try:
        items = _batch_decoder.decode(data)
    except msgspec.ValidationError:
        # Neither an object nor an array. msgspec reports a type mismatch
        # before it reads the rest, so check that the frame is JSON at all.
        try:
            _any_decoder.decode(data)
        except msgspec.ValidationError:
            pass  # valid JSON, but out of msgspec's range
        except msgspec.DecodeError as exc:
            return InvalidMessage(None, error_from_code(PARSE_ERROR, f"Parse error: {exc}"))
        except RecursionError:
            return InvalidMessage(None, error_from_code(PARSE_ERROR, "Parse error: nested too deeply"))
        return InvalidMessage(None, error_from_code(INVALID_REQUEST, "Invalid request: not a JSON object"))
    except msgspec.DecodeError as exc:
        return InvalidMessage(None, error_from_code(PARSE_ERROR, f"Parse error: {exc}"))
    except RecursionError:
        return InvalidMessage(None, error_from_code(PARSE_ERROR, "Parse error: nested too deeply"))
    if not items:
        return InvalidMessage(None, error_from_code(INVALID_REQUEST, "Invalid request: empty batch"))
    out: list[Message | InvalidMessage] = []
    for item in items:
        try:
            out.append(_classify(_envelope_decoder.decode(item)))
        except msgspec.DecodeError:
            out.append(
                InvalidMessage(None, error_from_code(INVALID_REQUEST, "Invalid request: not a JSON object"))
            )
        except RecursionError:  # pragma: no cover - the batch decode recursed first
            out.append(InvalidMessage(None, error_from_code(PARSE_ERROR, "Parse error: nested too deeply")))
    return out


def encode(message: Any) -> bytes:
    """Encode a message (or a list of messages) to compact JSON bytes."""
    return _encoder.encode(message)


def encode_line(message: Any, buffer: bytearray) -> None:
    """Append the compact JSON of ``message`` and a newline to ``buffer``."""
    _encoder.encode_into(message, buffer, -1)
    buffer.extend(b"\n")


def encode_lines(messages: list[Any]) -> bytes:
    """The compact JSON of each of ``messages``, each followed by a newline
    (one call for a whole batch of lines)."""
    return _encoder.encode_lines(messages)


T = TypeVar("T")
#: The JSON decoder of each type asked for, as its bound ``decode`` (see decoder_for).
_decoders: dict[Any, Callable[[Any], Any]] = {}


def coerce(value: Any, type_: type[T]) -> T:
    """Turn a payload into ``type_``: decode ``Raw`` with a cached decoder,
    pass an instance through (zero-copy), convert builtins.

    Raises :class:`msgspec.ValidationError` / ``DecodeError`` on mismatch.
    """
    if type(value) is Raw:
        if type_ is Raw:
            return value  # type: ignore[return-value]
        decoded: T = (_decoders.get(type_) or decoder_for(type_))(value)
        return decoded
    if isinstance(type_, type) and isinstance(value, type_):
        return value
    if type_ is Raw:  # a payload kept as JSON (a proxy's): encode what arrived decoded
        return Raw(_encoder.encode({} if value is UNSET or value is None else value))  # type: ignore[return-value]
    if value is UNSET or value is None:
        value = {}
    elif isinstance(value, Struct):
        value = msgspec.to_builtins(value)
    return msgspec.convert(value, type_)


def decoder_for(type_: type[T]) -> Callable[[Raw], T]:
    """The cached decoder :func:`coerce` uses for ``Raw`` into ``type_``, as a
    function (for a hot path that keeps it; it raises as ``coerce`` does)."""
    decode = _decoders.get(type_)
    if decode is None:
        decode = _decoders[type_] = msgspec.json.Decoder(type_).decode
    return decode


def error_response(ident: int | str | None, exc: McpError) -> ErrorResponse:
    data = UNSET if exc.data is None else exc.data
    return ErrorResponse(id=ident, error=ErrorObject(code=exc.code, message=exc.message, data=data))


def raw_or_none(value: Any) -> Any:
    """``Raw`` payloads decoded to builtins (for logging and tests)."""
    if type(value) is Raw:
        return msgspec.json.decode(value)
    if isinstance(value, Struct):
        return msgspec.to_builtins(value)
    return None if value is UNSET else value
