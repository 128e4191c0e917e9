# SPDX-License-Identifier: GPL-2.0-only
"""Benchmark files: lab/benchmarks/NAME.toml read, checked and expanded into cases.

Benchmarks are data (lab/benchmarks/NAME.toml): a shell command template, fixed parameters, a parameter
sweep (every combination is one case), and the figures to parse from the output (a regular expression, the
unit, whether higher is better, Hmean for rates or Amean for times). `--bench NAME[:KEY=V1/V2...]` runs a
benchmark, optionally with a sweep axis or parameter replaced. lab/benchmarks/ablation.toml lists the
mechanisms that `--ablate` switches off.
"""
from __future__ import annotations

import ast
import itertools
import operator
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import image, paths, run

BENCH_DIR = paths.REPO / "lab" / "benchmarks"
ABLATION_FILE = BENCH_DIR / "ablation.toml"
# Co-location: cross-node moves of a task count as "after start" from this many ms after its first sample on
# (a benchmark may set colocation_settle_ms): its initial placement and first balancing are left out.
COLOCATION_SETTLE_MS = 1000
PLACEHOLDER_RE = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


class BenchError(run.UsageError):
    """A bad --bench/--sched argument or a malformed benchmark file (the file and field are named)."""


@dataclass
class Figure:
    name: str
    regex: str
    unit: str
    higher_is_better: bool
    mean: str  # "hmean" (rates) or "amean" (times)
    aggregate: str = "first"  # over all matches: first, last, sum, mean, min, max
    cases: list[str] | None = None  # the case labels it applies to (None: every case)

    def applies(self, label: str) -> bool:
        return self.cases is None or label in self.cases

    def parse(self, text: str) -> float | None:
        vals = []
        for m in re.finditer(self.regex, text, re.M):
            try:
                vals.append(float(m.group(1)))
            except (ValueError, IndexError):
                continue
        if not vals:
            return None
        agg = {"first": lambda v: v[0], "last": lambda v: v[-1], "sum": sum, "min": min, "max": max,
               "mean": lambda v: sum(v) / len(v)}[self.aggregate]
        return float(agg(vals))

    def to_json(self) -> dict:
        d = {"name": self.name, "regex": self.regex, "unit": self.unit,
             "higher_is_better": self.higher_is_better, "mean": self.mean, "aggregate": self.aggregate}
        if self.cases is not None:
            d["cases"] = self.cases
        return d


@dataclass
class Case:
    bench: str
    id: str  # unique: bench name plus the sweep values
    label: str  # the sweep values alone (the row name in the report)
    params: dict
    command: str
    est_s: float
    timeout_s: float
    ticks: bool = False  # locsample -k: the per-tick record (for co-location)


@dataclass
class Benchmark:
    name: str
    path: Path
    description: str
    command: str
    params: dict
    sweep: dict
    choices: dict
    figures: list[Figure]
    est_seconds: str | float
    timeout_s: float
    residency_comm: str | None = None
    sample_comm: list[str] = field(default_factory=list)
    overrides: dict = field(default_factory=dict)
    colocation_tasks: int | None = None  # co-location of the N busiest selected tasks (None: not measured)
    colocation_settle_ms: float = COLOCATION_SETTLE_MS
    process_llc: bool = False  # per process: running samples per LLC (cache-aware scheduling)
    image_extras: list[str] = field(default_factory=list)  # image.EXTRAS its boots add to the guest image

    @property
    def spec(self) -> str:
        """The --bench argument that names this benchmark with its overrides."""
        if not self.overrides:
            return self.name
        return self.name + "".join(f":{k}={'/'.join(map(str, v)) if isinstance(v, list) else v}"
                                   for k, v in self.overrides.items())

    def cases(self) -> list[Case]:
        keys = list(self.sweep)
        out = []
        for combo in itertools.product(*(self.sweep[k] for k in keys)) if keys else [()]:
            values = dict(self.params) | dict(zip(keys, combo))
            subst = {k: str(v) for k, v in values.items()}
            for k, v in zip(keys, combo):
                if str(v) in self.choices.get(k, {}):  # a choice may name parameters and other axes: {loops}
                    subst[k] = PLACEHOLDER_RE.sub(lambda m: str(values[m.group(1)]), self.choices[k][str(v)])
            label = "-".join(str(v) for v in combo) or self.name
            cid = self.name + ("-" + label if combo else "")
            command = PLACEHOLDER_RE.sub(lambda m: subst[m.group(1)], self.command)
            out.append(Case(bench=self.name, id=cid, label=label, params=values, command=command,
                            est_s=_estimate(self.est_seconds, values, self.path), timeout_s=self.timeout_s,
                            ticks=self.colocation_tasks is not None))
        return out

    def to_json(self) -> dict:
        where = self.path.relative_to(paths.REPO) if self.path.is_relative_to(paths.REPO) else self.path
        return {"name": self.name, "spec": self.spec, "description": self.description, "command": self.command,
                "params": self.params, "sweep": self.sweep, "choices": self.choices,
                "figures": [f.to_json() for f in self.figures], "residency_comm": self.residency_comm,
                "sample_comm": self.sample_comm, "colocation_tasks": self.colocation_tasks,
                "colocation_settle_ms": self.colocation_settle_ms, "process_llc": self.process_llc,
                "image_extras": self.image_extras, "file": str(where),
                "cases": [{"id": c.id, "label": c.label, "command": c.command} for c in self.cases()]}


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.USub: operator.neg, ast.UAdd: operator.pos}


