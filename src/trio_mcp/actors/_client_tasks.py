"""The client side of tasks: call a tool as a task, follow it, take its result, cancel it.

:class:`TaskClient` works on a connected :class:`~trio_mcp.ClientSession`
(``session.tasks``) in either era:

* handshake (2025-11-25): ``tools/call`` with ``params.task``; ``tasks/get``
  to poll, ``tasks/result`` for the result, ``tasks/cancel``;
* stateless (2026-07-28): ``tools/call`` declaring the tasks extension in the
  request's capabilities; ``tasks/get`` (the result is inlined), questions the
  task parks are answered by the session's sampling / elicitation / roots
  handlers and sent back with ``tasks/update``; ``tasks/cancel``.

Every wait is the caller's (``trio.fail_after`` around :meth:`TaskClient.wait`);
polling follows the server's interval hint, clamped to
[:data:`MIN_POLL_INTERVAL`, :data:`MAX_POLL_INTERVAL`] seconds.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import trio
from msgspec import UNSET

from ..protocol import (
    META_CLIENT_CAPABILITIES,
    RESULT_TASK,
    TASKS_EXTENSION_ID,
    TERMINAL_STATUSES,
    CallToolRequestParams,
    CallToolResult,
    CreateTaskResult,
    DetailedTask,
    GetTaskResult,
    InvalidParams,
    ListTasksResult,
    McpError,
    MethodNotFound,
    Tool,
    coerce,
    error_from_code,
    with_extensions,
)

if TYPE_CHECKING:
    from ._client import ClientSession

__all__ = ["MAX_POLL_INTERVAL", "MIN_POLL_INTERVAL", "TaskClient", "TaskFailed", "TaskInfo"]

#: Bounds of the polling interval (seconds), whatever the server suggests.
MIN_POLL_INTERVAL: Final = 0.05
MAX_POLL_INTERVAL: Final = 5.0
#: Polling interval when the server gives no hint (seconds).
DEFAULT_POLL_INTERVAL: Final = 0.5


class TaskFailed(McpError):
    """A task ended ``failed`` (the server's error) or ``cancelled``."""


@attrs.frozen
class TaskInfo:
    """A task as the client last saw it, in either era."""

    task_id: str
    status: str
    status_message: str | None = None
    #: Retention from creation (ms; None: unlimited / not given).
    ttl_ms: int | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    poll_interval_ms: int | None = None
    #: 2026-07-28 ``tasks/get``: the inlined result / error / pending questions.
    result: CallToolResult | None = None
    error: McpError | None = None
    input_requests: dict[str, Any] = attrs.field(factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def poll_interval(self) -> float:
        hint = self.poll_interval_ms
        seconds = DEFAULT_POLL_INTERVAL if hint is None else hint / 1000
        return min(max(seconds, MIN_POLL_INTERVAL), MAX_POLL_INTERVAL)


def _opt(value: Any) -> Any:
    return None if value is UNSET else value


def _from_handshake(task: Any) -> TaskInfo:
    return TaskInfo(
        task_id=task.task_id,
        status=task.status,
        status_message=_opt(task.status_message),
        ttl_ms=task.ttl,
        poll_interval_ms=_opt(task.poll_interval),
        created_at=task.created_at,
        last_updated_at=task.last_updated_at,
    )


def _from_modern(task: DetailedTask) -> TaskInfo:
    error = None
    if task.error is not UNSET:
        raw = task.error
        error = error_from_code(int(raw.get("code", -32603)), str(raw.get("message", "")), raw.get("data"))
    return TaskInfo(
        task_id=task.task_id,
        status=task.status,
        status_message=_opt(task.status_message),
        ttl_ms=task.ttl_ms,
        poll_interval_ms=_opt(task.poll_interval_ms),
        created_at=task.created_at,
        last_updated_at=task.last_updated_at,
        result=None if task.result is UNSET else coerce(task.result, CallToolResult),
        error=error,
        input_requests={} if task.input_requests is UNSET else dict(task.input_requests),
    )


StatusCallback = Callable[[TaskInfo], Awaitable[None] | None]


class TaskClient:
    """Tasks of one client session (``session.tasks``)."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    @property
    def modern(self) -> bool:
        return self.session.era == "modern"

    def _modern_meta(self) -> dict[str, Any]:
        caps = with_extensions(self.session.capabilities(), [TASKS_EXTENSION_ID])
        return {META_CLIENT_CAPABILITIES: msgspec.to_builtins(caps)}

    async def _request(self, method: str, params: dict[str, Any], result_type: Any) -> Any:
        session = self.session
        if self.modern:
            return await session._call_modern(
                method, {**params, "_meta": self._modern_meta()}, result_type, None
            )
        return await session.peer.request(method, params, result_type=result_type)

    @staticmethod
    def required_by(tool: Tool) -> bool:
        """Whether ``tool`` runs only as a task (``execution.taskSupport: "required"``)."""
        execution = tool.execution
        return execution is not UNSET and execution.task_support == "required"

    @staticmethod
    def print_status(info: TaskInfo) -> None:
        """An ``on_status`` that prints each status to stderr (what the CLI shows)."""
        message = f": {info.status_message}" if info.status_message else ""
        print(f"task {info.task_id[:12]}: {info.status}{message}", file=sys.stderr, flush=True)

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, ttl_ms: int | None = None
    ) -> TaskInfo | CallToolResult:
        """Call ``name`` as a task. Returns the task, or the result itself when
        the server answered at once (a stateless server decides per call)."""
        if self.modern:
            params: Any = CallToolRequestParams(
                name=name,
                arguments=UNSET if arguments is None else arguments,
                meta=self._modern_meta(),
            )
            raw = await self.session._call_modern("tools/call", params, dict, None)
            if raw.get("resultType") == RESULT_TASK:
                return _from_modern(coerce(raw, DetailedTask))
            return coerce(raw, CallToolResult)
        params = CallToolRequestParams(
            name=name,
            arguments=UNSET if arguments is None else arguments,
            task={} if ttl_ms is None else {"ttl": ttl_ms},
        )
        created = await self.session.peer.request("tools/call", params, result_type=CreateTaskResult)
        return _from_handshake(created.task)

    async def get(self, task_id: str) -> TaskInfo:
        if self.modern:
            return _from_modern(await self._request("tasks/get", {"taskId": task_id}, DetailedTask))
        return _from_handshake(await self._request("tasks/get", {"taskId": task_id}, GetTaskResult))

    async def list_tasks(self) -> list[TaskInfo]:
        """This session's tasks (``tasks/list``, 2025-11-25: the stateless era has no listing)."""
        if self.modern:
            raise MethodNotFound("tasks/list does not exist in protocol 2026-07-28")
        found: list[TaskInfo] = []
        cursor: str | None = None
        while True:
            params = {} if cursor is None else {"cursor": cursor}
            page = await self._request("tasks/list", params, ListTasksResult)
            found.extend(_from_handshake(task) for task in page.tasks)
            if page.next_cursor is UNSET:
                return found
            cursor = page.next_cursor

    async def cancel(self, task_id: str) -> None:
        await self._request("tasks/cancel", {"taskId": task_id}, None)

    async def result(self, task_id: str) -> CallToolResult:
        """The result of a task, waiting for it to end. Raises :class:`TaskFailed`
        (or the server's error) if it failed or was cancelled."""
        if not self.modern:
            result: CallToolResult = await self._request("tasks/result", {"taskId": task_id}, CallToolResult)
            return result
        return _outcome(await self.wait(task_id))

    async def wait(self, task_id: str, *, on_status: StatusCallback | None = None) -> TaskInfo:
        """Poll until the task ends; ``on_status(info)`` on every status seen.
        Stateless era: questions the task parks are answered on the way."""
        last: tuple[str, str | None] | None = None
        while True:
            info = await self.get(task_id)
            if on_status is not None and (info.status, info.status_message) != last:
                last = (info.status, info.status_message)
                maybe = on_status(info)
                if maybe is not None:
                    await maybe
            if info.terminal:
                return info
            if info.status == "input_required":
                if self.modern and info.input_requests:
                    await self._answer(task_id, info.input_requests)
                    continue
                if not self.modern:
                    # 2025-11-25: the server sends its questions while tasks/result is open
                    with contextlib.suppress(McpError):
                        await self.result(task_id)
                    continue
            await trio.sleep(info.poll_interval)

    async def _answer(self, task_id: str, questions: dict[str, Any]) -> None:
        answers = {key: await self.session._answer(question) for key, question in questions.items()}
        await self._request("tasks/update", {"taskId": task_id, "inputResponses": answers}, None)

    async def run_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        on_status: StatusCallback | None = None,
    ) -> CallToolResult:
        """Call a tool as a task and return its result (bound it with ``trio.fail_after``).
        If the caller is cancelled, the task is cancelled on the server too."""
        started = await self.call_tool(name, arguments, ttl_ms=ttl_ms)
        if isinstance(started, CallToolResult):
            return started
        try:
            if not self.modern and on_status is None:
                return await self.result(started.task_id)  # 2025-11-25: tasks/result waits for the end
            info = await self.wait(started.task_id, on_status=on_status)
        except trio.Cancelled:
            with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_GRACE):
                try:
                    await self.cancel(started.task_id)
                except McpError:
                    pass
            raise
        if not self.modern and info.status == "completed":
            return await self.result(started.task_id)
        return _outcome(info)


#: Seconds a cancelled :meth:`TaskClient.run_tool` spends telling the server.
CANCEL_GRACE: Final = 5.0


def _outcome(info: TaskInfo) -> CallToolResult:
    if info.status == "completed" and info.result is not None:
        return info.result
    if info.status == "failed" and info.error is not None:
        raise info.error
    if info.status == "completed":
        raise InvalidParams(f"task {info.task_id} completed without a result")
    raise TaskFailed(f"task {info.task_id} ended {info.status}: {info.status_message or 'no reason given'}")
