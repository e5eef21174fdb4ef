"""What a run measured, as figures (the JSON report), as text (the end
summary: per-operation table, percentile spectrum, latency histogram), and
two runs compared."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

from ._stats import Aggregate, _OpTotals, moments, percentiles
from ._thresholds import evaluate, ms, parse_threshold

__all__ = ["build_report", "compare_reports", "format_compare", "format_summary"]

#: Percentiles of the spectrum (text and JSON).
SPECTRUM = (0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0)
#: Rows of the terminal latency histogram.
HISTOGRAM_ROWS = 12
_BAR = 40


def _latency(h: HdrHistogram) -> dict[str, float]:
    if not h.get_total_count():
        return {}
    mean, stdev = moments(h)
    out: dict[str, float] = {"min": h.get_min_value(), "mean": round(mean, 1), "stdev": round(stdev, 1)}
    for p, value in percentiles(h, (50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99)).items():
        out[_pname(p)] = value
    out["max"] = h.get_max_value()
    return out


def _pname(p: float) -> str:
    return f"p{p:g}"


def figures(totals: _OpTotals, seconds: float) -> dict[str, Any]:
    """One operation's (or the run's) figures."""
    calls = totals.calls
    failed = sum(totals.failed.values())
    return {
        "calls": calls,
        "ok": totals.ok,
        "is_error": totals.is_error,
        "failed": dict(sorted(totals.failed.items())),
        "calls_per_s": round(calls / seconds, 1) if seconds > 0 else 0.0,
        "error_rate": (totals.is_error + failed) / calls if calls else 0.0,
        "failed_rate": failed / calls if calls else 0.0,
        "latency_us": _latency(totals.corrected),
        "uncorrected_us": _latency(totals.uncorrected),
        "spectrum_us": [[p, v] for p, v in percentiles(totals.corrected, SPECTRUM).items()],
        "histograms": {
            "corrected": totals.corrected.encode().decode("ascii") if calls else "",
            "uncorrected": totals.uncorrected.encode().decode("ascii") if calls else "",
        },
        # not in the JSON: a threshold on an arbitrary percentile reads it
        "percentile": lambda p: percentiles(totals.corrected, (p,))[p],
    }


def build_report(
    agg: Aggregate,
    *,
    target: str,
    settings: Mapping[str, Any],
    seconds: float,
    setup: Mapping[str, Any],
    events: list[dict[str, Any]],
    stopped: str | None,
    thresholds: list[str],
    op_thresholds: Mapping[str, tuple[str, ...]],
) -> dict[str, Any]:
    """The whole report (``--json`` prints it, less the ``percentile`` callables)."""
    total = figures(agg.total(), seconds)
    per_op = {name: figures(t, seconds) for name, t in agg.ops.items()}
    parsed = [parse_threshold(t) for t in thresholds]
    for name, texts in op_thresholds.items():
        for text in texts:
            t = parse_threshold(text)
            parsed.append(t if t.operation else parse_threshold(f"{name}:{text}"))
    verdicts = evaluate(parsed, total, per_op)
    report: dict[str, Any] = {
        "target": target,
        "settings": dict(settings),
        "seconds": round(seconds, 3),
        "protocol": setup.get("protocol"),
        "era": setup.get("era"),
        "server": setup.get("server"),
        "sessions": setup.get("sessions"),
        **{k: total[k] for k in ("calls", "ok", "is_error", "failed", "calls_per_s")},
        "total": total,
        "operations": per_op,
        "intervals": agg.intervals,
        "warmup_calls": agg.warmup_calls,
        "per_worker": [{"worker": w, "calls": n} for w, n in sorted(agg.per_worker.items())],
        "events": events,
        "stopped": stopped,
        "thresholds": verdicts,
        "passed": all(v["passed"] for v in verdicts),
    }
    return report


def for_json(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report without its in-process helpers."""

    def clean(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items() if not callable(v)}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    out: dict[str, Any] = clean(report)
    return out


# ------------------------------------------------------------------ text


def _spectrum(f: Mapping[str, Any]) -> list[str]:
    lines = ["  percentile spectrum (corrected latency):"]
    for p, v in f["spectrum_us"]:
        label = "min" if p == 0 else "max" if p == 100 else f"p{p:g}"
        lines.append(f"    {label:>7}  {ms(v):>10}")
    return lines


def terminal_histogram(encoded: str, rows: int = HISTOGRAM_ROWS) -> list[str]:
    """An oha-style latency histogram: linear buckets from min to max."""
    if not encoded:
        return []
    h = HdrHistogram.decode(encoded.encode("ascii"))
    lo, hi = h.get_min_value(), h.get_max_value()
    step = max((hi - lo) / rows, 1e-9)
    counts = [0] * rows
    for item in h.get_recorded_iterator():
        i = min(int((item.value_iterated_to - lo) / step), rows - 1)
        counts[i] += item.count_at_value_iterated_to
    top = max(counts) or 1
    width = max(len(f"{c:,}") for c in counts)
    lines = ["  latency histogram:"]
    for i, c in enumerate(counts):
        bar = "■" * math.ceil(_BAR * c / top) if c else ""
        lines.append(f"    {ms(lo + (i + 1) * step):>10} [{c:>{width},}] |{bar}")
    return lines


