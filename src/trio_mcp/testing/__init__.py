"""A public test kit: in-memory client/server pairs and fault injection."""

from ._faults import InMemoryServer, ServerInstance
from ._pairs import connected

__all__ = ["InMemoryServer", "ServerInstance", "connected"]
