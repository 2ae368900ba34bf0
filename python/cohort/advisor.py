"""The data advisor: how to read a shard plan's data (docs/data.md, "DataAdvisor").

    advice = cohort.data.advise(plan, batch_size=256, memory_budget="8GiB",
                                style="allreduce", patterns=["train/*"],
                                measurements={"nodes": {"worker-3": {"data_wait_fraction": 0.3,
                                                                     "prefetch_hit_rate": 0.4}}})
    advice.prefetch_batches, advice.cache, advice.high_locality_nodes
    advice.shards[0].preferred_node, advice.shards[0].cache, advice.shards[0].priority

Every recommendation comes with a reason naming the inputs it came from.
"""

import json
import math
import numbers
from dataclasses import dataclass, field

from . import _lib, _util
from .errors import InvalidArgument
from .sharding import ShardPlan

STYLES = ("allreduce", "parameter_server")
CACHE_STRATEGIES = ("none", "memory", "local_disk")

_MEASUREMENT_FIELDS = ("data_wait_fraction", "data_wait", "prefetch_hit_rate", "read_bytes_per_second",
                       "step_time", "samples_per_second", "prefetch_depth")


@dataclass(frozen=True)
class Baseline:
    """The design's fixed heuristics, before any measurement."""
    prefetch_batches: int
    cache: bool
    locality_threshold: float
    prefetch_reason: str
    cache_reason: str


@dataclass(frozen=True)
class NodeAdvice:
    node: str
    prefetch_batches: int
    prefetch_bytes: int
    measured: bool
    prefetch_reason: str
    locality: float
    high_locality: bool
    shards: int
    bytes: int
    cache_memory_bytes: int
    cache_disk_bytes: int
    cache_reason: str


@dataclass(frozen=True)
class ShardAdvice:
    shard: int
    bytes: int
    preferred_node: str
    locality: float
    node_reason: str
    prefetch_batches: int
    prefetch_bytes: int
    prefetch_reason: str
    cache: str  # "none", "memory" or "local_disk"
    cache_reason: str
    priority: int  # a transfer priority: higher first
    priority_reason: str


@dataclass(frozen=True)
class DataAdvice:
    style: str
    batch_size: int
    sample_bytes: int
    sample_bytes_reason: str
    batch_bytes: int
    files: list
    bytes: int
    baseline: Baseline
    prefetch_batches: int
    prefetch_bytes: int
    measured: bool
    prefetch_reason: str
    cache: bool
    cache_reason: str
    high_locality_nodes: list
    locality_reason: str
    nodes: list = field(default_factory=list)   # NodeAdvice, in plan member order
    shards: list = field(default_factory=list)  # ShardAdvice, the selected shards ascending
    json: str = field(default="", repr=False)   # the library's JSON text

    def node(self, node_id):
        """The NodeAdvice of one member."""
        for n in self.nodes:
            if n.node == node_id:
                return n
        raise KeyError(node_id)

    @classmethod
    def from_json(cls, text):
        d = json.loads(text)
        b = d["baseline"]
        return cls(
            style=d["style"], batch_size=d["batch_size"], sample_bytes=d["sample_bytes"],
            sample_bytes_reason=d["sample_bytes_reason"], batch_bytes=d["batch_bytes"],
            files=list(d["files"]), bytes=d["bytes"],
            baseline=Baseline(b["prefetch_batches"], b["cache"], b["locality_threshold"],
                              b["prefetch_reason"], b["cache_reason"]),
            prefetch_batches=d["prefetch"]["batches"], prefetch_bytes=d["prefetch"]["bytes"],
            measured=d["prefetch"]["measured"], prefetch_reason=d["prefetch"]["reason"],
            cache=d["cache"]["enabled"], cache_reason=d["cache"]["reason"],
            high_locality_nodes=list(d["high_locality"]["nodes"]),
            locality_reason=d["high_locality"]["reason"],
            nodes=[NodeAdvice(n["node"], n["prefetch"]["batches"], n["prefetch"]["bytes"],
                              n["prefetch"]["measured"], n["prefetch"]["reason"], n["locality"],
                              n["high_locality"], n["shards"], n["bytes"], n["cache"]["memory_bytes"],
                              n["cache"]["disk_bytes"], n["cache"]["reason"]) for n in d["nodes"]],
            shards=[ShardAdvice(s["shard"], s["bytes"], s["preferred_node"], s["locality"],
                                s["node_reason"], s["prefetch"]["batches"], s["prefetch"]["bytes"],
                                s["prefetch"]["reason"], s["cache"]["strategy"], s["cache"]["reason"],
                                s["priority"]["value"], s["priority"]["reason"]) for s in d["shards"]],
            json=text)


