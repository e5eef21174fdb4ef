"""JSON Schemas of tool functions: arguments in, structured results out.

Everything here runs once, when a function is registered; nothing here is on
the per-call path.

- :func:`arguments_struct` turns a function's parameters into a msgspec Struct
  type (``defstruct``): one field per parameter, named like the parameter,
  defaults preserved, docstring descriptions attached as
  ``Annotated[..., msgspec.Meta(description=...)]``. The same type validates
  the arguments of every call (see :mod:`._functions`), so the published
  schema and the validation cannot drift apart.
- :func:`input_schema_for` is the JSON Schema (2020-12) of that Struct, as
  a self-contained object schema: ``{"type": "object", "properties": ...,
  "required": [...]}`` with any nested types in a root ``$defs`` (referenced as
  ``#/$defs/Name``; only the definitions actually reachable are kept).
- :func:`output_schema_for` decides whether a return annotation is
  *structured* (see its docstring for the rules) and returns its schema.
- :func:`description_of` / :func:`parameter_descriptions` read docstrings in
  Google (``Args:``), reST (``:param x:``) and numpy (``Parameters`` / ``---``)
  styles.
"""

from __future__ import annotations

import collections.abc
import copy
import datetime
import decimal
import enum
import functools
import inspect
import re
import types
import typing
import uuid
from collections.abc import Callable, Collection
from typing import Annotated, Any, Final, Literal, Union

import attrs
import msgspec

from ..protocol import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
)
from ._content import _Media

__all__ = [
    "OutputSchema",
    "arguments_struct",
    "description_of",
    "input_schema_for",
    "output_schema_for",
    "parameter_descriptions",
    "resolve_signature",
]

_REF_TEMPLATE: Final = "#/$defs/{name}"
_REF_PREFIX: Final = "#/$defs/"
_NoneType = type(None)

#: Types whose values are content, never structured data (see output_schema_for).
_CONTENT_CLASSES: Final = (
    TextContent,
    ImageContent,
    AudioContent,
    ResourceLink,
    EmbeddedResource,
    ResourceContents,
    CallToolResult,
    _Media,  # Image and Audio
)
#: Top-level return types that are text or bytes rather than structured data.
_TEXT_CLASSES: Final = (str, bytes, bytearray, memoryview)
#: Defaults msgspec can keep as they are (immutable, or empty and copied by msgspec).
_PLAIN_DEFAULTS: Final = (
    _NoneType,
    bool,
    int,
    float,
    str,
    bytes,
    enum.Enum,
    msgspec.UnsetType,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
    frozenset,
    tuple,
)


@attrs.frozen
class OutputSchema:
    """The output schema of a tool.

    ``schema`` is always an object schema (MCP requires ``"type": "object"``).
    ``wrapped`` is true when the function's return value is not itself an
    object and is published under a single ``"result"`` property; the
    ``structuredContent`` of a call is then ``{"result": value}``.
    """

    schema: dict[str, Any]
    wrapped: bool


# --------------------------------------------------------------------------
# Signatures


def _hint_target(func: Callable[..., Any]) -> Any:
    """The object whose annotations and docstring describe ``func``."""
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.isfunction(func) or inspect.ismethod(func) or inspect.isbuiltin(func):
        return func
    if isinstance(func, type):
        # the signature of a class is its constructor's (mypy flags __init__ on an instance; this is a class)
        return func.__init__  # type: ignore[misc]
    call = getattr(type(func), "__call__", None)  # noqa: B004 (the class's __call__, for its signature)
    return call if call is not None else func


