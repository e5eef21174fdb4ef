"""Wire protocol: msgspec Structs, the JSON-RPC codec, method registry,
versions and typed errors. No I/O here."""

from ._compat import *  # noqa: F403
from ._compat import __all__ as _compat_all
from ._errors import *  # noqa: F403
from ._errors import __all__ as _errors_all
from ._jsonrpc import *  # noqa: F403
from ._jsonrpc import __all__ as _jsonrpc_all
from ._registry import *  # noqa: F403
from ._registry import __all__ as _registry_all
from ._types import *  # noqa: F403
from ._types import __all__ as _types_all
from ._versions import *  # noqa: F403
from ._versions import __all__ as _versions_all

__all__ = [*_errors_all, *_jsonrpc_all, *_types_all, *_versions_all]
__all__ += [*_registry_all, *_compat_all]
