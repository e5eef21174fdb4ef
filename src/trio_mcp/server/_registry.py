"""What every part of :class:`~._app.MCPServer` shares: the tables of what
is registered (:mod:`._entries`), the bound of the worker threads running
sync handlers, calling a handler, the completions of prompt arguments and
template variables, and the OAuth scopes declared on what is registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import trio
from msgspec import UNSET

from ..actors._server import Context
from ..protocol import CompleteRequestParams, CompleteResult, Completion, InvalidParams, PromptReference, Tool
from ._entries import CompletionFn, ToolEntry, all_entry_scopes, entry_scopes
from ._functions import FunctionSpec, is_async, run_sync_in_thread
from ._lowlevel import LowLevelServer

if TYPE_CHECKING:  # built when the first resource, template or prompt is registered
    from ._more_entries import PromptEntry, ResourceEntry, TemplateEntry

__all__ = [
    "DEFAULT_MAX_SYNC_THREADS",
    "MAX_COMPLETION_VALUES",
    "F",
    "Registry",
    "opt",
    "registrar",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Completion values per answer (the specification's maximum).
MAX_COMPLETION_VALUES = 100
#: Worker threads running sync (``def``) handlers at once, per server
#: (``MCPServer(max_sync_threads=...)``); more calls wait for a thread.
DEFAULT_MAX_SYNC_THREADS = 40


def opt(value: Any) -> Any:
    return UNSET if value is None else value


class Registry(LowLevelServer):
    """The state and the shared handlers of :class:`~._app.MCPServer`."""

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        max_sync_threads: int = DEFAULT_MAX_SYNC_THREADS,
        **options: Any,
    ) -> None:
        super().__init__(name, version, **options)
        if max_sync_threads < 1:
            raise ValueError("max_sync_threads must be at least 1")
        #: The bound of the worker threads running sync handlers.
        self.thread_limiter = trio.CapacityLimiter(max_sync_threads)
        self._inline_completions: set[CompletionFn] = set()
        self._tools: dict[str, ToolEntry] = {}
        #: The tools that may take the plain path of tools/call (see ``_tools``).
        self._plain_tools: dict[str, ToolEntry] = {}
        self._resources: dict[str, ResourceEntry] = {}
        self._templates: dict[str, TemplateEntry] = {}
        self._prompts: dict[str, PromptEntry] = {}
        self._tool_list: list[Tool] | None = None

    # ---------------------------------------------------------- completions

    def completion(self, ref: str, argument: str, *, inline: bool = False) -> Callable[[F], F]:
        """Register completions for a prompt argument (``ref`` = prompt name)
        or a template variable (``ref`` = the URI template). A sync function
        runs in a worker thread unless ``inline=True`` (as do those given as
        ``complete=`` unless their prompt or template is inline)."""

        def register(fn: F) -> F:
            if inline:
                self._inline_completions.add(fn)
            if ref in self._prompts:
                self._prompts[ref].completions[argument] = fn
            elif ref in self._templates:
                self._templates[ref].completions[argument] = fn
            else:
                raise KeyError(f"no prompt or resource template {ref!r}; register it first")
            self._enable_completions()
            return fn

        return register

    def _enable_completions(self) -> None:
        if "completion/complete" not in self.request_handlers:
            self.set_request_handler("completion/complete", CompleteRequestParams, self._complete)

    async def _complete(self, ctx: Context, params: CompleteRequestParams) -> CompleteResult:
        ref = params.ref
        if isinstance(ref, PromptReference):
            entry: Any = self._prompts.get(ref.name)
            if entry is None:
                raise InvalidParams(f"Unknown prompt: {ref.name}")
        else:
            entry = self._templates.get(ref.uri)
            if entry is None:
                raise InvalidParams(f"Unknown resource template: {ref.uri}")
        fn = entry.completions.get(params.argument.name)
        values: list[str] = []
        if fn is not None:
            context_args = (
                {}
                if params.context is UNSET or params.context.arguments is UNSET
                else params.context.arguments
            )
            value = params.argument.value
            if is_async(fn) or entry.inline or fn in self._inline_completions:
                result = fn(value, context_args)
            else:
                result = await run_sync_in_thread(lambda: fn(value, context_args), self.thread_limiter)
            if hasattr(result, "__await__"):
                result = await result
            values = [str(v) for v in result]
        total = len(values)
        return CompleteResult(
            completion=Completion(
                values=values[:MAX_COMPLETION_VALUES], total=total, has_more=total > MAX_COMPLETION_VALUES
            )
        )

    # -------------------------------------------------------- authorization

    def scopes_for(self, method: str, target: str | None) -> frozenset[str]:
        return super().scopes_for(method, target) | entry_scopes(self, method, target)

    def declared_scopes(self) -> frozenset[str]:
        return super().declared_scopes() | all_entry_scopes(self)

    # ------------------------------------------------------------- threads

    async def _invoke(self, spec: FunctionSpec, arguments: Any, ctx: Context, inline: bool) -> Any:
        """Call a handler: a sync one in a worker thread unless ``inline``."""
        return await spec.call(arguments, ctx, limiter=None if inline else self.thread_limiter)


def registrar(add: Callable[..., Any], options: dict[str, Any]) -> Callable[[F], F]:
    """A decorator registering with ``add(fn, **options)`` that returns ``fn`` itself."""

    def register(fn: F) -> F:
        add(fn, **options)
        return fn

    return register
