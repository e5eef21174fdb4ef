"""``--html REPORT.html``: one self-contained file (inline CSS and SVG, no
script, nothing fetched at view time) with the run's figures and three
charts: latency over time, throughput over time, percentile distribution."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

from ._stats import percentiles
from ._thresholds import ms

__all__ = ["percentile_curve", "render_html", "write_html"]

_W, _H = 860, 300
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 78, 150, 34, 42
_COLORS = ("#2563eb", "#dc2626", "#7c3aed", "#059669", "#d97706", "#6b7280")
Series = tuple[str, Sequence[tuple[float, float]], bool]  # name, points, dashed


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * magnitude:
            return step * magnitude
    return 10.0 * magnitude


def svg_chart(
    chart_id: str,
    title: str,
    series: Sequence[Series],
    *,
    x_label: str,
    y_format: Callable[[float], str],
    x_ticks: Sequence[tuple[float, str]] | None = None,
) -> str:
    """A line chart as an SVG element (axes, grid, one polyline per series)."""
    xs = [x for _, pts, _ in series for x, _ in pts]
    ys = [y for _, pts, _ in series for _, y in pts]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1
    y1 = _nice_max(max(ys) if ys else 1.0)
    pw, ph = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def sx(x: float) -> float:
        return _PAD_L + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return _PAD_T + ph - (y / y1) * ph

    out = [
        (
            f'<svg id="{chart_id}" class="chart" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" '
            f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{html.escape(title)}">'
        ),
        f'<text x="{_PAD_L}" y="20" class="title">{html.escape(title)}</text>',
    ]
    for i in range(5):
        y = y1 * i / 4
        out.append(f'<line x1="{_PAD_L}" x2="{_PAD_L + pw}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="grid"/>')
        out.append(
            f'<text x="{_PAD_L - 6}" y="{sy(y) + 4:.1f}" class="tick" text-anchor="end">{y_format(y)}</text>'
        )
    ticks = x_ticks if x_ticks is not None else _time_ticks(x0, x1)
    for x, label in ticks:
        if x0 <= x <= x1:
            out.append(
                f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{_PAD_T}" y2="{_PAD_T + ph}" class="grid"/>'
            )
            out.append(
                f'<text x="{sx(x):.1f}" y="{_PAD_T + ph + 16}" class="tick" text-anchor="middle">{html.escape(label)}</text>'
            )
    out.append(
        f'<text x="{_PAD_L + pw / 2}" y="{_H - 6}" class="axis" text-anchor="middle">{html.escape(x_label)}</text>'
    )
    out.append(f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{pw}" height="{ph}" class="frame"/>')
    for i, (name, pts, dashed) in enumerate(series):
        color = _COLORS[i % len(_COLORS)]
        points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(
            f'<polyline class="series" data-series="{html.escape(name)}" points="{points}" '
            f'fill="none" stroke="{color}" stroke-width="2"{dash}/>'
        )
        ly = _PAD_T + 14 + i * 18
        out.append(
            f'<line x1="{_W - _PAD_R + 12}" x2="{_W - _PAD_R + 34}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="3"{dash}/>'
        )
        out.append(f'<text x="{_W - _PAD_R + 40}" y="{ly}" class="legend">{html.escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _time_ticks(x0: float, x1: float) -> list[tuple[float, str]]:
    """About six round ticks between ``x0`` and ``x1``."""
    step = _nice_max((x1 - x0) / 6)
    first = math.ceil(x0 / step) * step
    count = int((x1 - first) / step + 1e-9) + 1
    return [(first + i * step, f"{first + i * step:g}") for i in range(count)]


#: Percentile positions of the distribution chart: x = log10(1 / (1 - p)).
_NINES = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)


def percentile_curve(encoded: str, steps_per_nine: int = 20) -> list[tuple[float, float]]:
    """(log10(1/(1-p)), latency µs) points of a histogram, to 99.999%."""
    if not encoded:
        return []
    h = HdrHistogram.decode(encoded.encode("ascii"))
    xs = [i / steps_per_nine for i in range(int(_NINES[-1] * steps_per_nine) + 1)]
    values = percentiles(h, [100.0 * (1 - 10**-x) for x in xs])
    return [(x, float(v)) for x, v in zip(xs, values.values(), strict=True)]


def _latency_axis(us: float) -> str:
    return ms(us).replace(" ", "\u202f")


def charts(report: Mapping[str, Any]) -> list[str]:
    intervals = report["intervals"]
    # a last interval shorter than half of one (the run's tail) would show a
    # misleading rate: the charts leave it out (the figures keep it)
    if len(intervals) > 1 and intervals[-1]["width"] < report["settings"]["interval"] / 2:
        intervals = intervals[:-1]
    open_model = report["settings"]["model"] == "open"
    t = [i["seconds"] for i in intervals]

    def line(path: Callable[[Mapping[str, Any]], float]) -> list[tuple[float, float]]:
        return [(x, float(path(i))) for x, i in zip(t, intervals, strict=True)]

    lat: list[Series] = [
        ("p50", line(lambda i: i["latency_us"]["p50"]), False),
        ("p99", line(lambda i: i["latency_us"]["p99"]), False),
        ("max", line(lambda i: i["latency_us"]["max"]), False),
    ]
    if open_model:
        lat.append(("p99 uncorrected", line(lambda i: i["uncorrected_us"]["p99"]), True))
    thr: list[Series] = [
        ("calls/s", line(lambda i: i["calls_per_s"]), False),
        (
            "errors/s",
            line(lambda i: i["calls_per_s"] * (i["calls"] - i["ok"]) / i["calls"] if i["calls"] else 0),
            False,
        ),
    ]
    total = report["total"]["histograms"]
    dist: list[Series] = [("corrected", percentile_curve(total["corrected"]), False)]
    if open_model:
        dist.append(("uncorrected", percentile_curve(total["uncorrected"]), True))
    nines = [
        (x, label)
        for x, label in zip(_NINES, ("0%", "90%", "99%", "99.9%", "99.99%", "99.999%"), strict=True)
    ]
    return [
        svg_chart("chart-latency", "Latency over time", lat, x_label="seconds", y_format=_latency_axis),
        svg_chart(
            "chart-throughput", "Throughput over time", thr, x_label="seconds", y_format=lambda v: f"{v:,.0f}"
        ),
        svg_chart(
            "chart-percentiles",
            "Latency by percentile",
            dist,
            x_label="percentile",
            y_format=_latency_axis,
            x_ticks=nines,
        ),
    ]


_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; padding: 0 16px; max-width: 900px; color: #111827; }
h1 { font-size: 20px; margin-bottom: 4px; } .sub { color: #4b5563; margin-top: 0; }
table { border-collapse: collapse; margin: 12px 0; } td, th { padding: 3px 10px; text-align: right; }
th { background: #f3f4f6; } td:first-child, th:first-child { text-align: left; }
.chart { display: block; margin: 18px 0; background: #fff; border: 1px solid #e5e7eb; }
.chart .title { font-weight: 600; font-size: 14px; } .chart .tick { font-size: 11px; fill: #4b5563; }
.chart .axis, .chart .legend { font-size: 12px; fill: #374151; }
.chart .grid { stroke: #e5e7eb; } .chart .frame { fill: none; stroke: #9ca3af; }
.fail { color: #b91c1c; } .pass { color: #047857; }
"""


