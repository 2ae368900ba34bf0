#!/usr/bin/env bash
# Three workers started by Open MPI's mpirun form one world from the
# environment alone: each calls cohort.Communicator.from_env() (rank and size
# from OMPI_COMM_WORLD_*, the store from COHORT_STORE), checks the source is
# "openmpi", all-reduces its rank and checks the sum is 0+1+2. Skips (77)
# when mpirun is missing.
#
# Usage: mpirun_env.sh LIBCOHORT_SO PYTHON_PACKAGE_DIR [PYTHON]
set -euo pipefail

library=$1
package=$2
python=${3:-python3}
ranks=3

if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIPPED: mpirun not found (install Open MPI, e.g. Debian's openmpi-bin)"
  exit 77
fi
if ! mpirun --version 2>&1 | grep -q "Open MPI"; then
  echo "SKIPPED: mpirun is not Open MPI's: $(mpirun --version 2>&1 | head -n 1)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/store"

cat >"$work/worker.py" <<'EOF'
import array
import sys

import cohort

env = cohort.read_launch_env()
if env.source != "openmpi":
    sys.exit(f"expected source openmpi, got {env.source!r} ({'; '.join(env.notes)})")
with cohort.Communicator.from_env(timeout=60, connect_timeout=60) as comm:
    if (comm.rank, comm.size) != (env.rank, env.world_size):
        sys.exit(f"communicator is rank {comm.rank} of {comm.size}, env said {env.rank} of {env.world_size}")
    value = array.array("q", [comm.rank])
    comm.allreduce(value)
    expected = comm.size * (comm.size - 1) // 2
    if value[0] != expected:
        sys.exit(f"rank {comm.rank}: allreduce gave {value[0]}, expected {expected}")
    line = (f"worker rank {comm.rank} of {comm.size} local {env.local_rank} source {env.source} "
            f"sum {value[0]} ok\n")
    # mpirun forwards the ranks' stdout in chunks that can interleave
    # mid-line, so each rank also leaves its line in a file of its own.
    with open(f"{sys.argv[1]}/result-{comm.rank}.txt", "w") as out:
        out.write(line)
    print(line, end="", flush=True)
EOF

# Only the store, the library and the package are passed; rank and size
# come from mpirun. The launcher variables of an outer job (a CI runner
# under Slurm, say) must not leak in: COHORT_* would come first.
unset COHORT_RANK COHORT_WORLD_SIZE COHORT_LOCAL_RANK COHORT_LOCAL_WORLD_SIZE COHORT_NODE_RANK \
  RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT || true
export COHORT_STORE="file://$work/store"
export COHORT_LIBRARY="$library"
export PYTHONPATH="$package${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

status=0
timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
  -x COHORT_STORE -x COHORT_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE \
  "$python" "$work/worker.py" "$work" >"$work/out.txt" 2>&1 || status=$?
cat "$work/out.txt"
if [ "$status" -ne 0 ]; then
  echo "FAILED: mpirun exited with status $status"
  exit 1
fi
for r in $(seq 0 $((ranks - 1))); do
  if ! grep -q "^worker rank $r of $ranks .* sum $((ranks * (ranks - 1) / 2)) ok$" "$work/result-$r.txt" 2>/dev/null; then
    echo "FAILED: rank $r did not report success (no or wrong $work/result-$r.txt)"
    exit 1
  fi
done
echo "OK: $ranks workers under mpirun formed one world from the environment"
