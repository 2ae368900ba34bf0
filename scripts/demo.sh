#!/usr/bin/env bash
# The main job for now: build cohort-plan and plan the example cluster and
# dataset, then show what a departed node costs. Extra arguments go to
# cohort-plan (for example --json or --strategy locality --locality
# examples/locality.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target cohort-plan
exec build/examples/cohort-plan --cluster examples/cluster.yaml --dataset examples/dataset.txt \
  --replication 2 --remove worker-3 "$@"