def _estimate(expr, values: dict, path: Path) -> float:
    """est_seconds: a number, or an arithmetic expression (+ - * / and parentheses) of numeric parameters."""
    if isinstance(expr, (int, float)):
        return float(expr)

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            v = values.get(node.id)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            raise BenchError(f"{path}: field 'est_seconds': {node.id!r} is not a numeric parameter")
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise BenchError(f"{path}: field 'est_seconds': only numbers, parameters and + - * / are allowed")

    try:
        return max(0.0, ev(ast.parse(str(expr), mode="eval")))
    except SyntaxError as e:
        raise BenchError(f"{path}: field 'est_seconds': {e}") from None
    except ZeroDivisionError:
        raise BenchError(f"{path}: field 'est_seconds': division by zero") from None


# The fields of a benchmark file and of its [[figure]] entries; any other is a typo, named with its file.
BENCH_FIELDS = {"description", "command", "est_seconds", "timeout_s", "params", "sweep", "choices", "figure",
                "sample_comm", "residency_comm", "colocation_tasks", "colocation_settle_ms", "process_llc",
                "image_extras"}
FIGURE_FIELDS = {"name", "regex", "unit", "higher_is_better", "mean", "aggregate", "cases"}
MECHANISM_FIELDS = {"name", "off", "what"}
CASE_TIMEOUT_S = (1, 3600)  # a case's timeout_s: the guest kills it then
MAX_CASES = 1000


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_fields(path: Path, where: str, table, known: set[str]) -> None:
    if not isinstance(table, dict):
        raise BenchError(f"{path}: {where}must be a table")
    unknown = sorted(set(table) - known)
    if unknown:
        raise BenchError(f"{path}: {where}field {unknown[0]!r} is unknown (known: {', '.join(sorted(known))})")


