"""Prompts and completion end to end."""

from __future__ import annotations

import base64

import msgspec
import pytest
import trio

from trio_mcp.protocol import (
    INVALID_PARAMS,
    V2025_03_26,
    V2025_06_18,
    AudioContent,
    EmbeddedResource,
    ImageContent,
    InvalidParams,
    PromptArgument,
    PromptMessage,
    PromptReference,
    ResourceContents,
    ResourceLink,
    ResourceTemplateReference,
    TextContent,
)
from trio_mcp.server import Audio, Image, MCPServer

from .conftest import TIMEOUT

PNG = b"\x89PNG\r\n\x1a\n" + b"\x02" * 8
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt "
LANGUAGES = ["python", "pascal", "perl", "php", "prolog", "rust", "ruby"]


def prompts_app(**options) -> MCPServer:
    app = MCPServer("prompts", **options)

    @app.prompt(
        title="Code review",
        complete={"language": lambda value, ctx: [x for x in LANGUAGES if x.startswith(value)]},
    )
    def review(code: str, language: str = "python") -> str:
        """Ask for a review.

        Args:
            code: the code to review
            language: its language
        """
        return f"Review this {language}:\n{code}"

    @app.prompt
    def conversation(topic: str) -> list:
        return [
            {"role": "user", "content": f"Tell me about {topic}"},
            {"role": "assistant", "content": "Gladly."},
            PromptMessage(role="user", content=TextContent(text="Go on.")),
        ]

    @app.prompt
    def media() -> list:
        return [
            Image(PNG),
            Audio(WAV),
            {"role": "assistant", "content": ResourceLink(uri="file:///a.md", name="a.md", title="A")},
            EmbeddedResource(resource=ResourceContents.from_text("memo://x", "embedded")),
        ]

    @app.prompt
    def no_args() -> str:
        return "static"

    @app.prompt
    def broken(x: str) -> str:
        raise ValueError("prompt exploded")

    @app.resource("repo://{owner}/{name}")
    def repo(owner: str, name: str) -> str:
        return f"{owner}/{name}"

    @app.completion("repo://{owner}/{name}", "owner")
    def complete_owner(value: str, context: dict[str, str]) -> list[str]:
        return [o for o in ["alice", "albert", "bob"] if o.startswith(value)]

    @app.completion("repo://{owner}/{name}", "name")
    async def complete_name(value: str, context: dict[str, str]) -> list[str]:
        await trio.lowlevel.checkpoint()
        repos = {"alice": ["alpha", "apex"], "bob": ["beta"]}
        return [r for r in repos.get(context.get("owner", ""), []) if r.startswith(value)]

    @app.completion("conversation", "topic")
    def complete_topic(value: str, context: dict[str, str]) -> list[str]:
        return [f"topic-{i}" for i in range(250)]

    return app


