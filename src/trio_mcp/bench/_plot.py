"""``--plot FILE.png``: the report's three charts drawn with matplotlib (an
optional extra: ``pip install 'trio-mcp[plot]'``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._html import percentile_curve

__all__ = ["write_plot"]


def write_plot(report: Mapping[str, Any], path: str | Path) -> None:
    """Latency over time, throughput over time and latency by percentile, as
    one PNG. Raises ImportError when matplotlib is not installed."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    intervals = report["intervals"]
    if len(intervals) > 1 and intervals[-1]["width"] < report["settings"]["interval"] / 2:
        intervals = intervals[:-1]  # the run's short tail (see _html.charts)
    open_model = report["settings"]["model"] == "open"
    t = [i["seconds"] for i in intervals]
    fig, (lat, thr, dist) = plt.subplots(3, 1, figsize=(9, 10), constrained_layout=True)
    for key in ("p50", "p99", "max"):
        lat.plot(t, [i["latency_us"][key] / 1000 for i in intervals], label=key)
    if open_model:
        lat.plot(t, [i["uncorrected_us"]["p99"] / 1000 for i in intervals], "--", label="p99 uncorrected")
    lat.set(title="Latency over time", xlabel="seconds", ylabel="ms")
    thr.plot(t, [i["calls_per_s"] for i in intervals], label="calls/s")
    thr.set(title="Throughput over time", xlabel="seconds", ylabel="calls/s")
    hist = report["total"]["histograms"]
    for name, style in (("corrected", "-"), ("uncorrected", "--")):
        if name == "uncorrected" and not open_model:
            continue
        curve = percentile_curve(hist[name])
        dist.plot([x for x, _ in curve], [y / 1000 for _, y in curve], style, label=name)
    dist.set_xticks(range(6), ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
    dist.set(title="Latency by percentile", xlabel="percentile", ylabel="ms")
    for ax in (lat, thr, dist):
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
        ax.set_ylim(bottom=0)
    fig.suptitle(f"trio-mcp bench — {report['target']}")
    fig.savefig(str(path), dpi=80)
    plt.close(fig)
