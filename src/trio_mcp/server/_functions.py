"""Calling user functions with JSON arguments.

:func:`inspect_function` does all the introspection once, at registration,
and returns a :class:`FunctionSpec`; :meth:`FunctionSpec.call` is the
per-call path: one ``msgspec.convert`` (or one ``msgspec.json`` decode for raw
bytes), one ``asdict``, the call.

Argument validation is *strict*: JSON values must already have the
parameter's JSON type, so ``"3"`` is rejected for an ``int`` and ``1`` for a
``bool``. The exceptions are the ones JSON cannot avoid: an integer is
accepted for a ``float``, and strings are parsed for types JSON has no
literal for (``datetime``, ``date``, ``UUID``, ``Decimal``, base64 ``bytes``),
arrays for ``tuple`` / ``set``, objects for Structs / dataclasses /
TypedDicts / attrs classes. Two known differences from a JSON Schema
validator: a float with an integral value (``3.0``) is rejected for an
``int`` (JSON Schema's ``integer`` accepts it), and ``dict[int, ...]`` keys
are only parsed when the arguments arrive as raw JSON bytes.

Arguments that are strings by nature (resource template variables matched
from a URI, prompt arguments, which MCP types as ``dict[str, str]``) need
*lax* validation instead: pass ``strict=False`` to :func:`inspect_function`
(or to :meth:`FunctionSpec.call`), and ``"3"`` becomes ``3`` for an ``int``,
``"true"`` becomes ``True`` for a ``bool``, and so on.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Collection
from typing import Annotated, Any, Final

import attrs
import msgspec
import trio

from ._schema import (
    OutputSchema,
    _struct_schema,
    _union_args,
    arguments_struct,
    description_of,
    output_schema_for,
    resolve_signature,
)

__all__ = ["FunctionSpec", "ToolArgumentError", "inspect_function", "is_async", "run_sync_in_thread"]

_NoneType = type(None)
_PATH_RE: Final = re.compile(r"`\$([^`]*)`")
_MISSING_RE: Final = re.compile(r"^Object missing required field `([^`]*)`")


class ToolArgumentError(ValueError):
    """The arguments of a call do not fit the function's parameters.

    ``field`` is the offending argument's path (``"x"``, ``"point.y"``,
    ``"items[2]"``), or ``None`` when the arguments as a whole are wrong.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def _argument_error(exc: msgspec.ValidationError) -> ToolArgumentError:
    text = str(exc)
    detail, _, _ = text.partition(" - at ")
    paths = _PATH_RE.findall(text)
    path = paths[-1].lstrip(".") if paths else ""
    missing = _MISSING_RE.match(detail)
    if missing:
        field = f"{path}.{missing.group(1)}" if path else missing.group(1)
        return ToolArgumentError(f"Missing required argument `{field}`", field=field)
    detail = detail[:1].lower() + detail[1:]
    if not path:
        return ToolArgumentError(f"Invalid arguments: {detail}")
    if " - at `key` in " in text:
        detail = f"{detail} (in an object key)"
    return ToolArgumentError(f"Invalid argument `{path}`: {detail}", field=path)


def _is_context(tp: Any, context_type: type | tuple[type, ...]) -> bool:
    while typing.get_origin(tp) is Annotated:
        tp = tp.__origin__
    args = _union_args(tp)
    if args is not None:
        rest = [a for a in args if a is not _NoneType]
        return bool(rest) and all(_is_context(a, context_type) for a in rest)
    origin = typing.get_origin(tp) or tp
    return isinstance(origin, type) and issubclass(origin, context_type)


def is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(type(func), "__call__", None)  # noqa: B004 (the class's __call__ is what is awaited)
    return (
        not inspect.isfunction(func)
        and not inspect.ismethod(func)
        and call is not None
        and inspect.iscoroutinefunction(call)
    )


