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
to the client and authenticated with an HMAC keyed by a per-process secret, so
a client cannot forge earlier answers through it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
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

__all__ = ["InputNeeded", "ModernRequest", "ProtocolFailure", "RequestStateError", "required_capabilities"]

T = TypeVar("T")
_MAC_BYTES = 16


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


def _encode_state(state: dict[str, Any], secret: bytes) -> str:
    payload = msgspec.json.encode(state)
    mac = hmac.new(secret, payload, hashlib.sha256).digest()[:_MAC_BYTES]
    return base64.urlsafe_b64encode(mac + payload).decode().rstrip("=")


def _decode_state(state: str, secret: bytes) -> dict[str, Any]:
    try:
        blob = base64.urlsafe_b64decode(state + "=" * (-len(state) % 4))
    except (ValueError, TypeError):
        raise RequestStateError("requestState is not one this server issued") from None
    mac, payload = blob[:_MAC_BYTES], blob[_MAC_BYTES:]
    if not hmac.compare_digest(mac, hmac.new(secret, payload, hashlib.sha256).digest()[:_MAC_BYTES]):
        raise RequestStateError("requestState is not one this server issued (or it was altered)")
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
        "_questions",
        "_responses",
        "_secret",
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
        secret: bytes,
        client_info: Implementation | None = None,
        own_state: bool = False,
    ) -> None:
        self.version = version
        self.capabilities = capabilities
        self.client_info = client_info
        self.log_level = log_level
        self._secret = secret
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
                state = _decode_state(self._state, self._secret)
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
        raise InputNeeded({key: request}, _encode_state(state, self._secret))
