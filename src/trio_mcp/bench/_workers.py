"""Load-generating worker processes (``--workers W``).

Each worker is ``python -m trio_mcp.bench._workers``: a trio process with
its own sessions running :func:`~trio_mcp.bench._engine.run_load` on its
share of the plan. The conversation over its pipes, one JSON object per
line:

* parent → worker: the configuration; ``go`` once every worker's sessions
  are open (so the load starts together); ``stop`` (or end of input) to end
  the run early;
* worker → parent: the engine's messages (``Setup``, ``Tick`` with encoded
  HDR histograms, ``SessionLost``, ``End``), merged by the parent.

Workers run in their own process group (a terminal's Ctrl-C reaches only
the parent, which tells them to stop), and a worker whose input closes (its
parent died) stops too. Every worker is stopped when the parent's run ends:
asked, then SIGKILL after :data:`WORKER_EXIT_GRACE`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import msgspec
import trio

from ..cli._connect import AuthSettings
from ._engine import End, SessionLost, Setup, run_load
from ._scenario import scenario_from_spec
from ._settings import LoadPlan, Stage

__all__ = ["run_workers"]

#: Longest line a worker may send (a tick with many operations' histograms).
MAX_LINE_BYTES = 64 * 1024 * 1024
#: Seconds a worker may take to exit after its run ended or it was told to stop.
WORKER_EXIT_GRACE = 10.0
#: stderr lines of a worker kept for the report when it dies.
STDERR_TAIL = 20

Message = Setup | SessionLost | End | Any
_decoder: msgspec.json.Decoder[Any] | None = None


def _message_decoder() -> msgspec.json.Decoder[Any]:
    global _decoder
    if _decoder is None:
        from ._stats import Tick

        _decoder = msgspec.json.Decoder(Setup | SessionLost | End | Tick)
    return _decoder


def plan_to_json(plan: LoadPlan) -> dict[str, Any]:
    return attrs.asdict(plan)


def plan_from_json(raw: dict[str, Any]) -> LoadPlan:
    stages = tuple(Stage(**s) for s in raw.pop("stages", ()))
    return LoadPlan(**raw, stages=stages)


class _Lines:
    """Lines from a byte stream (bounded)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def next(self) -> bytes | None:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                return line
            if len(self.buffer) > MAX_LINE_BYTES:
                raise ValueError("a worker sent a line longer than MAX_LINE_BYTES")
            chunk = await self.stream.receive_some(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk


async def run_workers(
    workers: int,
    *,
    target: list[str],
    headers: dict[str, str],
    era: str,
    auth: AuthSettings | None = None,
    plan: LoadPlan,
    scenario_spec: dict[str, Any],
    handle: Callable[[Any], None],
    stop: trio.Event,
) -> None:
    """Run ``workers`` worker processes and hand every message they send to
    ``handle`` (with ``worker`` set to the worker's index)."""
    decoder = _message_decoder()
    procs: list[trio.Process] = []
    ready = 0
    all_ready = trio.Event()
    finished = 0
    all_finished = trio.Event()

    async def speak(proc: trio.Process, text: str) -> None:
        assert proc.stdin is not None
        try:
            await proc.stdin.send_all(text.encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # it ended already

    async def listen(index: int, proc: trio.Process) -> None:
        nonlocal ready, finished
        assert proc.stdout is not None and proc.stderr is not None
        lines = _Lines(proc.stdout)
        ended = False
        tail: deque[str] = deque(maxlen=STDERR_TAIL)

        async def drain_stderr() -> None:
            assert proc.stderr is not None
            err = _Lines(proc.stderr)
            while (line := await err.next()) is not None:
                tail.append(line.decode(errors="replace"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_stderr)
            while (line := await lines.next()) is not None:
                message = decoder.decode(line)
                message.worker = index
                if isinstance(message, Setup):
                    ready += 1
                    if ready == workers:
                        all_ready.set()
                handle(message)
                if isinstance(message, End):
                    ended = True
                    break
        if not ended:
            status = await proc.wait()
            reason = f"worker {index} exited (status {status}) before finishing"
            if tail:
                reason += ": " + " | ".join(tail)
            if ready < workers and not all_ready.is_set():
                handle(Setup(worker=index, failures=[reason]))
                ready += 1
                if ready == workers:
                    all_ready.set()
            handle(End(worker=index, seconds=0.0, stopped=reason))
        finished += 1
        if finished == workers:
            all_finished.set()

    try:
        async with trio.open_nursery() as nursery:
            for index in range(workers):
                proc = await trio.lowlevel.open_process(
                    [sys.executable, "-m", "trio_mcp.bench._workers"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
                procs.append(proc)
                config = {
                    "worker": index,
                    "target": target,
                    "headers": headers,
                    # environment variable names, never a secret: the worker reads them
                    "auth": auth.to_json() if auth else None,
                    "era": era,
                    "plan": plan_to_json(plan.share(index, workers)),
                    "scenario": scenario_spec,
                }
                await speak(proc, json.dumps(config))
                nursery.start_soon(listen, index, proc)

            async def relay_stop() -> None:
                await stop.wait()
                for proc in procs:
                    await speak(proc, "stop")

            nursery.start_soon(relay_stop)
            with trio.CancelScope() as waiting:
                nursery.start_soon(partial(_cancel_when, all_finished, waiting))
                await all_ready.wait()
                for proc in procs:
                    await speak(proc, "go")
                await all_finished.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            for proc in procs:
                if proc.stdin is not None:
                    await proc.stdin.aclose()
            with trio.move_on_after(WORKER_EXIT_GRACE):
                for proc in procs:
                    await proc.wait()
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


# ------------------------------------------------------------------ worker side


async def _work() -> None:
    from ._connect import open_session

    stdin = trio.lowlevel.FdStream(0)
    lines = _Lines(stdin)
    first = await lines.next()
    if first is None:
        return
    config = json.loads(first)
    plan = plan_from_json(config["plan"])
    scenario = scenario_from_spec(config["scenario"], base=Path.cwd(), origin="scenario")
    go, stop = trio.Event(), trio.Event()
    encoder = msgspec.json.Encoder()
    out = sys.stdout.buffer

    def emit(message: Any) -> None:
        out.write(encoder.encode(message) + b"\n")
        out.flush()

    async def commands() -> None:
        while (line := await lines.next()) is not None:
            if line.strip() == b"go":
                go.set()
            elif line.strip() == b"stop":
                break
        stop.set()
        go.set()

    target, headers, era = config["target"], config["headers"], config["era"]
    auth = AuthSettings.from_json(config["auth"]) if config.get("auth") else None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(commands)
        await run_load(
            plan,
            scenario,
            lambda: open_session(target, headers=headers, auth=auth, era=era),
            emit,
            worker=config["worker"],
            stop=stop,
            go=go.wait,
        )
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(_work)
