"""Tasks through the gateway: a task-augmented ``tools/call`` is forwarded as a
task to the server that owns the tool, and the ``tasks/*`` methods go to the
server that owns the task.

The gateway's task id is ``server__upstream-id`` (the server's name routes
every later call; nothing else is stored per task but its owner). Each task
belongs to the gateway session (handshake era) or to the gateway's principal
hook (stateless era) that created it: the gateway holds one session per
server for all its clients, so it keeps, bounded by ``max_tasks``, which of
its clients owns which task; another client's task does not exist for this
one. Both eras are served: ``CreateTaskResult`` / ``tasks/get`` /
``tasks/result`` / ``tasks/list`` / ``tasks/cancel`` (2025-11-25) and
``TaskCreated`` / ``DetailedTask`` / ``tasks/update`` (2026-07-28, the
``io.modelcontextprotocol/tasks`` extension); the upstream call is made in
the upstream session's own era.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import UNSET

from ..actors._client_tasks import TaskInfo
from ..actors._host import SEPARATOR
from ..actors._tasks import TaskRuntime, TaskStoreFull
from ..protocol import (
    META_RELATED_TASK,
    TASKS_EXTENSION_ID,
    CallToolRequestParams,
    CallToolResult,
    CreateTaskResult,
    DetailedTask,
    EmptyResult,
    GetTaskResult,
    InvalidParams,
    ListTasksResult,
    McpError,
    MethodNotFound,
    PaginatedRequestParams,
    Task,
    TaskCreated,
    TaskRequestParams,
    UpdateTaskRequestParams,
)

log = logging.getLogger("trio_mcp.gateway")

if TYPE_CHECKING:
    from ..actors._server import Context
    from ._gateway import Gateway

__all__ = ["DEFAULT_MAX_FORWARDED_TASKS", "TaskForwarding"]

#: Forwarded tasks whose owner the gateway remembers (beyond: new ones are refused).
DEFAULT_MAX_FORWARDED_TASKS: Final = 10_000


def _fields(info: TaskInfo, task_id: str) -> dict[str, Any]:
    created = info.created_at or ""
    return {
        "task_id": task_id,
        "status": info.status,
        "created_at": created,
        "last_updated_at": info.last_updated_at or created,
        "status_message": UNSET if info.status_message is None else info.status_message,
    }


class TaskForwarding:
    """The gateway's task methods (installed by ``Gateway(tasks=True)``)."""

    def __init__(self, gateway: Gateway, *, max_tasks: int = DEFAULT_MAX_FORWARDED_TASKS) -> None:
        self.gateway = gateway
        self.max_tasks = max_tasks
        #: gateway task id -> its owner (bounded: a full table refuses new tasks).
        self._owners: OrderedDict[str, str | None] = OrderedDict()
        #: Who owns what, per era, as the gateway's own task runtime decides it.
        self._runtime = TaskRuntime()

    def install(self) -> None:
        gateway = self.gateway
        gateway.set_request_handler("tasks/get", TaskRequestParams, self._get)
        gateway.set_request_handler("tasks/result", TaskRequestParams, self._result)
        gateway.set_request_handler("tasks/list", PaginatedRequestParams, self._list)
        gateway.set_request_handler("tasks/cancel", TaskRequestParams, self._cancel)
        gateway.set_request_handler("tasks/update", UpdateTaskRequestParams, self._update)
        gateway.extensions[TASKS_EXTENSION_ID] = {}

    # ------------------------------------------------------------ creation

    def requested(self, ctx: Context, task_param: Any) -> bool:
        """Whether the client asked for a task (checked before decoding the whole call)."""
        return self._runtime.requested(ctx, task_param)

    def wants_task(self, ctx: Context, params: CallToolRequestParams) -> bool:
        """The client asked for a task and the tool's server runs it as one."""
        if not self._runtime.requested(ctx, params.task):
            return False
        server, name = self.gateway._route("tool", params.name)
        tool = next((t for t in self.gateway.host.connection(server).tools if t.name == name), None)
        execution = UNSET if tool is None else tool.execution
        return execution is not UNSET and execution.task_support in ("optional", "required")

    async def call_tool(self, ctx: Context, params: CallToolRequestParams) -> Any:
        """Forward a task-augmented call; the answer is the gateway's task handle."""
        server, name = self.gateway._route("tool", params.name)
        if len(self._owners) >= self.max_tasks:
            raise TaskStoreFull(
                f"the gateway remembers {self.max_tasks} forwarded tasks, its limit",
                data={"maxTasks": self.max_tasks},
            )
        session = await self.gateway.host.connection(server).session()
        ttl = params.task.get("ttl") if isinstance(params.task, dict) else None
        arguments = None if params.arguments is UNSET else params.arguments
        started = await self.gateway._forward(
            server,
            f"tools/call {params.name!r} as a task",
            lambda: session.tasks.call_tool(name, arguments, ttl_ms=ttl if isinstance(ttl, int) else None),
        )
        if isinstance(started, CallToolResult):
            return started  # the server answered at once
        public = f"{server}{SEPARATOR}{started.task_id}"
        self._owners[public] = self._runtime.owner_of(ctx)
        return self._created(ctx, started, public)

    # ------------------------------------------------------------ routing

    async def _upstream(self, ctx: Context, public: str) -> tuple[Any, str]:
        if ctx.modern is not None and not self._runtime.requested(ctx, UNSET):
            from ..protocol import MissingClientCapability

            raise MissingClientCapability(
                f"the tasks methods need the {TASKS_EXTENSION_ID} extension in the request's capabilities",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION_ID: {}}}},
            )
        if public not in self._owners or self._owners[public] != self._runtime.owner_of(ctx):
            raise InvalidParams(f"Unknown task: {public}")
        server, _, upstream = public.partition(SEPARATOR)
        session = await self.gateway.host.connection(server).session()
        return session, upstream

    async def _info(self, ctx: Context, public: str) -> TaskInfo:
        session, upstream = await self._upstream(ctx, public)
        server = public.partition(SEPARATOR)[0]
        info: TaskInfo = await self.gateway._forward(
            server, f"tasks/get {public!r}", lambda: session.tasks.get(upstream)
        )
        return info

    def _created(self, ctx: Context, info: TaskInfo, public: str) -> Any:
        fields = _fields(info, public)
        if ctx.modern is not None:
            return TaskCreated(**fields, ttl_ms=info.ttl_ms, poll_interval_ms=_opt(info.poll_interval_ms))
        return CreateTaskResult(
            task=Task(**fields, ttl=info.ttl_ms, poll_interval=_opt(info.poll_interval_ms))
        )

    async def _get(self, ctx: Context, params: TaskRequestParams) -> Any:
        info = await self._info(ctx, params.task_id)
        fields = _fields(info, params.task_id)
        if ctx.modern is None:
            return GetTaskResult(**fields, ttl=info.ttl_ms, poll_interval=_opt(info.poll_interval_ms))
        extra: dict[str, Any] = {}
        result, error = info.result, info.error
        if info.status in ("completed", "failed") and result is None and error is None:
            # a 2025-11-25 server: the outcome is what tasks/result answers
            session, upstream = await self._upstream(ctx, params.task_id)
            try:
                result = _unrelated(await session.tasks.result(upstream))
            except McpError as exc:
                error = exc
        if result is not None:
            extra["result"] = result
        if error is not None:
            extra["error"] = {"code": error.code, "message": error.message}
        if info.input_requests:
            extra["input_requests"] = info.input_requests
        return DetailedTask(
            **fields, ttl_ms=info.ttl_ms, poll_interval_ms=_opt(info.poll_interval_ms), **extra
        )

    async def _result(self, ctx: Context, params: TaskRequestParams) -> Any:
        if ctx.modern is not None:
            raise MethodNotFound("Method not found: tasks/result")
        session, upstream = await self._upstream(ctx, params.task_id)
        server = params.task_id.partition(SEPARATOR)[0]
        result: CallToolResult = await self.gateway._forward(
            server, f"tasks/result {params.task_id!r}", lambda: session.tasks.result(upstream)
        )
        meta = {} if result.meta is UNSET else dict(result.meta)
        meta[META_RELATED_TASK] = {"taskId": params.task_id}
        return msgspec.structs.replace(result, meta=meta)

    async def _list(self, ctx: Context, params: PaginatedRequestParams) -> ListTasksResult:
        if ctx.modern is not None:
            raise MethodNotFound("Method not found: tasks/list")
        owner = self._runtime.owner_of(ctx)
        tasks = []
        for public in [p for p, o in self._owners.items() if o == owner]:
            try:
                info = await self._info(ctx, public)
            except McpError as exc:  # a task its server forgot (or a server down) is not listed
                log.info("tasks/list: leaving out %s: %s", public, exc)
                continue
            tasks.append(
                Task(**_fields(info, public), ttl=info.ttl_ms, poll_interval=_opt(info.poll_interval_ms))
            )
        return ListTasksResult(tasks=tasks)

    async def _cancel(self, ctx: Context, params: TaskRequestParams) -> Any:
        session, upstream = await self._upstream(ctx, params.task_id)
        server = params.task_id.partition(SEPARATOR)[0]
        await self.gateway._forward(
            server, f"tasks/cancel {params.task_id!r}", lambda: session.tasks.cancel(upstream)
        )
        if ctx.modern is not None:
            return EmptyResult()
        return await self._get(ctx, params)

    async def _update(self, ctx: Context, params: UpdateTaskRequestParams) -> EmptyResult:
        if ctx.modern is None:
            raise MethodNotFound("Method not found: tasks/update (protocol 2026-07-28)")
        session, upstream = await self._upstream(ctx, params.task_id)
        server = params.task_id.partition(SEPARATOR)[0]
        await self.gateway._forward(
            server,
            f"tasks/update {params.task_id!r}",
            lambda: session.tasks._request(
                "tasks/update", {"taskId": upstream, "inputResponses": params.input_responses}, None
            ),
        )
        return EmptyResult()


def _unrelated(result: CallToolResult) -> CallToolResult:
    """``result`` without the related-task ``_meta`` (a DetailedTask names its task at the top)."""
    if result.meta is UNSET or META_RELATED_TASK not in result.meta:
        return result
    meta = {k: v for k, v in result.meta.items() if k != META_RELATED_TASK}
    return msgspec.structs.replace(result, meta=meta or UNSET)


def _opt(value: Any) -> Any:
    return UNSET if value is None else value
