"""MCP payload types: ``params`` and ``result`` Structs of every protocol version.

One set of Structs covers the union of all supported versions, from the
``initialize`` handshake era (2024-11-05 .. 2025-11-25) to the stateless era
(2026-07-28). Fields added by later versions are optional and omitted from the
wire while unset; :func:`trio_mcp.protocol.adapt` downgrades an object for an
older peer.

Conventions:

- Every Struct is frozen, keyword-only and camel-cased on the wire
  (``mime_type`` <-> ``mimeType``); ``meta`` is the ``_meta`` object.
- Absent fields are :data:`msgspec.UNSET`; ``None`` only where the schema
  admits ``null``.
- Results carry the 2026 fields ``resultType`` (default ``"complete"``) and,
  for cacheable results, ``ttlMs`` (default ``0``) and ``cacheScope``
  (default ``"private"``) *always*, so a result is valid for the newest
  version as built. Handshake-era schemas tolerate these extra fields;
  :func:`trio_mcp.protocol.strip_modern` removes them for older peers, and
  decoding a legacy result (which lacks them) yields the same defaults, which
  is the meaning the 2026 spec gives to their absence.
- Content blocks, completion references and 2026 input requests are tagged
  unions (on ``type`` / ``method``). Untagged unions of objects that msgspec
  cannot express are single Structs with optional fields:
  :class:`ResourceContents` (text | blob), :class:`ElicitRequestParams`
  (form | URL mode) and :class:`PrimitiveSchemaDefinition` (the elicitation
  field schemas); each has convenience constructors.
- Unknown fields are ignored when decoding, so newer peers never break older
  code; unknown *capabilities* are therefore dropped on decode; use
  ``experimental`` or ``extensions`` for non-standard ones.

This module gathers them; they live by subject: :mod:`._common` (aliases,
``_meta`` keys, base Structs, implementation info, capabilities),
:mod:`._content` (content blocks), :mod:`._server_types` (handshake,
resources, prompts, tools, logging, completion), :mod:`._client_types`
(sampling, roots, elicitation) and :mod:`._stateless` (2026-07-28 input
requests and subscriptions).
"""

from __future__ import annotations

from ._client_types import *
from ._client_types import __all__ as _client_types_all
from ._common import *
from ._common import __all__ as _common_all
from ._content import *
from ._content import __all__ as _content_all
from ._server_types import *
from ._server_types import __all__ as _server_types_all
from ._stateless import *
from ._stateless import __all__ as _stateless_all

__all__ = [*_common_all, *_content_all, *_server_types_all, *_client_types_all, *_stateless_all]
