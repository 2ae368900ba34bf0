#!/usr/bin/env bash
# Runs bench_allreduce (cohort vs Gloo vs Open MPI) at 2 and 4 ranks on this
# machine, over loopback TCP, after printing what the machine is. Builds
# nothing: pass the build folder.
#
#   benchmarks/run_allreduce.sh build [bench_allreduce options, e.g. --sizes 1K,1M]
#
# RANKS="2 4 8" changes the rank counts; JSON_DIR=DIR writes one
# allreduce-N.json per rank count there.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [bench_allreduce options]" >&2
  exit 2
fi
bench="$1/benchmarks/bench_allreduce"
shift
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
echo "gloo:   $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo unknown)"

# ob1 with the tcp and self BTLs only, so Open MPI goes over loopback TCP like
# the others (not UCX or shared memory). No binding: each library runs I/O
# threads that a rank bound to one core would squeeze onto it. Yielding when
# idle, as Gloo and cohort block while they wait: Open MPI turns it on by
# itself only when it sees more ranks than cores, and without it a busy
# machine made its 1 KiB all-reduce 150 times slower (7.5 ms against 47 us).
mpi_flags=(--oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self
           --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1)
if [ "$(id -u)" -eq 0 ]; then
  mpi_flags+=(--allow-run-as-root)
fi

status=0
for n in ${RANKS:-2 4}; do
  echo
  json=()
  if [ -n "${JSON_DIR:-}" ]; then
    mkdir -p "$JSON_DIR"
    json=(--json "$JSON_DIR/allreduce-$n.json")
  fi
  mpirun -np "$n" "${mpi_flags[@]}" "$bench" "$@" "${json[@]}" || status=$?
done
exit $status
