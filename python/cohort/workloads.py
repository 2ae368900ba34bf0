"""The GPU workloads of a node (WorkloadRegistry): what each declared (its
process, GPUs, memory footprint, priority, files) and how it is doing (the
figures it reports, the GPU memory its process holds). Workloads whose
process ended are dropped. docs/data.md is the guide.

    registry = cohort.data.WorkloadRegistry()
    registry.add(id="train", pid=os.getpid(), gpus=[0, 1], memory_bytes=60 << 30,
                 priority=10, model_files=["/models/llama.pt"], access="random")
    registry.update("train", io_bytes_per_second=2.1e9, batch_size=256)
    registry.observe_gpu_memory(monitor)       # a GpuMonitor, or {pid: bytes}
    registry.find("train").gpu_memory          # {gpu index: bytes}
"""

import json
import numbers
import operator
import os
import traceback
import weakref
from ctypes import byref, c_int64, c_uint64
from dataclasses import dataclass, field
from typing import Dict, Tuple

from . import _lib, _util
from .errors import InvalidArgument, NotFound

ACCESS_PATTERNS = ("sequential", "random")

_DECLARED = ("id", "pid", "gpus", "memory_bytes", "priority", "dataset_files", "model_files",
             "access")


@dataclass
class Workload:
    """A workload: what it declares when it registers (id, pid, memory_bytes
    are required) and, as the registry gives it back, its live figures (0:
    not reported) and the GPU memory its process holds per GPU index."""
    id: str
    pid: int
    memory_bytes: int
    gpus: Tuple[int, ...] = ()
    priority: int = 0
    dataset_files: Tuple[str, ...] = ()
    model_files: Tuple[str, ...] = ()
    access: str = "sequential"
    io_bytes_per_second: float = 0.0
    batch_size: int = 0
    epoch_seconds: float = 0.0
    gpu_memory: Dict[int, int] = field(default_factory=dict)
    gpu_memory_total: int = 0


