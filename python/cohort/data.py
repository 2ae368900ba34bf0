"""The data path: cohort.data.advise and the DataAdvisor (docs/data.md)."""

from .advisor import (Baseline, DataAdvice, DataAdvisor, NodeAdvice, ShardAdvice,  # noqa: F401
                      advise)
