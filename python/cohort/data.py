"""cohort.data: the data path (docs/data.md): the workload registry, the
transfer scheduler, the data advisor and the shard loader.

    from cohort.data import WorkloadRegistry, TransferScheduler, DataAdvisor, ShardLoader
"""

from .workloads import ACCESS_PATTERNS, Workload, WorkloadRegistry
from .transfers import (ACTION_TYPES, PolicyAction, Transfer, TransferDecision, TransferFacts,
                        TransferResult, TransferScheduler, TransferStats)
from .advisor import Baseline, DataAdvice, DataAdvisor, NodeAdvice, ShardAdvice, advise
from .shard_loader import LoadedShard, ShardLoader

__all__ = [
    "Workload", "WorkloadRegistry", "ACCESS_PATTERNS",
    "TransferScheduler", "Transfer", "TransferResult", "TransferDecision", "TransferStats",
    "TransferFacts", "PolicyAction", "ACTION_TYPES",
    "DataAdvisor", "DataAdvice", "NodeAdvice", "ShardAdvice", "Baseline", "advise",
    "ShardLoader", "LoadedShard",
]
