"""FunctionSpec: context detection, argument validation, calling."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import inspect
import typing
import uuid
from typing import Annotated, Any, Generic, Literal, Optional, TypeVar

import msgspec
import pytest
import trio
from jsonschema import Draft202012Validator

from trio_mcp.server._functions import FunctionSpec, ToolArgumentError, inspect_function
from trio_mcp.server._schema import OutputSchema

T = TypeVar("T")


class Context:
    """Stands in for the server's request context."""

    def __init__(self, tag: str = "ctx") -> None:
        self.tag = tag


class SubContext(Context):
    pass


class GenericContext(Generic[T]):
    pass


class Point(msgspec.Struct, frozen=True):
    x: int
    y: int = 0


@dataclasses.dataclass
class Pair:
    left: Point
    right: Point


# ----------------------------------------------------------------------------- context


def test_context_detected_by_annotation_and_skipped() -> None:
    def tool(a: int, ctx: Context) -> str:
        return f"{a}-{ctx.tag}"

    spec = inspect_function(tool, context_type=Context)
    assert spec.context_parameter == "ctx"
    assert spec.parameter_names == ("a",)
    assert list(spec.input_schema["properties"]) == ["a"]
    assert spec.input_schema["required"] == ["a"]


@pytest.mark.parametrize(
    "annotation",
    [
        Context,
        SubContext,
        Optional[Context],  # noqa: UP045 (the old spelling must be recognised too)
        SubContext | None,
        Annotated[Context, "x"],
        "Context",
    ],
)
def test_context_annotation_forms(annotation: Any) -> None:
    def tool(a: int, c=None):  # type: ignore[no-untyped-def]
        return c

    tool.__annotations__ = {"a": "int", "c": annotation}
    spec = inspect_function(tool, context_type=Context)
    assert spec.context_parameter == "c"


def test_generic_context_alias() -> None:
    def tool(c: GenericContext[int], a: int) -> None: ...

    assert inspect_function(tool, context_type=GenericContext).context_parameter == "c"


def test_no_context_type_means_no_context() -> None:
    def tool(a: int, c: int = 0) -> None: ...

    spec = inspect_function(tool, context_type=Context)
    assert spec.context_parameter is None
    assert inspect_function(tool).context_parameter is None


def test_two_context_parameters_rejected() -> None:
    def tool(c1: Context, c2: SubContext) -> None: ...

    with pytest.raises(TypeError, match="two context parameters"):
        inspect_function(tool, context_type=Context)


async def test_context_injected_and_not_overridable() -> None:
    seen: list[Any] = []

    def tool(ctx: Context, a: int = 1) -> int:
        seen.append(ctx)
        return a

    spec = inspect_function(tool, context_type=Context)
    ctx = Context("real")
    # an argument with the context's name is ignored: the context wins
    assert await spec.call({"a": 2, "ctx": "forged"}, ctx) == 2
    assert seen == [ctx]


# ----------------------------------------------------------------------------- sync / async


async def test_sync_and_async_functions() -> None:
    def sync_tool(a: int, b: int = 2) -> int:
        return a * b

    async def async_tool(a: int, ctx: Context) -> str:
        await trio.lowlevel.checkpoint()
        return f"{a}:{ctx.tag}"

    s = inspect_function(sync_tool, context_type=Context)
    a = inspect_function(async_tool, context_type=Context)
    assert not s.is_async and a.is_async
    assert await s.call({"a": 3}, None) == 6
    assert await a.call({"a": 3}, Context("c")) == "3:c"


async def test_callables_partials_methods_positional_only() -> None:
    class Adder:
        def __init__(self, base: int) -> None:
            self.base = base

        async def __call__(self, x: int) -> int:
            return self.base + x

        def method(self, x: int, /, y: int = 0) -> int:
            return self.base + x - y

    async def scaled(factor: int, x: int) -> int:
        return factor * x

    adder = Adder(10)
    spec = inspect_function(adder)
    assert spec.is_async and spec.parameter_names == ("x",)
    assert await spec.call({"x": 5}) == 15

    method = inspect_function(adder.method)
    assert await method.call({"x": 5, "y": 1}) == 14

    part = inspect_function(functools.partial(scaled, 3))
    assert part.is_async and part.parameter_names == ("x",)
    assert await part.call({"x": 2}) == 6


async def test_sync_wrapper_returning_awaitable_is_awaited() -> None:
    async def inner(a: int) -> int:
        return a + 1

    @functools.wraps(inner)
    def wrapper(a: int) -> Any:
        return inner(a)

    spec = inspect_function(wrapper)
    assert not spec.is_async
    assert await spec.call({"a": 1}) == 2


