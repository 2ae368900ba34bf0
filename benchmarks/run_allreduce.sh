#!/usr/bin/env bash
# Runs bench_allreduce (cohort vs Gloo vs Open MPI) at 2 and 4 ranks on this
# machine after printing what the machine is, twice per rank count: Open MPI
# over loopback TCP only, then Open MPI allowed its shared-memory BTL (vader).
# Each table starts with a `run:` line naming which. Every run also measures
# the machine's memory bandwidth with all ranks at once and gives each row's
# fraction of that limit (bench_allreduce's `limit` column). Builds nothing:
# pass the build folder.
#
#   benchmarks/run_allreduce.sh build [--mpi-shm] [bench_allreduce options, e.g. --sizes 1K,1M]
#
# MPI_BTL=tcp|vader|both (default both) picks the Open MPI tables;
# --mpi-shm, as the first option, is MPI_BTL=vader. RANKS="2 4 8" changes
# the rank counts; JSON_DIR=DIR writes allreduce-N-tcp.json and
# allreduce-N-vader.json there. Every mpirun is bounded by RUN_TIMEOUT
# seconds (default 1800) and taken down with this script.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [bench_allreduce options]" >&2
  exit 2
fi
bench="$1/benchmarks/bench_allreduce"
shift
btl_mode="${MPI_BTL:-both}"
if [ "${1:-}" = "--mpi-shm" ]; then
  btl_mode=vader
  shift
fi
case "$btl_mode" in
  tcp) modes=(tcp) ;;
  vader) modes=(vader) ;;
  both) modes=(tcp vader) ;;
  *) echo "run_allreduce: MPI_BTL is '$btl_mode': use tcp, vader or both" >&2; exit 2 ;;
esac
if [ ! -x "$bench" ]; then
  echo "run_allreduce: $bench is missing: configure with Open MPI and Gloo present (scripts/deps.sh) and build it" >&2
  exit 2
fi

echo "cpus:   $(nproc)"
echo "cpu:    $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "kernel: $(uname -sr)"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
echo "memory: $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "mpi:    $(mpirun --version 2>/dev/null | head -n1)"
# vader's single copy (cma is process_vm_readv, like cohort's direct copy)
# decides its large-message speed: say which one this Open MPI uses.
echo "vader:  single_copy_mechanism $(ompi_info --param btl vader --level 9 2>/dev/null |
  sed -n 's/.*"btl_vader_single_copy_mechanism" (current value: "\([^"]*\)".*/\1/p' | head -n1)"
echo "gloo:   $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo unknown)"

# ob1 with the tcp and self BTLs only, so Open MPI goes over loopback TCP like
# Gloo (not UCX or shared memory); the vader run then lets it use shared
# memory between ranks of this machine, as cohort does. No binding: each library runs I/O
# threads that a rank bound to one core would squeeze onto it. Yielding when
# idle, as Gloo and cohort block while they wait: Open MPI turns it on by
# itself only when it sees more ranks than cores, and without it a busy
# machine made its 1 KiB all-reduce 150 times slower (7.5 ms against 47 us).
mpi_flags=(--oversubscribe --bind-to none --mca pml ob1
           --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1)
if [ "$(id -u)" -eq 0 ]; then
  mpi_flags+=(--allow-run-as-root)
fi
declare -A btls=([tcp]=tcp,self [vader]=vader,self,tcp)
declare -A labels=([tcp]="Open MPI over TCP only (btl tcp,self)"
                   [vader]="Open MPI with shared memory (btl vader,self,tcp)")

# mpirun runs in the background so that a signal reaching this script (or
# the timeout) takes its ranks down with it rather than leaving them spinning.
mpirun_pid=""
cleanup() {
  if [ -n "$mpirun_pid" ] && kill -0 "$mpirun_pid" 2>/dev/null; then
    kill -TERM "$mpirun_pid" 2>/dev/null || true
    wait "$mpirun_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

status=0
for n in ${RANKS:-2 4}; do
  for mode in "${modes[@]}"; do
    echo
    echo "== $n ranks, ${labels[$mode]} =="
    json=()
    if [ -n "${JSON_DIR:-}" ]; then
      mkdir -p "$JSON_DIR"
      json=(--json "$JSON_DIR/allreduce-$n-$mode.json")
    fi
    timeout --kill-after=10 "${RUN_TIMEOUT:-1800}" \
      mpirun -np "$n" "${mpi_flags[@]}" --mca btl "${btls[$mode]}" \
      "$bench" --label "${labels[$mode]}" "$@" "${json[@]}" &
    mpirun_pid=$!
    wait "$mpirun_pid" || status=$?
    mpirun_pid=""
  done
done
exit $status
