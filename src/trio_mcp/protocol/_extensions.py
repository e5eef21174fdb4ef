"""Protocol extensions (SEP-2133): identifiers, negotiation and the methods they add.

An extension is named by a reverse-DNS identifier (``io.modelcontextprotocol/tasks``)
and declared by each side under ``capabilities.extensions`` with a settings
object (``{}`` when it has none): the server in its ``initialize`` result or
``server/discover`` answer, the client in ``initialize`` (handshake era) or in
every request's ``_meta`` capabilities (stateless era, so a client can opt in
for one request). An extension is in force for a request when both sides
declare it.

An :class:`Extension` says what it adds to the wire: methods and
notifications (:class:`~trio_mcp.protocol.MethodSpec`, registered in the
method registry under :attr:`MethodSpec.extension` so that peers decode and
gate them like core methods), and the Struct types of its fields. Runtimes
(server and client) build on the description; see ``trio_mcp.server`` for
how a server serves one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
from msgspec import UNSET

from ._registry import METHODS, MethodSpec, register_methods
from ._types import ClientCapabilities, ServerCapabilities

__all__ = [
    "EXTENSIONS",
    "Extension",
    "declared_extension",
    "register_extension",
    "with_extensions",
]


@attrs.frozen(kw_only=True)
class Extension:
    """What an extension adds to the protocol."""

    #: Reverse-DNS identifier, the key under ``capabilities.extensions``.
    id: str
    #: Methods and notifications it adds (registered with ``extension=id``).
    methods: tuple[MethodSpec, ...] = ()
    #: Wire Structs of its fields, by name (for documentation and tooling).
    types: Mapping[str, type[Any]] = attrs.field(factory=dict)
    description: str = ""

    def method_names(self) -> frozenset[str]:
        return frozenset(spec.method for spec in self.methods)


#: Every registered extension, by identifier.
EXTENSIONS: Final[dict[str, Extension]] = {}


def register_extension(extension: Extension) -> Extension:
    """Register ``extension`` and its methods (idempotent for the same object)."""
    known = EXTENSIONS.get(extension.id)
    if known is extension:
        return extension
    if known is not None:
        raise ValueError(f"extension {extension.id!r} is already registered")
    for spec in extension.methods:
        if spec.extension != extension.id:
            raise ValueError(f"{spec.method}: MethodSpec.extension must be {extension.id!r}")
        other = METHODS.get(spec.method)
        if other is not None and other.extension != extension.id:
            raise ValueError(f"{spec.method} is already a method of {other.extension or 'the core protocol'}")
    EXTENSIONS[extension.id] = extension
    register_methods(extension.methods)
    return extension


def declared_extension(
    caps: ClientCapabilities | ServerCapabilities, extension_id: str
) -> dict[str, Any] | None:
    """The settings ``caps`` declares for ``extension_id``, or ``None`` if it does not declare it."""
    extensions = caps.extensions
    if extensions is UNSET:
        return None
    settings = extensions.get(extension_id)
    return settings if isinstance(settings, dict) else None


def with_extensions(
    caps: ClientCapabilities | ServerCapabilities, extensions: Mapping[str, Mapping[str, Any]] | Sequence[str]
) -> Any:
    """``caps`` with ``extensions`` added (identifiers alone declare ``{}``)."""
    import msgspec

    if not extensions:
        return caps
    merged = {} if caps.extensions is UNSET else dict(caps.extensions)
    if isinstance(extensions, Mapping):
        merged.update({k: dict(v) for k, v in extensions.items()})
    else:
        merged.update({k: {} for k in extensions})
    return msgspec.structs.replace(caps, extensions=merged)
