"""Input / output JSON Schemas generated from function signatures."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, Optional, TypedDict

import attrs
import msgspec
import pytest
from jsonschema import Draft202012Validator

from trio_mcp.protocol import CallToolResult, ImageContent, TextContent, Tool
from trio_mcp.server._content import Image
from trio_mcp.server._schema import (
    OutputSchema,
    arguments_struct,
    description_of,
    input_schema_for,
    output_schema_for,
    parameter_descriptions,
)

try:  # tests/ is on sys.path (rootdir-relative imports) ...
    from schema_check import validate_definition
except ImportError:  # ... or tests is a package
    from tests.schema_check import validate_definition


class Point(msgspec.Struct, frozen=True):
    """A point in the plane."""

    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    corner: Point
    tags: list[str] = dataclasses.field(default_factory=list)


class Movie(TypedDict):
    title: str
    year: int


@attrs.define
class Person:
    name: str
    age: int = 0


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Size(enum.IntEnum):
    S = 1
    L = 3


class Ctx:
    pass


class Opaque:
    """A type msgspec cannot describe."""


def valid(schema: dict[str, Any]) -> Draft202012Validator:
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def accepts(schema: dict[str, Any], instance: Any) -> bool:
    return valid(schema).is_valid(instance)


# ----------------------------------------------------------------------------- input schemas


def test_scalars_and_required() -> None:
    def f(i: int, x: float, s: str, b: bool, n: None = None) -> None: ...

    schema = input_schema_for(f)
    assert schema == {
        "type": "object",
        "properties": {
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "s": {"type": "string"},
            "b": {"type": "boolean"},
            "n": {"type": "null", "default": None},
        },
        "required": ["i", "x", "s", "b"],
    }
    v = valid(schema)
    assert v.is_valid({"i": 1, "x": 1.5, "s": "a", "b": True})
    assert v.is_valid({"i": 1, "x": 2, "s": "a", "b": False})  # an integer is a number
    assert not v.is_valid({"i": "1", "x": 1.5, "s": "a", "b": True})
    assert not v.is_valid({"i": 1, "x": 1.5, "s": "a"})


def test_defaults_and_optionals() -> None:
    def f(
        a: int = 3,
        b: Optional[str] = None,  # noqa: UP045
        c: int = None,  # type: ignore[assignment]  # noqa: RUF013 (implicit Optional is what is tested)
        d: list[int] = [1, 2],  # noqa: B006 (a list default is what is tested)
        e: float | None = 0.5,
    ) -> None: ...

    schema = input_schema_for(f)
    props = schema["properties"]
    assert schema["required"] == []
    assert props["a"] == {"type": "integer", "default": 3}
    assert props["b"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    # a None default widens a non-optional annotation
    assert props["c"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    # a mutable (factory-copied) default is still published
    assert props["d"] == {"type": "array", "items": {"type": "integer"}, "default": [1, 2]}
    assert props["e"]["default"] == 0.5
    v = valid(schema)
    assert v.is_valid({})
    assert v.is_valid({"c": None, "b": None})
    assert not v.is_valid({"d": ["x"]})


def test_unannotated_is_any() -> None:
    def f(a, b=1):  # type: ignore[no-untyped-def]
        ...

    schema = input_schema_for(f)
    assert schema["properties"] == {"a": {}, "b": {"default": 1}}
    assert schema["required"] == ["a"]


def test_containers() -> None:
    def f(
        a: list[int], b: dict[str, float], c: tuple[int, str], d: set[str], e: list[list[bool]]
    ) -> None: ...

    schema = input_schema_for(f)
    props = schema["properties"]
    assert props["a"] == {"type": "array", "items": {"type": "integer"}}
    assert props["b"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["c"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["d"]["uniqueItems"] is True
    v = valid(schema)
    good = {"a": [1], "b": {"k": 1.0}, "c": [1, "x"], "d": ["p"], "e": [[True]]}
    assert v.is_valid(good)
    assert not v.is_valid({**good, "c": [1, 2]})
    assert not v.is_valid({**good, "e": [[1]]})


def test_nested_types_go_to_root_defs() -> None:
    def f(p: Point, box: Box, movie: Movie, person: Person, tree: Node | None = None) -> None: ...

    schema = input_schema_for(f)
    assert set(schema["$defs"]) == {"Point", "Box", "Movie", "Person", "Node"}
    assert schema["properties"]["p"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["description"] == "A point in the plane."
    # nothing but root-level refs, and every ref resolves
    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                refs.append(node["$ref"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    assert refs and all(r.startswith("#/$defs/") and r[8:] in schema["$defs"] for r in refs)
    v = valid(schema)
    good = {
        "p": {"x": 1},
        "box": {"corner": {"x": 1, "y": 2}, "tags": ["a"]},
        "movie": {"title": "Alien", "year": 1979},
        "person": {"name": "Ann"},
        "tree": {"value": 1, "children": [{"value": 2, "children": []}]},
    }
    assert v.is_valid(good)
    assert not v.is_valid({**good, "box": {"corner": {"x": "1"}}})
    assert not v.is_valid({**good, "tree": {"value": 1, "children": [{"value": "deep"}]}})
    assert not v.is_valid({**good, "movie": {"title": "Alien"}})


def test_no_defs_when_not_needed() -> None:
    def f(a: int) -> None: ...

    assert "$defs" not in input_schema_for(f)


def test_literals_and_enums() -> None:
    def f(mode: Literal["fast", "slow"], color: Color, size: Size = Size.S, n: Literal[1, 2] = 1) -> None: ...

    schema = input_schema_for(f)
    assert schema["properties"]["mode"] == {"enum": ["fast", "slow"]}
    assert set(schema["$defs"]["Color"]["enum"]) == {"red", "green"}
    assert schema["properties"]["size"]["default"] == 1
    v = valid(schema)
    assert v.is_valid({"mode": "fast", "color": "red", "size": 3})
    assert not v.is_valid({"mode": "medium", "color": "red"})
    assert not v.is_valid({"mode": "fast", "color": "blue"})
    assert not v.is_valid({"mode": "fast", "color": "red", "size": 2})


def test_annotated_meta() -> None:
    def f(
        n: Annotated[int, msgspec.Meta(ge=1, le=10, description="How many")],
        name: Annotated[str, msgspec.Meta(min_length=2)] = "ab",
    ) -> None: ...

    schema = input_schema_for(f)
    n = {"type": "integer", "minimum": 1, "maximum": 10, "description": "How many"}
    assert schema["properties"]["n"] == n
    v = valid(schema)
    assert v.is_valid({"n": 5})
    assert not v.is_valid({"n": 0})
    assert not v.is_valid({"n": 5, "name": "a"})


def google(
    a: int, b: Annotated[str, msgspec.Meta(description="from Annotated")], c: Point, d: int = 0
) -> None:
    """Add things up.

    A second paragraph.

    Args:
        a: The first
            number, continued.
        b: Overridden by Annotated.
        c (Point): A point.
        d: Not really
           used.

    Returns:
        Nothing.
    """


def rest(a: int, b: str = "") -> int:
    """Compute.

    :param a: The a value.
    :param str b: The b
        value.
    :returns: a number
    """
    return a


def numpy_style(a: int, b: str = "") -> int:
    """Numpy things.

    Parameters
    ----------
    a : int
        The a value.
    b : str, optional
        The b value,
        on two lines.

    Returns
    -------
    int
    """
    return a


def test_google_docstring() -> None:
    assert description_of(google) == "Add things up.\n\nA second paragraph."
    assert parameter_descriptions(google) == {
        "a": "The first number, continued.",
        "b": "Overridden by Annotated.",
        "c": "A point.",
        "d": "Not really used.",
    }
    props = input_schema_for(google)["properties"]
    assert props["a"]["description"] == "The first number, continued."
    assert props["b"]["description"] == "from Annotated"
    assert props["c"] == {"$ref": "#/$defs/Point", "description": "A point."}
    assert props["d"]["description"] == "Not really used."
    valid(input_schema_for(google))


def test_rest_docstring() -> None:
    assert description_of(rest) == "Compute."
    assert parameter_descriptions(rest) == {"a": "The a value.", "b": "The b value."}
    b = {"type": "string", "default": "", "description": "The b value."}
    assert input_schema_for(rest)["properties"]["b"] == b


def test_numpy_docstring() -> None:
    assert description_of(numpy_style) == "Numpy things."
    assert parameter_descriptions(numpy_style) == {"a": "The a value.", "b": "The b value, on two lines."}


def test_description_without_docstring_or_sections() -> None:
    def bare(a: int) -> None:
        pass

    def only(a: int) -> None:
        """Just a summary."""

    def sections_only(a: int) -> None:
        """
        Args:
            a: The a.
        """

    assert description_of(bare) is None
    assert parameter_descriptions(bare) == {}
    assert description_of(only) == "Just a summary."
    assert description_of(sections_only) is None
    assert parameter_descriptions(sections_only) == {"a": "The a."}


def test_skip_and_string_annotations() -> None:
    def f(ctx: Ctx, a: Point, b: list[Color] = []) -> None:  # noqa: B006
        ...

    schema = input_schema_for(f, skip={"ctx"})
    assert list(schema["properties"]) == ["a", "b"]
    assert schema["required"] == ["a"]
    assert set(schema["$defs"]) == {"Point", "Color"}


def test_var_args_rejected() -> None:
    def star(a: int, *rest: int) -> None: ...

    def kw(a: int, **extra: int) -> None: ...

    with pytest.raises(TypeError, match=r"\*rest is not supported"):
        input_schema_for(star)
    with pytest.raises(TypeError, match=r"\*\*extra is not supported"):
        input_schema_for(kw)


def test_unsupported_and_unresolvable_types_rejected() -> None:
    def f(a: Opaque) -> None: ...

    def g(a: DoesNotExist) -> None:  # type: ignore[name-defined]  # noqa: F821
        ...

    with pytest.raises(TypeError, match="parameter 'a' has an unsupported type"):
        input_schema_for(f)
    with pytest.raises(TypeError, match="cannot resolve"):
        input_schema_for(g)


def test_methods_and_callables() -> None:
    class Tools:
        def add(self, a: int, b: int = 1) -> int:
            """Add."""
            return a + b

        def __call__(self, q: str) -> str:
            return q

    assert input_schema_for(Tools().add)["required"] == ["a"]
    assert list(input_schema_for(Tools())["properties"]) == ["q"]


def test_arguments_struct_fields() -> None:
    def f(a: int, b: str = "x", *, c: list[int] = [1]) -> None:  # noqa: B006
        ...

    struct = arguments_struct(f)
    assert struct.__struct_fields__ == ("a", "b", "c")
    one, two = struct(a=1), struct(a=1)
    assert one.c == [1] and one.c is not two.c  # mutable defaults are copied


def test_input_schema_is_a_valid_mcp_tool_schema() -> None:
    def f(p: Point, n: Annotated[int, msgspec.Meta(ge=0)] = 0, color: Color = Color.RED) -> None: ...

    output = output_schema_for(Point)
    assert output is not None
    tool = Tool(name="f", input_schema=input_schema_for(f), output_schema=output.schema)
    for version in ("2025-06-18", "2025-11-25", "2026-07-28"):
        validate_definition(tool, version, "Tool")


# ----------------------------------------------------------------------------- output schemas


@pytest.mark.parametrize(
    "annotation",
    [
        None,
        type(None),
        Any,
        object,
        str,
        bytes,
        str | None,
        int | str,
        TextContent,
        ImageContent,
        TextContent | ImageContent,
        list[TextContent],
        list[str | Image],
        Image,
        CallToolResult,
        "int",  # an unresolved string annotation
        Opaque,  # not describable
    ],
)
def test_unstructured_outputs(annotation: Any) -> None:
    assert output_schema_for(annotation) is None


def test_missing_annotation_is_unstructured() -> None:
    import inspect

    assert output_schema_for(inspect.Signature.empty) is None


@pytest.mark.parametrize(
    ("annotation", "inner"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (tuple[int, int], None),
    ],
)
def test_wrapped_outputs(annotation: Any, inner: Any) -> None:
    out = output_schema_for(annotation)
    assert isinstance(out, OutputSchema) and out.wrapped
    assert out.schema["type"] == "object"
    assert out.schema["required"] == ["result"]
    if inner is not None:
        assert out.schema["properties"]["result"] == inner
    valid(out.schema)


def test_wrapped_output_with_defs() -> None:
    out = output_schema_for(list[Point])
    assert out is not None and out.wrapped
    assert out.schema["properties"]["result"] == {"type": "array", "items": {"$ref": "#/$defs/Point"}}
    v = valid(out.schema)
    assert v.is_valid({"result": [{"x": 1}]})
    assert not v.is_valid({"result": [{"x": "1"}]})
    assert not v.is_valid([{"x": 1}])


@pytest.mark.parametrize("annotation", [Point, Box, Movie, Person, Node, dict[str, int], dict])
def test_object_outputs_are_not_wrapped(annotation: Any) -> None:
    out = output_schema_for(annotation)
    assert out is not None and not out.wrapped
    assert out.schema["type"] == "object"
    assert "title" not in out.schema
    valid(out.schema)


def test_object_output_schema_validates() -> None:
    out = output_schema_for(Box)
    assert out is not None
    assert set(out.schema["$defs"]) == {"Point"}
    v = valid(out.schema)
    assert v.is_valid({"corner": {"x": 1}, "tags": []})
    assert not v.is_valid({"corner": {"y": 1}})
    # a recursive type keeps its own definition for the self-reference
    node = output_schema_for(Node)
    assert node is not None
    assert node.schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    n = valid(node.schema)
    assert n.is_valid({"value": 1, "children": [{"value": 2}]})
    assert not n.is_valid({"value": 1, "children": [{"value": "x"}]})


def test_annotated_return() -> None:
    out = output_schema_for(Annotated[int, msgspec.Meta(ge=0)])
    assert out is not None and out.wrapped
    assert out.schema["properties"]["result"] == {"type": "integer", "minimum": 0}
