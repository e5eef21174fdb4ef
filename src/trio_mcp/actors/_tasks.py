"""The server side of tasks: a store, a runtime, and the ``tasks/*`` handlers.

A :class:`TaskRuntime` belongs to a server app (``LowLevelServer(tasks=...)``).
:meth:`TaskRuntime.create` stores a :class:`TaskRecord` and starts the work in
the background, supervised by the session's task nursery (the stateless HTTP
server lends its own): the request that created it is answered at once with
a task handle, and the record (status, then result or error) outlives it for
its TTL. Cancelling a task cancels the work's scope. The store is bounded
(:attr:`MemoryTaskStore.max_tasks`): when it is full of live tasks, creating
one more fails with :class:`TaskStoreFull`, a clear error, never unbounded
memory. Each task belongs to the session (handshake era) or principal
(stateless era: the access token's issuer, subject and client when the
server checks tokens, or what an ``owner=`` callable says) that created it:
to any other, it does not exist.

While a task's work needs client input (``ctx.elicit`` and friends), the task
is ``input_required``: in the handshake era the question is a server-to-client
request as usual; in the stateless era the question is parked in the task's
``inputRequests`` and the client answers it with ``tasks/update``.
"""

from __future__ import annotations

import datetime
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import attrs
import msgspec
import trio
from msgspec import UNSET

from .._util import describe
from ..protocol import (
    META_RELATED_TASK,
    TASKS_EXTENSION_ID,
    TERMINAL_STATUSES,
    CreateTaskResult,
    DetailedTask,
    EmptyResult,
    GetTaskResult,
    InternalError,
    InvalidParams,
    ListTasksResult,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    PaginatedRequestParams,
    Task,
    TaskCreated,
    TaskRequestParams,
    TaskStatus,
    TaskStatusNotificationParams,
    UpdateTaskRequestParams,
    coerce,
    declared_extension,
    has_capability,
)
from ._modern import InputNeeded, ProtocolFailure, required_capabilities

if TYPE_CHECKING:
    from ._server import Context

__all__ = [
    "DEFAULT_MAX_TASKS",
    "HANDSHAKE_TASKS_CAPABILITY",
    "MemoryTaskStore",
    "TaskHandle",
    "TaskRecord",
    "TaskRuntime",
    "TaskStore",
    "TaskStoreFull",
    "start_task",
]

Era = Literal["handshake", "modern"]

#: Tasks a :class:`MemoryTaskStore` holds by default (live and finished, until their TTL).
DEFAULT_MAX_TASKS: Final = 1000
#: Retention of a task from its creation when the client names none (ms).
DEFAULT_TTL_MS: Final = 10 * 60 * 1000
#: The longest retention a client may ask for (ms).
MAX_TTL_MS: Final = 60 * 60 * 1000
#: Polling hint given to clients (ms).
DEFAULT_POLL_INTERVAL_MS: Final = 500
#: ``capabilities.tasks`` (2025-11-25) of a server serving tasks of ``tools/call``.
HANDSHAKE_TASKS_CAPABILITY: Final[dict[str, Any]] = {
    "list": {},
    "cancel": {},
    "requests": {"tools": {"call": {}}},
}
#: Tasks per ``tasks/list`` page.
LIST_PAGE_SIZE: Final = 100


class TaskStoreFull(McpError):
    """The task store holds as many tasks as it may: no task was created."""

    code = -32603
    default_message = "Task store full"


