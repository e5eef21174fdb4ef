"""What :class:`~trio_mcp.server.MCPServer` keeps of each registered tool
(those of resources, templates and prompts are in :mod:`._more_entries`,
imported when the first is registered), and the OAuth scopes a request
needs: those declared (``scopes=``) on what it names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ..protocol import Tool
from ._functions import FunctionSpec
from ._schema import OutputSchema

if TYPE_CHECKING:
    from ._registry import Registry

__all__ = [
    "CompletionFn",
    "TaskSupport",
    "ToolEntry",
    "all_entry_scopes",
    "entry_scopes",
    "scope_set",
]

TaskSupport = Literal["optional", "required"]
#: ``fn(value, context_arguments) -> list[str]`` (sync or async).
CompletionFn = Callable[[str, dict[str, str]], Any]


@attrs.define
class ToolEntry:
    tool: Tool
    spec: FunctionSpec
    output: OutputSchema | None
    #: ``"optional"`` / ``"required"``: may run as a task (None: never).
    task_support: TaskSupport | None = None
    #: ``"call"``: the task starts with the call; ``"tool"``: the tool starts
    #: it itself (``ctx.start_task``), after gathering input synchronously.
    task_start: Literal["call", "tool"] = "call"
    inline: bool = False
    scopes: frozenset[str] = frozenset()


def scope_set(scopes: Sequence[str]) -> frozenset[str]:
    """The ``scopes=`` of a decorator, checked."""
    if isinstance(scopes, str):
        raise TypeError("scopes is a list of scope names, not one string")
    return frozenset(scopes)


_NONE: frozenset[str] = frozenset()


def entry_scopes(server: Registry, method: str, target: str | None) -> frozenset[str]:
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


def all_entry_scopes(server: Registry) -> frozenset[str]:
    """Every scope declared on a tool, resource, template or prompt."""
    found: set[str] = set()
    for table in (server._tools, server._resources, server._templates, server._prompts):
        for entry in table.values():
            found.update(entry.scopes)
    return frozenset(found)