def _check_types(path: Path, data: dict) -> None:
    """Types and bounds of a benchmark file's fields, each error naming the file and the field."""
    _check_fields(path, "", data, BENCH_FIELDS)
    scalar = (str, int, float, bool)
    if not isinstance(data.get("description", ""), str):
        raise BenchError(f"{path}: field 'description' must be a string")
    est = data.get("est_seconds", 10)
    if not (isinstance(est, str) or _is_num(est)):
        raise BenchError(f"{path}: field 'est_seconds' must be a number or an arithmetic expression string")
    lo, hi = CASE_TIMEOUT_S
    t = data.get("timeout_s", 600)
    if not _is_num(t) or not lo <= t <= hi:
        raise BenchError(f"{path}: field 'timeout_s' must be a number of seconds in {lo}..{hi}, got {t!r}")
    for key in ("params", "sweep", "choices"):
        if not isinstance(data.get(key, {}), dict):
            raise BenchError(f"{path}: field {key!r} must be a table")
    for k, v in data.get("params", {}).items():
        if not isinstance(v, scalar):
            raise BenchError(f"{path}: field 'params.{k}' must be a string, number or boolean")
    for k, v in data.get("sweep", {}).items():
        if not all(isinstance(x, scalar) for x in (v if isinstance(v, list) else [v])):
            raise BenchError(f"{path}: field 'sweep.{k}' must be a list of strings, numbers or booleans")
    for k, v in data.get("choices", {}).items():
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            raise BenchError(f"{path}: field 'choices.{k}' must be a table of strings")
    if not isinstance(data.get("residency_comm", ""), str):
        raise BenchError(f"{path}: field 'residency_comm' must be a string")
    sc = data.get("sample_comm", [])
    if not isinstance(sc, list) or not all(isinstance(x, str) for x in sc):
        raise BenchError(f"{path}: field 'sample_comm' must be a list of strings")
    ex = data.get("image_extras", [])
    if not isinstance(ex, list) or not all(isinstance(x, str) for x in ex):
        raise BenchError(f"{path}: field 'image_extras' must be a list of strings")
    for x in ex:
        if x not in image.EXTRAS:
            raise BenchError(f"{path}: field 'image_extras': {x!r} is not an image extra (known: "
                             f"{', '.join(image.EXTRAS)})")
    figs = data.get("figure", [])
    if not isinstance(figs, list):
        raise BenchError(f"{path}: field 'figure' must be an array of tables ([[figure]])")
    for i, f in enumerate(figs):
        _check_fields(path, f"figure[{i}]: ", f, FIGURE_FIELDS)


def known_benchmarks() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.toml") if p != ABLATION_FILE)


def _parse_value(text: str):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_bench_spec(spec: str) -> tuple[str, dict]:
    """NAME[:KEY=V1/V2...] -> (NAME, {KEY: [V1, V2]}); a sweep axis takes every value, a parameter one."""
    name, *parts = spec.strip().split(":")
    overrides: dict = {}
    for part in parts:
        key, eq, val = part.partition("=")
        if not eq or not key or not val:
            raise BenchError(f"bad benchmark override {part!r} in {spec!r}; expected KEY=VALUE[/VALUE...]")
        overrides[key] = [_parse_value(v) for v in val.split("/") if v != ""]
    return name, overrides


