"""``key=value`` words as the JSON arguments a tool's input schema wants."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["UsageError", "closest", "coerce_value", "tool_arguments"]

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


class UsageError(ValueError):
    """A command line that cannot work (exit code 2); the message says why."""


def _types(schema: Any) -> list[str]:
    """The JSON types ``schema`` admits, in the order it names them."""
    if not isinstance(schema, dict):
        return []
    found: list[str] = []
    kind = schema.get("type")
    if isinstance(kind, str):
        found.append(kind)
    elif isinstance(kind, list):
        found.extend(k for k in kind if isinstance(k, str))
    for key in ("anyOf", "oneOf"):
        for member in schema.get(key) or ():
            found.extend(_types(member))
    found.extend(_json_type(value) for value in schema.get("enum") or ())
    if "const" in schema:
        found.append(_json_type(schema["const"]))
    return list(dict.fromkeys(found))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _as(kind: str, raw: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``raw`` reads as JSON type ``kind``."""
    try:
        if kind == "integer":
            return True, int(raw)
        if kind == "number":
            return True, float(raw) if not raw.lstrip("-").isdigit() else int(raw)
        if kind == "boolean" and raw.lower() in _TRUE + _FALSE:
            return True, raw.lower() in _TRUE
        if kind == "null" and raw == "null":
            return True, None
        if kind in ("array", "object"):
            import json  # here: a server's start-up (trio-mcp run) never reads JSON arguments

            value = json.loads(raw)
            if isinstance(value, list if kind == "array" else dict):
                return True, value
    except ValueError:
        pass
    return False, None


def coerce_value(raw: str, schema: dict[str, Any] | None) -> Any:
    """A command-line string as the type the property's schema wants.

    A string is kept as it is where the schema admits a string (``str | None``:
    ``code=12345`` stays ``"12345"``) unless it reads as one of the schema's
    other types named first or, for ``null``, is ``null``. A schema naming no
    type takes ``raw`` as JSON when it parses, else as a string."""
    kinds = _types(schema)
    if not kinds:
        import json

        try:
            return json.loads(raw)
        except ValueError:
            return raw
    if "null" in kinds and raw == "null":
        return None
    for kind in kinds:
        if kind == "string":
            return raw
        ok, value = _as(kind, raw)
        if ok:
            return value
    wanted = " or ".join(k for k in kinds if k != "null") or "null"
    raise UsageError(f"cannot read {raw!r} as {wanted}")


def closest(name: str, names: Iterable[str]) -> list[str]:
    """The names most like ``name`` (for 'did you mean')."""
    import difflib

    return difflib.get_close_matches(name, list(names), n=3, cutoff=0.5)


def tool_arguments(
    pairs: Sequence[str], schema: Any, *, what: str = "the tool", check_keys: bool = True
) -> dict[str, Any]:
    """``['a=1', 'b=x']`` → arguments, each coerced by its property's schema.

    A key the schema does not name is refused (unless it allows additional
    properties, or ``check_keys`` is false), before anything is sent."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    open_ended = isinstance(schema, dict) and schema.get("additionalProperties") not in (None, False)
    if isinstance(schema, dict) and "properties" not in schema and "additionalProperties" not in schema:
        open_ended = True  # no schema to check against
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"arguments are key=value, not {pair!r}")
        if check_keys and key not in props and not open_ended:
            hint = closest(key, props)
            known = ", ".join(props) or "none"
            raise UsageError(
                f"{what} has no argument {key!r}"
                + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else f" (it takes: {known})")
            )
        try:
            out[key] = coerce_value(value, props.get(key))
        except UsageError as exc:
            raise UsageError(f"{key}: {exc}") from None
    return out
