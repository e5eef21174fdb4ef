"""The ``drop`` policy: a session whose owner died is forgotten (``404``), and
the client initializes again (two node processes, no balancer)."""

from __future__ import annotations

import httpx
import pytest
import trio

from ._helpers import TIMEOUT, call, headers_for, open_session, request, result_of, stream
from .conftest import LEASE, Cluster, needs_real_parts

pytestmark = [pytest.mark.cluster, needs_real_parts]

NODES = 2
POLICY = "drop"
BALANCED = False


async def test_an_owner_killed_fails_its_calls_then_its_session_is_gone(cluster: Cluster) -> None:
    n1, n2 = cluster.nodes
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            session_id, _ = await open_session(client, n1.url)
            await result_of(client, n2.url, session_id, call(1, "where"))
            body = call(2, "countdown", progress="c", n=1000, delay=0.05)
            async with stream(client, "POST", n2.url, headers_for(session_id), body) as events:
                assert await events.next() is not None
                n1.kill()
                with trio.fail_after(LEASE + 2):
                    while (message := await events.next()) is not None and message.get("id") != 2:
                        pass
            assert message is not None and message["error"]["data"] == {"owner_lost": "n1"}
            gone = await request(client, n2.url, session_id, call(3, "where"))
            assert gone.status_code == 404  # the client initializes again
            assert (await request(client, n2.url, session_id, call(4, "where"))).status_code == 404
            fresh, owner = await open_session(client, n2.url)
            assert fresh != session_id and owner == "n2"
            where = await result_of(client, n2.url, fresh, call(5, "where"))
            assert where["content"][0]["text"] == "n2"