def _row(cells: Sequence[str], tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>"


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page with its charts."""
    s = report["settings"]
    model = f"{s['rate']:g} calls/s (open)" if s["model"] == "open" else f"{s['callers']:g} callers (closed)"
    if s.get("stages"):
        model += ", stages " + " ".join(s["stages"])
    head = ["operation", "calls", "calls/s", "ok", "isError", "failed", "p50", "p90", "p99", "p99.9", "max"]
    rows = [_row(head, "th")]
    for name, f in [("all", report["total"]), *report["operations"].items()]:
        lat = f["latency_us"] or {}
        rows.append(
            _row(
                [
                    name,
                    f"{f['calls']:,}",
                    f"{f['calls_per_s']:,.1f}",
                    f"{f['ok']:,}",
                    f"{f['is_error']:,}",
                    f"{sum(f['failed'].values()):,}",
                ]
                + [ms(lat[k]) if k in lat else "—" for k in ("p50", "p90", "p99", "p99.9", "max")]
            )
        )
    notes = [f"<li>{html.escape(e['text'])}</li>" for e in report["events"]]
    if report["stopped"]:
        notes.append(f"<li>stopped early: {html.escape(report['stopped'])}</li>")
    for v in report["thresholds"]:
        cls = "pass" if v["passed"] else "fail"
        notes.append(
            f'<li class="{cls}">threshold {"passed" if v["passed"] else "FAILED"}: {html.escape(v["threshold"])}</li>'
        )
    body = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>trio-mcp bench: {html.escape(report['target'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>trio-mcp bench — {html.escape(report['target'])}</h1>",
        (
            f'<p class="sub">{html.escape(model)}, {s["sessions"]} session(s), {s["workers"]} worker(s), '
            f"{report['seconds']:.2f} s measured, protocol {html.escape(str(report['protocol']))}</p>"
        ),
        "<table>" + "".join(rows) + "</table>",
        "<ul>" + "".join(notes) + "</ul>" if notes else "",
        *charts(report),
        "</body></html>",
    ]
    return "\n".join(body)


def write_html(report: Mapping[str, Any], path: str | Path) -> None:
    """Write :func:`render_html` to ``path``."""
    Path(path).write_text(render_html(report), encoding="utf-8")
