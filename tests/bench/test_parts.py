"""The bench's parts on their own: plans, scenarios, thresholds, the lossless
merge of histograms, and the text of reports."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from trio_mcp.bench import (
    LoadPlan,
    PlanError,
    ScenarioError,
    Stage,
    ThresholdError,
    compare_reports,
    load_scenario,
    parse_duration,
    parse_rate,
    parse_stage,
    parse_threshold,
)
from trio_mcp.bench._report import terminal_histogram
from trio_mcp.bench._stats import (
    Aggregate,
    OpRecorder,
    Tick,
    histogram_of,
    moments,
    new_histogram,
    percentiles,
)
from trio_mcp.bench._thresholds import evaluate

# ------------------------------------------------------------------ plans


def test_durations_rates_and_stages_are_read() -> None:
    assert [parse_duration(t) for t in ("500ms", "30s", "2m", "1h", "1.5")] == [0.5, 30, 120, 3600, 1.5]
    assert [parse_rate(t) for t in ("100/s", "100", "6000/m")] == [100, 100, 100]
    assert parse_stage("30s:100/s") == Stage(30, 100, "open")
    assert parse_stage("1m:50") == Stage(60, 50, "closed")
    for bad in ("30", "x:1", "30s:1.5", "30s:fast/s"):
        with pytest.raises(PlanError):
            parse_stage(bad)


def test_a_plan_ramps_linearly_and_is_shared_among_workers() -> None:
    plan = LoadPlan(model="open", level=0, stages=(Stage(10, 100, "open"), Stage(10, 50, "open")))
    assert [plan.level_at(t) for t in (-1, 0, 5, 10, 15, 20, 99)] == [0, 0, 50, 100, 75, 50, 50]
    assert plan.measured_seconds == 20
    halves = [plan.share(i, 2) for i in range(2)]
    assert [h.stages[0].target for h in halves] == [50, 50] and halves[0].seed != halves[1].seed
    closed = LoadPlan(level=5, calls=11, sessions=3)
    parts = [closed.share(i, 2) for i in range(2)]
    assert [(p.level, p.calls, p.sessions) for p in parts] == [(3, 6, 2), (2, 5, 1)]


def test_bad_plans_are_refused() -> None:
    with pytest.raises(PlanError, match="concurrency"):
        LoadPlan(level=0)
    with pytest.raises(PlanError, match="duration or a number of calls"):
        LoadPlan(duration=float("inf"))
    with pytest.raises(PlanError, match="mix"):
        LoadPlan(model="open", stages=(Stage(1, 2, "closed"),))
    with pytest.raises(PlanError, match="sessions"):
        LoadPlan(sessions=0)


# -------------------------------------------------------------- scenarios


def test_toml_and_yaml_scenarios_with_every_argument_source(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text('{"user": "ann", "n": 1}\n\n{"user": "bob", "n": 2}\n')
    (tmp_path / "a.toml").write_text(
        'data = "rows.jsonl"\n[[operations]]\nname = "say"\ntool = "echo"\nweight = 2\n'
        'arguments = { text = { column = "user" }, k = { seq = [1, 2, 3] }, c = { choice = ["x"] }, f = 7 }\n'
        "[[operations]]\nping = true\n"
    )
    (tmp_path / "b.yaml").write_text(
        "data: rows.jsonl\noperations:\n  - name: say\n    tool: echo\n    weight: 2\n"
        "    arguments: {text: {column: user}, k: {seq: [1, 2, 3]}, c: {choice: [x]}, f: 7}\n"
        "  - ping: true\n"
    )
    for name in ("a.toml", "b.yaml"):
        scenario = load_scenario(tmp_path / name)
        mix = scenario.mix(seed=1)
        drawn = [next(mix) for _ in range(6)]
        assert [op.name for op, _ in drawn] == ["say", "ping", "say", "say", "ping", "say"]
        says = [args for op, args in drawn if op.name == "say"]
        assert [a["k"] for a in says] == [1, 2, 3, 1]
        assert {a["c"] for a in says} == {"x"} and {a["f"] for a in says} == {7}
        assert [a["text"] for a in says] == ["ann", "ann", "bob", "bob"]  # rows advance per call


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[operations]]\ntool = 'a'\nresource = 'b'\n", "exactly one of"),
        ("[[operations]]\ntool = 'a'\nwieght = 2\n", "wieght"),
        ("[[operations]]\ntool = 'a'\narguments = { x = { column = 'c' } }\n", "no data file"),
        ("[[operations]]\nlist = 'things'\n", "list is one of"),
        ("[[operations]]\ntool = 'a'\nweight = 0\n", "weight must be positive"),
        ("[[operations]]\ntool = 'a'\nthresholds = ['p99 < soon']\n", "not a threshold"),
        ("[[operations]]\ntool = 'a'\narguments = { x = { seq = [] } }\n", "non-empty list"),
        ("operations = []\n", "no operations"),
        ("[[operations]]\ntool = 'a'\n[[operations]]\ntool = 'a'\n", "share a name"),
        ("[[operations\n", "s.toml"),
    ],
)
def test_bad_scenarios_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises((ScenarioError, ThresholdError), match=message):
        load_scenario(path)


def test_a_data_column_must_exist(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("city\nOslo\n")
    (tmp_path / "s.toml").write_text(
        "data = 'd.csv'\n[[operations]]\ntool = 'a'\narguments = { x = { column = 'town' } }\n"
    )
    with pytest.raises(ScenarioError, match="no column 'town'.*city"):
        load_scenario(tmp_path / "s.toml")


# ------------------------------------------------------------- thresholds


def figures(**kw: Any) -> dict[str, Any]:
    base = {"calls": 100, "calls_per_s": 50.0, "error_rate": 0.02, "failed_rate": 0.01}
    base["latency_us"] = {"p50": 10_000, "p99": 60_000, "max": 90_000, "mean": 12_000}
    base["percentile"] = lambda p: 55_000
    return {**base, **kw}


def test_thresholds_are_read_and_judged() -> None:
    t = parse_threshold("p99<50ms")
    assert (t.operation, t.metric, t.compare, t.value) == (None, "p99", "<", 50_000)
    assert parse_threshold("call echo:error_rate<=0.1%").operation == "call echo"
    assert parse_threshold("read demo://x:p90 < 2 s").operation == "read demo://x"
    assert parse_threshold("error_rate<0.001").value == 0.001
    verdicts = evaluate(
        [
            parse_threshold(x)
            for x in (
                "p99<50ms",
                "p50<20ms",
                "error_rate<1%",
                "calls_per_s>=50",
                "p97<1s",
                "op:max<1s",
                "nope:p50<1s",
            )
        ],
        figures(),
        {"op": figures(latency_us={"max": 2_000_000})},
    )
    assert [v["passed"] for v in verdicts] == [False, True, False, True, True, False, False]
    assert verdicts[0]["actual"] == 60_000 and verdicts[-1]["why"] == "no such operation"
    for bad in ("p99<50", "p101<1ms", "speed<3", "error_rate<3ms", "p99 50ms"):
        with pytest.raises(ThresholdError):
            parse_threshold(bad)


# ---------------------------------------------------------------- merging


def test_histograms_from_two_workers_merge_without_loss() -> None:
    rng = random.Random(7)
    values = [int(rng.lognormvariate(8, 1.5)) + 1 for _ in range(5000)]
    reference = new_histogram()
    for v in values:
        reference.record_value(v)
    # the bulk recording is exactly the per-value one
    assert histogram_of(values).encode() == reference.encode()
    recorders = [OpRecorder(), OpRecorder()]
    for i, v in enumerate(values):
        recorders[i % 2].record("ok", v, v)
    agg = Aggregate(workers=2)
    agg.add(Tick(worker=0, index=1, seconds=1.0, ops={"op": recorders[0].drain()}))
    assert agg.intervals == []  # interval 1 waits for the other worker
    agg.add(Tick(worker=1, index=1, seconds=1.0, ops={"op": recorders[1].drain()}))
    assert len(agg.intervals) == 1 and agg.intervals[0]["calls"] == 5000
    merged = agg.total().corrected
    assert merged.get_total_count() == 5000
    ps = (0.0, 50.0, 90.0, 99.0, 99.9, 100.0)
    assert percentiles(merged, ps) == {p: reference.get_value_at_percentile(p) for p in ps}
    assert merged.get_mean_value() == reference.get_mean_value()
    assert agg.per_worker == {0: 2500, 1: 2500}


def test_mean_and_stdev_are_hdrhs_own_figures() -> None:
    # from exact microseconds (below 2048) to buckets hundreds of microseconds wide
    rng = random.Random(9)
    values = [int(rng.lognormvariate(9.0, 1.5)) for _ in range(3000)]
    assert min(values) < 2048 < 2**18 < max(values)
    h = histogram_of(values)
    assert moments(h) == (h.get_mean_value(), h.get_stddev())
    assert moments(new_histogram()) == (0.0, 0.0)


def test_a_finished_worker_no_longer_holds_intervals_back() -> None:
    agg = Aggregate(workers=2)
    agg.add(Tick(worker=0, index=1, seconds=1.0))
    agg.add(Tick(worker=0, index=2, seconds=2.0))
    assert agg.intervals == []
    agg.worker_done(1)
    assert [i["index"] for i in agg.intervals] == [1, 2]


# ----------------------------------------------------------------- text


def test_the_terminal_histogram_has_its_counts() -> None:
    h = histogram_of([1000] * 90 + [5000] * 10)
    lines = terminal_histogram(h.encode().decode())
    counts = [int(re.sub(r"[^\d]", "", line.split("[")[1].split("]")[0])) for line in lines[1:]]
    assert sum(counts) == 100 and counts[0] == 90 and counts[-1] == 10
    assert lines[1].count("■") == 40 and 0 < lines[-1].count("■") < 10


def test_compare_gives_ratios_per_figure() -> None:
    def report(rate: float, p99: int) -> dict[str, Any]:
        f = {"calls_per_s": rate, "error_rate": 0.0, "latency_us": {"p50": 1, "p99": p99}}
        return {"total": f, "operations": {"call x": f}}

    rows = compare_reports(report(100, 2000), report(250, 1000))
    by = {(r["scope"], r["figure"]): r["ratio"] for r in rows}
    assert by[("all", "calls/s")] == 2.5 and by[("call x", "p99")] == 0.5
    assert by[("all", "error rate")] is None  # 0 → 0: no ratio


def test_the_public_names_are_importable_and_documented() -> None:
    from trio_mcp import bench

    for name in bench.__all__:
        assert (getattr(bench, name).__doc__ or "").strip(), name


def test_a_finished_worker_does_not_complete_an_interval_another_still_owes() -> None:
    agg = Aggregate(workers=2)
    op = OpRecorder()
    op.record("ok", 10, 10)
    agg.add(Tick(worker=0, index=3, seconds=2.5, ops={"op": op.drain()}))
    agg.worker_done(0)
    assert agg.intervals == []  # worker 1 has not sent its interval 3
    op.record("ok", 10, 10)
    agg.add(Tick(worker=1, index=3, seconds=2.6, ops={"op": op.drain()}))
    assert [(i["index"], i["calls"]) for i in agg.intervals] == [(3, 2)]
