"""Protocol versions and eras."""

from __future__ import annotations

from typing import Final

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "LATEST_VERSION",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "V2024_11_05",
    "V2025_03_26",
    "V2025_06_18",
    "V2025_11_25",
    "V2026_07_28",
    "at_least",
    "is_modern",
]

V2024_11_05: Final = "2024-11-05"
V2025_03_26: Final = "2025-03-26"
V2025_06_18: Final = "2025-06-18"
V2025_11_25: Final = "2025-11-25"
V2026_07_28: Final = "2026-07-28"

#: Versions negotiated with the ``initialize`` handshake, oldest first.
HANDSHAKE_VERSIONS: Final = (V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25)
#: Stateless versions (every request carries its version in ``_meta``).
MODERN_VERSIONS: Final = (V2026_07_28,)
SUPPORTED_VERSIONS: Final = HANDSHAKE_VERSIONS + MODERN_VERSIONS
LATEST_HANDSHAKE_VERSION: Final = HANDSHAKE_VERSIONS[-1]
LATEST_VERSION: Final = SUPPORTED_VERSIONS[-1]


def is_modern(version: str) -> bool:
    """True for the stateless era (2026-07-28 and later)."""
    return version >= V2026_07_28


def at_least(version: str, minimum: str) -> bool:
    """Version strings are ISO dates, so they order lexically."""
    return version >= minimum
