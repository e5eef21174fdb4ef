"""Server authoring: :class:`MCPServer` (decorators) and :class:`LowLevelServer`."""

from typing import TYPE_CHECKING, Any

from ..actors._middleware import ServerMiddleware
from ..actors._modern import RequestStateKeys
from ..actors._server import Context, ServerSession
from ._app import MCPServer
from ._lowlevel import LowLevelServer, paginate

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from ._media import Audio as Audio
    from ._media import Image as Image


def __getattr__(name: str) -> Any:
    """``Image`` and ``Audio``, imported on first use: a server that never
    sends media does not build them."""
    if name in ("Image", "Audio"):
        from . import _media

        value = getattr(_media, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Audio",
    "Context",
    "Image",
    "LowLevelServer",
    "MCPServer",
    "ServerMiddleware",
    "ServerSession",
    "RequestStateKeys",
    "paginate",
]
