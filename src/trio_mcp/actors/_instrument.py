"""Instrumentation: observers a session attaches when it is made.

An :class:`Instrumentation` is given each new session (a
:class:`~trio_mcp.ClientSession` or :class:`~trio_mcp.ServerSession`) once,
before it runs, and may wrap its message path: the peer's dispatcher (what the
other side asks of us) and its ``request`` / ``notify`` (what we send). It
decides there, once, whether to do anything: a session no instrumentation
wrapped runs exactly the code it runs without any.

Which instrumentation a session attaches: the one it is given
(``ClientSession(..., instrumentation=[...])``, ``MCPServer(...,
instrumentation=[...])``; ``()`` for none), else the process defaults
(:func:`install_instrumentation`). The defaults include the package's
OpenTelemetry tracing (:mod:`trio_mcp.observability`), which sits above the
actors: it is named here, in :data:`DEFAULT_MODULES`, not imported, and loads
(and installs itself) when the first session is made.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Final, Protocol

__all__ = [
    "DEFAULT_MODULES",
    "Instrumentation",
    "install_instrumentation",
    "installed_instrumentation",
    "uninstall_instrumentation",
]


class Instrumentation(Protocol):
    """Something that observes sessions (tracing, metrics)."""

    def attach(self, session: Any) -> None:
        """Called once per session as it is made, before it runs."""


#: Modules imported when the first session is made; each installs its
#: default instrumentation (with :func:`install_instrumentation`) on import.
DEFAULT_MODULES: Final = ("trio_mcp.observability._tracing",)

_installed: list[Instrumentation] = []
_loaded = False


def install_instrumentation(instrumentation: Instrumentation) -> None:
    """Attach ``instrumentation`` to every session made from now on that was
    not given its own (idempotent)."""
    if instrumentation not in _installed:
        _installed.append(instrumentation)


def uninstall_instrumentation(instrumentation: Instrumentation) -> None:
    """Undo :func:`install_instrumentation` (sessions already made keep theirs)."""
    if instrumentation in _installed:
        _installed.remove(instrumentation)


def installed_instrumentation() -> tuple[Instrumentation, ...]:
    """The process defaults, loading :data:`DEFAULT_MODULES` on first use."""
    global _loaded
    if not _loaded:
        _loaded = True
        for name in DEFAULT_MODULES:
            importlib.import_module(name)
    return tuple(_installed)


def instrument(session: Any, chosen: Sequence[Instrumentation] | None) -> None:
    """Attach ``chosen`` (or, when None, the process defaults) to ``session``."""
    for instrumentation in installed_instrumentation() if chosen is None else chosen:
        instrumentation.attach(session)
