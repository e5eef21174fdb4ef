"""``trio-mcp run … -t http --workers N`` as deployed: real process trees on
127.0.0.1. Which worker answers is made certain, not left to the kernel: a
process frozen by the test (``scale_app.freeze``) can neither accept nor
answer, so the next connection goes to the other one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
import trio

from ._procs import ROOT
from ._served import (
    CLI,
    TIMEOUT,
    Freezer,
    alive,
    call_modern,
    initialize,
    post,
    served,
    text,
    wait_gone,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfd_open")

KEY = "scale-out-test-key-0123456789abcdefghij"
OTHER_KEY = "another-test-key-0123456789abcdefghijkl"


def _refused(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", "tests/cli/scale_app.py", *args, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        check=False,
    )


def test_workers_without_stateless_or_redis_refuse_to_start_and_say_why() -> None:
    out = _refused("-t", "http", "--workers", "2")
    assert out.returncode == 2
    assert "--stateless" in out.stderr and "--redis" in out.stderr and "session" in out.stderr


def test_workers_need_http_and_a_positive_count() -> None:
    out = _refused("-t", "stdio", "--workers", "2", "--stateless")
    assert out.returncode == 2 and "-t http" in out.stderr
    out = _refused("-t", "http", "--workers", "0")
    assert out.returncode == 2 and "--workers" in out.stderr


def test_workers_refuse_one_advertised_link_address_for_several_processes() -> None:
    redis = ("--redis", "redis://127.0.0.1:1/0", "--direct-link", "--link-advertise", "10.0.0.1:9000")
    out = _refused("-t", "http", "--workers", "2", *redis)
    assert out.returncode == 2 and "--link-advertise" in out.stderr and "port of its own" in out.stderr


def test_serve_on_ingress_needs_redis_and_json_answers() -> None:
    for missing in (("--json-response",), ("--redis", "redis://127.0.0.1:1/0")):
        out = _refused("-t", "http", "--serve-on-ingress", *missing)
        assert out.returncode == 2
        assert "--serve-on-ingress" in out.stderr and "--redis and --json-response" in out.stderr


def test_a_short_request_state_key_is_refused() -> None:
    out = _refused("-t", "http", "--request-state-key", "short")
    assert out.returncode == 2 and "at least 32" in out.stderr


async def test_two_workers_share_one_port_and_a_request_state_crosses_them(tmp_path: Path) -> None:
    """With no key given, the parent hands every worker the same one: a
    2026-07-28 retry issued by one worker is accepted by the other."""
    with trio.fail_after(TIMEOUT * 2):
        async with served("--workers", "2", "--stateless") as server, trio.open_nursery() as nursery:
            workers = server.worker_pids
            assert len(workers) == 2 and server.process.pid not in workers
            assert "--redis" in server.lines[3] and "no sessions" in server.lines[3]
            first, second = Freezer(tmp_path, server.url, "a"), Freezer(tmp_path, server.url, "b")
            frozen = await first.freeze(nursery)
            # Only the other worker can take this: it asks its question.
            round_one = await call_modern(server.url, "ask")
            ((key, _),) = round_one["result"]["inputRequests"].items()
            (asker,) = set(workers) - {frozen}
            assert await second.freeze(nursery) == asker  # now both are frozen
            assert await first.thaw() == frozen  # only the first one serves again
            answer = {"role": "assistant", "content": {"type": "text", "text": "Ada"}, "model": "m"}
            retried = await call_modern(
                server.url,
                "ask",
                inputResponses={key: answer},
                requestState=round_one["result"]["requestState"],
            )
            assert text(retried) == f"Ada (answered in {frozen})"  # issued by one, accepted by the other
            assert await second.thaw() == asker
            # A handshake-era initialize is answered without a session (--stateless).
            response = await initialize(server.url)
            assert response.status_code == 200 and "mcp-session-id" not in response.headers


async def test_when_the_parent_is_killed_every_worker_stops() -> None:
    with trio.fail_after(TIMEOUT * 2):
        async with served("--workers", "2", "--stateless") as server:
            workers = server.worker_pids
            assert all(alive(pid) for pid in workers)
            server.process.kill()  # SIGKILL: the parent gets no say
            await server.process.wait()
            await wait_gone(workers)
        assert not any(alive(pid) for pid in workers)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_sigterm_or_sigint_to_the_parent_stops_every_worker(signum: int) -> None:
    with trio.fail_after(TIMEOUT * 2):
        async with served("--workers", "2", "--stateless", "--drain-timeout", "1") as server:
            workers = server.worker_pids
            assert text(await call_modern(server.url, "pid")).isdigit()
            server.process.send_signal(signum)
            status = await server.process.wait()
            await wait_gone(workers)
    assert status == (0 if signum == signal.SIGTERM else 130)
    assert not any(alive(pid) for pid in workers)


async def test_a_worker_that_dies_is_replaced() -> None:
    with trio.fail_after(TIMEOUT * 2):
        async with served("--workers", "2", "--stateless") as server:
            workers = server.worker_pids
            os.kill(workers[0], signal.SIGKILL)
            line = await server.log.wait_for(f"in place of {workers[0]}")
            replacement = int(line.split("worker process ")[1].split()[0])
            assert replacement not in workers and alive(replacement)
            assert text(await call_modern(server.url, "pid")).isdigit()
            server.process.send_signal(signal.SIGTERM)
            assert await server.process.wait() == 0
            await wait_gone([*workers, replacement])


async def test_a_worker_that_cannot_start_again_stops_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "fail"
    with trio.fail_after(TIMEOUT * 2):
        async with served("--workers", "2", "--stateless", env={"SCALE_APP_FAIL_IF": str(marker)}) as server:
            workers = server.worker_pids
            marker.write_text("")  # from now on, the app does not import
            os.kill(workers[1], signal.SIGKILL)
            status = await server.process.wait()
            await wait_gone(workers)
            await server.log.wait_for("could not start")
    assert status == 1
    assert not any(alive(pid) for pid in workers)


async def test_request_state_keys_from_the_command_line_and_the_environment() -> None:
    """Three separate servers: one signing with KEY, one that rotated to
    OTHER_KEY but still accepts KEY (from the environment), one with
    OTHER_KEY only. A state is accepted wherever its key is listed."""
    with trio.fail_after(TIMEOUT * 3):
        async with (
            served("--request-state-key", KEY) as old,
            served(env={"TRIO_MCP_REQUEST_STATE_KEYS": f"{OTHER_KEY}, {KEY}"}) as rotated,
            served("--request-state-key", OTHER_KEY) as new,
        ):
            for issuer, accepts, refuses in ((old, rotated, new), (rotated, new, old)):
                first = await call_modern(issuer.url, "ask")
                ((key, _),) = first["result"]["inputRequests"].items()
                retry = {
                    "inputResponses": {key: {"role": "assistant", "content": {"type": "text", "text": "Bo"}}},
                    "requestState": first["result"]["requestState"],
                }
                retry["inputResponses"][key]["model"] = "m"
                accepted = await call_modern(accepts.url, "ask", **retry)
                assert text(accepted).startswith("Bo (answered in ")
                refused = await call_modern(refuses.url, "ask", **retry)
                assert refused["error"]["code"] == -32602
                assert "requestState" in refused["error"]["message"]
                assert "keys" in refused["error"]["message"]


@pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="needs Debian's redis-server (scripts/setup-interop installs it)",
)
@pytest.mark.parametrize("link", [False, True], ids=["inbox", "direct-link"])
async def test_two_workers_on_redis_serve_one_handshake_session_whichever_takes_the_request(
    tmp_path: Path, link: bool
) -> None:
    """``--workers 2 --redis URL``: sessions are shared, so no --stateless is
    needed; each worker is a node of its own (``--node-id w`` gives w-0 and
    w-1), and a call that reaches the worker not owning the session is
    forwarded to the one that does (through Redis, or with ``--direct-link``
    over a connection between the workers)."""
    from tests.serving.cluster.conftest import RedisServer

    redis = RedisServer(tmp_path)
    redis.start()
    try:
        with trio.fail_after(TIMEOUT * 3):
            args = (
                "--workers",
                "2",
                "--redis",
                redis.url,
                "--node-id",
                "w",
                "--node-header",
                "--json-response",
                *(["--direct-link"] if link else []),
            )
            async with served(*args) as server:
                opened = await initialize(server.url)
                assert opened.status_code == 200
                headers = {
                    "mcp-session-id": opened.headers["mcp-session-id"],
                    "mcp-protocol-version": opened.json()["result"]["protocolVersion"],
                }
                note = await post(
                    server.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers
                )
                assert note.status_code == 202
                ingress: set[str] = set()
                owners: set[str] = set()
                for request_id in range(2, 200):  # each POST on a connection of its own
                    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
                    answer = await post(
                        server.url, {**call, "params": {"name": "pid", "arguments": {}}}, headers
                    )
                    assert answer.status_code == 200, answer.text
                    owners.add(text(answer.json()))
                    ingress.add(answer.headers["mcp-node"])
                    if len(ingress) == 2:
                        break
                assert ingress == {"w-0", "w-1"}  # both workers took requests of the session
                (owner,) = owners  # and one of them ran every call
                assert int(owner) in server.worker_pids
                if link:
                    # The workers link over Unix sockets in a directory of the parent's own.
                    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                        ready = (await client.get(server.url.replace("/mcp", "/readyz"))).json()
                    address = ready["cluster"]["link_address"]
                    assert address.startswith("unix:/")
                    directory = Path(address.removeprefix("unix:")).parent
                    assert directory.stat().st_mode & 0o777 == 0o700
                    assert len(list(directory.glob("link-*.sock"))) == 2
            if link:
                assert not directory.exists()  # removed with the command
    finally:
        redis.stop()
