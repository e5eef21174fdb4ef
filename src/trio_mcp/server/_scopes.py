"""The OAuth scopes a request of an :class:`~trio_mcp.server.MCPServer`
needs: those declared (``scopes=``) on the tool, resource, template or prompt
it names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import MCPServer

__all__ = ["all_entry_scopes", "entry_scopes"]

_NONE: frozenset[str] = frozenset()


def entry_scopes(server: MCPServer, method: str, target: str | None) -> frozenset[str]:
    """The scopes of what a request names (``target``: a tool or prompt name,
    a resource URI; for ``completion/complete``, the prompt name or the
    template's URI template)."""
    if target is None:
        return _NONE
    if method == "tools/call":
        tool = server._tools.get(target)
        return _NONE if tool is None else tool.scopes
    if method in ("resources/read", "resources/subscribe"):
        resource = server._resources.get(target)
        if resource is not None:
            return resource.scopes
        for template in server._templates.values():
            if template.scopes and template.matcher.match(target) is not None:
                return template.scopes
        return _NONE
    if method == "prompts/get":
        prompt = server._prompts.get(target)
        return _NONE if prompt is None else prompt.scopes
    if method == "completion/complete":
        entry = server._prompts.get(target) or server._templates.get(target)
        return _NONE if entry is None else entry.scopes
    return _NONE


def all_entry_scopes(server: MCPServer) -> frozenset[str]:
    """Every scope declared on a tool, resource, template or prompt."""
    found: set[str] = set()
    for table in (server._tools, server._resources, server._templates, server._prompts):
        for entry in table.values():
            found.update(entry.scopes)
    return frozenset(found)
