"""Wire protocol: msgspec Structs, the JSON-RPC codec, method registry,
versions and typed errors. No I/O here."""

from ._compat import *
from ._compat import __all__ as _compat_all
from ._errors import *
from ._errors import __all__ as _errors_all
from ._extensions import *
from ._extensions import __all__ as _extensions_all
from ._jsonrpc import *
from ._jsonrpc import __all__ as _jsonrpc_all
from ._registry import *
from ._registry import __all__ as _registry_all
from ._tasks import *
from ._tasks import __all__ as _tasks_all
from ._types import *
from ._types import __all__ as _types_all
from ._versions import *
from ._versions import __all__ as _versions_all

__all__ = [*_errors_all, *_jsonrpc_all, *_types_all, *_versions_all]
__all__ += [*_registry_all, *_compat_all, *_extensions_all, *_tasks_all]
