#!/usr/bin/env bash
# Regenerates abi/libcohort.abi, the C ABI baseline that the capi.abi test
# compares every build with. Run it only when the change to the ABI is meant
# (a new function, a changed signature), and commit the new baseline with the
# change that made it; say in the commit what changed and whether it breaks
# callers (then COHORT_VERSION_MAJOR, the SOVERSION, must go up too).
#
# Usage: scripts/abi_baseline.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
library="$build/libcohort.so"
if [ ! -f "$library" ]; then
  echo "abi_baseline: $library not found: build first (cmake --build $build)" >&2
  exit 1
fi
cmake --build "$build" --target cohort
bash "$root/scripts/abi_dump.sh" "$library" "$root/abi/libcohort.abi"
echo "abi_baseline: wrote abi/libcohort.abi from $library; review it with git diff and commit it"
