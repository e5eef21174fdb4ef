"""Wire protocol: msgspec Structs, the JSON-RPC codec, method registry,
versions and typed errors. No I/O here."""

from ._client_types import *
from ._client_types import __all__ as _client_types_all
from ._common import *
from ._common import __all__ as _common_all
from ._compat import *
from ._compat import __all__ as _compat_all
from ._content import *
from ._content import __all__ as _content_all
from ._errors import *
from ._errors import __all__ as _errors_all
from ._extensions import *
from ._extensions import __all__ as _extensions_all
from ._jsonrpc import *
from ._jsonrpc import __all__ as _jsonrpc_all
from ._registry import *
from ._registry import __all__ as _registry_all
from ._server_types import *
from ._server_types import __all__ as _server_types_all
from ._stateless import *
from ._stateless import __all__ as _stateless_all
from ._tasks import *
from ._tasks import __all__ as _tasks_all
from ._versions import *
from ._versions import __all__ as _versions_all

__all__ = [*_errors_all, *_jsonrpc_all, *_versions_all]
__all__ += [*_common_all, *_content_all, *_server_types_all, *_client_types_all, *_stateless_all]
__all__ += [*_registry_all, *_compat_all, *_extensions_all, *_tasks_all]