@attrs.frozen(eq=False)
class FunctionSpec:
    """A user function, introspected once, ready to be called with JSON
    arguments. Build with :func:`inspect_function`.

    Attributes:
        func: the function.
        name: its ``__name__``.
        description: its docstring summary (:func:`description_of`).
        is_async: whether calling it returns a coroutine.
        context_parameter: the parameter the context is injected into, if any.
        arguments_type: the Struct type arguments are validated with.
        input_schema: the JSON Schema of the arguments (context excluded).
        output: the output schema of its return annotation, if structured.
        return_annotation: the resolved return annotation
            (``inspect.Signature.empty`` if there is none).
        parameter_names: the argument names (context and skipped excluded).
        strict: the default validation mode of :meth:`call` (module docstring).
    """

    func: Callable[..., Any]
    name: str
    description: str | None
    is_async: bool
    context_parameter: str | None
    arguments_type: type[msgspec.Struct]
    input_schema: dict[str, Any]
    output: OutputSchema | None
    return_annotation: Any
    parameter_names: tuple[str, ...]
    strict: bool
    _positional: tuple[str, ...] = attrs.field(alias="positional")
    _decoder: msgspec.json.Decoder[Any] = attrs.field(alias="decoder")
    _lax_decoder: msgspec.json.Decoder[Any] = attrs.field(alias="lax_decoder")
    #: The decoder of raw JSON arguments in :attr:`strict` mode (``arguments_type | None``).
    arguments_decoder: msgspec.json.Decoder[Any] = attrs.field(init=False)

    @arguments_decoder.default
    def _arguments_decoder(self) -> msgspec.json.Decoder[Any]:
        return self._decoder if self.strict else self._lax_decoder

    @property
    def positional(self) -> tuple[str, ...]:
        """The positional-only parameters (passed by position)."""
        return self._positional

    def decode_arguments(self, raw: msgspec.Raw | msgspec.UnsetType) -> msgspec.Struct | None:
        """``raw`` JSON arguments (strict; absent: none at all) as the
        arguments Struct, or None for a JSON ``null``. Raises
        :class:`msgspec.ValidationError` / ``DecodeError`` as they are (for a
        fast path whose caller falls back to :meth:`bind`, which words them)."""
        if raw is msgspec.UNSET:
            return msgspec.convert({}, self.arguments_type)
        decoded: msgspec.Struct | None = self.arguments_decoder.decode(raw)
        return decoded

    def bind(self, arguments: Any, *, strict: bool | None = None) -> dict[str, Any]:
        """Validate ``arguments`` (a dict, ``None``, or raw JSON bytes /
        :class:`msgspec.Raw`) into keyword arguments, context excluded.
        ``strict`` defaults to :attr:`strict`.

        Raises :class:`ToolArgumentError`.
        """
        if strict is None:
            strict = self.strict
        try:
            if arguments is None:
                args = msgspec.convert({}, self.arguments_type)
            elif isinstance(arguments, dict):
                args = msgspec.convert(arguments, self.arguments_type, strict=strict)
            elif isinstance(arguments, (bytes, bytearray, memoryview, msgspec.Raw, str)):
                args = (self._decoder if strict else self._lax_decoder).decode(arguments)
                if args is None:
                    args = msgspec.convert({}, self.arguments_type)
            else:
                raise ToolArgumentError(
                    f"Invalid arguments: expected an object, got {type(arguments).__name__}"
                )
        except msgspec.ValidationError as exc:
            raise _argument_error(exc) from None
        except msgspec.DecodeError as exc:
            raise ToolArgumentError(f"Invalid arguments: malformed JSON ({exc})") from None
        return msgspec.structs.asdict(args)

    async def call(
        self,
        arguments: Any,
        context: Any = None,
        *,
        strict: bool | None = None,
        limiter: trio.CapacityLimiter | None = None,
    ) -> Any:
        """Validate ``arguments`` (see :meth:`bind`), inject ``context`` and
        call the function: awaited if async. A sync function runs in a worker
        thread under ``limiter`` when one is given (see :func:`run_sync_in_thread`),
        else directly in this task. An awaitable returned by a sync function
        is awaited too."""
        kwargs = self.bind(arguments, strict=strict)
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = context
        args = [kwargs.pop(n) for n in self._positional] if self._positional else []
        if self.is_async:
            return await self.func(*args, **kwargs)
        if limiter is None:
            result = self.func(*args, **kwargs)
        else:
            result = await run_sync_in_thread(functools.partial(self.func, *args, **kwargs), limiter)
        if inspect.isawaitable(result):
            return await result
        return result


