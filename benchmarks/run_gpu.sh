#!/usr/bin/env bash
# The GPU probe on a machine with an NVIDIA GPU: captures what nvidia-smi
# prints for cohort's three queries (busy, with a process holding memory,
# then idle) as fixtures in the shape of tests/data/gpu/smi, times the GPU
# query from the shell, shows cohort-smi through each backend, and runs
# bench_gpu. Builds nothing.
#
#   benchmarks/run_gpu.sh BUILD_DIR OUT_DIR
#
# The busy phase needs a python3 with CUDA torch (PYTHON=...); without one
# the captures are of an idle GPU only.
set -uo pipefail

if [ $# -ne 2 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
out="$2"
mkdir -p "$out"
python="${PYTHON:-python3}"
command -v nvidia-smi >/dev/null || { echo "run_gpu: nvidia-smi not found on PATH" >&2; exit 2; }
# The fields and their order are cohort's (src/gpu/smi/parse.hpp).
gpu_fields=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,fan.speed,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,mig.mode.current
app_fields=gpu_uuid,pid,process_name,used_memory
capture() {  # NAME
  nvidia-smi -L >"$out/$1.list.txt"
  nvidia-smi --query-gpu=$gpu_fields --format=csv,noheader,nounits >"$out/$1.gpu.csv"
  nvidia-smi --query-compute-apps=$app_fields --format=csv,noheader,nounits >"$out/$1.apps.csv"
}

nvidia-smi --version
# Busy: a process that holds 6 GiB and runs bf16 matrix products for 25 s.
holder=""
if "$python" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  timeout 60 "$python" - <<'PY' &
import time, torch
held = torch.empty(6 * 1024**3, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
start = time.time()
while time.time() - start < 25:
    a @ a
    torch.cuda.synchronize()
PY
  holder=$!
  sleep 8
  capture busy
  echo "== cohort-smi, GPU busy"
  for backend in auto nvml smi; do "$build/examples/cohort-smi" --backend "$backend" --json; done
  "$build/examples/cohort-smi"
  wait "$holder"
else
  echo "run_gpu: $python has no CUDA torch: idle captures only" >&2
fi
capture idle
echo "== nvidia-smi --query-gpu from the shell, 10 runs (microseconds)"
for _ in $(seq 10); do
  start=$(date +%s%N)
  nvidia-smi --query-gpu=$gpu_fields --format=csv,noheader,nounits >/dev/null
  echo $((($(date +%s%N) - start) / 1000))
done
echo "== bench_gpu"
"$build/benchmarks/bench_gpu" --benchmark_counters_tabular=true --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true
