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
* The workers are supervised (:mod:`trio_mcp.supervision`, one-for-one): one
  that exits by itself is started again, in its place; more than
  :data:`RESTARTS` restarts within :data:`RESTART_WINDOW` seconds, or a
  worker that cannot start, stop the command (status 1), the service
  manager restarting the whole.
* Workers ignore ``SIGINT`` (a terminal's Ctrl-C reaches the whole process
  group): the parent decides.

Sessions: a handshake-era session lives in the process that created it, and
a client's next request may reach another. So without ``--redis`` (sessions
shared through Redis) the command refuses to start unless ``--stateless``
says that handshake-era requests are served without sessions; the 2026-07-28
era is stateless anyway. Its ``requestState`` must verify in every worker: the
parent hands every worker the keys given (``--request-state-key``,
``TRIO_MCP_REQUEST_STATE_KEYS``) or, without any, one random key of its own.
With ``--direct-link`` the workers link over Unix sockets in a temporary
directory of the parent's (mode 0700, removed when the command ends), unless
``--link-host`` or ``--link-dir`` says where.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from ..supervision import ChildSpec, StartFailure, Supervisor, SupervisorEscalation, current_child
from ._gateway_cmd import EXIT_ON, Signals, run_until_signal
from ._serve import ServeOptions, usage_error

__all__ = ["RESTARTS", "RESTART_WINDOW", "START_TIMEOUT", "WorkerExited", "run_workers", "worker_main"]

