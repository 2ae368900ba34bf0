"""cohort.data: the data path (docs/data.md). The workload registry, the
transfer scheduler and the shard loader; the other parts of issue 20 add
their names here.

    from cohort.data import WorkloadRegistry, TransferScheduler, ShardLoader
"""

from .workloads import ACCESS_PATTERNS, Workload, WorkloadRegistry
from .transfers import (ACTION_TYPES, PolicyAction, Transfer, TransferDecision, TransferFacts,
                        TransferResult, TransferScheduler, TransferStats)
from .shard_loader import LoadedShard, ShardLoader

__all__ = [
    "Workload", "WorkloadRegistry", "ACCESS_PATTERNS",
    "TransferScheduler", "Transfer", "TransferResult", "TransferDecision", "TransferStats",
    "TransferFacts", "PolicyAction", "ACTION_TYPES",
    "ShardLoader", "LoadedShard",
]