async def test_list_prompts(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            prompts = {p.name: p for p in await conn.client.list_all_prompts()}
            assert set(prompts) == {"review", "conversation", "media", "no_args", "broken"}
            review = prompts["review"]
            assert review.title == "Code review"
            assert review.description == "Ask for a review."
            assert review.arguments == [
                PromptArgument(name="code", description="the code to review", required=True),
                PromptArgument(name="language", description="its language", required=False),
            ]
            assert prompts["no_args"].arguments is msgspec.UNSET


async def test_get_prompt(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            result = await conn.client.get_prompt("review", {"code": "x = 1"})
            assert result.description == "Ask for a review."
            (message,) = result.messages
            assert message.role == "user"
            assert message.content.text == "Review this python:\nx = 1"
            result = await conn.client.get_prompt("review", {"code": "fn main(){}", "language": "rust"})
            assert result.messages[0].content.text == "Review this rust:\nfn main(){}"

            result = await conn.client.get_prompt("conversation", {"topic": "trio"})
            assert [(m.role, m.content.text) for m in result.messages] == [
                ("user", "Tell me about trio"),
                ("assistant", "Gladly."),
                ("user", "Go on."),
            ]

            assert (await conn.client.get_prompt("no_args")).messages[0].content.text == "static"


async def test_prompt_content_blocks_degrade_for_older_versions(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            image, audio, link, embedded = (await conn.client.get_prompt("media")).messages
            assert isinstance(image.content, ImageContent)
            assert base64.b64decode(image.content.data) == PNG
            if version >= V2025_03_26:
                assert isinstance(audio.content, AudioContent)
            else:
                assert isinstance(audio.content, TextContent) and "audio/wav" in audio.content.text
            assert link.role == "assistant"
            if version >= V2025_06_18:
                assert isinstance(link.content, ResourceLink) and link.content.uri == "file:///a.md"
            else:
                assert isinstance(link.content, TextContent) and "file:///a.md" in link.content.text
            assert isinstance(embedded.content, EmbeddedResource)
            assert embedded.content.resource.text == "embedded"


@pytest.mark.parametrize(
    ("name", "arguments", "fragments"),
    [
        ("review", None, ["missing", "code"]),
        ("review", {"language": "rust"}, ["missing", "code"]),
        ("conversation", {}, ["missing", "topic"]),
        ("nope", {}, ["nope"]),
    ],
)
async def test_prompt_errors_are_invalid_params(connect, name, arguments, fragments) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            with pytest.raises(InvalidParams) as caught:
                await conn.client.get_prompt(name, arguments)
            assert caught.value.code == INVALID_PARAMS
            for fragment in fragments:
                assert fragment in caught.value.message.lower()
            assert (await conn.client.get_prompt("no_args")).messages


async def test_a_failing_prompt_is_an_error_answer_and_the_session_keeps_serving(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            with pytest.raises(Exception) as caught:
                await conn.client.get_prompt("broken", {"x": "1"})
            assert "prompt exploded" in str(caught.value)
            assert (await conn.client.get_prompt("no_args")).messages[0].content.text == "static"


async def test_prompts_pagination(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("paged", page_size=4)
        for i in range(9):
            app.prompt(name=f"p{i}")(lambda: "x")
        async with connect(app) as conn:
            first = await conn.client.list_prompts()
            assert [p.name for p in first.prompts] == ["p0", "p1", "p2", "p3"]
            assert [p.name for p in await conn.client.list_all_prompts()] == [f"p{i}" for i in range(9)]
            with pytest.raises(InvalidParams):
                await conn.client.list_prompts("bogus")


# -------------------------------------------------------------- completion


async def test_complete_prompt_argument(connect, version: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            result = await conn.client.complete(PromptReference(name="review"), "language", "p")
            assert result.completion.values == ["python", "pascal", "perl", "php", "prolog"]
            assert result.completion.total == 5
            assert result.completion.has_more is False
            # An argument without completions: no values.
            result = await conn.client.complete(PromptReference(name="review"), "code", "x")
            assert result.completion.values == []


async def test_complete_template_variables_with_context(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            ref = ResourceTemplateReference(uri="repo://{owner}/{name}")
            result = await conn.client.complete(ref, "owner", "al")
            assert result.completion.values == ["alice", "albert"]
            result = await conn.client.complete(ref, "name", "a", context={"owner": "alice"})
            assert result.completion.values == ["alpha", "apex"]
            result = await conn.client.complete(ref, "name", "", context={"owner": "bob"})
            assert result.completion.values == ["beta"]
            result = await conn.client.complete(ref, "name", "")
            assert result.completion.values == []


async def test_completion_values_are_capped_at_100(connect) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            result = await conn.client.complete(PromptReference(name="conversation"), "topic", "")
            assert len(result.completion.values) == 100
            assert result.completion.values[0] == "topic-0"
            assert result.completion.total == 250
            assert result.completion.has_more is True


@pytest.mark.parametrize(
    "ref",
    [PromptReference(name="unknown"), ResourceTemplateReference(uri="nope://{x}")],
    ids=["prompt", "template"],
)
async def test_completion_for_an_unknown_reference_is_invalid_params(connect, ref) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(prompts_app()) as conn:
            with pytest.raises(InvalidParams):
                await conn.client.complete(ref, "x", "")


async def test_completion_register_requires_a_known_reference() -> None:
    app = MCPServer("x")
    with pytest.raises(KeyError):
        app.completion("missing", "arg")(lambda v, c: [])


async def test_prompt_arguments_are_strings_converted_to_the_parameter_types(connect) -> None:
    with trio.fail_after(TIMEOUT):
        app = MCPServer("typed")

        @app.prompt
        def repeat(word: str, times: int, loud: bool = False) -> str:
            text = " ".join([word] * times)
            return text.upper() if loud else text

        async with connect(app) as conn:
            result = await conn.client.get_prompt("repeat", {"word": "hi", "times": "3", "loud": "true"})
            assert result.messages[0].content.text == "HI HI HI"
            with pytest.raises(InvalidParams) as caught:
                await conn.client.get_prompt("repeat", {"word": "hi", "times": "many"})
            assert "times" in caught.value.message
