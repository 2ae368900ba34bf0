#!/usr/bin/env bash
# Runs bench_container.py (cohort's Python binding against torch.distributed
# with gloo) at 2 and 4 ranks, each rank in its own PID namespace as in
# separate containers: same network namespace, same /dev/shm, no sight of
# each other's processes (so no process_vm_readv between them). Needs root
# (unshare --pid), Debian's /usr/bin/python3 with python3-torch and
# python3-numpy, and libcohort built in BUILD_DIR. Builds nothing.
#
#   benchmarks/run_container.sh build [bench_container.py options, e.g. --sizes 1K,64K,64M --seconds 0.5]
#
# RANKS="2" changes the rank counts; JSON_DIR=DIR writes container-N.json
# there; RUN_TIMEOUT (seconds, default 900) bounds each rank process, which
# this script also takes down when it exits early.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [bench_container.py options]" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
shift
here="$(cd "$(dirname "$0")" && pwd)"
# PYTHON: an interpreter with torch and numpy (default Debian's /usr/bin/python3).
python="${PYTHON:-/usr/bin/python3}"
if [ "$(id -u)" -ne 0 ]; then
  echo "run_container: unshare --pid needs root (CAP_SYS_ADMIN); run it as root or in a privileged container" >&2
  exit 2
fi
if ! ls "$build"/libcohort.so* >/dev/null 2>&1; then
  echo "run_container: no libcohort.so in $build: cmake --build $build --target cohort" >&2
  exit 2
fi
if ! "$python" -c 'import numpy, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  echo "run_container: $python cannot import numpy and torch with gloo: apt-get install -y python3-torch python3-numpy" >&2
  exit 2
fi

echo "cpus:   $(nproc)"
echo "cpu:    $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "kernel: $(uname -sr)"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
echo "torch:  $("$python" -c 'import torch; print(torch.__version__)')"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench_container.XXXXXX")"
# Each rank looks for this file to show it shares /dev/shm with the others.
marker="$(mktemp /dev/shm/bench_container.XXXXXX)"
pids=()       # the timeout processes this script started
rank_pids=()  # the ranks below them, by their host pids
# A rank is its namespace's pid 1, which ignores every signal from outside
# but SIGKILL, and unshare blocks SIGTERM while it waits: so the ranks are
# killed outright, after which unshare and timeout exit by themselves
# (timeout's own TERM, then KILL 10 s later, covers a rank not found).
cleanup() {
  for pid in "${rank_pids[@]}"; do
    [ "$pid" -gt 0 ] && kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
  rm -f "$marker"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The host pid of the rank that `timeout -> unshare -> (fork)` runs: two
# levels below timeout (the forked child keeps its pid when it execs python).
# Waits up to 5 s per level; 0 when it did not appear.
rank_host_pid() {
  local pid="$1" child
  for _ in 1 2; do
    child=""
    for _ in $(seq 50); do
      child="$(cat /proc/"$pid"/task/*/children 2>/dev/null | awk '{print $1; exit}')"
      [ -n "$child" ] && break
      sleep 0.1
    done
    if [ -z "$child" ]; then
      echo 0
      return
    fi
    pid="$child"
  done
  echo "$pid"
}

status=0
for n in ${RANKS:-2 4}; do
  echo
  echo "== $n ranks, each in its own PID namespace (unshare --pid --fork --mount-proc) =="
  json=()
  if [ -n "${JSON_DIR:-}" ]; then
    mkdir -p "$JSON_DIR"
    json=(--json "$(cd "$JSON_DIR" && pwd)/container-$n.json")
  fi
  cohort_port="$(free_port)"
  gloo_port="$(free_port)"
  rm -f "$work/pids" "$work/pids.tmp"
  pids=()
  rank_pids=()
  for ((r = 0; r < n; ++r)); do
    # --kill-child: the rank dies with its unshare, which dies with timeout.
    COHORT_BUILD_DIR="$build" GLOO_SOCKET_IFNAME=lo \
      timeout --kill-after=10 "${RUN_TIMEOUT:-900}" \
      unshare --pid --fork --kill-child --mount-proc \
      "$python" "$here/bench_container.py" --rank "$r" --size "$n" \
      --cohort-port "$cohort_port" --gloo-port "$gloo_port" --pids-file "$work/pids" --shm-marker "$marker" \
      "$@" "${json[@]}" &
    pids+=($!)
  done
  for ((r = 0; r < n; ++r)); do
    rank_pids+=("$(rank_host_pid "${pids[$r]}")")
    echo "$r ${rank_pids[$r]}" >>"$work/pids.tmp"
  done
  mv "$work/pids.tmp" "$work/pids"
  for pid in "${pids[@]}"; do
    wait "$pid" || status=$?
  done
  pids=()
  rank_pids=()
done
exit $status
