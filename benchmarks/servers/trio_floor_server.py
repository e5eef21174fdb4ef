"""The trio floor of ``benchmarks/bench_stdio_neutral.py``: what trio itself
can do over stdio, with no MCP at all.

    .venv/bin/python benchmarks/servers/trio_floor_server.py

One trio task reads its stdin with :class:`trio.lowlevel.FdStream`, decodes
every complete line of a read with msgspec (the project's codec), answers
``initialize`` with a fixed result and every other request with the echo
tool's result shape for its ``arguments.text`` (notifications get nothing),
and writes the answers of one read with one write. Serves until its stdin
closes. Whatever an MCP server on trio adds (sessions, the handler pool,
capabilities, the tool's argument binding) comes on top of this.
"""

import os
import sys

import msgspec
import trio

INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "bench-trio-floor", "version": "1.0"},
}


class Arguments(msgspec.Struct):
    text: str = ""


class Params(msgspec.Struct):
    arguments: Arguments | None = None


class Message(msgspec.Struct, omit_defaults=True):
    id: int | str | None = None
    method: str = ""
    params: Params | None = None


class Text(msgspec.Struct, tag_field="type", tag="text"):
    text: str


class Echoed(msgspec.Struct):
    content: list[Text]


class Answer(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: int | str
    result: object


async def serve() -> None:
    decode = msgspec.json.Decoder(Message).decode
    encoder = msgspec.json.Encoder()
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    carry = b""
    out = bytearray()
    async with stdin, stdout:
        while data := await stdin.receive_some(1 << 16):
            lines = (carry + data).split(b"\n")
            carry = lines.pop()
            out.clear()
            for line in lines:
                if not line.strip():
                    continue
                msg = decode(line)
                if msg.id is None:
                    continue  # a notification
                if msg.method == "initialize":
                    result: object = INIT
                else:
                    args = msg.params.arguments if msg.params is not None else None
                    result = Echoed([Text(args.text if args is not None else "")])
                encoder.encode_into(Answer(id=msg.id, result=result), out, len(out))
                out += b"\n"
            if out:
                await stdout.send_all(out)


def main() -> int:
    trio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
