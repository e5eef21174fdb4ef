"""Converting return values into tool results, prompt messages and resource contents."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from trio_mcp.protocol import (
    Annotations,
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ReadResourceResult,
    ResourceContents,
    ResourceLink,
    TextContent,
)
from trio_mcp.server._content import (
    BYTES_URI,
    Audio,
    Image,
    to_content,
    to_prompt_messages,
    to_resource_contents,
    to_tool_result,
)
from trio_mcp.server._schema import output_schema_for

try:  # tests/ is on sys.path (rootdir-relative imports) ...
    from schema_check import validate_definition
except ImportError:  # ... or tests is a package
    from tests.schema_check import validate_definition

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 16
MP3 = b"ID3\x03\x00" + b"\x00" * 16
VERSIONS = ("2025-06-18", "2025-11-25", "2026-07-28")


class Point(msgspec.Struct, rename="camel"):
    x_pos: int
    y_pos: int = 0


@dataclasses.dataclass
class Row:
    name: str
    score: float


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def check_result(result: CallToolResult) -> None:
    for version in VERSIONS:
        validate_definition(result, version, "CallToolResult")


# ----------------------------------------------------------------------------- to_content


def test_text_and_none() -> None:
    assert to_content("hi") == [TextContent(text="hi")]
    assert to_content("") == [TextContent(text="")]
    assert to_content(None) == []


def test_bytes_become_an_embedded_blob() -> None:
    for value in (b"\x00\x01\xff", bytearray(b"\x00\x01\xff"), memoryview(b"\x00\x01\xff")):
        (block,) = to_content(value)
        assert isinstance(block, EmbeddedResource)
        assert block.resource.uri == BYTES_URI
        assert block.resource.mime_type == "application/octet-stream"
        assert block.resource.blob_bytes() == b"\x00\x01\xff"


def test_content_blocks_pass_through() -> None:
    blocks = [
        TextContent(text="t"),
        ImageContent(data=b64(PNG), mime_type="image/png"),
        AudioContent(data=b64(WAV), mime_type="audio/wav"),
        ResourceLink(uri="file:///a", name="a"),
        EmbeddedResource(resource=ResourceContents.from_text("file:///a", "x")),
    ]
    for block in blocks:
        (out,) = to_content(block)
        assert out is block
    assert to_content(blocks) == blocks


def test_resource_contents_are_embedded() -> None:
    contents = ResourceContents.from_text("file:///n.txt", "notes")
    assert to_content(contents) == [EmbeddedResource(resource=contents)]


def test_images_and_audio_from_bytes() -> None:
    (img,) = to_content(Image(PNG))
    assert img == ImageContent(data=b64(PNG), mime_type="image/png")
    (jpg,) = to_content(Image(JPEG))
    assert isinstance(jpg, ImageContent) and jpg.mime_type == "image/jpeg"
    (explicit,) = to_content(Image(b"whatever", "image/avif"))
    assert isinstance(explicit, ImageContent) and explicit.mime_type == "image/avif"
    (unknown,) = to_content(Image(b"????"))
    assert isinstance(unknown, ImageContent) and unknown.mime_type == "application/octet-stream"
    (wav,) = to_content(Audio(WAV))
    assert wav == AudioContent(data=b64(WAV), mime_type="audio/wav")
    (mp3,) = to_content(Audio(MP3))
    assert isinstance(mp3, AudioContent) and mp3.mime_type == "audio/mpeg"
    annotated = Image(PNG, annotations=Annotations(priority=0.5)).to_content()
    assert annotated.annotations == Annotations(priority=0.5)


def test_images_and_audio_from_paths(tmp_path: Path) -> None:
    jpg = tmp_path / "photo.JPG"
    jpg.write_bytes(PNG)  # the suffix wins over the content
    webp = tmp_path / "pic.webp"
    webp.write_bytes(b"RIFF0000WEBP")
    noext = tmp_path / "blob"
    noext.write_bytes(PNG)
    clip = tmp_path / "clip.mp3"
    clip.write_bytes(b"\x00\x01")

    assert Image(jpg).to_content() == ImageContent(data=b64(PNG), mime_type="image/jpeg")
    assert Image(str(webp)).to_content().mime_type == "image/webp"
    assert Image(noext).to_content().mime_type == "image/png"  # sniffed
    assert Audio(clip).to_content() == AudioContent(data=b64(b"\x00\x01"), mime_type="audio/mpeg")
    with pytest.raises(FileNotFoundError):
        Image(tmp_path / "missing.png").to_content()


def test_data_becomes_json_text() -> None:
    assert to_content(42) == [TextContent(text="42")]
    assert to_content(1.5) == [TextContent(text="1.5")]
    assert to_content(True) == [TextContent(text="true")]
    assert to_content({"a": [1, 2]}) == [TextContent(text='{"a":[1,2]}')]
    assert to_content(Point(1, 2)) == [TextContent(text='{"xPos":1,"yPos":2}')]
    assert to_content(Row("a", 1.0)) == [TextContent(text='{"name":"a","score":1.0}')]
    # a list of plain data is one JSON document
    assert to_content([1, 2, 3]) == [TextContent(text="[1,2,3]")]
    assert to_content([{"a": 1}, {"b": 2}]) == [TextContent(text='[{"a":1},{"b":2}]')]
    assert to_content([]) == []


def test_unencodable_values_fall_back_to_str() -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    assert to_content(Thing()) == [TextContent(text="a thing")]


def test_lists_with_content_are_concatenated() -> None:
    out = to_content(["a", Image(PNG), 3, None, ("b", b"\x01"), [TextContent(text="c")]])
    assert [type(b).__name__ for b in out] == [
        "TextContent",
        "ImageContent",
        "TextContent",
        "TextContent",
        "EmbeddedResource",
        "TextContent",
    ]
    assert [b.text for b in out if isinstance(b, TextContent)] == ["a", "3", "b", "c"]


def test_call_tool_result_content_is_reused() -> None:
    result = CallToolResult(content=[TextContent(text="x")])
    assert to_content(result) == [TextContent(text="x")]


# ----------------------------------------------------------------------------- to_tool_result


def test_tool_result_passthrough() -> None:
    result = CallToolResult(content=[TextContent(text="boom")], is_error=True)
    assert to_tool_result(result) is result
    assert to_tool_result(result, output_schema_for(int)) is result


def test_unstructured_tool_results() -> None:
    for value, expected in [
        ("hello", [TextContent(text="hello")]),
        ({"a": 1}, [TextContent(text='{"a":1}')]),
        (None, []),
    ]:
        result = to_tool_result(value)
        assert result.content == expected
        assert result.structured_content is UNSET
        check_result(result)
    check_result(to_tool_result([Image(PNG), b"\x00", Audio(WAV)]))


def test_structured_object_result() -> None:
    output = output_schema_for(Point)
    assert output is not None and not output.wrapped
    result = to_tool_result(Point(3, 4), output)
    assert result.structured_content == {"xPos": 3, "yPos": 4}
    assert result.content == [TextContent(text='{"xPos":3,"yPos":4}')]
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    check_result(result)

    rows = to_tool_result({"r": Row("a", 2.0), 5: "int key"}, output_schema_for(dict[Any, Any]))
    assert rows.structured_content == {"r": {"name": "a", "score": 2.0}, "5": "int key"}
    check_result(rows)


@pytest.mark.parametrize(
    ("annotation", "value", "structured", "text"),
    [
        (int, 42, {"result": 42}, "42"),
        (float, 0.5, {"result": 0.5}, "0.5"),
        (bool, False, {"result": False}, "false"),
        (list[str], ["a", "b"], {"result": ["a", "b"]}, '["a","b"]'),
        (list[Row], [Row("x", 1.0)], {"result": [{"name": "x", "score": 1.0}]}, '[{"name":"x","score":1.0}]'),
        (int | None, None, {"result": None}, "null"),
    ],
)
def test_wrapped_structured_results(annotation: Any, value: Any, structured: Any, text: str) -> None:
    output = output_schema_for(annotation)
    assert output is not None and output.wrapped
    result = to_tool_result(value, output)
    assert result.structured_content == structured
    assert result.content == [TextContent(text=text)]
    check_result(result)


def test_structured_output_schema_validates_the_result() -> None:
    from jsonschema import Draft202012Validator

    output = output_schema_for(list[Row])
    assert output is not None
    result = to_tool_result([Row("x", 1.0)], output)
    Draft202012Validator(output.schema).validate(result.structured_content)


def test_content_values_stay_unstructured_even_with_an_output_schema() -> None:
    output = output_schema_for(dict[str, int])
    for value in (Image(PNG), [Image(PNG), "caption"], TextContent(text="t")):
        result = to_tool_result(value, output)
        assert result.structured_content is UNSET
        assert result.content == to_content(value)
    # None for an object schema: nothing to structure
    assert to_tool_result(None, output) == CallToolResult(content=[])


# ----------------------------------------------------------------------------- prompts


def test_prompt_messages() -> None:
    expected = [PromptMessage(role="user", content=TextContent(text="Summarise"))]
    assert to_prompt_messages("Summarise") == expected
    msg = PromptMessage(role="assistant", content=TextContent(text="ok"))
    assert to_prompt_messages(msg) == [msg]
    assert to_prompt_messages(None) == []
    out = to_prompt_messages(
        [
            {"role": "user", "content": "question"},
            {"role": "assistant", "content": TextContent(text="answer")},
            {"role": "user", "content": {"type": "text", "text": "as a dict"}},
            Image(PNG),
            msg,
        ]
    )
    assert [m.role for m in out] == ["user", "assistant", "user", "user", "assistant"]
    assert out[0].content == TextContent(text="question")
    assert out[2].content == TextContent(text="as a dict")
    assert out[3].content == ImageContent(data=b64(PNG), mime_type="image/png")
    for version in VERSIONS:
        for m in out:
            validate_definition(m, version, "PromptMessage")


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ({"role": "system", "content": "x"}, ValueError, "role"),
        ({"role": "user"}, TypeError, "'role' and 'content'"),
        ({"role": "user", "content": 3}, TypeError, "content"),
        ({"role": "user", "content": {"type": "video"}}, TypeError, "invalid prompt message content"),
        (42, TypeError, "int"),
    ],
)
def test_bad_prompt_values(value: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        to_prompt_messages(value)


# ----------------------------------------------------------------------------- resources

URI = "file:///r"


def test_resource_contents() -> None:
    expected = [ResourceContents.from_text(URI, "text", mime_type="text/plain")]
    assert to_resource_contents(URI, "text") == expected
    assert to_resource_contents(URI, "# md", "text/markdown") == [
        ResourceContents.from_text(URI, "# md", mime_type="text/markdown")
    ]
    (blob,) = to_resource_contents(URI, b"\x00\x01")
    assert blob.blob == b64(b"\x00\x01") and blob.mime_type == "application/octet-stream" and blob.uri == URI
    (png,) = to_resource_contents(URI, Image(PNG))
    assert png.mime_type == "image/png" and png.blob_bytes() == PNG
    own = ResourceContents.from_text("file:///other", "x")
    assert to_resource_contents(URI, own) == [own]
    assert to_resource_contents(URI, None) == []
    (data,) = to_resource_contents(URI, {"k": [1, 2]})
    assert data.text == '{"k":[1,2]}' and data.mime_type == "application/json"
    (rows,) = to_resource_contents(URI, [Row("a", 1.0)])
    assert json.loads(rows.text) == [{"name": "a", "score": 1.0}]  # type: ignore[arg-type]


def test_resource_contents_lists_and_blocks() -> None:
    out = to_resource_contents(
        URI,
        [
            "a",
            b"b",
            TextContent(text="c"),
            ImageContent(data=b64(PNG), mime_type="image/png"),
            EmbeddedResource(resource=ResourceContents.from_text("file:///e", "e")),
        ],
    )
    assert [c.text if c.is_text else c.blob_bytes() for c in out] == ["a", b"b", "c", PNG, "e"]
    assert [c.uri for c in out] == [URI, URI, URI, URI, "file:///e"]
    for version in VERSIONS:
        validate_definition(ReadResourceResult(contents=out), version, "ReadResourceResult")
