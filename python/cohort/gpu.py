"""GPUs: a probe that never hangs the caller (GpuProbe) and a background
monitor with history, window statistics and the GPU rule pack's answers for
the I/O path (GpuMonitor). Samples are dicts in the JSON schema of
docs/gpu.md; a field with no value is {"state": "not_supported"} or
{"state": "not_available"}, never a made-up zero.

    probe = cohort.GpuProbe("auto", deadline=2.0)   # or "nvml", "smi", "file:gpus.yaml"
    print(probe.backend, probe.selection)
    for gpu in probe.sample()["gpus"]: ...

    with cohort.GpuMonitor(probe, interval=1.0) as monitor:
        monitor.start()
        loader.prefetch = int(base * monitor.prefetch_factor())
        time.sleep(monitor.transfer_delay(2 << 30, "model"))
"""

import json
import math
import numbers
from ctypes import byref, c_char_p, c_double, c_int32, c_uint64
from dataclasses import dataclass
from typing import Optional

from . import _lib, _util
from .errors import InvalidArgument, NotFound

HEALTH = ("ok", "unresponsive", "failed")  # COHORT_GPU_HEALTH_* in order
# COHORT_GPU_METRIC_* in order, with the names rules use as aliases.
METRICS = ("memory_used_percent", "memory_busy_percent", "utilization_percent",
           "temperature_celsius", "power_watts")
_METRIC_ALIASES = {
    "memory_used": 0, "memory": 0, "gpu_memory": 0,
    "memory_busy": 1, "gpu_memory_busy": 1,
    "utilization": 2, "util": 2, "gpu_util": 2,
    "temperature": 3, "gpu_temperature": 3,
    "power": 4, "gpu_power": 4,
}


@dataclass(frozen=True)
class BackendInfo:
    """Whether this machine can use a backend; reason says why not."""
    backend: str
    available: bool
    reason: str


@dataclass(frozen=True)
class BackendChoice:
    """Why a probe chose a backend or passed it over (reason, "" if chosen)."""
    backend: str
    chosen: bool
    reason: str


@dataclass(frozen=True)
class GpuSummary:
    """One sample boiled down; a maximum no GPU reported is None."""
    time: float
    latency: float
    gpu_count: int
    health: str
    stale: bool
    process_count: int
    memory_used: int   # bytes, summed over the GPUs that report it
    memory_total: int
    max_memory_used_percent: Optional[float]
    max_memory_busy_percent: Optional[float]
    max_utilization_percent: Optional[float]
    max_temperature_celsius: Optional[float]
    max_power_watts: Optional[float]


@dataclass(frozen=True)
class WindowStats:
    """A metric over a window: count of samples that had it, then min,
    mean and max (None when count is 0)."""
    count: int
    min: Optional[float]
    mean: Optional[float]
    max: Optional[float]


