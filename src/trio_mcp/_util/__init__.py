"""Small internal helpers shared across layers."""

from ._groups import collapse_groups, describe, single
from ._ratelog import DEFAULT_WARNING_INTERVAL, RepeatedWarnings
from ._settings import check_positive, numeric_fields

__all__ = [
    "DEFAULT_WARNING_INTERVAL",
    "RepeatedWarnings",
    "check_positive",
    "collapse_groups",
    "describe",
    "numeric_fields",
    "single",
]
