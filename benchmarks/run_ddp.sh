#!/usr/bin/env bash
# Runs bench_ddp.py: DDP on CPU with torch's gloo against DDP with cohort's
# comm hook, at 2 and 4 ranks of this machine, after the 1-rank no-DDP
# compute-only step (the limit a perfectly overlapped all-reduce would
# reach), all in this one invocation. Prints what the machine is first.
# Needs Debian's /usr/bin/python3 with python3-torch, and libcohort built in
# BUILD_DIR. Builds nothing.
#
#   benchmarks/run_ddp.sh build [bench_ddp.py options, e.g. --rounds 8 --seconds 60]
#   PYTHON=python3 benchmarks/run_ddp.sh DIR   # another interpreter with torch
#
# RANKS="2" changes the rank counts; RUN_TIMEOUT (seconds, default 600)
# bounds each run, whose ranks this script also takes down when it exits.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [bench_ddp.py options]" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
shift
here="$(cd "$(dirname "$0")" && pwd)"
# PYTHON: an interpreter with torch (default Debian's /usr/bin/python3).
python="${PYTHON:-/usr/bin/python3}"
lib="$(ls "$build"/libcohort.so "$build"/libcohort.so.0 2>/dev/null | head -1 || true)"
if [ -z "$lib" ]; then
  echo "run_ddp: no libcohort.so in $build: cmake --build $build --target cohort" >&2
  exit 2
fi
if ! "$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  echo "run_ddp: $python cannot import torch with gloo: apt-get install -y python3-torch" >&2
  exit 2
fi
export COHORT_LIBRARY="$lib"

echo "cpus:   $(nproc)"
echo "cpu:    $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "kernel: $(uname -sr)"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
echo "memory: $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "torch:  $("$python" -c 'import torch; print(torch.__version__)')"

pids=()  # the timeout processes of the run in progress
cleanup() {
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two free ports at once (both held while asked, so never the same one).
free_ports() {
  "$python" -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))'
}

echo
echo "== compute-only: 1 rank, no DDP =="
out="$(timeout --kill-after=10 "${RUN_TIMEOUT:-600}" "$python" "$here/bench_ddp.py" --baseline "$@")"
echo "$out"
compute_ms="$(echo "$out" | sed -n 's/^compute_ms: \([0-9.]*\).*/\1/p')"

status=0
for n in ${RANKS:-2 4}; do
  echo
  echo "== $n ranks: local, DDP with a no-op hook, DDP on gloo, DDP with cohort's hook =="
  read -r gloo_port store_port <<<"$(free_ports)"
  store="tcp://127.0.0.1:$store_port"
  for ((r = 0; r < n; r++)); do
    timeout --kill-after=10 "${RUN_TIMEOUT:-600}" "$python" "$here/bench_ddp.py" \
      --rank "$r" --size "$n" --gloo-port "$gloo_port" --store "$store" \
      --compute-ms "$compute_ms" "$@" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || status=$?
  done
  pids=()
done
exit $status
