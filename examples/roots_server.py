"""A server that works inside the client's roots.

It asks the client for its roots (``roots/list``), lists and reads files
under the ``file://`` ones, and never reaches outside them: every path is
resolved (symbolic links included) and must stay inside a root. Nothing is
ever written.

Tools
    ``list_roots``, ``list_directory``, ``read_file`` (all read-only).
Resources
    ``roots://current`` (this session's roots, as JSON; subscribable) and the
    template ``file://{+path}`` (a file under a root).
Roots changes
    On ``notifications/roots/list_changed`` the server fetches the roots
    again, logs the change and tells subscribers of ``roots://current``.

Roots belong to a session, so they are cached per session (weakly: the cache
entry goes away with the session).
"""

from __future__ import annotations

import fnmatch
import os
import sys
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import attrs
import msgspec
import trio

from trio_mcp.protocol import (
    EmbeddedResource,
    InvalidParams,
    ResourceContents,
    ResourceNotFound,
    Root,
    ToolAnnotations,
)
from trio_mcp.server import Context, MCPServer, ServerSession

__all__ = ["Entry", "Listing", "RootInfo", "RootsServer", "app", "main"]

ROOTS_URI = "roots://current"
#: Entries ``list_directory`` returns at most.
MAX_ENTRIES = 1000
#: Bytes ``read_file`` returns at most.
MAX_READ = 1 << 20
#: Seconds the client has to answer ``roots/list`` after announcing a change.
ROOTS_TIMEOUT = 10.0


# ---------------------------------------------------------- session state


@attrs.define
class SessionRoots:
    """One session's view of its client's roots."""

    roots: list[Root] | None = None
    #: How many ``roots/list_changed`` notifications were handled.
    changes: int = 0


_sessions: weakref.WeakKeyDictionary[ServerSession, SessionRoots] = weakref.WeakKeyDictionary()


def session_roots(session: ServerSession) -> SessionRoots:
    entry = _sessions.get(session)
    if entry is None:
        entry = _sessions[session] = SessionRoots()
    return entry


async def fetch_roots(session: ServerSession) -> list[Root]:
    """Ask the client for its roots and cache them for the session."""
    roots = await session.list_roots()
    entry = session_roots(session)
    entry.roots = roots
    return roots


async def current_roots(ctx: Context) -> list[Root]:
    if ctx.modern is not None:
        # Stateless era: the roots come with this request's retry, never cached.
        return await ctx.list_roots()
    entry = session_roots(ctx.session)
    if entry.roots is None:
        return await fetch_roots(ctx.session)
    return entry.roots


class RootsServer(MCPServer):
    """An MCPServer that reacts to ``notifications/roots/list_changed``."""

    async def handle_notification(self, session: ServerSession, method: str, params: Any) -> None:
        parent = getattr(super(), "handle_notification", None)
        if parent is not None:
            await parent(session, method, params)
        if method != "notifications/roots/list_changed":
            return
        entry = session_roots(session)
        entry.changes += 1
        with trio.move_on_after(ROOTS_TIMEOUT) as scope:
            roots = await fetch_roots(session)
        if scope.cancelled_caught:  # keep the old roots rather than block this session's notifications
            await session.send_log("warning", "roots/list timed out after roots/list_changed", logger="roots")
            return
        await session.send_log(
            "info", {"event": "roots changed", "roots": [r.uri for r in roots]}, logger="roots"
        )
        if ROOTS_URI in session.subscriptions:
            await session.notify("notifications/resources/updated", {"uri": ROOTS_URI})


app = RootsServer(
    "trio-mcp-roots",
    "0.1.0",
    instructions="Lists and reads files inside the client's file:// roots (read-only).",
)

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


# ------------------------------------------------------------------ paths


def uri_to_path(uri: str) -> Path:
    """The local path of a ``file://`` URI (host empty or ``localhost``)."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise InvalidParams(f"not a file:// URI: {uri!r}")
    if parts.netloc not in ("", "localhost"):
        raise InvalidParams(f"file URI on another host: {uri!r}")
    return Path(url2pathname(parts.path))


def _root_dirs(roots: list[Root]) -> list[tuple[Root, Path]]:
    """The file:// roots, resolved (other schemes are ignored)."""
    out = []
    for root in roots:
        try:
            path = uri_to_path(root.uri)
        except InvalidParams:
            continue
        out.append((root, path.resolve()))
    return out


def _inside(path: Path, roots: list[tuple[Root, Path]]) -> tuple[Root, Path] | None:
    for root, base in roots:
        if path == base or path.is_relative_to(base):
            return root, base
    return None


def confine(target: str, roots: list[Root]) -> tuple[Path, Root]:
    """Resolve ``target`` (a file:// URI or an absolute path) and check it is
    inside one of ``roots``; raises ResourceNotFound otherwise (whether the
    path exists outside the roots is nobody's business)."""
    raw = uri_to_path(target) if target.startswith("file:") else Path(target)
    if not raw.is_absolute():
        raise InvalidParams(f"give a file:// URI or an absolute path, not {target!r}")
    resolved = raw.resolve()
    found = _inside(resolved, _root_dirs(roots))
    if found is None:
        raise ResourceNotFound(f"{target} is not inside any root", data={"uri": target})
    return resolved, found[0]


# ------------------------------------------------------------------ tools


