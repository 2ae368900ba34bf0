"""cohort.data: the data path (docs/data.md). The workload registry and the
transfer scheduler today; the other parts of issue 20 add their names here.

    from cohort.data import WorkloadRegistry, TransferScheduler
"""

from .workloads import ACCESS_PATTERNS, Workload, WorkloadRegistry
from .transfers import (ACTION_TYPES, PolicyAction, Transfer, TransferDecision, TransferFacts,
                        TransferResult, TransferScheduler, TransferStats)

__all__ = [
    "Workload", "WorkloadRegistry", "ACCESS_PATTERNS",
    "TransferScheduler", "Transfer", "TransferResult", "TransferDecision", "TransferStats",
    "TransferFacts", "PolicyAction", "ACTION_TYPES",
]
