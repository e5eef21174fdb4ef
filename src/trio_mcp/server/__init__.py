"""Server authoring: :class:`MCPServer` (decorators) and :class:`LowLevelServer`."""

from ..actors._middleware import ServerMiddleware
from ..actors._modern import RequestStateKeys
from ..actors._server import Context, ServerSession
from ._app import MCPServer
from ._content import Audio, Image
from ._lowlevel import LowLevelServer, paginate

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