class RootInfo(msgspec.Struct, kw_only=True):
    uri: str
    name: str | None
    path: str | None
    exists: bool


class Entry(msgspec.Struct, kw_only=True):
    uri: str
    name: str
    root: str
    is_dir: bool
    size: int | None


class Listing(msgspec.Struct, kw_only=True):
    entries: list[Entry]
    truncated: bool


@app.tool(annotations=READ_ONLY)
async def list_roots(ctx: Context) -> list[RootInfo]:
    """The client's roots, with their local paths (file:// roots only)."""
    roots = await current_roots(ctx)
    out = []
    for root in roots:
        try:
            path: Path | None = uri_to_path(root.uri)
        except InvalidParams:
            path = None
        out.append(
            RootInfo(
                uri=root.uri,
                name=None if root.name is msgspec.UNSET else root.name,
                path=None if path is None else str(path),
                exists=path is not None and path.is_dir(),
            )
        )
    return out


def _scan(start: Path, root: Root, base: Path, pattern: str, recursive: bool, limit: int) -> Listing:
    entries: list[Entry] = []
    roots = [(root, base)]
    pending = [start]
    while pending:
        directory = pending.pop(0)
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for item in items:
            path = Path(item.path)
            real = path.resolve()
            if _inside(real, roots) is None:
                continue  # a symbolic link leading out of the root
            is_dir = real.is_dir()
            if is_dir and recursive:
                pending.append(path)
            if not fnmatch.fnmatch(item.name, pattern):
                continue
            if len(entries) >= limit:
                return Listing(entries=entries, truncated=True)
            entries.append(
                Entry(
                    uri=path.as_uri(),
                    name=str(path.relative_to(start)),
                    root=root.uri,
                    is_dir=is_dir,
                    size=None if is_dir else real.stat().st_size,
                )
            )
    return Listing(entries=entries, truncated=False)


@app.tool(annotations=READ_ONLY)
async def list_directory(
    ctx: Context, uri: str | None = None, pattern: str = "*", recursive: bool = False, limit: int = 200
) -> Listing:
    """List a directory inside a root (every root's top level when no ``uri``).

    Args:
        uri: file:// URI (or absolute path) of a directory inside a root
        pattern: Shell-style pattern the names must match
        recursive: Descend into subdirectories
        limit: Most entries to return
    """
    limit = max(1, min(limit, MAX_ENTRIES))
    roots = await current_roots(ctx)
    if uri is None:
        targets = [(base, root, base) for root, base in _root_dirs(roots)]
    else:
        path, root = confine(uri, roots)
        if not path.is_dir():
            raise InvalidParams(f"not a directory: {uri}")
        base = next(b for r, b in _root_dirs(roots) if r is root)
        targets = [(path, root, base)]
    entries: list[Entry] = []
    truncated = False
    for start, root, base in targets:
        if len(entries) >= limit:
            truncated = True
            break
        remaining = limit - len(entries)
        listing = await trio.to_thread.run_sync(_scan, start, root, base, pattern, recursive, remaining)
        entries.extend(listing.entries)
        if listing.truncated:
            truncated = True
            break
    return Listing(entries=entries, truncated=truncated)


def _read(path: Path, max_bytes: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(max_bytes)


@app.tool(annotations=READ_ONLY)
async def read_file(ctx: Context, uri: str, max_bytes: int = 65536) -> str | EmbeddedResource:
    """Read a file inside a root: text as text, anything else as a base64 blob.

    Args:
        uri: file:// URI (or absolute path) of the file
        max_bytes: Most bytes to read
    """
    path, _ = confine(uri, await current_roots(ctx))
    if not path.is_file():
        raise InvalidParams(f"not a file: {uri}")
    data = await trio.to_thread.run_sync(_read, path, max(0, min(max_bytes, MAX_READ)))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return EmbeddedResource(resource=ResourceContents.from_blob(path.as_uri(), data))


# -------------------------------------------------------------- resources


@app.resource(ROOTS_URI, name="roots", mime_type="application/json")
async def roots_resource(ctx: Context) -> list[dict[str, Any]]:
    """This session's roots (subscribe to hear when they change)."""
    roots = await current_roots(ctx)
    return [msgspec.to_builtins(root) for root in roots]


# The path is absolute by design and confine() keeps it inside a root (symbolic
# links and ".." resolved), so this template opts out of the default refusal.
@app.resource(
    "file://{+path}",
    name="file",
    description="A file inside one of the client's roots.",
    allow_path_traversal=True,
)
async def file_resource(ctx: Context, path: str) -> str | bytes:
    uri = f"file://{path}"
    resolved, _ = confine(uri, await current_roots(ctx))
    if not resolved.is_file():
        raise ResourceNotFound(f"Resource not found: {uri}", data={"uri": uri})
    data = await trio.to_thread.run_sync(_read, resolved, MAX_READ)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


# ------------------------------------------------------- entry point ----
# stdio today; other transports (Streamable HTTP)
# plug in here as they land.


async def serve_stdio() -> None:
    """Serve :data:`app` to one client over this process's stdin / stdout."""
    from trio_mcp.transports.stdio import stdio_server_stream

    async with stdio_server_stream() as stream:
        await app.serve(stream, name="roots-stdio")


def main(argv: list[str] | None = None) -> int:
    """``python examples/roots_server.py``: serve over stdio until stdin ends."""
    trio.run(serve_stdio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