def test_generators_rejected() -> None:
    def gen(a: int) -> Any:
        yield a

    async def agen(a: int) -> Any:
        yield a

    for f in (gen, agen):
        with pytest.raises(TypeError, match="generator"):
            inspect_function(f)


def test_spec_metadata() -> None:
    def tool(a: int) -> Point:
        """Make a point.

        Args:
            a: The x.
        """
        return Point(a)

    spec = inspect_function(tool)
    assert isinstance(spec, FunctionSpec)
    assert spec.name == "tool"
    assert spec.description == "Make a point."
    assert spec.return_annotation is Point
    assert spec.output == OutputSchema(spec.output.schema, wrapped=False)  # type: ignore[union-attr]
    assert spec.input_schema["properties"]["a"]["description"] == "The x."

    def none(a: int) -> None: ...

    def bare(a):  # type: ignore[no-untyped-def]
        ...

    assert inspect_function(none).output is None
    assert inspect_function(bare).output is None
    assert inspect_function(bare).return_annotation is inspect.Signature.empty


# ----------------------------------------------------------------------------- validation


def tool_types(
    i: int,
    f: float,
    b: bool = False,
    s: str = "",
    items: list[int] = [],  # noqa: B006
    point: Point | None = None,
    mode: Literal["a", "b"] = "a",
    n: Annotated[int, msgspec.Meta(ge=0, le=5)] = 0,
    when: datetime.datetime | None = None,
    ident: uuid.UUID | None = None,
) -> dict[str, Any]:
    return dict(locals())


async def test_arguments_are_converted() -> None:
    spec = inspect_function(tool_types)
    out = await spec.call(
        {
            "i": 1,
            "f": 2,  # int -> float is accepted
            "b": True,
            "items": [1, 2],
            "point": {"x": 3},
            "when": "2024-05-06T07:08:09Z",
            "ident": "12345678-1234-5678-1234-567812345678",
        }
    )
    assert out["f"] == 2.0 and isinstance(out["f"], float)
    assert out["point"] == Point(3, 0)
    assert out["when"] == datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC)
    assert out["ident"] == uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert out["mode"] == "a" and out["s"] == ""


async def test_none_arguments_mean_defaults_and_unknown_fields_are_ignored() -> None:
    def tool(a: int = 7) -> int:
        return a

    spec = inspect_function(tool)
    assert await spec.call(None) == 7
    assert await spec.call({"zzz": 1}) == 7


async def test_mutable_defaults_are_not_shared() -> None:
    def tool(acc: list[int] = []) -> list[int]:  # noqa: B006
        acc.append(1)
        return acc

    spec = inspect_function(tool)
    assert await spec.call({}) == [1]
    assert await spec.call({}) == [1]


async def test_nested_dataclass_arguments() -> None:
    def tool(pair: Pair) -> int:
        return pair.left.x + pair.right.y

    spec = inspect_function(tool)
    assert await spec.call({"pair": {"left": {"x": 1}, "right": {"x": 0, "y": 5}}}) == 6


@pytest.mark.parametrize(
    ("arguments", "field", "fragment"),
    [
        ({"f": 1.0}, "i", "Missing required argument `i`"),
        ({"i": "3", "f": 1.0}, "i", "expected `int`, got `str`"),
        ({"i": 3.5, "f": 1.0}, "i", "expected `int`, got `float`"),
        ({"i": 1, "f": "1.0"}, "f", "expected `float`, got `str`"),
        ({"i": 1, "f": 1.0, "b": 1}, "b", "expected `bool`, got `int`"),
        ({"i": 1, "f": 1.0, "b": "true"}, "b", "expected `bool`, got `str`"),
        ({"i": 1, "f": 1.0, "items": [1, "2"]}, "items[1]", "expected `int`, got `str`"),
        ({"i": 1, "f": 1.0, "point": {"y": 1}}, "point.x", "Missing required argument `point.x`"),
        ({"i": 1, "f": 1.0, "point": {"x": "1"}}, "point.x", "expected `int`"),
        ({"i": 1, "f": 1.0, "mode": "c"}, "mode", "invalid enum value 'c'"),
        ({"i": 1, "f": 1.0, "n": 6}, "n", "<= 5"),
        ({"i": 1, "f": 1.0, "when": "yesterday"}, "when", "datetime"),
    ],
)
async def test_argument_errors_name_the_field(arguments: dict[str, Any], field: str, fragment: str) -> None:
    spec = inspect_function(tool_types)
    with pytest.raises(ToolArgumentError) as info:
        await spec.call(arguments)
    assert info.value.field == field
    assert fragment in str(info.value)
    assert f"`{field}`" in str(info.value)


