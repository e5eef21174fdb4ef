"""Validate JSON-RPC messages against the official MCP JSON schemas.

Test helper: ``validate_message(message, version, method=...)`` checks a
message against the schema's whole-message union (``JSONRPCMessage``) and
against the definition for its method (``tools/call`` request ->
``CallToolRequest``; a result -> ``CallToolResult``, or in 2026-07-28 the
``CallToolResultResponse`` that also admits ``InputRequiredResult``).

The schemas are the copies under ``tests/data/mcp-schema/<version>/``.
Validators are built once per (version, definition) and cached.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7, DRAFT202012

from trio_mcp.protocol import encode

__all__ = [
    "SCHEMA_DIR",
    "VERSIONS",
    "definitions",
    "schema_methods",
    "validate_definition",
    "validate_message",
]

SCHEMA_DIR = Path(__file__).resolve().parent / "data" / "mcp-schema"
VERSIONS: tuple[str, ...] = tuple(
    sorted(path.name for path in SCHEMA_DIR.iterdir() if (path / "schema.json").is_file())
)

Sender = Literal["client", "server"]


class _VersionSchema:
    """One version's schema: definitions, method tables and a ref registry."""

    def __init__(self, version: str) -> None:
        path = SCHEMA_DIR / version / "schema.json"
        if not path.is_file():
            raise AssertionError(f"no MCP schema for version {version!r} (have {', '.join(VERSIONS)})")
        self.version = version
        contents = json.loads(path.read_text(encoding="utf-8"))
        if "$defs" in contents:
            self.defs_key, self.validator_cls, spec = "$defs", Draft202012Validator, DRAFT202012
        else:
            self.defs_key, self.validator_cls, spec = "definitions", Draft7Validator, DRAFT7
        self.defs: dict[str, Any] = contents[self.defs_key]
        self.base_uri = f"https://schema.modelcontextprotocol.invalid/{version}/schema.json"
        resource = Resource.from_contents(contents, default_specification=spec)
        self.registry = Registry().with_resource(self.base_uri, resource)
        self._validators: dict[str, Any] = {}
        # method -> definition name, and which side may send it
        self.requests: dict[str, str] = {}
        self.notifications: dict[str, str] = {}
        self.senders: dict[tuple[str, str], set[str]] = {}
        for union, kind, sender in (
            ("ClientRequest", "request", "client"),
            ("ServerRequest", "request", "server"),
            ("ClientNotification", "notification", "client"),
            ("ServerNotification", "notification", "server"),
        ):
            for name in self._members(union):
                method = self.defs[name].get("properties", {}).get("method", {}).get("const")
                if method is None:
                    continue
                (self.requests if kind == "request" else self.notifications)[method] = name
                self.senders.setdefault((kind, method), set()).add(sender)

    def _members(self, union: str) -> list[str]:
        node = self.defs.get(union)
        if node is None:
            return []
        if "anyOf" not in node:
            return [union]  # a union with a single member is inlined (2026 ClientNotification)
        return [item["$ref"].rsplit("/", 1)[1] for item in node["anyOf"]]

    def result_definition(self, method: str) -> tuple[str, bool]:
        """(definition name, whether it describes the whole response message)."""
        request = self.requests[method]
        stem = request.removesuffix("Request")
        if f"{stem}ResultResponse" in self.defs:
            return f"{stem}ResultResponse", True
        if f"{stem}Result" in self.defs:
            return f"{stem}Result", False
        return "EmptyResult", False

    def validator(self, definition: str) -> Any:
        validator = self._validators.get(definition)
        if validator is None:
            if definition not in self.defs:
                raise AssertionError(f"MCP {self.version} schema has no definition {definition!r}")
            ref = {"$ref": f"{self.base_uri}#/{self.defs_key}/{definition}"}
            validator = self._validators[definition] = self.validator_cls(ref, registry=self.registry)
        return validator

    def check(self, instance: Any, definition: str, what: str) -> None:
        error = best_match(self.validator(definition).iter_errors(instance))
        if error is None:
            return
        shown = json.dumps(instance, sort_keys=True)
        if len(shown) > 600:
            shown = shown[:600] + "..."
        schema_path = "/".join(str(p) for p in error.absolute_schema_path)
        raise AssertionError(
            f"{what} is not a valid {definition} (MCP {self.version}): {error.message}\n"
            f"  at instance path {error.json_path}\n"
            f"  schema path {schema_path}\n"
            f"  message: {shown}"
        )