def _plain(value):
    """A JSON-ready copy: integer-likes (numpy ints) as int, paths as str;
    anything else as it is, for the library to name the field it cannot take."""
    if isinstance(value, (str, bool, float)) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fsdecode(value)
    if isinstance(value, numbers.Integral):
        return operator.index(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _workload(doc):
    return Workload(
        id=doc["id"], pid=doc["pid"], memory_bytes=doc["memory_bytes"], gpus=tuple(doc["gpus"]),
        priority=doc["priority"], dataset_files=tuple(doc["dataset_files"]),
        model_files=tuple(doc["model_files"]), access=doc["access"],
        io_bytes_per_second=doc["io_bytes_per_second"], batch_size=doc["batch_size"],
        epoch_seconds=doc["epoch_seconds"],
        gpu_memory={m["gpu"]: m["bytes"] for m in doc["gpu_memory"]},
        gpu_memory_total=doc["gpu_memory_total"])


def _figure(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(f"WorkloadRegistry.update: {name} must be a number, "
                              f"not {type(value).__name__}")
    return float(value)


class WorkloadRegistry(_util.Handle):
    """The workloads of this node. alive: None (a process has ended when
    the kernel says so, it is a zombie, or its pid was reused), or a
    callable(pid) -> bool that decides (pids of another PID namespace,
    tests); it is called on whichever thread prunes, a TransferScheduler's
    included, and an exception in it counts as alive. Every method may be
    called from several threads at once."""

    _kind = "workload registry"
    _destroy_name = "cohort_workload_registry_destroy"

    def __init__(self, alive=None):
        lib = _lib.load()
        if alive is not None and not callable(alive):
            raise InvalidArgument(f"WorkloadRegistry: alive must be a callable(pid) -> bool, "
                                  f"not {type(alive).__name__}")
        self._alive = None
        self._schedulers = weakref.WeakSet()  # TransferSchedulers using it
        if alive is not None:
            def check(_user_data, pid):
                try:
                    return 1 if alive(pid) else 0
                except BaseException:  # never drop a workload because the check broke
                    traceback.print_exc()
                    return 1
            self._alive = _lib.pid_alive_fn(check)
        super().__init__(_util.create(lib.cohort_workload_registry_create, _lib.workload_registry_p,
                                      self._alive or _lib.pid_alive_fn(), None))
        if self._alive is not None:
            # The finalizer keeps the callback alive until the registry is gone.
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _destroy_keeping,
                                                     lib.cohort_workload_registry_destroy,
                                                     self._ptr, self._alive)

    def close(self):
        """Destroys the registry. cohort.InvalidArgument while an open
        TransferScheduler uses it: close that first."""
        users = [s for s in getattr(self, "_schedulers", ()) if not s.closed]
        if users:
            raise InvalidArgument("WorkloadRegistry.close: an open TransferScheduler uses this "
                                  "registry; close the scheduler first")
        super().close()

    def add(self, workload=None, **fields):
        """Registers a Workload, or one described by keyword arguments (id,
        pid, memory_bytes, gpus, priority, dataset_files, model_files,
        access). Figures a Workload carries are reported as update() would.
        cohort.InvalidArgument names the field; cohort.NotFound when the
        process does not run."""
        if workload is not None and fields:
            raise InvalidArgument("WorkloadRegistry.add: give a Workload or keyword fields, not both")
        if workload is None:
            unknown = sorted(set(fields) - set(_DECLARED))
            if unknown:
                raise InvalidArgument(f"WorkloadRegistry.add: unknown field {unknown[0]!r} "
                                      f"(expected: {', '.join(_DECLARED)})")
            doc = {k: _plain(v) for k, v in fields.items()}
            figures = None
        elif isinstance(workload, Workload):
            doc = {k: _plain(getattr(workload, k)) for k in _DECLARED}
            figures = (workload.io_bytes_per_second, workload.batch_size, workload.epoch_seconds)
        else:
            raise InvalidArgument(f"WorkloadRegistry.add: workload must be a cohort.data.Workload, "
                                  f"not {type(workload).__name__}")
        for key, value in doc.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise InvalidArgument(f"WorkloadRegistry.add: workload {doc.get('id')!r}: {key} "
                                      f"cannot be sent as JSON ({exc})") from None
        text = json.dumps(doc)
        _lib.load().cohort_workload_registry_add(self._h(), text.encode("utf-8"))
        if figures is not None and any(figures):
            self.update(workload.id, *figures)

    def remove(self, id):
        """cohort.NotFound for an id that is not registered."""
        _lib.load().cohort_workload_registry_remove(self._h(), _util.text("id", id))

    def update(self, id, io_bytes_per_second=0.0, batch_size=0, epoch_seconds=0.0):
        """The workload's live figures (0: unknown). cohort.NotFound for an
        unknown id; cohort.InvalidArgument naming a negative figure."""
        _lib.load().cohort_workload_registry_update(
            self._h(), _util.text("id", id), _figure("io_bytes_per_second", io_bytes_per_second),
            _util.u64("batch_size", batch_size), _figure("epoch_seconds", epoch_seconds))

    def observe_gpu_memory(self, source):
        """Per-process GPU memory: from a GpuMonitor's latest sample (each
        GPU's process list; cohort.NotFound before its first sample), or a
        dict {pid: bytes} the caller measured (counted on each workload's
        first GPU)."""
        from .gpu import GpuMonitor
        lib = _lib.load()
        if isinstance(source, GpuMonitor):
            lib.cohort_workload_registry_observe_monitor(self._h(), source._h())
            return
        if not isinstance(source, dict):
            raise InvalidArgument("WorkloadRegistry.observe_gpu_memory: source must be a GpuMonitor "
                                  f"or a dict {{pid: bytes}}, not {type(source).__name__}")
        n = len(source)
        pids, sizes = (c_int64 * max(n, 1))(), (c_uint64 * max(n, 1))()
        for i, (pid, size) in enumerate(source.items()):
            pids[i] = _util.index("pid", pid)
            sizes[i] = _util.u64(f"bytes of pid {pid}", size)
        lib.cohort_workload_registry_observe_memory(self._h(), pids, sizes, n)

    def find(self, id):
        """The Workload, or None when it is not registered or its process
        ended (then it is dropped)."""
        lib = _lib.load()
        try:
            text = _util.owned_string(lib.cohort_workload_registry_find, self._h(),
                                      _util.text("id", id))
        except NotFound:
            return None
        return _workload(json.loads(text))

    def list(self):
        """Every live Workload, by id (the dead ones dropped first)."""
        doc = json.loads(_util.owned_string(_lib.load().cohort_workload_registry_list, self._h()))
        return [_workload(w) for w in doc]

    def prune(self):
        """Drops the workloads whose process ended; returns their ids."""
        return json.loads(_util.owned_string(_lib.load().cohort_workload_registry_prune, self._h()))

    def __len__(self):
        out = c_uint64()
        _lib.load().cohort_workload_registry_size(self._h(), byref(out))
        return out.value


def _destroy_keeping(destroy, ptr, *keep):
    """Destroys a handle whose callbacks (in keep) must live until it is gone."""
    try:
        destroy(ptr)
    except Exception:  # interpreter shutdown: the library may be gone
        pass


__all__ = ["Workload", "WorkloadRegistry", "ACCESS_PATTERNS"]
