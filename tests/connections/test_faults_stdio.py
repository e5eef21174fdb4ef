"""Fault injection against real subprocess servers: supervised stdio
connections and hosts under kill -9, start failures, hangs, garbage on
stdout, restore after a restart, the death of their owner, and shutdown.

The server is ``fixtures/flaky_server.py`` (an ``MCPServer`` over stdio with
fault switches in its environment); ``fixtures/host_owner.py`` is an owner
process running a Host. Real processes need real time: graces and backoff
are kept small and every wait is bounded. Every process a test starts is
stopped by that test; the ``servers`` fixture double-checks (and cleans up
after a failure). Processes that are not our children (the owner's servers)
count as gone when they are zombies: the init of some containers never
reaps orphans.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from trio_mcp import ConnectionClosed
from trio_mcp.actors._connection import (
    Connected,
    Connection,
    ConnectionEvent,
    ConnectionFailed,
    ConnectionSettings,
    Disconnected,
    ReconnectScheduled,
)
from trio_mcp.actors._host import ConsentPolicy, Host
from trio_mcp.supervision import Backoff
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

FIXTURES = Path(__file__).parent / "fixtures"
FLAKY = str(FIXTURES / "flaky_server.py")
OWNER = str(FIXTURES / "host_owner.py")
TIMEOUT = 10.0

FAST = ConnectionSettings(
    backoff=Backoff(initial=0.05, maximum=0.2, reset_after=5.0),
    start_retries=2,
    start_timeout=5.0,
    reconnect_wait=5.0,
    shutdown_grace=3.0,
)
#: Health check: a ping every 0.2 s, answered within 0.5 s.
HEALTH = attrs.evolve(FAST, ping_interval=0.2, ping_timeout=0.5)
#: Seconds a server may take to leave after its stdin closed (ours: ~50 ms;
#: generous for loaded machines: the wait ends as soon as the server exits).
CLOSE_GRACE = 2.0


# ------------------------------------------------------------------ helpers


class FlakyServers:
    """A transport factory for ``flaky_server.py`` that remembers every
    transport it made (one per spawn) and where the server logs its pid."""

    def __init__(self, spawn_log: Path, name: str, env: dict[str, str], **params: Any) -> None:
        self.spawn_log = spawn_log
        params.setdefault("close_grace", CLOSE_GRACE)
        params.setdefault("term_grace", 0.3)
        params.setdefault("kill_timeout", 2.0)
        params.setdefault("eof_grace", 0.5)
        self.params = StdioServerParameters(
            command=sys.executable,
            args=[FLAKY],
            env={"SPAWN_LOG": str(spawn_log), **env},
            name=name,
            **params,
        )
        self.transports: list[StdioTransport] = []

    def __call__(self) -> StdioTransport:
        transport = StdioTransport(self.params)
        self.transports.append(transport)
        return transport

    @property
    def pids(self) -> list[int]:
        return [t.pid for t in self.transports if t.pid is not None]

    def spawned(self) -> list[int]:
        """Pids the servers wrote to their spawn log (one per process start)."""
        try:
            return [int(line) for line in self.spawn_log.read_text().split()]
        except FileNotFoundError:
            return []


#: The ``servers`` fixture: ``servers(name="flaky", params=None, **env)``.
Servers = Callable[..., FlakyServers]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    """``servers(name="flaky", **env)`` makes a :class:`FlakyServers`. At
    teardown no server may be left running (survivors are killed first)."""
    made: list[FlakyServers] = []

    def make(name: str = "flaky", params: dict[str, Any] | None = None, **env: str) -> FlakyServers:
        factory = FlakyServers(tmp_path / f"spawns-{len(made)}.log", name, env, **(params or {}))
        made.append(factory)
        return factory

    yield make
    survivors = [pid for f in made for pid in {*f.pids, *f.spawned()} if not _gone(pid)]
    for pid in survivors:
        _kill_quietly(pid)
    assert not survivors, f"server processes left running: {survivors}"


def _gone(pid: int) -> bool:
    """Not running: absent, or a zombie nobody reaps (not our child)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return _proc_state(pid) in (None, "Z", "X")