@functools.cache
def _schema(version: str) -> _VersionSchema:
    return _VersionSchema(version)


def _to_json(message: Any) -> Any:
    if isinstance(message, (bytes, bytearray, memoryview)):
        return json.loads(bytes(message))
    if isinstance(message, str):
        return json.loads(message)
    # Structs, dicts or lists possibly holding Structs / msgspec.Raw.
    return json.loads(encode(message))


def definitions(version: str) -> dict[str, Any]:
    """The raw schema definitions of ``version``."""
    return _schema(version).defs


def schema_methods(version: str) -> dict[tuple[str, str], set[str]]:
    """``{(kind, method): {senders}}`` declared by the schema of ``version``
    (kind is "request" or "notification", senders "client" / "server")."""
    return {key: set(value) for key, value in _schema(version).senders.items()}


def validate_definition(instance: Any, version: str, definition: str) -> Any:
    """Validate any JSON value (or Struct) against one named definition."""
    schema = _schema(version)
    data = _to_json(instance)
    schema.check(data, definition, "value")
    return data


def validate_message(
    message: Any,
    version: str,
    *,
    method: str | None = None,
    sender: Sender | None = None,
    strict: bool = True,
) -> Any:
    """Validate a JSON-RPC message (Struct, bytes/str JSON, dict or a batch list)
    against the MCP schema of ``version``; return it as decoded JSON.

    - Always checked against ``JSONRPCMessage``.
    - Requests and notifications: also against their method's definition
      (``CallToolRequest``...). Unknown methods fail when ``strict``.
    - Results: pass ``method`` (the request's method) to check the result
      definition; without it only the generic envelope is checked.
    - ``sender`` ("client" / "server") additionally checks that this side may
      send the message (``ClientRequest`` / ``ServerResult``...).

    Raises AssertionError naming the failing path.
    """
    schema = _schema(version)
    data = _to_json(message)
    schema.check(data, "JSONRPCMessage", "message")
    items = data if isinstance(data, list) else [data]
    for item in items:
        _validate_item(
            schema, item, method=method if not isinstance(data, list) else None, sender=sender, strict=strict
        )
    return data


def _validate_item(
    schema: _VersionSchema, item: dict[str, Any], *, method: str | None, sender: str | None, strict: bool
) -> None:
    version = schema.version
    if "method" in item:
        kind = "request" if "id" in item else "notification"
        name = item["method"]
        if method is not None and method != name:
            raise AssertionError(f"message method {name!r} differs from expected method {method!r}")
        table = schema.requests if kind == "request" else schema.notifications
        definition = table.get(name)
        if definition is None:
            if strict:
                raise AssertionError(f"{name!r} is not a {kind} of MCP {version}")
            return
        schema.check(item, definition, f"{kind} {name!r}")
        if sender is not None:
            allowed = schema.senders[(kind, name)]
            if sender not in allowed:
                raise AssertionError(f"a {sender} may not send {kind} {name!r} in MCP {version}")
        return
    if "result" in item:
        if method is not None:
            if method not in schema.requests:
                if strict:
                    raise AssertionError(f"{method!r} is not a request of MCP {version}")
                return
            definition, whole = schema.result_definition(method)
            if whole:
                schema.check(item, definition, f"response to {method!r}")
            else:
                schema.check(item["result"], definition, f"result of {method!r}")
            if sender is not None:
                requester = "server" if sender == "client" else "client"
                if requester not in schema.senders[("request", method)]:
                    raise AssertionError(f"a {sender} never answers {method!r} in MCP {version}")
        if sender is not None:
            union = "ClientResult" if sender == "client" else "ServerResult"
            schema.check(item["result"], union, f"{sender} result")
        return
    # error responses: the generic envelope check above is all the schema offers
