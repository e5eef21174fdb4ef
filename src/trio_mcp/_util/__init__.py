"""Small internal helpers shared across layers."""

from ._groups import collapse_groups, describe, single

__all__ = ["collapse_groups", "describe", "single"]
