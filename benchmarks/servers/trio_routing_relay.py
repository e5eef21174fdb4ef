"""The floor of any trio stdio gateway that routes: each message read, its
id and tool name swapped, written again; nothing else.

    .venv/bin/python benchmarks/servers/trio_routing_relay.py COMMAND [ARGS...]

Spawns ``COMMAND`` and relays its stdin and stdout with ``trio_relay.py``'s
``relay`` (one trio task per direction: read everything there is, one write,
wait only when nothing is left), but understands what it relays, as the
least a gateway in front of several clients and servers must. The complete
lines of a read are decoded in one msgspec call (as plain ``tools/call``
requests, params as a name and raw arguments; a read with anything else is
decoded again as generic messages), each request gets an id of the relay's
own (the client's kept in a dict) and a ``tools/call`` its tool's name at the
server (a dict lookup: ``echo__echo`` -> ``echo``, as ``trio-mcp gateway``
names server ``echo``'s tool), and the lines are encoded again in one call
and written at once; an answer gets its client's id back the same way. No
deadlines, no cancellation, no progress, no sessions, no tool lists:
``bench_stdio_neutral.py`` runs it as the ``routing-relay`` row, next to
``relay`` (bytes only) and ``gateway``.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType
from trio_relay import relay, write_all


class Message(msgspec.Struct):
    """A JSON-RPC message, its payloads left as raw JSON."""

    jsonrpc: str
    id: int | str | None | UnsetType = UNSET
    method: str | UnsetType = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


class CallParams(msgspec.Struct, forbid_unknown_fields=True):
    """A plain ``tools/call``'s params: its tool's name (the routing key) and arguments."""

    name: str
    arguments: Raw | UnsetType = UNSET


class Call(msgspec.Struct, forbid_unknown_fields=True):
    """A plain ``tools/call`` request (anything else fails to decode as one)."""

    jsonrpc: str
    id: int | str
    method: str
    params: CallParams


read_messages = msgspec.json.Decoder(Message).decode_lines
read_calls = msgspec.json.Decoder(Call).decode_lines
encode_lines = msgspec.json.Encoder().encode_lines


class Ids:
    """The relay's ids for the requests it passed on, the client's ids they
    stand for, and the tools' names at the server (given: the gateway
    learns them from the server's ``tools/list``)."""

    def __init__(self, tools: dict[str, str]) -> None:
        self.next = itertools.count(1).__next__
        self.clients: dict[int, int | str | None] = {}
        #: The routing table: a tool's name at the relay -> its name at the server.
        self.tools = tools

    def to_server(self, lines: bytes) -> list[Any]:
        try:
            calls: list[Any] = read_calls(lines)
        except msgspec.ValidationError:
            return self._others(read_messages(lines))  # a handshake, a notification: the slow way
        clients, tools, ids = self.clients, self.tools, self.next
        for call in calls:
            params = call.params
            tool = tools.get(params.name)
            if tool is None or call.method != "tools/call":
                for done in calls:  # the slow way for the whole read: the ids taken so far given back
                    if done is call:
                        break
                    del clients[done.id]
                return self._others(read_messages(lines))
            params.name = tool
            ident = ids()
            clients[ident] = call.id
            call.id = ident
        return calls

    def _others(self, messages: list[Message]) -> list[Any]:
        for message in messages:
            if message.method is UNSET or message.id is UNSET:
                continue  # an answer or a notification: as it is
            if message.method == "tools/call" and message.params is not UNSET:
                params = msgspec.json.decode(message.params)
                if isinstance(params, dict) and params.get("name") in self.tools:
                    params["name"] = self.tools[params["name"]]
                    message.params = Raw(msgspec.json.encode(params))
            ident = self.next()
            self.clients[ident] = message.id
            message.id = ident
        return messages

    def to_client(self, lines: bytes) -> list[Any]:
        messages = read_messages(lines)
        clients = self.clients
        for message in messages:
            if message.method is UNSET and type(message.id) is int:
                message.id = clients.pop(message.id, message.id)
        return messages


async def pump(src: int, dst: int, rewrite: Callable[[bytes], list[Any]]) -> None:
    """Relay the complete lines of ``src`` to ``dst``, rewritten, until ``src`` ends."""
    rest = b""
    while True:
        try:
            data = os.read(src, 1 << 16)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(src)
            continue
        if not data:
            return
        cut = data.rfind(b"\n") + 1
        if not cut:
            rest += data
            continue
        lines, rest = rest + data[:cut], data[cut:]
        await write_all(dst, encode_lines(rewrite(lines)))


def main() -> int:
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    ids = Ids({"echo__echo": "echo"})  # as the gateway names its server echo's tool
    return trio.run(relay, child, partial(pump, rewrite=ids.to_server), partial(pump, rewrite=ids.to_client))


if __name__ == "__main__":
    sys.exit(main())
