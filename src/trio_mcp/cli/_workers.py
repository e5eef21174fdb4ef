"""``trio-mcp run|gateway … -t http --workers N``: N processes serving one port.

The model is hypercorn's multiprocess ``run``: the parent binds the listening
socket once (hypercorn's ``Config.create_sockets``, so the same options) and
every worker process serves that very socket with hypercorn's trio worker,
the kernel handing each new connection to one of them. What differs is how
a worker gets its app and how long it lives:

* A worker builds its app itself, from the command line: the parent starts
  ``python -m trio_mcp.cli serve-worker`` with the socket passed as a file
  descriptor and writes one JSON line on its stdin: the parsed options (plain
  strings, numbers and lists), the descriptor numbers, and the
  ``requestState`` keys (on stdin, never in an argument list that ``ps``
  shows). Nothing else crosses the process boundary.
* No worker outlives the parent. The parent keeps each worker's stdin open
  and never writes to it again: when the parent dies, however it dies
  (SIGKILL included), the worker reads end-of-file and stops as on
  ``SIGTERM``. ``SIGTERM``/``SIGINT`` to the parent are passed on as
  ``SIGTERM`` (each worker drains, within its bound; a worker still alive
  after it is killed), ``SIGHUP`` is passed on (a gateway reloads its file).
  A worker that exits by itself stops the others and the command (status 1):
  the service manager restarts the whole.
* Workers ignore ``SIGINT`` (a terminal's Ctrl-C reaches the whole process
  group): the parent decides.

Sessions: a handshake-era session lives in the process that created it, and
a client's next request may reach another. So without ``--redis`` (sessions
shared through Redis) the command refuses to start unless ``--stateless``
says that handshake-era requests are served without sessions; the 2026-07-28
era is stateless anyway. Its ``requestState`` must verify in every worker: the
parent hands every worker the keys given (``--request-state-key``,
``TRIO_MCP_REQUEST_STATE_KEYS``) or, without any, one random key of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from ._gateway_cmd import EXIT_ON, Signals, run_until_signal
from ._serve import ServeOptions, usage_error

__all__ = ["START_TIMEOUT", "run_workers", "worker_main"]

#: Seconds every worker has to load its app and start serving (a gateway's
#: servers included) before the command gives up.
START_TIMEOUT = 60.0
#: Seconds a worker has to exit once killed.
KILL_WAIT = 5.0
#: Lines each worker reports when it serves (the URL, the Host names, the health routes).
_READY_LINES = 3


def check_workers(options: ServeOptions) -> None:
    """Refuse (exit status 2) what N processes cannot serve (see the module)."""
    if options.transport != "http":
        usage_error(f"--workers {options.workers} needs -t http, not -t {options.transport}")
    if options.redis_url is None and not options.stateless:
        usage_error(
            f"--workers {options.workers} without --redis: a handshake-era session would live in one "
            "worker process, and its client's next request may reach another ('session not found'). "
            "Add --stateless to serve the 2026-07-28 era and handshake-era requests without sessions, "
            "or --redis URL to share sessions between the processes."
        )


def run_workers(args: argparse.Namespace, options: ServeOptions) -> int:
    """Serve ``args`` (a parsed ``run`` or ``gateway`` command line) from
    ``options.workers`` processes; the exit status."""
    check_workers(options)
    app = getattr(args, "app", None)
    if (
        app is not None
        and app.partition(":")[0].endswith(".py")
        and not Path(app.partition(":")[0]).is_file()
    ):
        from ._targets import TargetError

        raise TargetError(f"no such file: {app.partition(':')[0]}")  # said once, before any worker starts
    from hypercorn.config import Config

    from ..transports._base import host_in_url

    keys = options.request_state_keys or (secrets.token_urlsafe(32),)
    config = Config()
    config.bind = [f"{host_in_url(options.host)}:{options.port}"]
    sockets = config.create_sockets()
    (sock,) = sockets.insecure_sockets
    try:
        sock.listen(config.backlog)
        spec = {"args": vars(args), "keys": list(keys), "fd": sock.fileno()}
        return trio.run(_Parent(options, spec).run)
    finally:
        sock.close()


@attrs.define
class _Worker:
    process: trio.Process
    ready: trio.lowlevel.FdStream
    lines: list[str] = attrs.Factory(list)


class _Parent:
    """The parent process: starts the workers, passes signals on, stops them."""

    def __init__(self, options: ServeOptions, spec: dict[str, Any]) -> None:
        self.options = options
        self.spec = spec
        self.workers: list[_Worker] = []
        self.status = 0
        self.stopping = False

    @property
    def stop_bound(self) -> float:
        """Seconds a worker may take to drain and exit once sent SIGTERM."""
        from ..serving.http import HttpServerSettings

        return self.options.drain_timeout + HttpServerSettings().store_timeout + 2.0 + 5.0

    async def run(self) -> int:
        wanted = [signal.SIGTERM, signal.SIGINT]
        if hasattr(signal, "SIGHUP"):
            wanted.append(signal.SIGHUP)
        with trio.open_signal_receiver(*wanted) as signals:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._start_all, nursery)
                    async for signum in signals:
                        if signum not in EXIT_ON:
                            self._signal_all(signum)
                            continue
                        if self.stopping:
                            if signum == signal.SIGINT:
                                self._kill_all()  # a second Ctrl-C: now
                            continue
                        self.status = EXIT_ON[signum]
                        nursery.start_soon(self._stop_all, nursery)
            finally:
                with trio.CancelScope(shield=True):
                    await self._reap()
        return self.status

    async def _start_all(self, nursery: trio.Nursery) -> None:
        for index in range(self.options.workers):
            worker = await self._spawn(index)
            self.workers.append(worker)
            nursery.start_soon(self._watch, worker, nursery)
        try:
            with trio.fail_after(START_TIMEOUT):
                for worker in self.workers:
                    await self._read_ready(worker)
        except (trio.TooSlowError, EOFError) as exc:
            reason = "did not start in time" if isinstance(exc, trio.TooSlowError) else "exited"
            _say(f"trio-mcp: a worker process {reason}; stopping")
            self.status = 1
            await self._stop_all(nursery)
            return
        first = self.workers[0].lines
        for line in first:
            _say(line)
        _say(self._workers_line())

    def _workers_line(self) -> str:
        pids = ", ".join(str(worker.process.pid) for worker in self.workers)
        line = f"{len(self.workers)} worker processes (pids {pids}) serve this port; "
        if self.options.redis_url is not None:
            return line + "sessions are shared through Redis"
        return line + (
            "no sessions (--stateless): the 2026-07-28 era and handshake-era requests without "
            "sessions are served, GET and DELETE refused; sessions across processes need --redis URL"
        )

    async def _spawn(self, index: int) -> _Worker:
        ready_r, ready_w = os.pipe()
        try:
            fd = self.spec["fd"]
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "trio_mcp.cli", "serve-worker"],
                stdin=subprocess.PIPE,
                pass_fds=(fd, ready_w),
            )
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
        line = json.dumps({**self.spec, "ready_fd": ready_w, "index": index}) + "\n"
        assert process.stdin is not None
        await process.stdin.send_all(line.encode())
        # The stdin pipe stays open, unwritten: its end-of-file tells the worker we are gone.
        return _Worker(process, trio.lowlevel.FdStream(ready_r))

    async def _read_ready(self, worker: _Worker) -> None:
        buffer = b""
        while buffer.count(b"\n") < _READY_LINES:
            chunk = await worker.ready.receive_some(4096)
            if not chunk:
                raise EOFError
            buffer += chunk
        worker.lines = buffer.decode(errors="replace").splitlines()[:_READY_LINES]

    async def _watch(self, worker: _Worker, nursery: trio.Nursery) -> None:
        status = await worker.process.wait()
        if not self.stopping:
            _say(f"trio-mcp: worker process {worker.process.pid} exited with status {status}; stopping")
            self.status = 1
            await self._stop_all(nursery)

    def _signal_all(self, signum: int) -> None:
        for worker in self.workers:
            if worker.process.returncode is None:
                worker.process.send_signal(signum)

    def _kill_all(self) -> None:
        for worker in self.workers:
            if worker.process.returncode is None:
                worker.process.kill()

    async def _stop_all(self, nursery: trio.Nursery) -> None:
        """SIGTERM to every worker, wait for them within the bound, kill the rest."""
        if self.stopping:
            return
        self.stopping = True
        self._signal_all(signal.SIGTERM)
        with trio.move_on_after(self.stop_bound):
            for worker in self.workers:
                await worker.process.wait()
        nursery.cancel_scope.cancel()

    async def _reap(self) -> None:
        """On the way out, whatever happened: no worker is left running."""
        self._kill_all()
        with trio.move_on_after(KILL_WAIT):
            for worker in self.workers:
                await worker.process.wait()
        for worker in self.workers:
            with trio.move_on_after(1.0):
                await worker.ready.aclose()
            if worker.process.stdin is not None:
                with trio.move_on_after(1.0):
                    await worker.process.stdin.aclose()


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -------------------------------------------------------------------- worker


def worker_main() -> int:
    """``trio-mcp serve-worker``: read the spec on stdin, serve, stop when
    the parent says so (SIGTERM) or is gone (end of stdin)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    line = sys.stdin.readline()
    if not line:
        return 0  # the parent went away before it said anything
    spec = json.loads(line)
    args = argparse.Namespace(**spec["args"])
    options = attrs.evolve(
        ServeOptions.from_args(args),
        workers=1,
        request_state_keys=tuple(spec["keys"]),
        listen_fd=spec["fd"],
    )
    out = os.fdopen(spec["ready_fd"], "w", encoding="utf-8")
    if args.command == "gateway":
        from ..gateway import load_config
        from ._gateway_cmd import _inputs, _serve

        inputs = _inputs(args.input)
        config = load_config(args.config, inherit_env=args.inherit_env, inputs=inputs)

        def main(signals: Signals) -> Awaitable[None]:
            return _serve(args, config, inputs, signals, options, out=out)

    else:
        from ._serve import serve
        from ._targets import load_app

        app = load_app(args.app)

        def main(signals: Signals) -> Awaitable[None]:
            return serve(app, options, out=out, signals=signals)

    return run_until_signal(lambda signals: _while_parent_lives(main, signals), stop_on=(signal.SIGTERM,))


async def _while_parent_lives(main: Callable[[Signals], Awaitable[None]], signals: Signals) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watch_parent)
        await main(signals)
        nursery.cancel_scope.cancel()


async def _watch_parent() -> None:
    """Stop as on SIGTERM when stdin ends: the parent is gone."""
    while True:
        await trio.lowlevel.wait_readable(0)
        if not os.read(0, 4096):
            break
    os.kill(os.getpid(), signal.SIGTERM)
    await trio.sleep_forever()
