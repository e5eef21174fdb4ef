"""Resources and resource templates of :class:`~._app.MCPServer`:
registering them (``@app.resource``), listing and reading them (a template's
variables refused when they traverse paths), subscriptions, and notifying
subscribers of a change."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from msgspec import UNSET

from ..actors._server import Context
from ..protocol import (
    Icon,
    InvalidParams,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceNotFound,
    ResourceTemplate,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)
from ._content import to_resource_contents
from ._entries import CompletionFn, scope_set
from ._functions import ToolArgumentError, inspect_function
from ._lowlevel import paginate
from ._registry import F, Registry, opt
from ._schema import description_of

__all__ = ["ResourceRegistry"]


class ResourceRegistry(Registry):
    """Resources and templates: ``resource``, ``resource_updated``."""

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: Sequence[Icon] | None = None,
        complete: dict[str, CompletionFn] | None = None,
        meta: dict[str, Any] | None = None,
        inline: bool = False,
        allow_path_traversal: bool = False,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a resource (fixed URI) or a resource template (``{param}`` in the URI).

        A template refuses, before its function runs, a URI whose variables
        (after percent-decoding, at every level) hold a ``..`` path segment, an
        absolute path or a NUL (:func:`traversal_problem`);
        ``allow_path_traversal=True`` lets such values through to a function
        that checks them itself. ``inline=True`` runs a sync function in the
        event loop's task instead of a worker thread. ``scopes``: the OAuth
        scopes reading (or subscribing to) it needs, as for tools."""

        def register(fn: F) -> F:
            # built with the first resource or template
            from ._more_entries import ResourceEntry, TemplateEntry
            from ._uri_template import UriTemplate

            spec = inspect_function(fn, context_type=Context, strict=False)
            described: dict[str, Any] = {  # what a resource and a template both say of themselves
                "name": name or fn.__name__,
                "title": opt(title),
                "description": opt(description or description_of(fn)),
                "mime_type": opt(mime_type),
                "icons": UNSET if not icons else list(icons),
                "meta": opt(meta),
            }
            if "{" in uri:
                matcher = UriTemplate(uri)
                missing = set(spec.parameter_names) - set(matcher.variables)
                if missing:
                    raise TypeError(
                        f"resource template {uri!r}: parameters {sorted(missing)} are not variables of the URI"
                    )
                template = ResourceTemplate(uri_template=uri, **described)
                self._templates[uri] = TemplateEntry(
                    template,
                    matcher,
                    spec,
                    mime_type,
                    dict(complete or {}),
                    inline,
                    allow_path_traversal,
                    scope_set(scopes),
                )
            else:
                resource = Resource(uri=uri, **described)
                self._resources[uri] = ResourceEntry(resource, spec, mime_type, inline, scope_set(scopes))
            if "resources/read" not in self.request_handlers:
                self.set_request_handler("resources/list", PaginatedRequestParams, self._list_resources)
                self.set_request_handler(
                    "resources/templates/list", PaginatedRequestParams, self._list_templates
                )
                self.set_request_handler("resources/read", ReadResourceRequestParams, self._read_resource)
                self.set_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
                self.set_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)
                self._enable_completions()
            self.broadcast_nowait("notifications/resources/list_changed")
            return fn

        return register

    async def _list_resources(self, ctx: Context, params: PaginatedRequestParams) -> ListResourcesResult:
        items = [e.resource for e in self._resources.values()]
        page, cursor = paginate(items, params.cursor, self.page_size)
        return ListResourcesResult(resources=page, next_cursor=cursor)

    async def _list_templates(
        self, ctx: Context, params: PaginatedRequestParams
    ) -> ListResourceTemplatesResult:
        items = [e.template for e in self._templates.values()]
        page, cursor = paginate(items, params.cursor, self.page_size)
        return ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)

    async def _read_resource(self, ctx: Context, params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = params.uri
        entry = self._resources.get(uri)
        if entry is not None:
            value = await self._invoke(entry.spec, {}, ctx, entry.inline)
            return ReadResourceResult(contents=to_resource_contents(uri, value, entry.mime_type))
        for tentry in self._templates.values():
            args = tentry.matcher.match(uri)
            if args is not None:
                if not tentry.allow_path_traversal:
                    _refuse_traversal(uri, tentry.template.uri_template, args)
                try:
                    value = await self._invoke(tentry.spec, args, ctx, tentry.inline)
                except ToolArgumentError as exc:
                    raise InvalidParams(
                        f"Invalid URI {uri!r} for template {tentry.template.uri_template!r}: {exc}"
                    )
                return ReadResourceResult(contents=to_resource_contents(uri, value, tentry.mime_type))
        raise ResourceNotFound(f"Resource not found: {uri}", data={"uri": uri})

    def _known_uri(self, uri: str) -> bool:
        return uri in self._resources or any(
            t.matcher.match(uri) is not None for t in self._templates.values()
        )

    async def _subscribe(self, ctx: Context, params: SubscribeRequestParams) -> dict[str, Any]:
        if not self._known_uri(params.uri):
            raise ResourceNotFound(f"Resource not found: {params.uri}", data={"uri": params.uri})
        ctx.session.subscriptions.add(params.uri)
        return {}

    async def _unsubscribe(self, ctx: Context, params: UnsubscribeRequestParams) -> dict[str, Any]:
        ctx.session.subscriptions.discard(params.uri)
        return {}

    def resource_updated(self, uri: str) -> None:
        """Notify subscribers that ``uri`` changed (callable from sync code)."""
        self.notify_resource_updated(uri)


def _refuse_traversal(uri: str, template: str, args: dict[str, str]) -> None:
    from ._traversal import traversal_problem  # imported by the first template read

    for name, value in args.items():
        problem = traversal_problem(value)
        if problem is not None:
            raise InvalidParams(
                f"Refused URI {uri!r} for template {template!r}: variable {name!r} {problem} "
                "(path traversal; a template that checks its values itself is registered "
                "with allow_path_traversal=True)",
                data={"uri": uri, "variable": name},
            )