def _iso(wall: float) -> str:
    return datetime.datetime.fromtimestamp(wall, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@attrs.define(eq=False)
class TaskRecord:
    """One task: its wire state and what the runtime needs to drive it."""

    task_id: str
    #: The session or principal it belongs to (``None``: anyone on this server).
    owner: str | None
    era: Era
    ttl_ms: int | None
    poll_interval_ms: int
    #: ``trio.current_time()`` after which it is forgotten (``None``: never).
    expires_at: float | None
    status: TaskStatus = "working"
    status_message: str | None = None
    created_at: float = attrs.field(factory=time.time)
    updated_at: float = attrs.field(factory=time.time)
    #: The request's result once completed (a Struct).
    result: Any = None
    #: The JSON-RPC error once failed.
    error: McpError | None = None
    #: Pending questions (stateless era): key -> InputRequest.
    input_requests: dict[str, Any] = attrs.field(factory=dict)
    done: trio.Event = attrs.field(factory=trio.Event)
    cancel_scope: trio.CancelScope | None = None
    #: ``post_nowait(method, params)`` of the session told of status changes.
    notify: Callable[[str, Any], None] | None = None
    _answers: dict[str, tuple[trio.Event, list[Any]]] = attrs.field(factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def set_status(self, status: TaskStatus, message: str | None = None) -> None:
        self.status = status
        self.status_message = message
        self.updated_at = time.time()

    def fields(self) -> dict[str, Any]:
        """The task's fields common to both eras (wire names of the 2025 Task)."""
        return {
            "task_id": self.task_id,
            "status": self.status,
            "created_at": _iso(self.created_at),
            "last_updated_at": _iso(self.updated_at),
            "status_message": UNSET if self.status_message is None else self.status_message,
        }

    def as_task(self) -> Task:
        return Task(**self.fields(), ttl=self.ttl_ms, poll_interval=self.poll_interval_ms)

    def as_created(self) -> TaskCreated:
        return TaskCreated(**self.fields(), ttl_ms=self.ttl_ms, poll_interval_ms=self.poll_interval_ms)

    def as_detailed(self) -> DetailedTask:
        extra: dict[str, Any] = {}
        if self.status == "completed":
            extra["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            error: dict[str, Any] = {"code": self.error.code, "message": self.error.message}
            if self.error.data is not None:
                error["data"] = self.error.data
            extra["error"] = error
        elif self.status == "input_required" and self.input_requests:
            extra["input_requests"] = dict(self.input_requests)
        return DetailedTask(
            **self.fields(), ttl_ms=self.ttl_ms, poll_interval_ms=self.poll_interval_ms, **extra
        )


class TaskStore(Protocol):
    """Where task records live. Implementations bound what they hold."""

    async def add(self, record: TaskRecord) -> None:
        """Store a new record; raise :class:`TaskStoreFull` when there is no room."""

    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def page(self, owner: str | None, offset: int, limit: int) -> tuple[list[TaskRecord], bool]:
        """Records of ``owner`` from ``offset``, at most ``limit``; and whether more follow."""

    async def remove(self, task_id: str) -> None: ...

    async def purge(self, now: float) -> list[TaskRecord]:
        """Forget the records whose TTL ran out at ``now`` (trio clock); return them."""


class MemoryTaskStore:
    """The in-memory :class:`TaskStore` (one process), bounded by ``max_tasks``."""

    def __init__(self, max_tasks: int = DEFAULT_MAX_TASKS) -> None:
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self.max_tasks = max_tasks
        self._records: dict[str, TaskRecord] = {}

    def __len__(self) -> int:
        return len(self._records)

    async def add(self, record: TaskRecord) -> None:
        await self.purge(trio.current_time())
        if len(self._records) >= self.max_tasks:
            raise TaskStoreFull(
                f"the task store holds {self.max_tasks} tasks, its limit: no new task until some expire "
                "(or raise max_tasks)",
                data={"maxTasks": self.max_tasks},
            )
        self._records[record.task_id] = record

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is not None and record.expires_at is not None and record.expires_at <= trio.current_time():
            return None
        return record

    async def page(self, owner: str | None, offset: int, limit: int) -> tuple[list[TaskRecord], bool]:
        now = trio.current_time()
        mine = [
            r
            for r in self._records.values()
            if r.owner == owner and (r.expires_at is None or r.expires_at > now)
        ]
        return mine[offset : offset + limit], offset + limit < len(mine)

    async def remove(self, task_id: str) -> None:
        self._records.pop(task_id, None)

    async def purge(self, now: float) -> list[TaskRecord]:
        gone = [r for r in self._records.values() if r.expires_at is not None and r.expires_at <= now]
        for record in gone:
            del self._records[record.task_id]
        return gone

    def statistics(self) -> dict[str, int]:
        live = sum(1 for r in self._records.values() if not r.terminal)
        return {"tasks": len(self._records), "live": live, "max_tasks": self.max_tasks}


#: ``work(ctx)``: the task's body; returns the request's result (a Struct).
Work = Callable[["Context"], Awaitable[Any]]


class TaskHandle:
    """What a task's work sees of its task (``ctx.task``)."""

    __slots__ = ("_counter", "capabilities", "record", "runtime")

    def __init__(self, runtime: TaskRuntime, record: TaskRecord, capabilities: Any) -> None:
        self.runtime = runtime
        self.record = record
        self.capabilities = capabilities
        self._counter = itertools.count(1)

    @property
    def task_id(self) -> str:
        return self.record.task_id

    async def ask(
        self,
        request: Any,
        capability: str,
        result_type: type[Any],
        direct: Callable[[], Awaitable[Any]],
    ) -> Any:
        """Ask the client (sampling, elicitation, roots) on behalf of the task:
        ``input_required`` until the answer comes."""
        record = self.record
        if record.era == "handshake":
            record.set_status("input_required")
            self.runtime._changed(record)
            try:
                return await direct()
            finally:
                if not record.terminal:
                    record.set_status("working")
                    self.runtime._changed(record)
        if not has_capability(self.capabilities, capability.split(".")):
            raise ProtocolFailure(
                MissingClientCapability(
                    f"The request did not declare the client capability {capability!r} that this task needs",
                    data={"requiredCapabilities": required_capabilities(capability)},
                )
            )
        key = f"{capability.split('.')[0]}-{next(self._counter)}"
        event = trio.Event()
        slot: list[Any] = []
        record._answers[key] = (event, slot)
        record.input_requests[key] = request
        record.set_status("input_required")
        self.runtime._changed(record)
        try:
            await event.wait()
        finally:
            record._answers.pop(key, None)
            record.input_requests.pop(key, None)
            if not record.input_requests and not record.terminal:
                record.set_status("working")
                self.runtime._changed(record)
        try:
            return coerce(slot[0], result_type)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InvalidParams(f"inputResponses[{key!r}] is not a valid answer: {exc}") from None


class TaskRuntime:
    """Tasks of one server app: creation, background execution, and the ``tasks/*`` methods."""

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        max_tasks: int = DEFAULT_MAX_TASKS,
        default_ttl_ms: int = DEFAULT_TTL_MS,
        max_ttl_ms: int = MAX_TTL_MS,
        poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS,
        owner: Callable[[Context], str | None] | None = None,
    ) -> None:
        if default_ttl_ms < 1 or max_ttl_ms < default_ttl_ms or poll_interval_ms < 1:
            raise ValueError("need 1 <= default_ttl_ms <= max_ttl_ms and poll_interval_ms >= 1")
        self.store: TaskStore = store if store is not None else MemoryTaskStore(max_tasks)
        self.default_ttl_ms = default_ttl_ms
        self.max_ttl_ms = max_ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self._owner = owner
        self.created = 0

    # ------------------------------------------------------------ capabilities

    def handshake_capability(self) -> dict[str, Any]:
        """``capabilities.tasks`` of 2025-11-25."""
        return dict(HANDSHAKE_TASKS_CAPABILITY)

    def extension_settings(self) -> dict[str, Any]:
        """``capabilities.extensions["io.modelcontextprotocol/tasks"]`` (2026-07-28)."""
        return {}

    def install(self, server: Any) -> None:
        """Serve the ``tasks/*`` methods on ``server`` (a LowLevelServer)."""
        server.set_request_handler("tasks/get", TaskRequestParams, self._get)
        server.set_request_handler("tasks/result", TaskRequestParams, self._result)
        server.set_request_handler("tasks/list", PaginatedRequestParams, self._list)
        server.set_request_handler("tasks/cancel", TaskRequestParams, self._cancel)
        server.set_request_handler("tasks/update", UpdateTaskRequestParams, self._update)

    # ------------------------------------------------------------ creation

    @staticmethod
    def era_of(ctx: Context) -> Era:
        return "modern" if ctx.modern is not None else "handshake"

    def requested(self, ctx: Context, task_param: Any) -> bool:
        """Whether the request may be answered with a task: the client asked
        (``params.task``, 2025-11-25) or declared the extension (2026-07-28)."""
        if ctx.modern is not None:
            return declared_extension(ctx.client_capabilities, TASKS_EXTENSION_ID) is not None
        return task_param is not UNSET and task_param is not None

    def required_error(self, ctx: Context, what: str) -> McpError:
        """The error for a task-required request made without tasks."""
        if ctx.modern is not None:
            return MissingClientCapability(
                f"{what} runs only as a task: declare the {TASKS_EXTENSION_ID} extension",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION_ID: {}}}},
            )
        return MethodNotFound(f"{what} requires task augmentation (params.task)")

    def owner_of(self, ctx: Context) -> str | None:
        if self._owner is not None:
            return self._owner(ctx)
        if ctx.modern is not None:
            # Stateless: no session; the principal of the request's access
            # token when the server checks tokens, else anyone (or owner=).
            auth = ctx.auth
            return None if auth is None else "principal:" + "\x00".join(map(str, auth.identity))
        return ctx.session.task_owner

    async def create(self, ctx: Context, work: Work, *, task_param: Any = UNSET) -> Any:
        """Store a task, start ``work`` in the background, and return the task
        handle to answer the request with (:class:`CreateTaskResult` or
        :class:`TaskCreated`)."""
        nursery = ctx.session.task_nursery
        if nursery is None:
            raise InternalError("this server session cannot run tasks (no task nursery)")
        ttl = self.default_ttl_ms
        if isinstance(task_param, dict) and isinstance(task_param.get("ttl"), int) and task_param["ttl"] > 0:
            ttl = min(task_param["ttl"], self.max_ttl_ms)
        now = trio.current_time()
        for expired in await self.store.purge(now):
            self._abandon(expired)
        record = TaskRecord(
            task_id=secrets.token_urlsafe(16),
            owner=self.owner_of(ctx),
            era=self.era_of(ctx),
            ttl_ms=ttl,
            poll_interval_ms=self.poll_interval_ms,
            expires_at=now + ttl / 1000,
        )
        if record.era == "handshake":
            record.notify = ctx.session.post_nowait
        await self.store.add(record)  # durable before the handle is answered
        self.created += 1
        from ._server import Context as _Context

        task_ctx = _Context(ctx.session, ctx.request, ctx.modern)
        task_ctx.task = TaskHandle(self, record, ctx.client_capabilities)
        nursery.start_soon(self._run, record, work, task_ctx, name=f"task {record.task_id[:8]}")
        return record.as_created() if record.era == "modern" else CreateTaskResult(task=record.as_task())

    async def _run(self, record: TaskRecord, work: Work, ctx: Context) -> None:
        with trio.CancelScope() as scope:
            record.cancel_scope = scope
            if record.expires_at is not None:
                scope.deadline = record.expires_at  # an expired task's work is not worth finishing
            try:
                result = await work(ctx)
            except McpError as exc:
                self._settle(record, "failed", error=exc)
            except ProtocolFailure as failure:
                self._settle(record, "failed", error=failure.error)
            except InputNeeded:
                self._settle(record, "failed", error=InternalError("the task asked for input outside a task"))
            except Exception as exc:
                self._settle(record, "failed", error=InternalError(f"task failed: {describe(exc)}"))
            else:
                self._settle(record, "completed", result=result)
        if not record.terminal:  # cancelled (tasks/cancel, TTL, or the host stopping)
            self._settle(record, "cancelled", message="cancelled")
        record.cancel_scope = None

    def _settle(
        self,
        record: TaskRecord,
        status: TaskStatus,
        *,
        result: Any = None,
        error: McpError | None = None,
        message: str | None = None,
    ) -> None:
        if record.terminal:
            return
        record.result = result
        record.error = error
        record.input_requests.clear()
        record.set_status(status, message if message is not None else (error.message if error else None))
        record.done.set()
        self._changed(record)

    def _abandon(self, record: TaskRecord) -> None:
        if record.cancel_scope is not None:
            record.cancel_scope.cancel()

    def _changed(self, record: TaskRecord) -> None:
        """A status change: ``notifications/tasks/status`` to the owning session (handshake era)."""
        if record.notify is not None:
            record.notify("notifications/tasks/status", self.status_notification(record))

    # ------------------------------------------------------------ methods

    async def _lookup(self, ctx: Context, task_id: str) -> TaskRecord:
        if ctx.modern is not None and declared_extension(ctx.client_capabilities, TASKS_EXTENSION_ID) is None:
            raise MissingClientCapability(
                f"the tasks methods need the {TASKS_EXTENSION_ID} extension in the request's capabilities",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION_ID: {}}}},
            )
        record = await self.store.get(task_id)
        if record is None or record.owner != self.owner_of(ctx):
            # Another owner's task does not exist for this one.
            raise InvalidParams(f"Unknown task: {task_id}")
        return record

    async def _get(self, ctx: Context, params: TaskRequestParams) -> Any:
        record = await self._lookup(ctx, params.task_id)
        if ctx.modern is not None:
            return record.as_detailed()
        return GetTaskResult(**record.fields(), ttl=record.ttl_ms, poll_interval=record.poll_interval_ms)

    async def _result(self, ctx: Context, params: TaskRequestParams) -> Any:
        record = await self._lookup(ctx, params.task_id)
        await record.done.wait()  # bounded by the caller's cancellation and the task's TTL
        related = {META_RELATED_TASK: {"taskId": record.task_id}}
        if record.status == "completed":
            result = record.result
            if isinstance(result, msgspec.Struct) and hasattr(result, "meta"):
                meta = {} if result.meta is UNSET else dict(result.meta)
                return msgspec.structs.replace(result, meta={**meta, **related})
            return result
        if record.status == "failed" and record.error is not None:
            raise record.error
        raise InvalidParams(f"Task {record.task_id} was cancelled: it has no result")

    async def _list(self, ctx: Context, params: PaginatedRequestParams) -> ListTasksResult:
        if ctx.modern is not None:
            raise MethodNotFound("Method not found: tasks/list")
        offset = 0
        if params.cursor is not UNSET:
            try:
                offset = int(params.cursor)
            except ValueError:
                raise InvalidParams(f"invalid cursor {params.cursor!r}") from None
        records, more = await self.store.page(self.owner_of(ctx), offset, LIST_PAGE_SIZE)
        return ListTasksResult(
            tasks=[r.as_task() for r in records],
            next_cursor=str(offset + LIST_PAGE_SIZE) if more else UNSET,
        )

    async def _cancel(self, ctx: Context, params: TaskRequestParams) -> Any:
        record = await self._lookup(ctx, params.task_id)
        if record.terminal:
            if ctx.modern is not None:
                return EmptyResult()  # idempotent
            raise InvalidParams(f"Task {record.task_id} is already {record.status}: it cannot be cancelled")
        self._settle(record, "cancelled", message="cancelled by the client")
        self._abandon(record)
        if ctx.modern is not None:
            return EmptyResult()
        return GetTaskResult(**record.fields(), ttl=record.ttl_ms, poll_interval=record.poll_interval_ms)

    async def _update(self, ctx: Context, params: UpdateTaskRequestParams) -> EmptyResult:
        if ctx.modern is None:
            raise MethodNotFound("Method not found: tasks/update (protocol 2026-07-28)")
        record = await self._lookup(ctx, params.task_id)
        for key, answer in params.input_responses.items():
            waiting = record._answers.get(key)
            if waiting is not None and not waiting[0].is_set():
                waiting[1].append(answer)
                waiting[0].set()
                record.input_requests.pop(key, None)  # answered: no longer pending
        if not record.input_requests and record.status == "input_required":
            record.set_status("working")
            self._changed(record)
        return EmptyResult()

    def status_notification(self, record: TaskRecord) -> TaskStatusNotificationParams:
        return TaskStatusNotificationParams(
            **record.fields(), ttl=record.ttl_ms, poll_interval=record.poll_interval_ms
        )


async def start_task(ctx: Context, work: Work, *, task_param: Any = UNSET) -> Any:
    """From a request handler: answer the request with a task that runs ``work(ctx)``
    in the background (the app must have tasks: ``LowLevelServer(tasks=True)``)."""
    runtime = getattr(ctx.session.app, "tasks", None)
    if runtime is None:
        raise InternalError("this server has no task runtime (LowLevelServer(tasks=...))")
    return await runtime.create(ctx, work, task_param=task_param)