def resolve_signature(func: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """``func``'s signature and its resolved type hints (string annotations
    evaluated, ``Annotated`` kept). Raises :class:`TypeError` when an
    annotation cannot be resolved."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of {func!r}: {exc}") from None
    target = _hint_target(func)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except NameError as exc:
        raise TypeError(f"cannot resolve the type annotations of {func!r}: {exc}") from None
    except TypeError:
        hints = {}
    return signature, hints


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = tp.__origin__
    return tp


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return typing.get_args(tp)
    return None


def _admits_none(tp: Any) -> bool:
    tp = _strip_annotated(tp)
    if tp is Any or tp is None or tp is _NoneType or tp is object:
        return True
    args = _union_args(tp)
    if args is not None:
        return any(_admits_none(a) for a in args)
    if typing.get_origin(tp) is Literal:
        return None in typing.get_args(tp)
    return False


def _has_description(tp: Any) -> bool:
    if typing.get_origin(tp) is not Annotated:
        return False
    return any(isinstance(m, msgspec.Meta) and m.description is not None for m in tp.__metadata__)


def _optional(tp: Any) -> Any:
    """``tp | None``, keeping ``Annotated`` metadata on the outside."""
    if typing.get_origin(tp) is Annotated:
        return Annotated[(_optional(tp.__origin__), *tp.__metadata__)]
    return Union[tp, None]  # noqa: UP007


def _field_default(default: Any) -> Any:
    if isinstance(default, _PLAIN_DEFAULTS):
        return default
    if isinstance(default, (list, dict, set, bytearray)) and not default:
        return default  # msgspec copies empty mutable defaults itself
    if isinstance(default, msgspec.Struct) and type(default).__struct_config__.frozen:
        return default
    return msgspec.field(default_factory=functools.partial(copy.deepcopy, default))


def arguments_struct(
    func: Callable[..., Any],
    *,
    skip: Collection[str] = (),
    name: str | None = None,
    signature: inspect.Signature | None = None,
    hints: dict[str, Any] | None = None,
) -> type[msgspec.Struct]:
    """A Struct type with one field per parameter of ``func`` (minus ``skip``).

    Unannotated parameters are ``Any``; a parameter whose default is ``None``
    also accepts ``None`` even if its annotation does not say so. Mutable or
    unusual defaults are deep-copied for each call. Unknown fields are
    ignored when converting (``forbid_unknown_fields=False``).

    Raises :class:`TypeError` for ``*args`` / ``**kwargs`` and for parameter
    types msgspec cannot validate or describe.
    """
    if signature is None or hints is None:
        signature, hints = resolve_signature(func)
    docs = parameter_descriptions(func)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for pname, param in signature.parameters.items():
        if pname in skip:
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"{_qualname(func)}: *{pname} is not supported; tool arguments are named, "
                "declare each one as a parameter"
            )
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(
                f"{_qualname(func)}: **{pname} is not supported; tool arguments are named, "
                "declare each one as a parameter"
            )
        tp = hints.get(pname, Any)
        has_default = param.default is not inspect.Parameter.empty
        if has_default and param.default is None and not _admits_none(tp):
            tp = _optional(tp)
        description = docs.get(pname)
        if description and not _has_description(tp):
            tp = Annotated[tp, msgspec.Meta(description=description)]
        try:
            msgspec.json.schema(tp)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{_qualname(func)}: parameter {pname!r} has an unsupported type {tp!r}: {exc}"
            ) from None
        if has_default:
            fields.append((pname, tp, _field_default(param.default)))
        else:
            fields.append((pname, tp))
    struct_name = name or f"{getattr(func, '__name__', 'function')}_arguments"
    try:
        return msgspec.defstruct(struct_name, fields, kw_only=True, forbid_unknown_fields=False)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{_qualname(func)}: cannot build an arguments type: {exc}") from None


def _qualname(func: Any) -> str:
    return getattr(func, "__qualname__", None) or repr(func)


# --------------------------------------------------------------------------
# Schemas


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            out.add(ref[len(_REF_PREFIX) :])
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def _reachable(root: Any, components: dict[str, Any]) -> dict[str, Any]:
    """The components transitively referenced from ``root``, in a stable order."""
    seen: set[str] = set()
    todo: set[str] = set()
    _refs(root, todo)
    while todo:
        name = todo.pop()
        if name in seen or name not in components:
            continue
        seen.add(name)
        _refs(components[name], todo)
    return {name: components[name] for name in sorted(seen)}


def _with_defs(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    defs = _reachable(schema, components)
    if defs:
        schema["$defs"] = defs
    return schema


def _struct_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    (ref,), components = msgspec.json.schema_components([struct], ref_template=_REF_TEMPLATE)
    name = ref["$ref"][len(_REF_PREFIX) :]
    body = components.pop(name)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": body.get("properties", {}),
        "required": body.get("required", []),
    }
    # Defaults made with a factory (mutable values) are not in msgspec's output.
    for field in msgspec.structs.fields(struct):
        if field.default_factory is not msgspec.NODEFAULT and field.encode_name in schema["properties"]:
            prop = schema["properties"][field.encode_name]
            if "default" not in prop:
                try:
                    prop["default"] = msgspec.to_builtins(field.default_factory(), str_keys=True)
                except (TypeError, ValueError):
                    pass
    return _with_defs(schema, components)


def input_schema_for(func: Callable[..., Any], *, skip: Collection[str] = ()) -> dict[str, Any]:
    """The JSON Schema (2020-12) of ``func``'s arguments, minus the parameters
    named in ``skip`` (the context parameter).

    The root is ``{"type": "object", "properties": {...}, "required": [...]}``
    (``required`` may be empty), plus ``$defs`` when nested types need it.
    Property descriptions come from ``Annotated[T, msgspec.Meta(description=...)]``
    or, failing that, from the docstring.
    """
    return _struct_schema(arguments_struct(func, skip=skip))


def _mentions_content(tp: Any, *, top: bool) -> bool:
    """Whether ``tp`` is (or holds, through unions and containers) a content
    type; ``str`` and bytes count only at the top level."""
    tp = _strip_annotated(tp)
    if isinstance(tp, type):
        if issubclass(tp, _CONTENT_CLASSES):
            return True
        if top and tp in _TEXT_CLASSES:
            return True
    args = _union_args(tp)
    if args is not None:
        return any(_mentions_content(a, top=top) for a in args)
    origin = typing.get_origin(tp)
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable):
        return any(_mentions_content(a, top=False) for a in typing.get_args(tp) if a is not Ellipsis)
    return False


def output_schema_for(return_annotation: Any) -> OutputSchema | None:
    """The output schema of a function returning ``return_annotation``, or
    ``None`` when its results are unstructured.

    Unstructured (``None``): no annotation, ``None``, ``Any``/``object``,
    untyped containers (``list``, ``tuple``, ``list[Any]``),
    ``str`` / ``bytes`` (text and blobs are content, not data), content
    blocks, :class:`Image` / :class:`Audio`, ``ResourceContents``,
    ``CallToolResult``, containers of content, any union mentioning one of
    those (``str | None``, ``int | str``), and types msgspec cannot describe.

    Structured, not wrapped: types whose schema is an object, that is Structs,
    dataclasses, attrs classes, TypedDicts and ``dict``.

    Structured and wrapped under ``"result"``: everything else msgspec can
    describe, e.g. ``int``, ``float``, ``bool``, ``list[str]``, ``Literal``,
    enums, ``Point | None``.
    """
    if return_annotation is inspect.Signature.empty or return_annotation is None:
        return None
    if return_annotation is _NoneType or isinstance(return_annotation, str):
        return None
    bare = _strip_annotated(return_annotation)
    if bare is Any or bare is object or bare is _NoneType:
        return None
    if bare in (list, tuple, set, frozenset) or (
        typing.get_origin(bare) in (list, tuple, set, frozenset)
        and all(arg in (Any, object, Ellipsis) for arg in typing.get_args(bare))
    ):
        return None  # an untyped container may hold content blocks: promise no schema
    if _mentions_content(return_annotation, top=True):
        return None
    try:
        (ref,), components = msgspec.json.schema_components([return_annotation], ref_template=_REF_TEMPLATE)
    except (TypeError, ValueError):
        return None
    root: dict[str, Any] = ref
    if set(ref) == {"$ref"}:
        name = ref["$ref"][len(_REF_PREFIX) :]
        root = dict(components[name])
        root.pop("title", None)
    if root.get("type") == "object":
        return OutputSchema(_with_defs(root, components), wrapped=False)
    schema = {"type": "object", "properties": {"result": ref}, "required": ["result"]}
    return OutputSchema(_with_defs(schema, components), wrapped=True)


# --------------------------------------------------------------------------
# Docstrings

_GOOGLE_PARAM_HEADERS: Final = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "other parameters"}
)
_GOOGLE_HEADER_RE: Final = re.compile(
    r"^\s*(args|arguments|parameters|params|keyword args|keyword arguments|other parameters|"
    r"returns?|yields?|raises?|examples?|notes?|attributes|see also|warnings?|todo|references)\s*:\s*$",
    re.IGNORECASE,
)
_NUMPY_UNDERLINE_RE: Final = re.compile(r"^\s*-{3,}\s*$")
_REST_FIELD_RE: Final = re.compile(r"^\s*:(\w+)([^:]*):\s*(.*)$")
_REST_PARAM_KINDS: Final = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})
_GOOGLE_ENTRY_RE: Final = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ENTRY_RE: Final = re.compile(r"^\**(\w+)\s*(?::.*)?$")


def _docstring(func: Callable[..., Any]) -> str | None:
    target = _hint_target(func)
    doc = getattr(target, "__doc__", None)
    if not doc and target is not func:
        doc = getattr(func, "__doc__", None) if not isinstance(func, functools.partial) else None
    if not isinstance(doc, str) or not doc.strip():
        return None
    return inspect.cleandoc(doc)


def _is_section_start(lines: list[str], i: int) -> bool:
    line = lines[i]
    if _GOOGLE_HEADER_RE.match(line) or _REST_FIELD_RE.match(line):
        return True
    return bool(line.strip()) and i + 1 < len(lines) and bool(_NUMPY_UNDERLINE_RE.match(lines[i + 1]))


def description_of(func: Callable[..., Any]) -> str | None:
    """The docstring of ``func`` up to its first section (``Args:``,
    ``Returns:``, ``:param ...:``, a numpy ``Parameters`` header...), or
    ``None`` without a docstring."""
    doc = _docstring(func)
    if doc is None:
        return None
    lines = doc.splitlines()
    for i in range(len(lines)):
        if _is_section_start(lines, i):
            lines = lines[:i]
            break
    text = "\n".join(lines).strip()
    return text or None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(parts: list[str]) -> str:
    return " ".join(p.strip() for p in parts if p.strip())


def parameter_descriptions(func: Callable[..., Any]) -> dict[str, str]:
    """Parameter descriptions from ``func``'s docstring: Google ``Args:``
    sections, reST ``:param [type] name:`` fields and numpy ``Parameters``
    sections. Continuation lines are joined with single spaces."""
    doc = _docstring(func)
    if doc is None:
        return {}
    lines = doc.splitlines()
    out: dict[str, str] = {}
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        header = _GOOGLE_HEADER_RE.match(line)
        if header:
            base = _indent(line)
            i += 1
            if header.group(1).lower() not in _GOOGLE_PARAM_HEADERS:
                continue
            entry_indent: int | None = None
            name: str | None = None
            parts: list[str] = []
            while i < n:
                cur = lines[i]
                if cur.strip():
                    ind = _indent(cur)
                    if ind <= base:
                        break
                    if entry_indent is None:
                        entry_indent = ind
                    if ind <= entry_indent:
                        m = _GOOGLE_ENTRY_RE.match(cur.strip())
                        if name is not None:
                            out[name] = _join(parts)
                        name, parts = (m.group(1), [m.group(2)]) if m else (None, [])
                    elif name is not None:
                        parts.append(cur)
                i += 1
            if name is not None:
                out[name] = _join(parts)
            continue
        field = _REST_FIELD_RE.match(line)
        if field:
            kind, rest, text = field.groups()
            i += 1
            parts = [text]
            while i < n and lines[i].strip() and _indent(lines[i]) > _indent(line):
                if _REST_FIELD_RE.match(lines[i]):
                    break
                parts.append(lines[i])
                i += 1
            words = rest.split()
            if kind.lower() in _REST_PARAM_KINDS and words:
                out[words[-1].lstrip("*")] = _join(parts)
            continue
        if (
            line.strip().lower() in ("parameters", "other parameters")
            and i + 1 < n
            and _NUMPY_UNDERLINE_RE.match(lines[i + 1])
        ):
            base = _indent(line)
            i += 2
            name = None
            parts = []
            while i < n:
                cur = lines[i]
                if cur.strip():
                    if _is_section_start(lines, i):
                        break
                    if _indent(cur) <= base:
                        m = _NUMPY_ENTRY_RE.match(cur.strip())
                        if name is not None:
                            out[name] = _join(parts)
                        name, parts = (m.group(1), []) if m else (None, [])
                    elif name is not None:
                        parts.append(cur)
                i += 1
            if name is not None:
                out[name] = _join(parts)
            continue
        i += 1
    return {k: v for k, v in out.items() if v}