def _measurement(where, m):
    if not isinstance(m, dict):
        raise InvalidArgument(f"{where}: expected a dict of measurements, not {type(m).__name__}")
    unknown = sorted(set(m) - set(_MEASUREMENT_FIELDS))
    if unknown:
        raise InvalidArgument(f"{where}: unknown measurement {unknown[0]!r}; expected one of "
                              f"{', '.join(_MEASUREMENT_FIELDS)}")
    out = {}
    for k, v in m.items():
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise InvalidArgument(f"{where}: {k} must be a number, not {v!r}")
        if k == "prefetch_depth":
            # A count of batches: the library checks the range (1 to 64).
            if not math.isfinite(v) or v != int(v) or v < 0:
                raise InvalidArgument(f"{where}: prefetch_depth must be a whole number of batches, not {v!r}")
            out[k] = int(v)
            continue
        out[k] = float(v)
    return out


def _measurements(measurements):
    """{"job": {...}, "nodes": {id: {...}}}; a flat dict of figures is the job's."""
    if measurements is None:
        return None
    if not isinstance(measurements, dict):
        raise InvalidArgument(f"measurements: expected a dict, not {type(measurements).__name__}")
    if not set(measurements) <= {"job", "nodes"}:
        return {"job": _measurement("measurements", measurements)}
    out = {}
    if measurements.get("job") is not None:
        out["job"] = _measurement("measurements['job']", measurements["job"])
    nodes = measurements.get("nodes") or {}
    if not isinstance(nodes, dict):
        raise InvalidArgument("measurements['nodes']: expected {node_id: {...}}")
    out["nodes"] = {str(n): _measurement(f"measurements['nodes'][{n!r}]", m) for n, m in nodes.items()}
    return out


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(f"{name} must be a number, not {value!r}")
    return float(value)


def _size(name, value):
    if isinstance(value, str):
        return value  # "8GiB": the library reads it
    return _util.u64(name, value)


class DataAdvisor:
    """The advisor's options, checked when advise() runs; see advise()."""

    def __init__(self, batch_size, memory_budget, style="allreduce", patterns=None,
                 sample_bytes=None, disk_budget=None, epochs=1, access="sequential",
                 locality_threshold=0.8, prefetch_factor_floor=1.0):
        if style not in STYLES:
            raise InvalidArgument(f"style: unknown style {style!r} (expected allreduce or parameter_server)")
        if isinstance(patterns, str):
            patterns = [patterns]
        self.options = {"batch_size": _util.u64("batch_size", batch_size),
                        "memory_budget_bytes": _size("memory_budget", memory_budget),
                        "style": style, "epochs": _util.u32("epochs", epochs), "access": access,
                        "locality_threshold": _number("locality_threshold", locality_threshold),
                        "prefetch_factor_floor": _number("prefetch_factor_floor", prefetch_factor_floor)}
        if patterns:
            for p in patterns:
                if not isinstance(p, str):
                    raise InvalidArgument(f"patterns: each pattern must be a str, not {p!r}")
            self.options["patterns"] = list(patterns)
        if sample_bytes is not None:
            self.options["sample_bytes"] = _size("sample_bytes", sample_bytes)
        if disk_budget is not None:
            self.options["disk_budget_bytes"] = _size("disk_budget", disk_budget)

    def advise(self, plan, measurements=None):
        """The DataAdvice for `plan` (a ShardPlan). measurements: {"job": M,
        "nodes": {node_id: M}} or a flat M (the job's), M a dict of
        data_wait_fraction (or data_wait with step_time, seconds),
        prefetch_hit_rate, read_bytes_per_second, step_time, samples_per_second,
        prefetch_depth (the batches queued while measuring, after any factor)."""
        if not isinstance(plan, ShardPlan):
            raise InvalidArgument(f"plan: expected a ShardPlan, not {type(plan).__name__}")
        options = dict(self.options)
        m = _measurements(measurements)
        if m is not None:
            options["measurements"] = m
        text = _util.owned_string(_lib.load().cohort_shard_plan_advise, plan._h(),
                                  json.dumps(options).encode())
        return DataAdvice.from_json(text)


def advise(plan, batch_size, memory_budget, measurements=None, **options):
    """DataAdvisor(batch_size, memory_budget, **options).advise(plan, measurements)."""
    return DataAdvisor(batch_size, memory_budget, **options).advise(plan, measurements)
