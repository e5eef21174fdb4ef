"""Checks shared by the settings classes (attrs, frozen)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs


def numeric_fields(settings: Any) -> list[str]:
    """The names of the fields of ``settings`` that hold numbers (not flags)."""
    return [
        f.name
        for f in attrs.fields(type(settings))
        if type(value := getattr(settings, f.name)) is not bool and isinstance(value, (int, float))
    ]


def check_positive(settings: Any, names: Iterable[str], *, nonnegative: Iterable[str] = ()) -> None:
    """A ValueError naming ``Class.field`` unless every field in ``names`` is
    greater than zero and every one in ``nonnegative`` at least zero."""
    cls = type(settings).__name__
    for name in names:
        if getattr(settings, name) <= 0:
            raise ValueError(f"{cls}.{name} must be positive")
    for name in nonnegative:
        if getattr(settings, name) < 0:
            raise ValueError(f"{cls}.{name} must not be negative")