async def run_sync_in_thread(fn: Callable[[], Any], limiter: trio.CapacityLimiter) -> Any:
    """``fn()`` in a worker thread holding a token of ``limiter``.

    Cancelling the caller returns at once (``abandon_on_cancel``): the thread
    cannot be interrupted, so it is abandoned and runs to its end; trio keeps
    the limiter's token borrowed until the thread really ends, so abandoned
    threads still count against the bound and never pile up past it."""
    # Boxed: trio refuses a coroutine returned from a thread, and a sync
    # function returning an awaitable is allowed (the caller awaits it).
    boxed = await trio.to_thread.run_sync(lambda: (fn(),), abandon_on_cancel=True, limiter=limiter)
    return boxed[0]


def inspect_function(
    func: Callable[..., Any],
    *,
    context_type: type | tuple[type, ...] | None = None,
    skip: Collection[str] = (),
    strict: bool = True,
) -> FunctionSpec:
    """Introspect ``func`` once: its context parameter (any parameter
    annotated with ``context_type``, a subclass, a generic alias of one, or an
    ``Optional`` of one; string annotations are resolved), its arguments
    Struct and schema, its output schema and description.

    Parameters named in ``skip`` are left out of the schema and not passed
    (they must have defaults). ``strict`` is the default validation mode of
    :meth:`FunctionSpec.call`: keep it for tools, pass ``False`` for resource
    templates and prompts, whose arguments are strings. Raises :class:`TypeError` for ``*args`` /
    ``**kwargs``, more than one context parameter, generator functions,
    unresolvable annotations and unsupported parameter types.
    """
    if not callable(func):
        raise TypeError(f"{func!r} is not callable")
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise TypeError(f"{getattr(func, '__qualname__', func)!r}: generator functions are not supported")
    signature, hints = resolve_signature(func)
    context_parameter: str | None = None
    if context_type is not None:
        for pname in signature.parameters:
            if pname in hints and _is_context(hints[pname], context_type):
                if context_parameter is not None:
                    raise TypeError(
                        f"{getattr(func, '__qualname__', func)!r} has two context parameters: "
                        f"{context_parameter!r} and {pname!r}"
                    )
                context_parameter = pname
    excluded = set(skip)
    if context_parameter is not None:
        excluded.add(context_parameter)
    arguments_type = arguments_struct(func, skip=excluded, signature=signature, hints=hints)
    positional = tuple(
        pname
        for pname, param in signature.parameters.items()
        if param.kind is inspect.Parameter.POSITIONAL_ONLY and pname not in skip
    )
    return_annotation = hints.get("return", signature.return_annotation)
    return FunctionSpec(
        func=func,
        name=getattr(func, "__name__", type(func).__name__),
        description=description_of(func),
        is_async=is_async(func),
        context_parameter=context_parameter,
        arguments_type=arguments_type,
        input_schema=_struct_schema(arguments_type),
        output=output_schema_for(return_annotation),
        return_annotation=return_annotation,
        parameter_names=tuple(f.name for f in msgspec.structs.fields(arguments_type)),
        strict=strict,
        positional=positional,
        decoder=msgspec.json.Decoder(arguments_type | None, strict=True),
        lax_decoder=msgspec.json.Decoder(arguments_type | None, strict=False),
    )
