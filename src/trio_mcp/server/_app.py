"""The high-level authoring API: decorators over the low-level server.

::

    app = MCPServer("demo")

    @app.tool
    def add(a: int, b: int) -> int:
        '''Add two numbers.'''
        return a + b

    @app.resource("greeting://{name}")
    def greeting(name: str) -> str:
        return f"Hello, {name}!"

    @app.prompt
    def review(code: str) -> str:
        return f"Please review:\\n{code}"
"""

from __future__ import annotations

from ._entries import CompletionFn
from ._prompts import PromptRegistry
from ._registry import DEFAULT_MAX_SYNC_THREADS
from ._resources import ResourceRegistry
from ._tools import ToolRegistry

__all__ = ["DEFAULT_MAX_SYNC_THREADS", "CompletionFn", "MCPServer"]


class MCPServer(ToolRegistry, ResourceRegistry, PromptRegistry):
    """A server whose tools, resources and prompts are plain functions.

    Sync (``def``) tools, resources, prompts and completions run in worker
    threads, at most ``max_sync_threads`` at once (:attr:`thread_limiter`), so
    they never block the event loop; register one with ``inline=True`` to run
    it in the event loop's task instead (for tiny pure functions).

    Tools: :mod:`._tools`; resources and templates: :mod:`._resources`;
    prompts: :mod:`._prompts`; completions, worker threads and scopes:
    :mod:`._registry`."""