def _reaped(pid: int) -> bool:
    """Our child is gone for good: exited *and* reaped (no zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rfind(b")") + 2 :].split()[0].decode()


def _children() -> set[int]:
    """Pids whose parent is this process (zombies included)."""
    me = os.getpid()
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if int(fields[1]) == me:
            found.add(int(entry))
    return found


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    # Observes a process that is not our child: polling is all there is.
    with trio.move_on_after(timeout):
        while not _gone(pid):
            await trio.sleep(0.02)
        return True
    return False


class Events:
    """Records a connection's events as they come (``nursery.start_soon(events.run)``)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.items: list[ConnectionEvent] = []
        self._changed = trio.Event()

    async def run(self) -> None:
        async for event in self.conn.events():
            self.items.append(event)
            self._changed.set()
            self._changed = trio.Event()

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.items if isinstance(e, kind)]

    async def wait_for(self, kind: type[Any], count: int = 1) -> None:
        while len(self.of(kind)) < count:
            await self._changed.wait()


def _drain(conn: Connection) -> list[ConnectionEvent]:
    out: list[ConnectionEvent] = []
    while True:
        try:
            out.append(conn.events().receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return out


async def _pid(target: Connection | Host, tool: str = "pid") -> int:
    result = await target.call_tool(tool)
    assert result.structured_content is not None
    return int(result.structured_content["result"])


async def _state(conn: Connection) -> dict[str, Any]:
    result = await conn.call_tool("state")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


# ------------------------------------------------------------------- kill -9


async def test_kill_9_mid_call_fails_the_call_within_a_second_then_a_new_pid_answers(
    servers: Servers,
) -> None:
    flaky = servers()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(flaky, name="flaky", settings=FAST).run)
            events = Events(conn)
            nursery.start_soon(events.run)
            first = await _pid(conn)
            assert first == flaky.pids[-1]

            under_way = trio.Event()
            finished = trio.Event()
            failures: list[tuple[float, BaseException]] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                under_way.set()

            async def slow_call() -> None:
                try:
                    await conn.call_tool("slow", {"seconds": 30}, on_progress=progress)
                except ConnectionClosed as exc:
                    failures.append((trio.current_time(), exc))
                finally:
                    finished.set()

            nursery.start_soon(slow_call)
            await under_way.wait()  # the server is inside the call
            killed_at = trio.current_time()
            os.kill(first, signal.SIGKILL)
            await finished.wait()
            assert len(failures) == 1, "the in-flight call must fail with ConnectionClosed"
            failed_at, exc = failures[0]
            assert failed_at - killed_at < 1.0
            assert "killed by SIGKILL" in str(exc)

            second = await _pid(conn)  # waits for the restart
            assert second != first and second == flaky.pids[-1]
            assert flaky.spawned() == [first, second]
            assert (await conn.call_tool("echo", {"text": "back"})).content[0].text == "back"
            await events.wait_for(Connected, 2)
            kinds = [type(e) for e in events.items]
            reconnect = kinds.index(ReconnectScheduled)
            assert kinds.index(Connected) < kinds.index(Disconnected) < reconnect
            assert Connected in kinds[reconnect:]
            assert conn.statistics()["connects"] == 2 and conn.statistics()["disconnects"] == 1
            nursery.cancel_scope.cancel()
    assert flaky.transports[0].returncode == -signal.SIGKILL
    assert _reaped(first) and _reaped(second)


