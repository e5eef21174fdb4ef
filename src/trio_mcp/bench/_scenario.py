"""Scenarios: the weighted mix of operations a load run sends.

A scenario file (TOML or YAML) lists operations::

    data = "users.csv"            # optional: rows (CSV with a header, or JSONL)
    data_order = "sequence"       # or "random"

    [[operations]]
    tool = "echo"                 # or resource = "demo://x/{id}", prompt = "p",
    weight = 5                    #    list = "tools", ping = true
    arguments = { message = "hi", n = { seq = [1, 2, 3] },
                  city = { choice = ["Oslo", "Lima"] }, user = { column = "name" } }
    thresholds = ["p99<50ms", "error_rate<1%"]

An argument is a literal, ``{seq = [...]}`` (in turn, cycling), ``{choice =
[...]}`` (at random, seeded) or ``{column = "NAME"}`` (from the data file's
current row; every call takes the next row, or a random one). A resource URI
may hold ``{name}`` placeholders filled from the arguments. Operations are
interleaved by smooth weighted round robin: exact proportions, no randomness.
"""

from __future__ import annotations

import csv
import json
import random
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs

__all__ = ["Operation", "Scenario", "ScenarioError", "load_scenario", "single_tool"]

Kind = Literal["tool", "resource", "prompt", "list", "ping"]
LISTS = {
    "tools": "list_tools",
    "resources": "list_resources",
    "prompts": "list_prompts",
    "resource_templates": "list_resource_templates",
}


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message says where and why."""


@attrs.frozen(kw_only=True)
class _OperationSpec:
    name: str | None = None
    tool: str | None = None
    resource: str | None = None
    prompt: str | None = None
    #: ``list`` in the file (renamed: the builtin is used in annotations here).
    listing: str | None = None
    ping: bool = False
    weight: float = 1.0
    arguments: dict[str, Any] = attrs.field(factory=dict)
    thresholds: list[str] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class _ScenarioSpec:
    operations: list[_OperationSpec]
    data: str | None = None
    data_order: Literal["sequence", "random"] = "sequence"


_converter = cattrs.Converter(forbid_extra_keys=True)


@attrs.frozen
class Operation:
    """One kind of call in the mix."""

    name: str
    kind: Kind
    #: Tool or prompt name, resource URI (template), or list kind.
    target: str
    weight: float
    arguments: dict[str, Any]
    thresholds: tuple[str, ...] = ()


@attrs.define
class Scenario:
    """The operations of a run, with the rows of its data file."""

    operations: list[Operation]
    #: Rows of the data file (``{column}`` arguments).
    rows: list[dict[str, Any]] = attrs.field(factory=list)
    data_order: str = "sequence"
    #: Where it came from, for the report (and for worker processes to load it again).
    source: dict[str, Any] = attrs.field(factory=dict)

    def to_spec(self) -> dict[str, Any]:
        return self.source

    def mix(self, seed: int) -> Iterator[tuple[Operation, dict[str, Any]]]:
        """Endless (operation, arguments) pairs in the weighted proportions."""
        rng = random.Random(seed)
        ops = self.operations
        total = sum(op.weight for op in ops)
        current = [0.0] * len(ops)
        counters: dict[tuple[int, str], int] = {}
        row_index = 0
        while True:
            # smooth weighted round robin
            best = 0
            for i, op in enumerate(ops):
                current[i] += op.weight
                if current[i] > current[best]:
                    best = i
            current[best] -= total
            op = ops[best]
            row: dict[str, Any] = {}
            if self.rows:
                row = rng.choice(self.rows) if self.data_order == "random" else self.rows[row_index]
                row_index = (row_index + 1) % len(self.rows)
            args: dict[str, Any] = {}
            for key, value in op.arguments.items():
                args[key] = _draw(value, key, best, row, rng, counters)
            yield op, args


def _draw(
    value: Any,
    key: str,
    op: int,
    row: dict[str, Any],
    rng: random.Random,
    counters: dict[tuple[int, str], int],
) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        ((how, what),) = value.items()
        if how == "seq":
            n = counters.get((op, key), 0)
            counters[(op, key)] = n + 1
            return what[n % len(what)]
        if how == "choice":
            return rng.choice(what)
        if how == "column":
            return row[what]
    return value


def _check_argument(where: str, key: str, value: Any, columns: set[str] | None) -> None:
    if not (isinstance(value, dict) and len(value) == 1):
        return
    ((how, what),) = value.items()
    if how in ("seq", "choice"):
        if not isinstance(what, list) or not what:
            raise ScenarioError(f"{where}: argument {key!r}: {how} needs a non-empty list")
    elif how == "column":
        if columns is None:
            raise ScenarioError(f"{where}: argument {key!r} takes a column but the scenario has no data file")
        if what not in columns:
            raise ScenarioError(
                f"{where}: argument {key!r}: no column {what!r} in the data (has {', '.join(sorted(columns))})"
            )


def _read_rows(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read the data file {path}: {exc.strerror}") from None
    if path.suffix in (".jsonl", ".ndjson"):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ScenarioError(f"{path}:{number}: not JSON: {exc.msg}") from None
            if not isinstance(row, dict):
                raise ScenarioError(f"{path}:{number}: a row must be a JSON object")
            rows.append(row)
    else:
        rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise ScenarioError(f"the data file {path} has no rows")
    return rows


def _operation(spec: _OperationSpec, where: str, columns: set[str] | None) -> Operation:
    given = [
        (kind, value)
        for kind, value in (
            ("tool", spec.tool),
            ("resource", spec.resource),
            ("prompt", spec.prompt),
            ("list", spec.listing),
            ("ping", "ping" if spec.ping else None),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise ScenarioError(f"{where}: give exactly one of tool, resource, prompt, list or ping")
    kind, target = given[0]
    if kind == "list" and target not in LISTS:
        raise ScenarioError(f"{where}: list is one of {', '.join(LISTS)}, not {target!r}")
    if spec.weight <= 0:
        raise ScenarioError(f"{where}: weight must be positive")
    for key, value in spec.arguments.items():
        _check_argument(where, key, value, columns)
    default = {"tool": f"call {target}", "resource": f"read {target}", "prompt": f"prompt {target}"}
    name = spec.name or default.get(kind) or (f"list {target}" if kind == "list" else "ping")
    from ._thresholds import parse_threshold

    for text in spec.thresholds:
        parse_threshold(text)  # a bad threshold shows before the run
    return Operation(name, kind, target, spec.weight, dict(spec.arguments), tuple(spec.thresholds))  # type: ignore[arg-type]


def scenario_from_spec(raw: Any, *, base: Path, origin: str) -> Scenario:
    if isinstance(raw, dict) and "operation" in raw and "operations" not in raw:
        raw = {**raw, "operations": raw.pop("operation")}
    prepared = raw
    if isinstance(raw, dict) and isinstance(raw.get("operations"), list):
        renamed = [
            {("listing" if k == "list" else k): v for k, v in op.items()} if isinstance(op, dict) else op
            for op in raw["operations"]
        ]
        prepared = {**raw, "operations": renamed}
    try:
        spec = _converter.structure(prepared, _ScenarioSpec)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:  # cattrs: a group of findings
        detail = (
            "; ".join(cattrs.transform_error(exc, path=origin))
            if isinstance(exc, cattrs.BaseValidationError)
            else str(exc)
        )
        raise ScenarioError(f"bad scenario: {detail}") from None
    if not spec.operations:
        raise ScenarioError(f"{origin}: no operations")
    rows: list[dict[str, Any]] = []
    data_path = None
    if spec.data is not None:
        data_path = (base / spec.data).resolve()
        rows = _read_rows(data_path)
    columns = set(rows[0]) if rows else None
    ops = [_operation(s, f"{origin}: operation {i + 1}", columns) for i, s in enumerate(spec.operations)]
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{origin}: two operations share a name; give them distinct names")
    source = dict(raw) if isinstance(raw, dict) else {}
    if data_path is not None:
        source["data"] = str(data_path)
    return Scenario(ops, rows, spec.data_order, source)


def load_scenario(path: str | Path) -> Scenario:
    """A scenario file, TOML (``.toml``) or YAML (``.yaml``/``.yml``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read the scenario {path}: {exc.strerror}") from None
    loader: Callable[[str], Any]
    if path.suffix in (".yaml", ".yml"):
        import yaml

        loader = yaml.safe_load
        error: tuple[type[Exception], ...] = (yaml.YAMLError,)
    elif path.suffix == ".toml":
        loader = tomllib.loads
        error = (tomllib.TOMLDecodeError,)
    else:
        raise ScenarioError(f"a scenario file is .toml, .yaml or .yml, not {path.name}")
    try:
        raw = loader(text)
    except error as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    return scenario_from_spec(raw, base=path.resolve().parent, origin=str(path))


def single_tool(tool: str, arguments: dict[str, Any]) -> Scenario:
    """The command-line shorthand: one tool, fixed arguments."""
    raw = {"operations": [{"tool": tool, "arguments": arguments}]}
    return scenario_from_spec(raw, base=Path.cwd(), origin="command line")
