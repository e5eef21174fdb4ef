"""A peer's outbound calls: the one-slot reply a caller waits on (with its
progress), and the helpers that shape a call's params and answer."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import outcome
import trio
from msgspec import UNSET, Raw, Struct

from ..protocol import ErrorResponse, InternalError, Response, coerce, decoder_for

__all__ = ["ProgressCallback"]

_Task = trio.lowlevel.Task
_reschedule = trio.lowlevel.reschedule

log = logging.getLogger("trio_mcp.peer")

ProgressCallback = Callable[[float, "float | None", "str | None"], Awaitable[None]]


class _Reply:
    """A one-slot reply: the read loop fills it without ever blocking.

    A call made with ``on_progress`` also gets its progress notifications
    here (bounded), so the caller runs its callback for each of them, in
    order, before it returns the answer that followed them on the wire.
    """

    __slots__ = ("progress", "task", "value")

    def __init__(self) -> None:
        self.value: outcome.Outcome[Any] | None = None
        self.task: trio.lowlevel.Task | None = None
        self.progress: deque[tuple[float, Any, Any]] | None = None

    def deliver(self, value: outcome.Outcome[Any]) -> None:
        if self.value is not None:
            return
        self.value = value
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task, value)

    def deliver_progress(self, item: tuple[float, Any, Any], limit: int) -> bool:
        queue = self.progress
        if queue is None or len(queue) >= limit:
            return False
        queue.append(item)
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task, outcome.Value(None))
        return True

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def _park(self) -> Any:
        self.task = trio.lowlevel.current_task()
        return await trio.lowlevel.wait_task_rescheduled(self._abort)

    async def wait(self) -> Any:
        if self.value is not None:
            await trio.lowlevel.checkpoint()
            return self.value.unwrap()
        self.task = trio.lowlevel.current_task()  # parked here: one frame less than _park
        return await trio.lowlevel.wait_task_rescheduled(self._abort)

    async def wait_reporting(self, callback: ProgressCallback, name: str) -> Any:
        queue = self.progress
        assert queue is not None
        while True:
            while queue:
                progress, total, message = queue.popleft()
                try:
                    await callback(progress, total, message)
                except Exception:
                    log.exception("%s: progress callback failed", name)
            if self.value is not None:
                return await self.wait()
            # Woken with None for more progress, or handed the answer (then
            # nothing was queued since we parked: progress would have woken us).
            msg = await self._park()
            if msg is not None:
                return msg


class _CancelOwed:
    """A pending entry left by a call cancelled after its request was
    written: its caller owes the peer ``notifications/cancelled`` unless the
    answer comes first (which takes this entry away). Delivering to it does
    nothing: nobody waits."""

    __slots__ = ()

    def deliver(self, value: outcome.Outcome[Any]) -> None:
        pass


#: The one :class:`_CancelOwed` entry.
CANCEL_OWED = _CancelOwed()


def deliver(entry: Any, value: outcome.Outcome[Any]) -> None:
    """Hand ``value`` to a pending call's entry: its parked task itself (a
    call gathered for the answer writer, see ``Peer.request``), or an object
    with ``deliver`` (a :class:`_Reply`, :data:`CANCEL_OWED`, what
    ``Peer.expect`` was given)."""
    if type(entry) is _Task:
        _reschedule(entry, value)
    else:
        entry.deliver(value)


def _answer(msg: Response | ErrorResponse, method: str, result_type: Any) -> Any:
    """A call's result (decoded to ``result_type`` if given), or its error raised."""
    if type(msg) is Response:
        result = msg.result
        if result_type is None:
            return result
        try:
            if type(result) is Raw and result_type is not Raw:  # the usual case: its type's kept decoder
                return decoder_for(result_type)(result)
            return coerce(result, result_type)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise InternalError(f"malformed result for {method}: {exc}") from None
    raise msg.error.to_exception()  # type: ignore[union-attr]


def _progress_of(params: Any) -> tuple[int | str, tuple[float, Any, Any] | None] | None:
    """(token, (progress, total, message)) of ``notifications/progress``
    params; the item is None when ``progress`` is not a number, the whole
    None when there is no usable token."""
    try:
        data = coerce(params, dict[str, Any])
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    token = data.get("progressToken")
    if type(token) is not int and type(token) is not str:
        return None
    progress = data.get("progress")
    if type(progress) is not int and type(progress) is not float:
        return token, None
    return token, (progress, data.get("total"), data.get("message"))


def _with_progress_token(params: Any, token: int | str) -> Any:
    if params is UNSET or params is None:
        return {"_meta": {"progressToken": token}}
    if isinstance(params, dict):
        meta = dict(params.get("_meta") or {})
        meta["progressToken"] = token
        return {**params, "_meta": meta}
    if isinstance(params, Struct) and "meta" in params.__struct_fields__:
        meta = params.meta if isinstance(params.meta, dict) else {}  # type: ignore[attr-defined]
        return msgspec.structs.replace(params, meta={**meta, "progressToken": token})
    data = coerce(params, dict[str, Any])
    return _with_progress_token(data, token)