async def test_non_object_arguments() -> None:
    spec = inspect_function(tool_types)
    with pytest.raises(ToolArgumentError, match="expected an object") as info:
        await spec.call([1, 2])
    assert info.value.field is None
    with pytest.raises(ToolArgumentError, match="malformed JSON"):
        await spec.call(b"{not json")
    with pytest.raises(ToolArgumentError, match="Invalid arguments: expected `object"):
        await spec.call(b"[1]")


async def test_raw_json_arguments() -> None:
    def tool(i: int, f: float, keys: dict[int, str] | None = None) -> Any:
        return i, f, keys

    spec = inspect_function(tool)
    assert await spec.call(msgspec.Raw(b'{"i": 1, "f": 2, "keys": {"3": "c"}}')) == (1, 2.0, {3: "c"})
    assert await spec.call(b'{"i": 1, "f": 2.5}') == (1, 2.5, None)
    with pytest.raises(ToolArgumentError, match="`i`"):
        await spec.call(b'{"i": "1", "f": 2}')


async def test_lax_mode_for_string_arguments() -> None:
    def resource(user_id: int, verbose: bool = False, ratio: float = 1.0) -> Any:
        return user_id, verbose, ratio

    lax = inspect_function(resource, strict=False)
    assert await lax.call({"user_id": "42", "verbose": "true", "ratio": "0.5"}) == (42, True, 0.5)
    with pytest.raises(ToolArgumentError, match="`user_id`"):
        await lax.call({"user_id": "forty-two"})
    strict = inspect_function(resource)
    with pytest.raises(ToolArgumentError, match="`user_id`"):
        await strict.call({"user_id": "42"})
    assert await strict.call({"user_id": "42"}, strict=False) == (42, False, 1.0)


async def test_call_path_does_no_introspection(monkeypatch: pytest.MonkeyPatch) -> None:
    async def tool(ctx: Context, a: int, b: Point | None = None) -> int:
        return a

    spec = inspect_function(tool, context_type=Context)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("introspection on the call path")

    monkeypatch.setattr(inspect, "signature", boom)
    monkeypatch.setattr(typing, "get_type_hints", boom)
    monkeypatch.setattr(msgspec, "defstruct", boom)
    assert await spec.call({"a": 1, "b": {"x": 1}}, Context()) == 1


# ----------------------------------------------------------------------------- schema <-> validation


SAMPLES: list[tuple[dict[str, Any], bool]] = [
    ({"i": 1, "f": 1.5}, True),
    ({"i": 1, "f": 1}, True),
    ({"i": -4, "f": 0, "b": True, "s": "x", "items": [], "mode": "b", "n": 5}, True),
    ({"i": 1, "f": 1, "point": {"x": 1, "y": 2}}, True),
    ({"i": 1, "f": 1, "point": None}, True),
    ({"i": 1, "f": 1, "extra": "ignored"}, True),
    ({"i": 1, "f": 1, "when": None, "ident": None}, True),
    ({"f": 1.5}, False),
    ({"i": 1}, False),
    ({"i": "1", "f": 1.5}, False),
    ({"i": 1.5, "f": 1.5}, False),
    ({"i": True, "f": 1.5}, False),
    ({"i": 1, "f": "1"}, False),
    ({"i": 1, "f": 1, "b": 0}, False),
    ({"i": 1, "f": 1, "s": 5}, False),
    ({"i": 1, "f": 1, "items": [1, None]}, False),
    ({"i": 1, "f": 1, "items": {"a": 1}}, False),
    ({"i": 1, "f": 1, "point": {"y": 2}}, False),
    ({"i": 1, "f": 1, "point": {"x": 1.5}}, False),
    ({"i": 1, "f": 1, "point": []}, False),
    ({"i": 1, "f": 1, "mode": "A"}, False),
    ({"i": 1, "f": 1, "n": -1}, False),
    ({"i": 1, "f": 1, "n": 6}, False),
]


@pytest.mark.parametrize(("arguments", "ok"), SAMPLES)
async def test_schema_and_validation_agree(arguments: dict[str, Any], ok: bool) -> None:
    spec = inspect_function(tool_types)
    Draft202012Validator.check_schema(spec.input_schema)
    by_schema = Draft202012Validator(spec.input_schema).is_valid(arguments)
    try:
        await spec.call(arguments)
        by_call = True
    except ToolArgumentError:
        by_call = False
    assert by_schema == ok
    assert by_call == ok
