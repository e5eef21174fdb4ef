"""An MCP server that only answers holders of an access token from your
authorization server (README: "Authorization").

Served from the command line, its tokens checked against the authorization
server's JWKS::

    trio-mcp run examples/protected_server.py -t http --port 8000 \\
        --auth-jwks https://auth.example.com/.well-known/jwks.json \\
        --auth-issuer https://auth.example.com \\
        --resource http://127.0.0.1:8000/mcp --auth-scope notes

or from Python: ``python examples/protected_server.py JWKS_URL ISSUER``.
Every request needs the ``notes`` scope; writing a note needs
``notes:write`` too (``403 insufficient_scope`` otherwise: the client asks
for it and retries). Each user sees only their own notes.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import trio

from trio_mcp.auth.resource import JwtVerifier, ResourceServer
from trio_mcp.server import Context, MCPServer
from trio_mcp.serving.http import HttpServer

app = MCPServer("protected-notes")
notes: defaultdict[str, list[str]] = defaultdict(list)


def _user(ctx: Context) -> str:
    auth = ctx.auth  # the verified access token (None when served without authorization)
    return "anonymous" if auth is None or auth.subject is None else auth.subject


@app.tool
def whoami(ctx: Context) -> dict[str, object]:
    """Who the access token says you are, and what it allows."""
    auth = ctx.auth
    if auth is None:
        return {"subject": None}
    return {"subject": auth.subject, "client_id": auth.client_id, "scopes": sorted(auth.scopes)}


@app.tool(scopes=["notes:write"])
def add_note(ctx: Context, text: str) -> str:
    """Keep a note (needs the notes:write scope)."""
    notes[_user(ctx)].append(text)
    return f"{len(notes[_user(ctx)])} notes"


@app.tool
def list_notes(ctx: Context) -> list[str]:
    """Your notes."""
    return notes[_user(ctx)]


async def main(jwks_url: str, issuer: str) -> None:
    auth = ResourceServer(
        verifier=JwtVerifier(issuer, jwks_url=jwks_url),
        resource="http://127.0.0.1:8000/mcp",
        required_scopes=["notes"],
    )
    server = HttpServer(app, port=8000, auth=auth)
    async with trio.open_nursery() as nursery:
        info = await nursery.start(server.run)
        print(f"serving at {info.url}; metadata at {auth.metadata_url()}", file=sys.stderr)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:3])
