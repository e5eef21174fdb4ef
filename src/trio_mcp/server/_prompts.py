"""Prompts of :class:`~._app.MCPServer`: registering them (``@app.prompt``),
listing them and getting one (its required arguments checked)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from msgspec import UNSET

from ..actors._server import Context
from ..protocol import (
    GetPromptRequestParams,
    GetPromptResult,
    Icon,
    InvalidParams,
    ListPromptsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
)
from ._content import to_prompt_messages
from ._entries import CompletionFn, scope_set
from ._functions import ToolArgumentError, inspect_function
from ._lowlevel import paginate
from ._registry import F, Registry, opt, registrar
from ._schema import description_of

__all__ = ["PromptRegistry"]


class PromptRegistry(Registry):
    """Prompts: ``prompt``."""

    @overload
    def prompt(self, fn: F, /) -> F: ...

    @overload
    def prompt(
        self,
        /,
        *,
        name: str | None = ...,
        title: str | None = ...,
        description: str | None = ...,
        icons: Sequence[Icon] | None = ...,
        complete: dict[str, CompletionFn] | None = ...,
        inline: bool = ...,
        scopes: Sequence[str] = ...,
    ) -> Callable[[F], F]: ...

    def prompt(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a function returning prompt messages (``@app.prompt``);
        ``inline=True`` runs a sync function in the event loop's task;
        ``scopes``: the OAuth scopes getting it needs, as for tools."""
        if fn is None:
            return registrar(self._add_prompt, options)
        self._add_prompt(fn, **options)
        return fn

    def _add_prompt(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Icon] | None = None,
        complete: dict[str, CompletionFn] | None = None,
        inline: bool = False,
        scopes: Sequence[str] = (),
    ) -> Prompt:
        spec = inspect_function(fn, context_type=Context, strict=False)
        props = spec.input_schema.get("properties", {})
        required = tuple(spec.input_schema.get("required", ()))
        arguments = [
            PromptArgument(name=arg, description=opt(props[arg].get("description")), required=arg in required)
            for arg in props
        ]
        prompt_name = name or fn.__name__
        prompt = Prompt(
            name=prompt_name,
            title=opt(title),
            description=opt(description or description_of(fn)),
            arguments=arguments or UNSET,
            icons=UNSET if not icons else list(icons),
        )
        from ._more_entries import PromptEntry  # built with the first prompt

        self._prompts[prompt_name] = PromptEntry(
            prompt, spec, required, dict(complete or {}), inline, scope_set(scopes)
        )
        if "prompts/list" not in self.request_handlers:
            self.set_request_handler("prompts/list", PaginatedRequestParams, self._list_prompts)
            self.set_request_handler("prompts/get", GetPromptRequestParams, self._get_prompt)
            self._enable_completions()
        self.broadcast_nowait("notifications/prompts/list_changed")
        return prompt

    async def _list_prompts(self, ctx: Context, params: PaginatedRequestParams) -> ListPromptsResult:
        items = [e.prompt for e in self._prompts.values()]
        page, cursor = paginate(items, params.cursor, self.page_size)
        return ListPromptsResult(prompts=page, next_cursor=cursor)

    async def _get_prompt(self, ctx: Context, params: GetPromptRequestParams) -> GetPromptResult:
        entry = self._prompts.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown prompt: {params.name}")
        arguments = {} if params.arguments is UNSET else params.arguments
        missing = [a for a in entry.required if a not in arguments]
        if missing:
            raise InvalidParams(f"Prompt {params.name!r} is missing required arguments: {', '.join(missing)}")
        try:
            value = await self._invoke(entry.spec, arguments, ctx, entry.inline)
        except ToolArgumentError as exc:
            raise InvalidParams(f"Invalid arguments for prompt {params.name!r}: {exc}") from None
        return GetPromptResult(messages=to_prompt_messages(value), description=entry.prompt.description)