def format_summary(report: Mapping[str, Any]) -> str:
    """The end-of-run text: figures, spectrum, histogram, events, thresholds."""
    s = report["settings"]
    total = report["total"]
    model = f"{s['rate']:g} calls/s (open model)" if s["model"] == "open" else f"{s['callers']:g} callers"
    if s.get("stages"):
        model += ", stages " + " ".join(s["stages"])
    head = (
        f"{report['target']}: {model}, {s['sessions']} session(s), {s['workers']} worker(s), "
        f"{report['seconds']:.2f} s measured, protocol {report['protocol']}"
    )
    lines = [head]
    sessions = report.get("sessions") or {}
    if sessions.get("opened"):
        lines.append(
            f"  sessions {sessions['opened']} opened in {ms(sessions['mean_us'])} mean, "
            f"{ms(sessions['max_us'])} max"
            + (f"; {len(sessions['failures'])} failed" if sessions["failures"] else "")
        )
    failed = sum(report["failed"].values())
    kinds = ", ".join(f"{k}: {n:,}" for k, n in report["failed"].items())
    lines.append(
        f"  calls    {report['calls']:,} ({report['calls_per_s']:,.1f}/s): {report['ok']:,} ok, "
        f"{report['is_error']:,} isError, {failed:,} failed" + (f" ({kinds})" if kinds else "")
    )
    lat, unc = total["latency_us"], total["uncorrected_us"]
    if lat:
        lines.append(
            f"  latency  mean {ms(lat['mean'])}, p50 {ms(lat['p50'])}, p90 {ms(lat['p90'])}, "
            f"p99 {ms(lat['p99'])}, p99.9 {ms(lat['p99.9'])}, max {ms(lat['max'])}"
        )
        if s["model"] == "open":
            lines.append(
                f"  uncorrected (from send) p50 {ms(unc['p50'])}, p99 {ms(unc['p99'])}, max {ms(unc['max'])}"
            )
    if len(report["operations"]) > 1:
        lines.append("  per operation:")
        for name, f in report["operations"].items():
            fl = f["latency_us"]
            nfail = sum(f["failed"].values())
            lines.append(
                f"    {name:<24} {f['calls']:>9,} calls {f['calls_per_s']:>9,.1f}/s  "
                f"{f['is_error']:,} isError {nfail:,} failed  "
                + (f"p50 {ms(fl['p50'])} p99 {ms(fl['p99'])}" if fl else "")
            )
    if lat:
        lines += _spectrum(total)
        lines += terminal_histogram(total["histograms"]["corrected"])
    for event in report["events"]:
        lines.append(f"  {event['text']}")
    if report["stopped"]:
        lines.append(f"  stopped early: {report['stopped']}")
    for v in report["thresholds"]:
        mark = "✓" if v["passed"] else "✗"
        why = v.get("why") or f"actual {v['shown']}"
        lines.append(f"  threshold {mark} {v['threshold']}  ({why})")
    return "\n".join(lines)


# -------------------------------------------------------------- compare

_COMPARED = (
    ("calls/s", ("calls_per_s",)),
    ("error rate", ("error_rate",)),
    ("p50", ("latency_us", "p50")),
    ("p90", ("latency_us", "p90")),
    ("p99", ("latency_us", "p99")),
    ("p99.9", ("latency_us", "p99.9")),
    ("max", ("latency_us", "max")),
)


def _get(f: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = f
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return float(value)


def compare_reports(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per figure (whole run, then each operation both runs have): A, B, B/A."""
    rows = []
    scopes = [("all", a["total"], b["total"])]
    scopes += [(n, a["operations"][n], b["operations"][n]) for n in a["operations"] if n in b["operations"]]
    for scope, fa, fb in scopes:
        for label, path in _COMPARED:
            va, vb = _get(fa, path), _get(fb, path)
            if va is None or vb is None:
                continue
            ratio = vb / va if va else None
            rows.append({"scope": scope, "figure": label, "a": va, "b": vb, "ratio": ratio})
    return rows


def format_compare(rows: list[dict[str, Any]], a_name: str, b_name: str) -> str:
    """The rows of :func:`compare_reports` as a table."""
    lines = [f"{'':<24} {'figure':<11} {'A':>12} {'B':>12} {'B/A':>8}", f"A = {a_name}", f"B = {b_name}"]
    lines = lines[1:] + lines[:1]
    for r in rows:
        latency = r["figure"] not in ("calls/s", "error rate")

        def show(v: float, latency: bool = latency, figure: str = r["figure"]) -> str:
            if latency:
                return ms(v)
            return f"{v * 100:.3f}%" if figure == "error rate" else f"{v:,.1f}"

        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "—"
        lines.append(f"{r['scope']:<24} {r['figure']:<11} {show(r['a']):>12} {show(r['b']):>12} {ratio:>8}")
    return "\n".join(lines)
