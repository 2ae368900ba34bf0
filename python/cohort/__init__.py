"""cohort: coordination for distributed ML training, a pure-ctypes binding of
libcohort's C ABI (capi/cohort.h).

libcohort is found, on first use, at $COHORT_LIBRARY, else next to this
package, in $COHORT_BUILD_DIR, in the build tree (python/../build), then on
the system.

    topo = cohort.Topology.from_file("cluster.yaml")
    order = topo.rank_order()
    plan = cohort.plan_shards(cohort.Dataset.from_file("data.txt"), topo,
                              shard_bytes=256 << 20, replication=2)
    mine = plan.member_shards("node-3")
    indices = cohort.epoch_order(len(mine), seed=1, epoch=0)

    engine = cohort.RuleEngine(allow_unhandled=True)
    engine.load("rules/gpu_io.yaml")
    engine.evaluate({"gpu_memory": 91.5}, now=0).fired_rules

    with cohort.GpuMonitor("auto", interval=1.0) as monitor:
        monitor.start()
        factor = monitor.prefetch_factor()

    with cohort.Communicator(rank, size, "file:///shared/rdzv") as comm:
        comm.allreduce(gradients)              # numpy, array.array, bytearray, ...
        work = comm.broadcast_async(weights, root=0)
        work.wait()

    with cohort.Communicator.from_env() as comm:  # under torchrun, mpirun or srun
        print(cohort.read_launch_env().source, comm.rank, comm.size)
"""

from ._util import FORMATS, LEVELS, ROLES, STATUSES, STRATEGIES
from . import comm as _comm
from . import data  # the data path: cohort.data.advise, DataAdvisor
from .comm import Communicator, Work
from .coordinator import Coordinator, CoordinatorClient
from . import data  # cohort.data: the data path (workloads, transfers)
from .dataset import DataFile, Dataset, Shard, Shards, split_shards
from .epoch import epoch_order
from .errors import (BufferTooSmall, CallbackError, Closed, Error, FileError, InternalError,
                     InvalidArgument, LibraryNotFound, Mismatch, NoMemory, NotFound, OutOfRange,
                     ParseError, PeerFailed, PermissionDenied, Timeout, Unavailable,
                     Unsatisfiable)
from .gpu import (BackendChoice, BackendInfo, GpuMonitor, GpuProbe, GpuSummary, WindowStats,
                  gpu_backends)
from .launch_env import LaunchEnv, communicator_from_env, read_launch_env
from .membership import Membership
from .rules import (Action, Context, Evaluation, ExplainStep, Expression, Firing, Outcome,
                    RuleEngine, RuleError, RuleEvent, Symbols, check_rules, check_rules_string)
from .sharding import PlanOptions, ShardPlan, plan_shards
from .topology import Node, RankInfo, RankOrder, Topology

__all__ = [
    "Topology", "Node", "RankOrder", "RankInfo",
    "Dataset", "DataFile", "Shards", "Shard", "split_shards",
    "plan_shards", "ShardPlan", "PlanOptions", "epoch_order",
    "Expression", "Symbols", "Context", "Outcome", "ExplainStep", "RuleEngine", "Evaluation",
    "Firing", "Action", "RuleEvent", "RuleError", "check_rules", "check_rules_string",
    "GpuProbe", "GpuMonitor", "GpuSummary", "WindowStats", "BackendChoice", "BackendInfo",
    "gpu_backends",
    "Communicator", "Work", "DTYPES", "REDUCE_OPS", "ALGORITHMS", "TRANSPORTS",
    "LaunchEnv", "read_launch_env", "communicator_from_env",
    "Coordinator", "CoordinatorClient", "Membership",
    "version", "strerror", "library_path",
    "ROLES", "STATUSES", "LEVELS", "STRATEGIES", "FORMATS",
    "Error", "InvalidArgument", "ParseError", "FileError", "NotFound", "OutOfRange",
    "Timeout", "Unavailable", "NoMemory", "CallbackError", "InternalError",
    "BufferTooSmall", "Unsatisfiable", "PeerFailed", "Mismatch", "Closed", "PermissionDenied",
    "LibraryNotFound",
]


def version():
    """The library's version, e.g. "0.1.0" (cohort_version())."""
    from . import _lib
    return _lib.load().cohort_version().decode()


def strerror(code):
    """A short name for a status code, e.g. "invalid argument"."""
    from . import _lib
    return _lib.load().cohort_strerror(int(code)).decode()


def library_path():
    """The path (or name) libcohort was loaded from."""
    from . import _lib
    return _lib.path()


def __getattr__(name):
    # __version__, and the names of DTYPES, REDUCE_OPS, ALGORITHMS and TRANSPORTS, ask the
    # library, loaded lazily (see _lib.py).
    if name == "__version__":
        return version()
    if name in ("DTYPES", "REDUCE_OPS", "ALGORITHMS", "TRANSPORTS"):
        return getattr(_comm, name)
    raise AttributeError(f"module 'cohort' has no attribute {name!r}")
