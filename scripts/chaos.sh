#!/usr/bin/env bash
# The chaos soak (tests/integration/chaos.py): the training demo under
# three cohort-run launchers and a cohort-coordinator with a data directory,
# with the coordinator kill -9'd and restarted, workers SIGKILLed, launchers
# SIGKILLed and restarted, and workers SIGSTOPped past the failure timeout,
# at random seeded times; then every shard done once per epoch, the
# reference's weights, and nothing left behind (docs/benchmarks.md).
#
#   scripts/chaos.sh [MINUTES] [--faults N] [--seed S] [--kinds K,...]
#
# MINUTES (default 5) bounds the fault injection; --faults N injects N
# faults instead. Other options go to chaos.py (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [[ $# -gt 0 && $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
  args+=(--minutes "$1")
  shift
elif [[ " $* " != *" --faults "* && " $* " != *" --minutes "* ]]; then
  args+=(--minutes 5)
fi
cmake --build build -j2 --target cohort-run cohort-coordinator cohort-train >/dev/null
exec /usr/bin/python3 tests/integration/chaos.py build "${args[@]}" "$@"