async def test_events_say_why_the_server_went_away(servers: Servers) -> None:
    # Killed once; every later process exits at start with status 3.
    flaky = servers(EXIT_AT_START_AFTER="1")
    conn = Connection(flaky, name="flaky", settings=FAST)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            events = Events(conn)
            nursery.start_soon(events.run)

            async def run_connection(*, task_status: trio.TaskStatus[Connection]) -> None:
                with pytest.raises(ConnectionClosed, match="gave up"):
                    await conn.run(task_status=task_status)

            await nursery.start(run_connection)
            os.kill(await _pid(conn), signal.SIGKILL)
    lost, *start_failures = (e.reason for e in events.of(Disconnected))
    assert "killed by SIGKILL" in lost, lost
    assert len(start_failures) == FAST.start_retries + 1
    for reason in start_failures:  # each attempt says why: exit status and stderr tail
        assert "exited with status 3" in reason and "fatal: cannot start" in reason, reason
    (failed,) = events.of(ConnectionFailed)
    assert "exited with status 3" in failed.reason, failed.reason


# ------------------------------------------------------------ start failures


async def test_server_exiting_at_start_gives_up_without_a_crash_loop(servers: Servers) -> None:
    broken = servers("broken", EXIT_AT_START="1")
    conn = Connection(broken, name="broken", settings=FAST)
    with trio.fail_after(TIMEOUT):
        with pytest.raises(ConnectionClosed, match="broken: gave up"):
            await conn.run()
    attempts = FAST.start_retries + 1
    assert len(broken.spawned()) == attempts
    events = _drain(conn)
    assert isinstance(events[-1], ConnectionFailed) and events[-1].name == "broken"
    reasons = [e.reason for e in events if isinstance(e, Disconnected)]
    assert len(reasons) == attempts and all(r.startswith("start failed") for r in reasons), reasons
    with pytest.raises(ConnectionClosed, match="gave up"):  # at once, not after reconnect_wait
        with trio.fail_after(1.0):
            await conn.call_tool("echo", {"text": "x"})
    await trio.sleep(0.3)  # no crash loop: nothing was spawned after the give-up
    assert len(broken.spawned()) == attempts
    assert all(_reaped(pid) for pid in broken.spawned())


async def test_server_that_cannot_come_back_gives_up_after_bounded_restarts(servers: Servers) -> None:
    # Up once; after its crash every new process exits at start.
    flaky = servers(EXIT_AT_START_AFTER="1")
    conn = Connection(flaky, name="flaky", settings=FAST)
    gave_up: list[ConnectionClosed] = []

    async def run_connection(*, task_status: trio.TaskStatus[Connection]) -> None:
        try:
            await conn.run(task_status=task_status)
        except ConnectionClosed as exc:
            gave_up.append(exc)

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_connection)
            first = await _pid(conn)
            with pytest.raises(ConnectionClosed, match="exited with status 13"):
                await conn.call_tool("crash", {"code": 13})
            # a call made now waits for the reconnect, and fails once the connection gives up
            with pytest.raises(ConnectionClosed, match="gave up"):
                await conn.call_tool("echo", {"text": "x"})
    assert gave_up and "gave up" in str(gave_up[0])
    spawned = flaky.spawned()
    assert spawned[0] == first and len(spawned) == 1 + FAST.start_retries + 1
    await trio.sleep(0.3)
    assert flaky.spawned() == spawned  # nothing after the give-up
    assert all(_reaped(pid) for pid in spawned)


# ------------------------------------------------------------------- hangs


async def test_hung_server_is_restarted_by_the_health_check(servers: Servers) -> None:
    # The second tool call blocks the server's event loop: no reads, no answers.
    flaky = servers(HANG_AFTER="1", params={"close_grace": 0.1, "term_grace": 1.0})
    settings = HEALTH
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(flaky, name="flaky", settings=settings).run)
            events = Events(conn)
            nursery.start_soon(events.run)
            first = await _pid(conn)
            start = trio.current_time()
            with pytest.raises(ConnectionClosed):
                await conn.call_tool("echo", {"text": "stuck"})
            assert settings.ping_interval is not None
            assert trio.current_time() - start < settings.ping_interval + settings.ping_timeout + 1.0
            second = await _pid(conn)
            assert second != first
            await events.wait_for(Connected, 2)
            reasons = [e.reason for e in events.of(Disconnected)]
            assert any("HealthCheckFailed" in r for r in reasons), reasons
            nursery.cancel_scope.cancel()
    # the hung server ignored the end of its stdin and was stopped with SIGTERM
    assert flaky.transports[0].returncode == -signal.SIGTERM
    assert _reaped(first) and _reaped(second)