def _seconds(name, value, window=False):
    """A positive, finite number of seconds; a window may also be 0 or inf."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(f"{name} must be a number of seconds, not {type(value).__name__}")
    value = float(value)
    if window and not value >= 0:
        raise InvalidArgument(f"{name} must be 0 or more seconds (math.inf for all), got {value}")
    if not window and not (value > 0 and math.isfinite(value)):
        raise InvalidArgument(f"{name} must be a positive number of seconds, got {value}")
    return value


def _summary(raw):
    def maybe(x):
        return None if math.isnan(x) else x
    return GpuSummary(
        time=raw.time, latency=raw.latency_seconds, gpu_count=raw.gpu_count,
        health=HEALTH[raw.health] if 0 <= raw.health < len(HEALTH) else str(raw.health),
        stale=bool(raw.stale), process_count=raw.process_count,
        memory_used=raw.memory_used_bytes, memory_total=raw.memory_total_bytes,
        max_memory_used_percent=maybe(raw.max_memory_used_percent),
        max_memory_busy_percent=maybe(raw.max_memory_busy_percent),
        max_utilization_percent=maybe(raw.max_utilization_percent),
        max_temperature_celsius=maybe(raw.max_temperature_celsius),
        max_power_watts=maybe(raw.max_power_watts))


def _metric(value):
    if isinstance(value, str):
        key = value.strip().lower().replace("-", "_").replace(".", "_")
        if key in _METRIC_ALIASES:
            return _METRIC_ALIASES[key]
    return _util.choice("metric", METRICS, value)


def gpu_backends(deadline=2.0):
    """Which backends this machine has (nvml, nvidia-smi, file, none), trying
    each; nvidia-smi is given `deadline` seconds. A list of BackendInfo."""
    doc = json.loads(_util.owned_string(_lib.load().cohort_gpu_backends,
                                        _seconds("deadline", deadline)))
    return [BackendInfo(b["backend"], b["available"], b["reason"]) for b in doc]


class GpuProbe(_util.Handle):
    """Reads the GPUs through one backend; every query is bounded by `deadline`.

    spec: "auto" (NVML, then nvidia-smi, then none), "nvml", "smi",
    "file:PATH" (simulated GPUs) or "none". A named backend that cannot be
    used raises cohort.Unavailable with the reason.
    """

    _kind = "GPU probe"
    _destroy_name = "cohort_gpu_probe_destroy"

    def __init__(self, spec="auto", deadline=2.0):
        lib = _lib.load()
        super().__init__(_util.create(lib.cohort_gpu_probe_open, _lib.gpu_probe_p,
                                      _util.text("spec", spec), _seconds("deadline", deadline)))

    @property
    def backend(self):
        """"nvml", "nvidia-smi", "file:PATH" or "none"."""
        out = c_char_p()
        _lib.load().cohort_gpu_probe_backend(self._h(), byref(out))
        return _util.decode(out.value)

    @property
    def selection(self):
        """Why each backend was or was not chosen, in the order tried."""
        doc = json.loads(_util.owned_string(_lib.load().cohort_gpu_probe_selection, self._h()))
        return [BackendChoice(c["backend"], c["chosen"], c["reason"]) for c in doc]

    def sample(self):
        """A sample as a dict; returns within the deadline. A late or failed
        query gives the last good readings with "stale" true and "health"
        "unresponsive" or "failed"."""
        return json.loads(_util.owned_string(_lib.load().cohort_gpu_probe_sample, self._h()))

    def summary(self):
        """Takes a sample and boils it down to a GpuSummary."""
        raw = _lib.gpu_summary()
        _lib.load().cohort_gpu_probe_sample_summary(self._h(), byref(raw))
        return _summary(raw)


class GpuMonitor(_util.Handle):
    """Samples a probe in the background every `interval` seconds once
    started, keeps `history` samples per GPU, and answers through the GPU
    rule pack `rules` (a path; None for the shipped rules/gpu_io.yaml).

    probe is a GpuProbe, whose backend moves into the monitor (the probe can
    still tell its backend and selection, but no longer sample), or a spec
    to open one with `deadline`. Use it as a context manager, or close() it,
    to stop the sampler.
    """

    _kind = "GPU monitor"
    _destroy_name = "cohort_gpu_monitor_destroy"

    def __init__(self, probe="auto", interval=1.0, history=600, rules=None, deadline=2.0):
        if probe is None or isinstance(probe, str):
            probe = GpuProbe(probe or "auto", deadline)
        elif not isinstance(probe, GpuProbe):
            raise InvalidArgument("probe must be a GpuProbe or a spec string, "
                                  f"not {type(probe).__name__}")
        lib = _lib.load()
        rules_path = None if rules is None else _util.fspath(rules)
        super().__init__(_util.create(lib.cohort_gpu_monitor_create, _lib.gpu_monitor_p,
                                      probe._h(), _seconds("interval", interval),
                                      _util.u32("history", history), rules_path))
        self.probe = probe  # its backend and selection stay readable

    def start(self):
        """Starts the background sampler (a no-op if it runs)."""
        _lib.load().cohort_gpu_monitor_start(self._h())

    def stop(self):
        """Stops the background sampler (a no-op if it does not run)."""
        _lib.load().cohort_gpu_monitor_stop(self._h())

    @property
    def running(self):
        out = c_int32()
        _lib.load().cohort_gpu_monitor_running(self._h(), byref(out))
        return bool(out.value)

    def sample_now(self):
        """Takes one sample on this thread, keeps it, and returns it as a dict."""
        return json.loads(_util.owned_string(_lib.load().cohort_gpu_monitor_sample_now, self._h()))

    def latest(self):
        """The latest sample as a dict, or None before the first."""
        try:
            return json.loads(_util.owned_string(_lib.load().cohort_gpu_monitor_latest, self._h()))
        except NotFound:
            return None

    def summary(self):
        """The latest sample as a GpuSummary, or None before the first."""
        raw = _lib.gpu_summary()
        try:
            _lib.load().cohort_gpu_monitor_latest_summary(self._h(), byref(raw))
        except NotFound:
            return None
        return _summary(raw)

    def history(self, gpu):
        """The kept readings of GPU `gpu`, oldest first: (time, reading dict)."""
        lib, gpu = _lib.load(), _util.u32("gpu", gpu)
        doc = json.loads(_util.owned_string(
            lambda h, out, length: lib.cohort_gpu_monitor_history(h, gpu, out, length), self._h()))
        return [(entry["time"], entry["gpu"]) for entry in doc]

    def stats(self, gpu, metric, window=math.inf):
        """WindowStats of a metric ("memory_used_percent" or "gpu_memory",
        "memory_busy_percent", "utilization_percent", "temperature_celsius",
        "power_watts") over the samples of the last `window` seconds."""
        count, lo, mean, hi = c_uint64(), c_double(), c_double(), c_double()
        _lib.load().cohort_gpu_monitor_stats(self._h(), _util.u32("gpu", gpu), _metric(metric),
                                             _seconds("window", window, window=True),
                                             byref(count), byref(lo), byref(mean), byref(hi))
        if count.value == 0:
            return WindowStats(0, None, None, None)
        return WindowStats(count.value, lo.value, mean.value, hi.value)

    def publish(self, context):
        """Sets the GPU variables (gpu_memory, gpu_temperature, ...) that a
        cohort.Context's rules use, from the latest sample."""
        from .rules import Context
        if not isinstance(context, Context):
            raise InvalidArgument(f"context must be a cohort.Context, not {type(context).__name__}")
        _lib.load().cohort_gpu_monitor_publish(self._h(), context._h())

    def prefetch_factor(self):
        """How hard to prefetch now: 1.0 is normal, 0.5 half as deep."""
        out = c_double()
        _lib.load().cohort_gpu_monitor_prefetch_factor(self._h(), byref(out))
        return out.value

    def transfer_delay(self, size, kind, priority=0, prefetch=False):
        """Seconds to hold a transfer of `size` bytes of `kind` ("model",
        "dataset", ...); 0.0 to go ahead now. priority is the rules'
        transfer_priority (the transfer's plus its workload's) and prefetch
        whether it is a read-ahead: the shipped pack holds only transfers of
        priority below 10 while a GPU is hot."""
        if not isinstance(prefetch, bool):
            raise InvalidArgument(f"prefetch must be True or False, not {prefetch!r}")
        out = c_double()
        _lib.load().cohort_gpu_monitor_transfer_delay_for(self._h(), _util.u64("size", size),
                                                          _util.text("kind", kind),
                                                          _util.i32("priority", priority),
                                                          1 if prefetch else 0, byref(out))
        return out.value
