"""Per-request state of the stateless 2026-07-28 era.

There are no server-to-client requests in this era. When a handler asks the
client for something (sampling, elicitation, roots), the request ends with an
``InputRequiredResult`` carrying the question; the client answers it and
retries the same request with ``inputResponses`` and the ``requestState`` it
was given. The handler then runs again from the start, and this time the
question is answered from the responses, so the same handler code serves both
eras: handlers must do the same things up to each question (as any retried
operation must).

``requestState`` carries the answers of earlier rounds, so a handler that asks
several questions gets all of them on the last retry, and a fingerprint of
each question asked: an answer is only used for the question it was given to
(a handler that asks something else on a retry is asked again). It is opaque
to the client and authenticated with an HMAC (:class:`RequestStateKeys`: a
random per-process key unless the app is given keys), so a client cannot forge
earlier answers through it. Several processes serving one app (behind a load
balancer, or ``trio-mcp run --workers N``) must share the keys: a retry may
land on another process than the one that issued its state.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from ..protocol import (
    ClientCapabilities,
    Implementation,
    InvalidParams,
    McpError,
    MissingClientCapability,
    coerce,
    has_capability,
)

__all__ = [
    "InputNeeded",
    "ModernRequest",
    "ProtocolFailure",
    "RequestStateError",
    "RequestStateKeys",
    "required_capabilities",
]

T = TypeVar("T")
_MAC_BYTES = 16
#: The shortest key accepted (bytes of its UTF-8 text): 32 hex digits, 128 bits.
MIN_KEY_BYTES = 32


class InputNeeded(BaseException):
    """Unwinds a handler that needs client input (a BaseException so that
    tool error boundaries, which catch Exception, let it through)."""

    def __init__(self, requests: dict[str, Any], state: str) -> None:
        super().__init__("client input required")
        self.requests = requests
        self.state = state


class ProtocolFailure(BaseException):
    """Carries an :class:`McpError` that must answer the *request* (e.g.
    -32021), through tool error boundaries that turn exceptions into results."""

    def __init__(self, error: McpError) -> None:
        super().__init__(str(error))
        self.error = error


class RequestStateError(ValueError):
    """A ``requestState`` that this server did not issue, or that was altered."""


class RequestStateKeys:
    """The HMAC keys of ``requestState``: the first signs, every one is
    accepted (rotation: list the new key first and keep the old one until
    the states it signed have been retried, then drop it).

    Keys are text (their UTF-8 bytes are the key) or bytes, at least
    :data:`MIN_KEY_BYTES` long, e.g. ``openssl rand -base64 32``. Processes
    that serve one app behind a load balancer must be given the same keys.
    """

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[str | bytes]) -> None:
        found = tuple(key.encode() if isinstance(key, str) else bytes(key) for key in keys)
        if not found:
            raise ValueError("RequestStateKeys needs at least one key")
        for index, key in enumerate(found):
            if len(key) < MIN_KEY_BYTES:
                raise ValueError(
                    f"requestState key #{index + 1} is {len(key)} bytes long; a key needs at least "
                    f"{MIN_KEY_BYTES} (e.g. the output of 'openssl rand -base64 32')"
                )
        self._keys = tuple(dict.fromkeys(found))

    @classmethod
    def random(cls) -> RequestStateKeys:
        """One random key (what a process uses when given none)."""
        return cls([secrets.token_bytes(32)])

    @classmethod
    def of(cls, keys: RequestStateKeys | Iterable[str | bytes]) -> RequestStateKeys:
        return keys if isinstance(keys, RequestStateKeys) else cls(keys)

    def __repr__(self) -> str:
        return f"<RequestStateKeys: {len(self._keys)} key(s)>"

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def keys(self) -> tuple[bytes, ...]:
        """The keys, the signing one first."""
        return self._keys

    def sign(self, payload: bytes) -> bytes:
        return hmac.new(self._keys[0], payload, hashlib.sha256).digest()[:_MAC_BYTES]

    def verify(self, mac: bytes, payload: bytes) -> bool:
        """Whether any of the keys signed ``payload`` with ``mac``."""
        return any(
            hmac.compare_digest(mac, hmac.new(key, payload, hashlib.sha256).digest()[:_MAC_BYTES])
            for key in self._keys
        )


def required_capabilities(path: str) -> dict[str, Any]:
    """``"elicitation.url"`` → ``{"elicitation": {"url": {}}}`` (a ClientCapabilities object)."""
    node: dict[str, Any] = {}
    root = node
    for part in path.split("."):
        node[part] = {}
        node = node[part]
    return root


def _fingerprint(question: Any) -> str:
    return hashlib.sha256(msgspec.json.encode(question)).hexdigest()[:16]


def _encode_state(state: dict[str, Any], keys: RequestStateKeys) -> str:
    payload = msgspec.json.encode(state)
    return base64.urlsafe_b64encode(keys.sign(payload) + payload).decode().rstrip("=")


def _decode_state(state: str, keys: RequestStateKeys) -> dict[str, Any]:
    try:
        blob = base64.urlsafe_b64decode(state + "=" * (-len(state) % 4))
    except (ValueError, TypeError):
        raise RequestStateError("requestState is not one this server issued") from None
    mac, payload = blob[:_MAC_BYTES], blob[_MAC_BYTES:]
    if not keys.verify(mac, payload):
        raise RequestStateError(
            "requestState is not one this server issued (it was altered, or signed with a key "
            "this server does not have: servers behind one endpoint need the same requestState keys)"
        )
    try:
        data = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        raise RequestStateError("requestState is corrupt") from None
    if not isinstance(data, dict):
        raise RequestStateError("requestState is corrupt")
    return data


class ModernRequest:
    """What a stateless request carries: version, client capabilities, log
    level, and the answers to earlier input requests."""

    __slots__ = (
        "_asked",
        "_input",
        "_keys",
        "_questions",
        "_responses",
        "_state",
        "capabilities",
        "client_info",
        "log_level",
        "version",
    )

    def __init__(
        self,
        *,
        version: str,
        capabilities: ClientCapabilities,
        log_level: str | None,
        input_responses: Any,
        request_state: Any,
        keys: RequestStateKeys,
        client_info: Implementation | None = None,
        own_state: bool = False,
    ) -> None:
        self.version = version
        self.capabilities = capabilities
        self.client_info = client_info
        self.log_level = log_level
        self._keys = keys
        self._asked = 0
        self._state = None if request_state is UNSET else request_state
        self._input = None if input_responses is UNSET else input_responses
        self._responses: dict[str, Any] | None = None
        #: Fingerprints of the questions the answers were given to.
        self._questions: dict[str, str] = {}
        if not own_state and (self._state is not None or self._input is not None):
            # Checked before the handler runs: a state this server did not
            # issue never reaches it. A low-level handler that runs its own
            # input-required rounds (``own_state``) gets its state untouched.
            try:
                self._load()
            except ProtocolFailure as failure:
                raise RequestStateError(failure.error.message) from None

    def _load(self) -> dict[str, Any]:
        responses: dict[str, Any] = {}
        if self._state is not None:
            try:
                state = _decode_state(self._state, self._keys)
            except RequestStateError as exc:
                raise ProtocolFailure(InvalidParams(str(exc))) from None
            answers, asked = state.get("responses"), state.get("questions")
            if not isinstance(answers, dict) or not isinstance(asked, dict):
                raise ProtocolFailure(InvalidParams("requestState is corrupt"))
            responses.update(answers)
            self._questions.update(asked)
        if self._input is not None:
            responses.update(self._input)
        self._responses = responses
        return responses

    def ask(self, request: Any, capability: str, result_type: type[T]) -> T:
        """The answer to ``request`` if the client already gave it, else
        raise :class:`InputNeeded` to end this round with the question."""
        if not has_capability(self.capabilities, capability.split(".")):
            raise ProtocolFailure(
                MissingClientCapability(
                    f"The request did not declare the client capability {capability!r} that this handler needs",
                    data={"requiredCapabilities": required_capabilities(capability)},
                )
            )
        responses = self._responses if self._responses is not None else self._load()
        self._asked += 1
        key = f"{capability.split('.')[0]}-{self._asked}"
        fingerprint = _fingerprint(request)
        if key in responses and self._questions.get(key, fingerprint) == fingerprint:
            try:
                return coerce(responses[key], result_type)
            except Exception as exc:  # msgspec.ValidationError and friends
                raise ProtocolFailure(
                    InvalidParams(f"inputResponses[{key!r}] is not a valid answer: {exc}")
                ) from None
        # Not answered yet, or answered for another question (the handler did
        # not ask the same thing again on this retry): ask this one.
        responses.pop(key, None)
        state = {"responses": responses, "questions": {**self._questions, key: fingerprint}}
        raise InputNeeded({key: request}, _encode_state(state, self._keys))