def load_benchmark(spec: str, path: Path | None = None) -> Benchmark:
    name, overrides = parse_bench_spec(spec)
    path = path or BENCH_DIR / f"{name}.toml"
    if not path.exists() or path == ABLATION_FILE:
        raise BenchError(f"unknown benchmark {name!r}; known: {', '.join(known_benchmarks())}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BenchError(f"{path}: not valid TOML: {e}") from None
    _check_types(path, data)

    def need(key, typ):
        if key not in data:
            raise BenchError(f"{path}: field {key!r} is missing")
        if not isinstance(data[key], typ):
            raise BenchError(f"{path}: field {key!r} has the wrong type")
        return data[key]

    command = need("command", str)
    params = dict(data.get("params", {}))
    sweep = {k: list(v) if isinstance(v, list) else [v] for k, v in data.get("sweep", {}).items()}
    choices = {k: {str(a): str(b) for a, b in v.items()} for k, v in data.get("choices", {}).items()}
    for k, vals in sweep.items():
        if not vals:
            raise BenchError(f"{path}: field 'sweep.{k}' is empty")
        for v in vals:
            if k in choices and str(v) not in choices[k]:
                raise BenchError(f"{path}: field 'sweep.{k}': value {v!r} has no entry in choices.{k}")
    for k in params:
        if k in sweep:
            raise BenchError(f"{path}: {k!r} is both a parameter and a sweep axis")
    for key, vals in overrides.items():
        if key in sweep:
            for v in vals:
                if key in choices and str(v) not in choices[key]:
                    raise BenchError(f"{name}: {key}={v} is not one of {', '.join(choices[key])}")
            sweep[key] = vals
        elif key in params:
            if len(vals) == 1:
                params[key] = vals[0]
            else:  # several values for a fixed parameter: it becomes a sweep axis
                del params[key]
                sweep[key] = vals
        else:
            raise BenchError(f"{name} has no parameter or sweep axis {key!r}; it has: "
                             f"{', '.join(list(params) + list(sweep)) or 'none'}")
    figures = []
    for i, f in enumerate(data.get("figure", [])):
        where = f"{path}: figure[{i}]"
        try:
            fig = Figure(name=str(f["name"]), regex=str(f["regex"]), unit=str(f.get("unit", "")),
                         higher_is_better=bool(f["higher_is_better"]), mean=str(f["mean"]),
                         aggregate=str(f.get("aggregate", "first")))
        except KeyError as e:
            raise BenchError(f"{where}: field {e.args[0]!r} is missing") from None
        if "cases" in f:
            if not isinstance(f["cases"], list) or not all(isinstance(x, str) for x in f["cases"]):
                raise BenchError(f"{where}: field 'cases' must be a list of case labels")
            fig.cases = list(f["cases"])
        if fig.mean not in ("hmean", "amean"):
            raise BenchError(f"{where}: field 'mean' must be 'hmean' (rates) or 'amean' (times)")
        if fig.aggregate not in ("first", "last", "sum", "mean", "min", "max"):
            raise BenchError(f"{where}: field 'aggregate' must be first, last, sum, mean, min or max")
        try:
            if re.compile(fig.regex).groups < 1:
                raise BenchError(f"{where}: field 'regex' needs one capture group (the figure)")
        except re.error as e:
            raise BenchError(f"{where}: field 'regex': {e}") from None
        figures.append(fig)
    if not figures:
        raise BenchError(f"{path}: no [[figure]] defined")
    known = set(params) | set(sweep)
    for ph in PLACEHOLDER_RE.findall(command):
        if ph not in known:
            raise BenchError(f"{path}: field 'command': {{{ph}}} is neither a parameter nor a sweep axis")
    for k, table in choices.items():
        for v, text in table.items():
            for ph in PLACEHOLDER_RE.findall(text):
                if ph not in known or ph == k:
                    raise BenchError(f"{path}: field 'choices.{k}.{v}': {{{ph}}} is neither a parameter nor "
                                     "another sweep axis")
    colo = data.get("colocation_tasks")
    if colo is not None and (not isinstance(colo, int) or isinstance(colo, bool) or colo < 2):
        raise BenchError(f"{path}: field 'colocation_tasks' must be an integer >= 2")
    settle = data.get("colocation_settle_ms", COLOCATION_SETTLE_MS)
    if not isinstance(settle, (int, float)) or isinstance(settle, bool) or settle < 0:
        raise BenchError(f"{path}: field 'colocation_settle_ms' must be a number >= 0")
    pllc = data.get("process_llc", False)
    if not isinstance(pllc, bool):
        raise BenchError(f"{path}: field 'process_llc' must be true or false")
    b = Benchmark(name=name, path=path, description=str(data.get("description", "")), command=command,
                  params=params, sweep=sweep, choices=choices, figures=figures,
                  est_seconds=data.get("est_seconds", 10), timeout_s=float(data.get("timeout_s", 600)),
                  residency_comm=data.get("residency_comm") or None,
                  sample_comm=list(data.get("sample_comm", [])), overrides=overrides,
                  colocation_tasks=colo, colocation_settle_ms=float(settle), process_llc=pllc,
                  image_extras=sorted(set(data.get("image_extras", []))))
    nr_cases = 1
    for vals in sweep.values():
        nr_cases *= len(vals)
    if nr_cases > MAX_CASES:
        raise BenchError(f"{path}: field 'sweep': {nr_cases} cases; at most {MAX_CASES}")
    b.cases()  # validates est_seconds
    labels = {c.label for c in b.cases()}
    for i, fig in enumerate(figures):
        unknown = [x for x in fig.cases or [] if x not in labels]
        if unknown and not overrides:  # an override may leave a figure's cases out
            raise BenchError(f"{path}: figure[{i}]: field 'cases': no case {', '.join(map(repr, unknown))}; "
                             f"the cases are {', '.join(sorted(labels))}")
    return b


def ablation_mechanisms(path: Path = ABLATION_FILE) -> list[dict]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BenchError(f"{path}: not valid TOML: {e}") from None
    _check_fields(path, "", data, {"mechanism"})
    out = []
    for i, m in enumerate(data.get("mechanism", [])):
        _check_fields(path, f"mechanism[{i}]: ", m, MECHANISM_FIELDS)
        if "name" not in m or "off" not in m:
            raise BenchError(f"{path}: mechanism[{i}] needs 'name' and 'off'")
        out.append({"name": m["name"], "off": m["off"], "what": m.get("what", "")})
    return out