# ----------------------------------------------------------------- garbage


async def test_garbage_on_stdout_is_ignored_and_the_session_survives(servers: Servers) -> None:
    # BANNER: a line of text on stdout even before the handshake.
    flaky = servers(BANNER="1")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(flaky, name="flaky", settings=FAST).run)
            events = Events(conn)
            nursery.start_soon(events.run)
            first = await _pid(conn)
            for kind in ("text", "binary", "json", "response"):
                result = await conn.call_tool("garbage", {"kind": kind})
                assert result.content[0].text == f"wrote {kind} garbage"
                assert (await conn.call_tool("echo", {"text": kind})).content[0].text == kind
            session = await conn.session()
            stats = session.peer.statistics()
            assert stats.invalid_frames == 4  # banner, text, binary, json
            assert stats.unmatched_responses == 1  # the answer to an id nobody asked for
            # the same process, never disconnected
            assert await _pid(conn) == first and flaky.spawned() == [first]
            assert conn.statistics()["disconnects"] == 0 and events.of(Disconnected) == []

            # garbage followed by the server's exit: the connection restarts
            with pytest.raises(ConnectionClosed, match="exited with status 14"):
                await conn.call_tool("garbage", {"kind": "text", "exit": True})
            second = await _pid(conn)
            assert second != first and flaky.spawned() == [first, second]
            nursery.cancel_scope.cancel()
    assert _reaped(first) and _reaped(second)


async def test_stray_json_on_stdout_is_not_answered(servers: Servers) -> None:
    flaky = servers()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(flaky, name="flaky", settings=FAST).run)
            await conn.call_tool("garbage", {"kind": "json"})
            server_side = (await conn.call_tool("peer_stats")).structured_content
            nursery.cancel_scope.cancel()
    assert server_side == {"invalid_frames": 0, "unmatched_responses": 0}


# ----------------------------------------------------------------- restore


async def test_subscriptions_and_log_level_are_restored_after_a_kill(servers: Servers) -> None:
    flaky = servers()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(flaky, name="flaky", settings=FAST).run)
            events = Events(conn)
            nursery.start_soon(events.run)
            assert await _state(conn) == {"subscriptions": [], "log_level": None}
            await conn.subscribe_resource("flaky://counter")
            await conn.set_logging_level("warning")
            wanted = {"subscriptions": ["flaky://counter"], "log_level": "warning"}
            assert await _state(conn) == wanted
            first = await _pid(conn)
            os.kill(first, signal.SIGKILL)
            await events.wait_for(Connected, 2)
            second = await _pid(conn)
            assert second != first
            assert await _state(conn) == wanted  # the new process's session was told again
            nursery.cancel_scope.cancel()
    assert _reaped(first) and _reaped(second)


# ------------------------------------------------------------- owner death


