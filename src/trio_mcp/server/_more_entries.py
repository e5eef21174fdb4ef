"""What :class:`~trio_mcp.server.MCPServer` keeps of each registered
resource, resource template and prompt: imported when the first is
registered, so that a server of tools alone does not build these classes
(each attrs class costs about a millisecond of start-up)."""

from __future__ import annotations

import attrs

from ..protocol import Prompt, Resource, ResourceTemplate
from ._entries import CompletionFn
from ._functions import FunctionSpec
from ._uri_template import UriTemplate

__all__ = ["PromptEntry", "ResourceEntry", "TemplateEntry"]


@attrs.define
class ResourceEntry:
    resource: Resource
    spec: FunctionSpec
    mime_type: str | None
    inline: bool = False
    scopes: frozenset[str] = frozenset()


@attrs.define
class TemplateEntry:
    template: ResourceTemplate
    matcher: UriTemplate
    spec: FunctionSpec
    mime_type: str | None
    completions: dict[str, CompletionFn]
    inline: bool = False
    allow_path_traversal: bool = False
    scopes: frozenset[str] = frozenset()


@attrs.define
class PromptEntry:
    prompt: Prompt
    spec: FunctionSpec
    required: tuple[str, ...]
    completions: dict[str, CompletionFn]
    inline: bool = False
    scopes: frozenset[str] = frozenset()
