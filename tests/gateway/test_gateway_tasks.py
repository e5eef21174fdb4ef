"""Tasks through the gateway: a task-augmented call is forwarded as a task to
the server owning the tool (``tests/transports/fixtures/tasks_server.py``
over stdio), ``tasks/*`` are routed back to it by the gateway's task id, and
another gateway client cannot see the task. Both eras of the gateway's own
clients; the gateway speaks to its server in that server's era."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.connections.test_faults_stdio import FAST
from tests.gateway.test_gateway import STDIO, children, wait_gone

from trio_mcp.gateway import load_config, open_gateway
from trio_mcp.protocol import ElicitRequestParams, ElicitResult, InvalidParams
from trio_mcp.testing import connected

ROOT = Path(__file__).resolve().parents[2]
TASKS_SERVER = str(ROOT / "tests" / "transports" / "fixtures" / "tasks_server.py")
TIMEOUT = 20.0


async def accept(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


def config(tmp_path: Path) -> Any:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps({"mcpServers": {"jobs": {"command": sys.executable, "args": [TASKS_SERVER, "10"]}}})
    )
    return load_config(path)


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_tasks_are_forwarded_to_the_owning_server(tmp_path: Path, era: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config(tmp_path), settings=FAST, stdio_options=STDIO) as gateway:
            spawned = children(os.getpid())
            async with connected(gateway, mode="bytes", era=era, elicitation_handler=accept) as client:
                assert client.server_capabilities.extensions == {"io.modelcontextprotocol/tasks": {}}
                tools = {t.name: t for t in await client.list_all_tools()}
                assert client.tasks.required_by(tools["jobs__confirm"])
                info = await client.tasks.call_tool("jobs__slow", {"seconds": 0.1}, ttl_ms=30_000)
                assert info.task_id.startswith("jobs__") and info.created_at
                result = await client.tasks.result(info.task_id)
                assert result.content[0].text == "slept 0.1"
                assert (await client.tasks.get(info.task_id)).status == "completed"
                long = await client.tasks.call_tool("jobs__slow", {"seconds": 1000}, ttl_ms=30_000)
                await client.tasks.cancel(long.task_id)
                assert (await client.tasks.get(long.task_id)).status == "cancelled"
                if era == "handshake":
                    listed = {t.task_id for t in await client.tasks.list_tasks()}
                    assert listed == {info.task_id, long.task_id}
                with pytest.raises(InvalidParams, match="Unknown task"):
                    await client.tasks.get("jobs__no-such-task")
                # a plain call of an optional tool is still a plain call
                assert (await client.call_tool("jobs__slow", {"seconds": 0})).content[0].text == "slept 0.0"
    assert await wait_gone(spawned) == set()


async def test_another_gateway_client_cannot_see_the_task(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_gateway(config(tmp_path), settings=FAST, stdio_options=STDIO) as gateway:
            spawned = children(os.getpid())
            async with connected(gateway, mode="bytes") as alice, connected(gateway, mode="bytes") as bob:
                mine = await alice.tasks.call_tool("jobs__slow", {"seconds": 1000}, ttl_ms=30_000)
                for attempt in (bob.tasks.get, bob.tasks.cancel, bob.tasks.result):
                    with pytest.raises(InvalidParams, match="Unknown task"):
                        await attempt(mine.task_id)
                assert await bob.tasks.list_tasks() == []
                assert (await alice.tasks.get(mine.task_id)).status == "working"
                await alice.tasks.cancel(mine.task_id)
    assert await wait_gone(spawned) == set()
