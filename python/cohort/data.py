"""cohort.data: the data path (docs/data.md): the workload registry, the
transfer scheduler and the data advisor.

    from cohort.data import WorkloadRegistry, TransferScheduler, DataAdvisor
"""

from .workloads import ACCESS_PATTERNS, Workload, WorkloadRegistry
from .transfers import (ACTION_TYPES, PolicyAction, Transfer, TransferDecision, TransferFacts,
                        TransferResult, TransferScheduler, TransferStats)
from .advisor import Baseline, DataAdvice, DataAdvisor, NodeAdvice, ShardAdvice, advise

__all__ = [
    "Workload", "WorkloadRegistry", "ACCESS_PATTERNS",
    "TransferScheduler", "Transfer", "TransferResult", "TransferDecision", "TransferStats",
    "TransferFacts", "PolicyAction", "ACTION_TYPES",
    "DataAdvisor", "DataAdvice", "NodeAdvice", "ShardAdvice", "Baseline", "advise",
]
