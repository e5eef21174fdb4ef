"""Pass/fail criteria of a run: ``p99<50ms``, ``error_rate<0.1%``,
``calls_per_s>1000``, for the whole run or one operation (``NAME:p99<50ms``).

Latency metrics (``p50`` … ``p99.99``, ``max``, ``mean``) read the corrected
latency (from each call's intended start); ``error_rate`` counts isError
results and failed calls, ``failed_rate`` failed calls only.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = ["Threshold", "ThresholdError", "evaluate", "ms", "parse_threshold"]

_LATENCY = re.compile(r"p\d+(?:\.\d+)?|max|mean|min")
_RATES = ("error_rate", "failed_rate")
_COUNTS = ("calls_per_s", "calls")
_TIME_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class ThresholdError(ValueError):
    """A threshold that cannot be read; the message says why."""


@attrs.frozen
class Threshold:
    """One pass/fail criterion, parsed."""

    text: str
    #: The operation it applies to (None: the whole run).
    operation: str | None
    metric: str
    compare: str
    #: In microseconds (latency), as a fraction (rates) or as is.
    value: float


def parse_threshold(text: str) -> Threshold:
    """``[OPERATION:]METRIC<op>VALUE[unit]``; :class:`ThresholdError` when unreadable."""
    m = re.fullmatch(
        r"\s*(?:(?P<op>.+):)?(?P<metric>[a-z_0-9.]+)\s*(?P<cmp><=|>=|<|>)\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-zµ%]*)\s*",
        text,
    )
    if m is None:
        raise ThresholdError(f"not a threshold: {text!r} (e.g. 'p99<50ms', 'error_rate<0.1%')")
    metric, unit, number = m["metric"], m["unit"], float(m["num"])
    if _LATENCY.fullmatch(metric):
        if metric.startswith("p") and not 0 < float(metric[1:]) <= 100:
            raise ThresholdError(f"{text!r}: a percentile is between 0 and 100")
        if unit not in _TIME_UNITS:
            raise ThresholdError(f"{text!r}: a latency needs a unit: us, ms or s")
        value = number * _TIME_UNITS[unit]
    elif metric in _RATES:
        if unit not in ("%", ""):
            raise ThresholdError(f"{text!r}: a rate is a fraction or a percentage")
        value = number / 100 if unit == "%" else number
    elif metric in _COUNTS:
        if unit not in ("", "/s"):
            raise ThresholdError(f"{text!r}: {metric} takes a plain number")
        value = number
    else:
        known = "p50, p90, p99, p99.9, max, mean, error_rate, failed_rate, calls_per_s, calls"
        raise ThresholdError(f"{text!r}: unknown metric {metric!r} (known: {known})")
    return Threshold(text.strip(), m["op"], metric, m["cmp"], value)


def ms(us: float) -> str:
    """A latency in µs, readably."""
    if us >= 1_000_000:
        return f"{us / 1_000_000:.2f} s"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} µs"


def shown(threshold: Threshold, actual: float) -> str:
    """A figure as the threshold's reader wants it (latency, rate or count)."""
    if _LATENCY.fullmatch(threshold.metric):
        return ms(actual)
    if threshold.metric in _RATES:
        return f"{actual * 100:.3g}%"
    return f"{actual:,.1f}"


def actual_value(threshold: Threshold, figures: Mapping[str, Any]) -> float:
    """The figure a threshold reads, from :func:`trio_mcp.bench._report.figures` output."""
    metric = threshold.metric
    if _LATENCY.fullmatch(metric):
        latency = figures["latency_us"]
        if metric in latency:
            return float(latency[metric])
        return float(figures["percentile"](float(metric[1:])))
    return float(figures[metric])


def evaluate(
    thresholds: list[Threshold], total: Mapping[str, Any], per_op: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each threshold's verdict: text, actual figure, passed."""
    out: list[dict[str, Any]] = []
    for t in thresholds:
        figures = total if t.operation is None else per_op.get(t.operation)
        if figures is None:
            out.append({"threshold": t.text, "actual": None, "passed": False, "why": "no such operation"})
            continue
        if not figures["calls"] and t.metric not in _COUNTS:
            out.append({"threshold": t.text, "actual": None, "passed": False, "why": "no calls measured"})
            continue
        actual = actual_value(t, figures)
        out.append(
            {
                "threshold": t.text,
                "actual": actual,
                "shown": shown(t, actual),
                "passed": _COMPARE[t.compare](actual, t.value),
            }
        )
    return out