async def test_servers_exit_when_their_owner_is_sigkilled() -> None:
    owner = await trio.lowlevel.open_process([sys.executable, OWNER], stdout=subprocess.PIPE)
    pids: list[int] = []
    try:
        assert owner.stdout is not None
        line = b""
        with trio.fail_after(TIMEOUT):
            while not line.endswith(b"\n"):
                chunk = await owner.stdout.receive_some(100)
                assert chunk, "the owner exited early"
                line += chunk
        pids = [int(p) for p in line.split()]
        assert len(pids) == 3 and len(set(pids)) == 3
        assert not any(_gone(pid) for pid in pids)
        owner.send_signal(signal.SIGKILL)
        with trio.fail_after(TIMEOUT):
            await owner.wait()
        survivors = [pid for pid in pids if not await _wait_gone(pid)]
        assert not survivors, f"servers outlived their SIGKILLed owner: {survivors}"
    finally:
        if owner.returncode is None:
            owner.kill()
            with trio.move_on_after(TIMEOUT, shield=True):
                await owner.wait()
        for pid in pids:
            _kill_quietly(pid)
        if owner.stdout is not None:
            await owner.stdout.aclose()


# --------------------------------------------------------- clean shutdown


async def test_closing_a_connection_leaves_no_child_behind(servers: Servers) -> None:
    before = _children()
    flaky = servers()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(flaky, name="flaky", settings=FAST).run)
            pid = await _pid(conn)
            assert pid in _children()
            nursery.cancel_scope.cancel()
    # closing stdin was enough: the server exited by itself (no SIGTERM / SIGKILL) and was reaped
    (transport,) = flaky.transports
    assert transport.returncode == 0
    assert flaky.spawned() == [pid] and _reaped(pid)
    assert _children() <= before
    with pytest.raises(ConnectionClosed):
        await conn.call_tool("echo", {"text": "late"})


async def test_a_clean_close_is_not_reported_as_a_failure(servers: Servers) -> None:
    flaky = servers()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            conn = await nursery.start(Connection(flaky, name="flaky", settings=FAST).run)
            await _pid(conn)
            nursery.cancel_scope.cancel()
    assert [e for e in _drain(conn) if isinstance(e, ConnectionFailed)] == []


async def test_closing_a_host_leaves_no_child_behind(servers: Servers) -> None:
    before = _children()
    names = ("alpha", "beta", "gamma")
    factories = {name: servers(name) for name in names}
    policy = ConsentPolicy(trusted_servers=frozenset(names))
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host(consent_policy=policy, settings=FAST).run)
            async with trio.open_nursery() as starting:
                for name in names:
                    starting.start_soon(host.add_server, name, factories[name])
            pids = {name: await _pid(host, f"{name}__pid") for name in names}
            assert set(pids.values()) <= _children()
            # removing one server stops its process; the others keep running
            await host.remove_server("beta")
            while factories["beta"].transports[0].returncode is None:
                await trio.sleep(0.02)
            assert _reaped(pids["beta"]) and sorted(host.servers) == ["alpha", "gamma"]
            assert await _pid(host, "alpha__pid") == pids["alpha"]
            assert await _pid(host, "gamma__pid") == pids["gamma"]
            nursery.cancel_scope.cancel()
    for name in names:
        (transport,) = factories[name].transports
        assert transport.returncode == 0, name  # each left on end of stdin
        assert _reaped(pids[name])
    assert _children() <= before


async def test_host_keeps_its_other_servers_when_one_gives_up(servers: Servers) -> None:
    names = ("alpha", "beta")
    factories = {name: servers(name) for name in names}
    policy = ConsentPolicy(trusted_servers=frozenset(names))
    fragile = attrs.evolve(FAST, max_restarts=0)  # the first crash is one too many
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(Host(consent_policy=policy, settings=FAST).run)
            await host.add_server("alpha", factories["alpha"])
            beta = await host.add_server("beta", factories["beta"], settings=fragile)
            alpha_pid = await _pid(host, "alpha__pid")
            with pytest.raises(ConnectionClosed):
                await host.call_tool("beta__crash")
            while beta.statistics()["failed"] is None:
                await trio.sleep(0.02)
            await trio.sleep(0.2)
            # the other server is untouched, the failed one is out of the registry
            assert await _pid(host, "alpha__pid") == alpha_pid
            assert sorted(host.servers) == ["alpha"]
            nursery.cancel_scope.cancel()
