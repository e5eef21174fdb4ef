"""Tools of :class:`~._app.MCPServer`: registering them (``@app.tool``),
listing them, and calling one (arguments checked against its signature, a
failure turned into an error result, the result checked against its output
schema, or run as a task)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final, Literal, overload

import msgspec
from msgspec import UNSET, UnsetType

from .._util import describe
from ..actors._peer_inbound import InboundRequest
from ..actors._server import Context, RequestHandler, ServerSession
from ..protocol import (
    LATEST_HANDSHAKE_VERSION,
    LATEST_VERSION,
    CallToolRequestParams,
    CallToolResult,
    CreateTaskResult,
    Icon,
    InvalidParams,
    ListToolsResult,
    McpError,
    PaginatedRequestParams,
    Request,
    TaskCreated,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolExecution,
    adapt,
)
from ._content import to_tool_result
from ._entries import TaskSupport, ToolEntry, scope_set
from ._functions import ToolArgumentError, inspect_function
from ._lowlevel import paginate
from ._registry import F, Registry, opt, registrar
from ._schema import description_of, output_schema_for

__all__ = ["ToolRegistry"]


class ToolRegistry(Registry):
    """Tools: ``tool``, ``add_tool``, ``remove_tool``, ``tools``."""

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
            return registrar(self._add_tool, options)
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
            title=opt(title),
            description=opt(description or description_of(fn)),
            output_schema=UNSET if output is None else output.schema,
            annotations=opt(annotations),
            icons=UNSET if not icons else list(icons),
            execution=UNSET if task_support is None else ToolExecution(task_support=task_support),
            meta=opt(meta),
        )
        entry = ToolEntry(tool, spec, output, task_support, task_start, inline, scope_set(scopes))
        self._tools[tool_name] = entry
        if task_support is None and (spec.is_async or inline) and not spec.positional:
            self._plain_tools[tool_name] = entry  # it may take the plain path (see _plain_call)
        else:
            self._plain_tools.pop(tool_name, None)
        self._tool_list = None
        if "tools/list" not in self.request_handlers:
            self.set_request_handler("tools/list", PaginatedRequestParams, self._list_tools)
            self.request_handlers["tools/call"] = RequestHandler(
                CallToolRequestParams, self._call_tool, plain=self._plain_call
            )
        self.broadcast_nowait("notifications/tools/list_changed")
        return tool

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is None:
            raise KeyError(f"no tool named {name!r}")
        self._plain_tools.pop(name, None)
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
        return _tool_result(entry, params.name, value)

    def _plain_call(self, session: ServerSession, request: Request) -> Coroutine[Any, Any, Any] | None:
        """The plain path of ``tools/call`` (``RequestHandler.plain``): the
        call of a tool that runs in the caller's task (async, or ``inline``)
        and never as a task, whose params hold only its name and arguments
        that fit its signature, as one coroutine that returns the result as
        sent. No :class:`CallToolRequestParams`, no dict of arguments, and no
        :class:`Context` unless the tool takes one. None for anything else:
        the general path answers it (and says what is wrong)."""
        try:
            params = _plain_params(request.params)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
        if (
            params.meta is not UNSET
            or params.task is not UNSET
            or params.input_responses is not UNSET
            or params.request_state is not UNSET
        ):
            return None
        entry = self._plain_tools.get(params.name)
        if entry is None:
            return None
        spec = entry.spec
        raw = params.arguments
        try:
            # (spec.decode_arguments, unrolled: tools decode strictly)
            args = spec.arguments_decoder.decode(raw) if raw is not UNSET else spec.decode_arguments(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
        if args is None:
            return None
        kwargs = msgspec.structs.asdict(args)
        if spec.context_parameter is not None:
            kwargs[spec.context_parameter] = Context(session, InboundRequest(session.peer, request))
        return _run_plain(entry, params.name, kwargs, session.protocol_version or LATEST_HANDSHAKE_VERSION)


class _PlainParams(msgspec.Struct, frozen=True, rename="camel"):
    """``tools/call`` params as its plain path reads them: what is not a
    name or arguments (``_meta``, a task, input responses) is only noticed."""

    name: str
    arguments: msgspec.Raw | UnsetType = UNSET
    meta: msgspec.Raw | UnsetType = msgspec.field(default=UNSET, name="_meta")
    task: msgspec.Raw | UnsetType = UNSET
    input_responses: msgspec.Raw | UnsetType = UNSET
    request_state: msgspec.Raw | UnsetType = UNSET


_plain_params: Final = msgspec.json.Decoder(_PlainParams).decode


async def _run_plain(entry: ToolEntry, name: str, kwargs: dict[str, Any], version: str) -> Any:
    """Call a tool on the plain path with its bound arguments (see
    :meth:`ToolRegistry._plain_call`): the result, as ``_run_tool`` and the
    session would make it."""
    func = entry.spec.func
    try:
        if entry.spec.is_async:
            value = await func(**kwargs)
        else:
            value = func(**kwargs)  # inline: in this task
            if inspect.isawaitable(value):
                value = await value
    except Exception as exc:  # a tool failure is a result, never a dead session
        return adapt(_tool_error(f"Tool {name!r} failed: {describe(exc)}"), version)
    if type(value) is str and entry.output is None:
        # adapt's answer, at once: a handshake version has no resultType
        if version < LATEST_VERSION:
            return CallToolResult(content=[TextContent(text=value)], result_type=UNSET)
        return CallToolResult(content=[TextContent(text=value)])
    return adapt(_tool_result(entry, name, value), version)


def _tool_result(entry: ToolEntry, name: str, value: Any) -> Any:
    """The result of tool ``name`` that returned ``value`` (checked against
    its output schema, if any)."""
    if isinstance(value, (TaskCreated, CreateTaskResult)):
        return value  # the tool started a task itself (task_start="tool")
    if entry.output is not None and not isinstance(value, CallToolResult):
        problem = _output_mismatch(value, entry.spec.return_annotation)
        if problem is not None:
            return _tool_error(
                f"Tool {name!r} returned a value that does not match its output schema: {problem}"
            )
    try:
        return to_tool_result(value, entry.output)
    except Exception as exc:
        return _tool_error(f"Tool {name!r} returned a value that cannot be sent: {describe(exc)}")


def _output_mismatch(value: Any, annotation: Any) -> str | None:
    """Why ``value`` does not fit the declared return type (None when it does)."""
    if isinstance(annotation, type) and isinstance(value, annotation) and annotation not in (dict, list):
        return None  # a Struct / dataclass instance of the declared type
    try:
        msgspec.convert(msgspec.to_builtins(value), annotation, strict=False)
    except (msgspec.ValidationError, TypeError) as exc:
        return str(exc)
    return None


def _tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=message)], is_error=True)
