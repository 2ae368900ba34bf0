#!/usr/bin/env bash
# The main job: build the launcher and the training demo, then train
# across 4 worker processes under `cohort-run --standalone`, SIGKILL one of
# them 3 s in, and watch the job detect it, go on with 3 workers, relaunch
# the fourth and finish with every shard trained exactly once per epoch and
# weights equal to a single-process run (docs/training.md). Extra
# arguments go to cohort-train (for example --epochs 8 --step-ms 50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target cohort-run cohort-train
exec build/examples/cohort-run --standalone --nproc-per-node 4 --kill-worker 2@3 -- \
  build/examples/cohort-train --epochs 5 --shards 64 --step-ms 100 "$@"
