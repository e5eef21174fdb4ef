"""The tasks extension: wire types and methods of both protocol eras.

A *task* stands for a request (``tools/call``) whose result is fetched later:
the server answers the call with a task handle at once, runs the work in the
background, and the client polls the task's status and takes its result.

* 2025-11-25 (handshake era, core protocol, SEP-1686): the client asks for a
  task with ``params.task`` (:class:`TaskMetadata`) on tools whose
  ``execution.taskSupport`` allows it; the answer is a
  :class:`CreateTaskResult` (``{"task": Task}``). Methods ``tasks/get``,
  ``tasks/result`` (blocks until the task ends, answers with the call's own
  result or error), ``tasks/list``, ``tasks/cancel``; the server may send
  ``notifications/tasks/status``. Capability: ``capabilities.tasks``.
* 2026-07-28 (stateless era, the ``io.modelcontextprotocol/tasks``
  extension, SEP-2663): the client declares the extension in the request's
  capabilities and the *server* decides whether to create a task; the answer
  is a flat :class:`TaskCreated` (``resultType: "task"``). ``tasks/get``
  answers a :class:`DetailedTask`, which inlines the result, the error, or the
  pending ``inputRequests``; ``tasks/update`` delivers ``inputResponses``;
  ``tasks/cancel`` acknowledges with an empty result. ``tasks/result`` and
  ``tasks/list`` are gone. Durations are ``ttlMs`` / ``pollIntervalMs``.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

from msgspec import UNSET, UnsetType, field

from ._common import Meta
from ._extensions import Extension, register_extension
from ._registry import CLIENT_TO_SERVER, SERVER_TO_CLIENT, MethodKind, MethodSpec
from ._types import (
    RESULT_COMPLETE,
    InputRequest,
    McpStruct,
    PaginatedRequestParams,
    RequestParams,
    Result,
    ResultType,
)
from ._versions import V2025_11_25, V2026_07_28

__all__ = [
    "META_RELATED_TASK",
    "RESULT_TASK",
    "TASKS_EXTENSION",
    "TASKS_EXTENSION_ID",
    "TASK_STATUSES",
    "TERMINAL_STATUSES",
    "CreateTaskResult",
    "DetailedTask",
    "GetTaskResult",
    "ListTasksResult",
    "Task",
    "TaskCreated",
    "TaskMetadata",
    "TaskRequestParams",
    "TaskStatus",
    "TaskStatusNotificationParams",
    "UpdateTaskRequestParams",
]

TASKS_EXTENSION_ID: Final = "io.modelcontextprotocol/tasks"
#: ``_meta`` key tying a message to a task (2025-11-25).
META_RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
#: ``resultType`` of a task handle (2026-07-28).
RESULT_TASK: Final = "task"

TaskStatus: TypeAlias = Literal["working", "input_required", "completed", "failed", "cancelled"]
TASK_STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
TERMINAL_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})


# ------------------------------------------------------------- 2025-11-25


class TaskMetadata(McpStruct, frozen=True, kw_only=True):
    """``params.task`` of a task-augmented request: the retention asked for (ms)."""

    ttl: int | UnsetType = UNSET


class Task(McpStruct, frozen=True, kw_only=True):
    """A task's state (2025-11-25). ``ttl`` is the retention from creation in
    ms (``None``: unlimited); ``poll_interval`` a polling hint in ms."""

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | UnsetType = UNSET
    status_message: str | UnsetType = UNSET


class CreateTaskResult(Result, frozen=True, kw_only=True):
    """The answer to a task-augmented request (2025-11-25)."""

    task: Task


class GetTaskResult(Result, frozen=True, kw_only=True):
    """``tasks/get`` and ``tasks/cancel`` (2025-11-25): the task's fields at the top level."""

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | UnsetType = UNSET
    status_message: str | UnsetType = UNSET


class ListTasksResult(Result, frozen=True, kw_only=True):
    tasks: list[Task]
    next_cursor: str | UnsetType = UNSET


class TaskStatusNotificationParams(Task, frozen=True, kw_only=True):
    """``notifications/tasks/status`` (2025-11-25): the task, and ``_meta``."""

    meta: Meta = field(default=UNSET, name="_meta")


class TaskRequestParams(RequestParams, frozen=True, kw_only=True):
    """Params of ``tasks/get``, ``tasks/result`` and ``tasks/cancel``."""

    task_id: str


# ------------------------------------------------------------- 2026-07-28


class TaskCreated(Result, frozen=True, kw_only=True):
    """A task handle answered in lieu of a request's result (2026-07-28,
    ``resultType: "task"``): the task's fields at the top level, nothing else."""

    result_type: ResultType | UnsetType = RESULT_TASK
    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | UnsetType = UNSET
    status_message: str | UnsetType = UNSET


class DetailedTask(TaskCreated, frozen=True, kw_only=True):
    """``tasks/get`` (2026-07-28): the task, with its ``result`` once completed,
    its ``error`` (a JSON-RPC error object) once failed, and the pending
    ``input_requests`` while ``input_required``."""

    result_type: ResultType | UnsetType = RESULT_COMPLETE
    result: Any | UnsetType = UNSET
    error: dict[str, Any] | UnsetType = UNSET
    input_requests: dict[str, InputRequest] | UnsetType = UNSET


class UpdateTaskRequestParams(RequestParams, frozen=True, kw_only=True):
    """``tasks/update`` (2026-07-28): answers to some or all pending input requests."""

    task_id: str
    input_responses: dict[str, Any]


def _spec(method: str, params: Any, result: Any, **kw: Any) -> MethodSpec:
    kind: MethodKind = "notification" if result is None else "request"
    return MethodSpec(
        method=method,
        kind=kind,
        direction=kw.pop("direction", CLIENT_TO_SERVER),
        params_type=params,
        result_type=result,
        since=kw.pop("since", V2025_11_25),
        extension=TASKS_EXTENSION_ID,
        cancellable=kind == "request",
        **kw,
    )


TASKS_EXTENSION: Final = register_extension(
    Extension(
        id=TASKS_EXTENSION_ID,
        description=__doc__ or "",
        methods=(
            _spec("tasks/get", TaskRequestParams, GetTaskResult),
            _spec("tasks/result", TaskRequestParams, Result, until=V2025_11_25),
            _spec("tasks/list", PaginatedRequestParams, ListTasksResult, until=V2025_11_25),
            _spec("tasks/cancel", TaskRequestParams, GetTaskResult),
            _spec("tasks/update", UpdateTaskRequestParams, Result, since=V2026_07_28),
            _spec(
                "notifications/tasks/status",
                TaskStatusNotificationParams,
                None,
                direction=SERVER_TO_CLIENT,
                until=V2025_11_25,
            ),
        ),
        types={
            name: globals()[name]
            for name in (
                "Task",
                "TaskMetadata",
                "CreateTaskResult",
                "GetTaskResult",
                "ListTasksResult",
                "TaskStatusNotificationParams",
                "TaskCreated",
                "DetailedTask",
                "UpdateTaskRequestParams",
            )
        },
    )
)