#: Seconds every worker has to load its app and start serving (a gateway's
#: servers included) before the command gives up.
START_TIMEOUT = 60.0
#: Seconds a worker has to exit once killed.
KILL_WAIT = 5.0
#: Restarts of exited workers allowed within :data:`RESTART_WINDOW` seconds;
#: one more stops the command (status 1).
RESTARTS = 5
RESTART_WINDOW = 60.0
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
    if options.link_advertise is not None:
        usage_error(
            f"--link-advertise names one address, and each of --workers {options.workers} processes "
            "listens for direct links on a port of its own: leave it out (they dial 127.0.0.1)."
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
    # The workers' direct links: Unix sockets in a directory of this command's
    # own (only its user can reach it), unless told where.
    private = (
        options.redis_url is not None
        and options.direct_link
        and args.link_host is None
        and options.link_dir is None
    )
    link_dir = tempfile.mkdtemp(prefix="trio-mcp-links-") if private else None
    try:
        sock.listen(config.backlog)
        spec = {"args": vars(args), "keys": list(keys), "fd": sock.fileno(), "link_dir": link_dir}
        return trio.run(_Parent(options, spec).run)
    finally:
        sock.close()
        if link_dir is not None:
            shutil.rmtree(link_dir, ignore_errors=True)


@attrs.define
class _Worker:
    process: trio.Process
    ready: trio.lowlevel.FdStream
    lines: list[str] = attrs.Factory(list)


class WorkerExited(Exception):
    """A worker process ended by itself (its supervisor restarts it)."""

    def __init__(self, pid: int, status: int) -> None:
        super().__init__(f"worker process {pid} exited with status {status}")
        self.pid = pid
        self.status = status


class _Parent:
    """The parent process: supervises the workers (one-for-one: one that
    exits is started again, up to :data:`RESTARTS` times within
    :data:`RESTART_WINDOW` seconds, then the command stops), passes signals
    on, and stops them."""

    def __init__(self, options: ServeOptions, spec: dict[str, Any]) -> None:
        self.options = options
        self.spec = spec
        #: The current worker of each slot (the last one started).
        self.workers: dict[int, _Worker] = {}
        self.status = 0
        self.stopping = False

    @property
    def stop_bound(self) -> float:
        """Seconds a worker may take to drain and exit once sent SIGTERM."""
        from ..serving.http import HttpServerSettings

        return self.options.drain_timeout + HttpServerSettings().store_timeout + 2.0 + 5.0

    def supervisor(self) -> Supervisor:
        children = [
            ChildSpec(
                id=index,
                start=functools.partial(self._worker, index),
                shutdown_grace=self.stop_bound,
                start_timeout=START_TIMEOUT,
                start_retries=0,  # a worker that cannot start will not start on a retry either
            )
            for index in range(self.options.workers)
        ]
        return Supervisor(children, max_restarts=RESTARTS, max_seconds=RESTART_WINDOW)

    async def run(self) -> int:
        wanted = [signal.SIGTERM, signal.SIGINT]
        if hasattr(signal, "SIGHUP"):
            wanted.append(signal.SIGHUP)
        supervisor = self.supervisor()
        with trio.open_signal_receiver(*wanted) as signals:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._supervise, supervisor, nursery)
                    async for signum in signals:
                        if signum not in EXIT_ON:
                            self._signal_all(signum)
                            continue
                        if self.stopping:
                            if signum == signal.SIGINT:
                                self._kill_all()  # a second Ctrl-C: now
                            continue
                        self.status = EXIT_ON[signum]
                        self.stopping = True
                        self._signal_all(signal.SIGTERM)  # every worker drains at once
                        nursery.start_soon(supervisor.aclose)
            finally:
                with trio.CancelScope(shield=True):
                    await self._reap()
        return self.status

    async def _supervise(self, supervisor: Supervisor, nursery: trio.Nursery) -> None:
        try:
            await supervisor.run(task_status=_Announce(self))
        except SupervisorEscalation as exc:
            if not self.stopping:  # else a worker stopped before it was ready: as asked
                _say(f"trio-mcp: stopping: {_why(exc)}")
                self.status = 1
        nursery.cancel_scope.cancel()

    def announce(self) -> None:
        """Every worker serves: the start-up lines (the first worker's, then ours)."""
        for line in self.workers[0].lines:
            _say(line)
        _say(self._workers_line())

    def _workers_line(self) -> str:
        pids = ", ".join(str(worker.process.pid) for worker in self.workers.values())
        line = f"{len(self.workers)} worker processes (pids {pids}) serve this port; "
        if self.options.redis_url is not None:
            return line + "sessions are shared through Redis"
        return line + (
            "no sessions (--stateless): the 2026-07-28 era and handshake-era requests without "
            "sessions are served, GET and DELETE refused; sessions across processes need --redis URL"
        )

    async def _worker(self, index: int, *, task_status: trio.TaskStatus[int]) -> None:
        """One worker process, as a supervised child: started, ready, then
        waited for; stopped with SIGTERM within its grace, then SIGKILL."""
        replaced = self.workers.get(index)
        worker = await self._spawn(index)
        self.workers[index] = worker
        process = worker.process
        try:
            await self._read_ready(worker)
            if replaced is not None:
                _say(f"trio-mcp: worker process {process.pid} serves in place of {replaced.process.pid}")
            task_status.started(process.pid)
            status = await process.wait()
            if self.stopping:
                await trio.sleep_forever()  # the supervisor is stopping us: no restart
            _say(f"trio-mcp: worker process {process.pid} exited with status {status}")
            raise WorkerExited(process.pid, status)
        finally:
            with current_child().cleanup_scope():
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    await process.wait()
            if process.returncode is None:
                process.kill()
            await _close(worker)

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
                raise WorkerExited(worker.process.pid, await worker.process.wait())
            buffer += chunk
        worker.lines = buffer.decode(errors="replace").splitlines()[:_READY_LINES]

    def _signal_all(self, signum: int) -> None:
        for worker in self.workers.values():
            if worker.process.returncode is None:
                worker.process.send_signal(signum)

    def _kill_all(self) -> None:
        for worker in self.workers.values():
            if worker.process.returncode is None:
                worker.process.kill()

    async def _reap(self) -> None:
        """On the way out, whatever happened: no worker is left running."""
        self._kill_all()
        with trio.move_on_after(KILL_WAIT):
            for worker in self.workers.values():
                await worker.process.wait()
        for worker in self.workers.values():
            await _close(worker)


class _Announce:
    """The supervisor's ``task_status``: all its children started."""

    def __init__(self, parent: _Parent) -> None:
        self.parent = parent

    def started(self, value: None = None) -> None:
        self.parent.announce()


async def _close(worker: _Worker) -> None:
    """Close the parent's ends of a worker's pipes (bounded)."""
    with trio.move_on_after(1.0):
        await worker.ready.aclose()
        if worker.process.stdin is not None:
            await worker.process.stdin.aclose()


def _why(exc: SupervisorEscalation) -> str:
    reason = getattr(exc, "reason", None)
    if isinstance(reason, StartFailure):
        return f"a worker process could not start ({reason.__cause__ or reason})"
    return f"the worker processes exited more than {RESTARTS} times within {RESTART_WINDOW:g} s"


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
    options = ServeOptions.from_args(args)
    options = attrs.evolve(
        options,
        workers=1,
        request_state_keys=tuple(spec["keys"]),
        listen_fd=spec["fd"],
        link_dir=spec["link_dir"] or options.link_dir,
        # A node id is held by one live process: each worker is a node of its own.
        node_id=None if options.node_id is None else f"{options.node_id}-{spec['index']}",
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
