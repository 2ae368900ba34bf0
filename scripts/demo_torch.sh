#!/usr/bin/env bash
# The second main job, in PyTorch: build the launcher and the library, then
# train an MLP on scikit-learn's digits with DistributedDataParallel over
# cohort's comm hook, 4 workers under `cohort-run --standalone`; one is
# SIGKILLed 15 s in, relaunched, and resumes from its checkpoint. Rank 0
# ends with its checks: every shard counted once per epoch, test accuracy
# at least 95%, and the parameters of a single-process run within 1e-4
# (docs/torch.md#an-elastic-example). Extra arguments go to
# train_elastic.py (for example --epochs 120 --step-ms 200).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target cohort-run cohort
export COHORT_LIBRARY="$PWD/build/libcohort.so"
exec build/examples/cohort-run --standalone --nproc-per-node 4 --kill-worker 2@15 -- \
  /usr/bin/python3 examples/torch/train_elastic.py --step-ms 100 "$@"
