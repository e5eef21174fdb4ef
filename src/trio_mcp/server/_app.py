"""The high-level authoring API: decorators over the low-level server.

::

    app = MCPServer("demo")

    @app.tool
    def add(a: int, b: int) -> int:
        '''Add two numbers.'''
        return a + b

    @app.resource("greeting://{name}")
    def greeting(name: str) -> str:
        return f"Hello, {name}!"

    @app.prompt
    def review(code: str) -> str:
        return f"Please review:\\n{code}"
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, overload

import msgspec
import trio
from msgspec import UNSET

from .._util import describe
from ..actors._server import Context
from ..protocol import (
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    CreateTaskResult,
    GetPromptRequestParams,
    GetPromptResult,
    Icon,
    InvalidParams,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    McpError,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceNotFound,
    ResourceTemplate,
    SubscribeRequestParams,
    TaskCreated,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolExecution,
    UnsubscribeRequestParams,
)
from ._content import to_prompt_messages, to_resource_contents, to_tool_result
from ._entries import (
    CompletionFn,
    PromptEntry,
    ResourceEntry,
    TaskSupport,
    TemplateEntry,
    ToolEntry,
    all_entry_scopes,
    entry_scopes,
    scope_set,
)
from ._functions import FunctionSpec, ToolArgumentError, inspect_function, is_async, run_sync_in_thread
from ._lowlevel import LowLevelServer, paginate
from ._schema import description_of, output_schema_for
from ._traversal import traversal_problem
from ._uri_template import UriTemplate

__all__ = ["DEFAULT_MAX_SYNC_THREADS", "CompletionFn", "MCPServer"]

F = TypeVar("F", bound=Callable[..., Any])

#: Completion values per answer (the specification's maximum).
MAX_COMPLETION_VALUES = 100
#: Worker threads running sync (``def``) handlers at once, per server
#: (``MCPServer(max_sync_threads=...)``); more calls wait for a thread.
DEFAULT_MAX_SYNC_THREADS = 40


def _opt(value: Any) -> Any:
    return UNSET if value is None else value


class MCPServer(LowLevelServer):
    """A server whose tools, resources and prompts are plain functions.

    Sync (``def``) tools, resources, prompts and completions run in worker
    threads, at most ``max_sync_threads`` at once (:attr:`thread_limiter`), so
    they never block the event loop; register one with ``inline=True`` to run
    it in the event loop's task instead (for tiny pure functions)."""

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        max_sync_threads: int = DEFAULT_MAX_SYNC_THREADS,
        **options: Any,
    ) -> None:
        super().__init__(name, version, **options)
        if max_sync_threads < 1:
            raise ValueError("max_sync_threads must be at least 1")
        #: The bound of the worker threads running sync handlers.
        self.thread_limiter = trio.CapacityLimiter(max_sync_threads)
        self._inline_completions: set[CompletionFn] = set()
        self._tools: dict[str, ToolEntry] = {}
        self._resources: dict[str, ResourceEntry] = {}
        self._templates: dict[str, TemplateEntry] = {}
        self._prompts: dict[str, PromptEntry] = {}
        self._tool_list: list[Tool] | None = None

    # ---------------------------------------------------------------- tools

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        /,
        *,
        name: str | None = ...,
        title: str | None = ...,
        description: str | None = ...,
        annotations: ToolAnnotations | None = ...,
        icons: Sequence[Icon] | None = ...,
        structured_output: bool | None = ...,
        input_schema: dict[str, Any] | None = ...,
        meta: dict[str, Any] | None = ...,
        task_support: TaskSupport | None = ...,
        task_start: Literal["call", "tool"] = ...,
        inline: bool = ...,
        scopes: Sequence[str] = ...,
    ) -> Callable[[F], F]: ...

    def tool(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a function as a tool (``@app.tool`` or ``@app.tool(name=...)``).

        ``input_schema`` replaces the schema generated from the signature (it is
        advertised as given; arguments are still validated against the signature).

        ``task_support`` (``"optional"`` / ``"required"``; the server needs
        ``tasks=True``): the tool may run as a task, or only as one. A client
        that asks for one (``params.task``, 2025-11-25) or declares the tasks
        extension (2026-07-28) gets a task handle at once and the result from
        the task; ``"required"`` refuses other calls. ``task_start="tool"``:
        the tool runs as a plain call first (it may ask for input) and starts
        the task itself with ``return await ctx.start_task(work)``.

        ``inline=True`` runs a sync function in the event loop's task instead of
        a worker thread. ``scopes``: the OAuth scopes a call needs (served
        over HTTP with a ``ResourceServer``: ``403 insufficient_scope`` before
        the tool runs when the token lacks one; see :meth:`scopes_for`)."""
        if fn is None:
            return _registrar(self._add_tool, options)
        self._add_tool(fn, **options)
        return fn

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> Tool:
        return self._add_tool(fn, **options)

    def _add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: Sequence[Icon] | None = None,
        structured_output: bool | None = None,
        input_schema: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        task_support: TaskSupport | None = None,
        task_start: Literal["call", "tool"] = "call",
        inline: bool = False,
        scopes: Sequence[str] = (),
    ) -> Tool:
        if task_support not in (None, "optional", "required"):
            raise ValueError(f"task_support must be 'optional' or 'required', not {task_support!r}")
        if task_support is not None and self.tasks is None:
            raise ValueError(f"tool {name or fn.__name__!r}: task_support needs a server with tasks=True")
        spec = inspect_function(fn, context_type=Context)
        if input_schema is not None and input_schema.get("type") != "object":
            raise TypeError(f'tool {name or fn.__name__!r}: input_schema must have "type": "object"')
        tool_name = name or fn.__name__
        output = None if structured_output is False else output_schema_for(spec.return_annotation)
        if structured_output is True and output is None:
            raise TypeError(
                f"tool {tool_name!r}: structured_output=True needs a structured return annotation"
            )
        tool = Tool(
            name=tool_name,
            input_schema=spec.input_schema if input_schema is None else input_schema,
            title=_opt(title),
            description=_opt(description or description_of(fn)),
            output_schema=UNSET if output is None else output.schema,
            annotations=_opt(annotations),
            icons=UNSET if not icons else list(icons),
            execution=UNSET if task_support is None else ToolExecution(task_support=task_support),
            meta=_opt(meta),
        )
        self._tools[tool_name] = ToolEntry(
            tool, spec, output, task_support, task_start, inline, scope_set(scopes)
        )
        self._tool_list = None
        if "tools/list" not in self.request_handlers:
            self.set_request_handler("tools/list", PaginatedRequestParams, self._list_tools)
            self.set_request_handler("tools/call", CallToolRequestParams, self._call_tool)
        self.broadcast_nowait("notifications/tools/list_changed")
        return tool

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is None:
            raise KeyError(f"no tool named {name!r}")
        self._tool_list = None
        self.broadcast_nowait("notifications/tools/list_changed")

    @property
    def tools(self) -> list[Tool]:
        if self._tool_list is None:
            self._tool_list = [e.tool for e in self._tools.values()]
        return self._tool_list

    async def _list_tools(self, ctx: Context, params: PaginatedRequestParams) -> ListToolsResult:
        page, cursor = paginate(self.tools, params.cursor, self.page_size)
        return ListToolsResult(tools=page, next_cursor=cursor)

    async def _call_tool(self, ctx: Context, params: CallToolRequestParams) -> Any:
        entry = self._tools.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown tool: {params.name}")
        tasks = self.tasks
        if entry.task_support is not None and tasks is not None and ctx.task is None:
            if not tasks.requested(ctx, params.task):
                if entry.task_support == "required":
                    raise tasks.required_error(ctx, f"tool {params.name!r}")
            elif entry.task_start == "call":

                async def work(task_ctx: Context) -> CallToolResult:
                    result: CallToolResult = await self._run_tool(entry, params, task_ctx)
                    return result

                return await tasks.create(ctx, work, task_param=params.task)
        return await self._run_tool(entry, params, ctx)

    async def _run_tool(self, entry: ToolEntry, params: CallToolRequestParams, ctx: Context) -> Any:
        arguments = None if params.arguments is UNSET else params.arguments
        try:
            # (_invoke, unrolled: the hot path of every tools/call)
            value = await entry.spec.call(
                arguments, ctx, limiter=None if entry.inline else self.thread_limiter
            )
        except ToolArgumentError as exc:
            return _tool_error(f"Invalid arguments for tool {params.name!r}: {exc}")
        except Exception as exc:  # a tool failure is a result, never a dead session
            if isinstance(exc, McpError) and ctx.task is not None:
                raise  # a protocol error in a task: the task failed (tasks/get shows the error)
            return _tool_error(f"Tool {params.name!r} failed: {describe(exc)}")
        if type(value) is str and entry.output is None:
            return CallToolResult(content=[TextContent(text=value)])  # to_tool_result's, at once
        if isinstance(value, (TaskCreated, CreateTaskResult)):
            return value  # the tool started a task itself (task_start="tool")
        if entry.output is not None and not isinstance(value, CallToolResult):
            problem = _output_mismatch(value, entry.spec.return_annotation)
            if problem is not None:
                return _tool_error(
                    f"Tool {params.name!r} returned a value that does not match its output schema: {problem}"
                )
        try:
            return to_tool_result(value, entry.output)
        except Exception as exc:
            return _tool_error(f"Tool {params.name!r} returned a value that cannot be sent: {describe(exc)}")

    # ------------------------------------------------------------ resources

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: Sequence[Icon] | None = None,
        complete: dict[str, CompletionFn] | None = None,
        meta: dict[str, Any] | None = None,
        inline: bool = False,
        allow_path_traversal: bool = False,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a resource (fixed URI) or a resource template (``{param}`` in the URI).

        A template refuses, before its function runs, a URI whose variables
        (after percent-decoding, at every level) hold a ``..`` path segment, an
        absolute path or a NUL (:func:`traversal_problem`);
        ``allow_path_traversal=True`` lets such values through to a function
        that checks them itself. ``inline=True`` runs a sync function in the
        event loop's task instead of a worker thread. ``scopes``: the OAuth
        scopes reading (or subscribing to) it needs, as for tools."""

        def register(fn: F) -> F:
            spec = inspect_function(fn, context_type=Context, strict=False)
            res_name = name or fn.__name__
            desc = _opt(description or description_of(fn))
            if "{" in uri:
                matcher = UriTemplate(uri)
                missing = set(spec.parameter_names) - set(matcher.variables)
                if missing:
                    raise TypeError(
                        f"resource template {uri!r}: parameters {sorted(missing)} are not variables of the URI"
                    )
                template = ResourceTemplate(
                    uri_template=uri,
                    name=res_name,
                    title=_opt(title),
                    description=desc,
                    mime_type=_opt(mime_type),
                    icons=UNSET if not icons else list(icons),
                    meta=_opt(meta),
                )
                self._templates[uri] = TemplateEntry(
                    template,
                    matcher,
                    spec,
                    mime_type,
                    dict(complete or {}),
                    inline,
                    allow_path_traversal,
                    scope_set(scopes),
                )
            else:
                resource = Resource(
                    uri=uri,
                    name=res_name,
                    title=_opt(title),
                    description=desc,
                    mime_type=_opt(mime_type),
                    icons=UNSET if not icons else list(icons),
                    meta=_opt(meta),
                )
                self._resources[uri] = ResourceEntry(resource, spec, mime_type, inline, scope_set(scopes))
            if "resources/read" not in self.request_handlers:
                self.set_request_handler("resources/list", PaginatedRequestParams, self._list_resources)
                self.set_request_handler(
                    "resources/templates/list", PaginatedRequestParams, self._list_templates
                )
                self.set_request_handler("resources/read", ReadResourceRequestParams, self._read_resource)
                self.set_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
                self.set_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)
                self._enable_completions()
            self.broadcast_nowait("notifications/resources/list_changed")
            return fn

        return register

    async def _list_resources(self, ctx: Context, params: PaginatedRequestParams) -> ListResourcesResult:
        items = [e.resource for e in self._resources.values()]
        page, cursor = paginate(items, params.cursor, self.page_size)
        return ListResourcesResult(resources=page, next_cursor=cursor)

    async def _list_templates(
        self, ctx: Context, params: PaginatedRequestParams
    ) -> ListResourceTemplatesResult:
        items = [e.template for e in self._templates.values()]
        page, cursor = paginate(items, params.cursor, self.page_size)
        return ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)

    async def _read_resource(self, ctx: Context, params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = params.uri
        entry = self._resources.get(uri)
        if entry is not None:
            value = await self._invoke(entry.spec, {}, ctx, entry.inline)
            return ReadResourceResult(contents=to_resource_contents(uri, value, entry.mime_type))
        for tentry in self._templates.values():
            args = tentry.matcher.match(uri)
            if args is not None:
                if not tentry.allow_path_traversal:
                    _refuse_traversal(uri, tentry.template.uri_template, args)
                try:
                    value = await self._invoke(tentry.spec, args, ctx, tentry.inline)
                except ToolArgumentError as exc:
                    raise InvalidParams(
                        f"Invalid URI {uri!r} for template {tentry.template.uri_template!r}: {exc}"
                    )
                return ReadResourceResult(contents=to_resource_contents(uri, value, tentry.mime_type))
        raise ResourceNotFound(f"Resource not found: {uri}", data={"uri": uri})

    def _known_uri(self, uri: str) -> bool:
        return uri in self._resources or any(
            t.matcher.match(uri) is not None for t in self._templates.values()
        )

    async def _subscribe(self, ctx: Context, params: SubscribeRequestParams) -> dict[str, Any]:
        if not self._known_uri(params.uri):
            raise ResourceNotFound(f"Resource not found: {params.uri}", data={"uri": params.uri})
        ctx.session.subscriptions.add(params.uri)
        return {}

    async def _unsubscribe(self, ctx: Context, params: UnsubscribeRequestParams) -> dict[str, Any]:
        ctx.session.subscriptions.discard(params.uri)
        return {}

    # -------------------------------------------------------------- prompts

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
            return _registrar(self._add_prompt, options)
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
            PromptArgument(
                name=arg, description=_opt(props[arg].get("description")), required=arg in required
            )
            for arg in props
        ]
        prompt_name = name or fn.__name__
        prompt = Prompt(
            name=prompt_name,
            title=_opt(title),
            description=_opt(description or description_of(fn)),
            arguments=arguments or UNSET,
            icons=UNSET if not icons else list(icons),
        )
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

    # ---------------------------------------------------------- completions

    def completion(self, ref: str, argument: str, *, inline: bool = False) -> Callable[[F], F]:
        """Register completions for a prompt argument (``ref`` = prompt name)
        or a template variable (``ref`` = the URI template). A sync function
        runs in a worker thread unless ``inline=True`` (as do those given as
        ``complete=`` unless their prompt or template is inline)."""

        def register(fn: F) -> F:
            if inline:
                self._inline_completions.add(fn)
            if ref in self._prompts:
                self._prompts[ref].completions[argument] = fn
            elif ref in self._templates:
                self._templates[ref].completions[argument] = fn
            else:
                raise KeyError(f"no prompt or resource template {ref!r}; register it first")
            self._enable_completions()
            return fn

        return register

    def _enable_completions(self) -> None:
        if "completion/complete" not in self.request_handlers:
            self.set_request_handler("completion/complete", CompleteRequestParams, self._complete)

    async def _complete(self, ctx: Context, params: CompleteRequestParams) -> CompleteResult:
        ref = params.ref
        if isinstance(ref, PromptReference):
            entry: Any = self._prompts.get(ref.name)
            if entry is None:
                raise InvalidParams(f"Unknown prompt: {ref.name}")
        else:
            entry = self._templates.get(ref.uri)
            if entry is None:
                raise InvalidParams(f"Unknown resource template: {ref.uri}")
        fn = entry.completions.get(params.argument.name)
        values: list[str] = []
        if fn is not None:
            context_args = (
                {}
                if params.context is UNSET or params.context.arguments is UNSET
                else params.context.arguments
            )
            value = params.argument.value
            if is_async(fn) or entry.inline or fn in self._inline_completions:
                result = fn(value, context_args)
            else:
                result = await run_sync_in_thread(lambda: fn(value, context_args), self.thread_limiter)
            if hasattr(result, "__await__"):
                result = await result
            values = [str(v) for v in result]
        total = len(values)
        return CompleteResult(
            completion=Completion(
                values=values[:MAX_COMPLETION_VALUES], total=total, has_more=total > MAX_COMPLETION_VALUES
            )
        )

    # -------------------------------------------------------- authorization

    def scopes_for(self, method: str, target: str | None) -> frozenset[str]:
        return super().scopes_for(method, target) | entry_scopes(self, method, target)

    def declared_scopes(self) -> frozenset[str]:
        return super().declared_scopes() | all_entry_scopes(self)

    # ------------------------------------------------------------- threads

    async def _invoke(self, spec: FunctionSpec, arguments: Any, ctx: Context, inline: bool) -> Any:
        """Call a handler: a sync one in a worker thread unless ``inline``."""
        return await spec.call(arguments, ctx, limiter=None if inline else self.thread_limiter)

    # ---------------------------------------------------------- resources

    def resource_updated(self, uri: str) -> None:
        """Notify subscribers that ``uri`` changed (callable from sync code)."""
        self.notify_resource_updated(uri)


def _registrar(add: Callable[..., Any], options: dict[str, Any]) -> Callable[[F], F]:
    """A decorator registering with ``add(fn, **options)`` that returns ``fn`` itself."""

    def register(fn: F) -> F:
        add(fn, **options)
        return fn

    return register


def _output_mismatch(value: Any, annotation: Any) -> str | None:
    """Why ``value`` does not fit the declared return type (None when it does)."""
    if isinstance(annotation, type) and isinstance(value, annotation) and annotation not in (dict, list):
        return None  # a Struct / dataclass instance of the declared type
    try:
        msgspec.convert(msgspec.to_builtins(value), annotation, strict=False)
    except (msgspec.ValidationError, TypeError) as exc:
        return str(exc)
    return None


def _refuse_traversal(uri: str, template: str, args: dict[str, str]) -> None:
    for name, value in args.items():
        problem = traversal_problem(value)
        if problem is not None:
            raise InvalidParams(
                f"Refused URI {uri!r} for template {template!r}: variable {name!r} {problem} "
                "(path traversal; a template that checks its values itself is registered "
                "with allow_path_traversal=True)",
                data={"uri": uri, "variable": name},
            )


def _tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=message)], is_error=True)
