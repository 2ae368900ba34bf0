#!/usr/bin/env bash
# CI's ThreadSanitizer stage (README, "Testing"; docs/guide.md, "Sanitizers
# and fuzzing"): one clang build in build-tsan/ with -fsanitize=thread, then
# the tests of the code whose threads share state:
#   - unit: the collective engine's frames, the coordinator's journal and
#     snapshot threads, its etcd log writer, connections and client, the
#     etcd client (tests/unit/CMakeLists.txt names them);
#   - api: collectives (every transport, TLS, failures), the coordinator
#     (HTTP, HTTPS, replicas, failover, idempotency), the stores and
#     Membership (tests/api/CMakeLists.txt);
#   - cohort-run's own logic (unit.cohort_run.*);
#   - the launcher and the coordinator as programs (cohort-run,
#     cohort-coordinator and cohort-train built with TSan): the integration
#     tests launcher.*, coordinator_restart.*, coordinator_ha.* (replicas on
#     etcd), coordinator_members.* and orphans.*.
# Only those sources are compiled in this tree, which keeps the stage short.
# Any data race, lock-order inversion or use of a destroyed mutex fails it.
#
#   scripts/tsan.sh                build and run
#   scripts/tsan.sh --build-only   configure and build only
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = "--build-only" ]; then build_only=1; fi

jobs=$(nproc 2>/dev/null || echo 2)
build="$PWD/build-tsan"
started=$SECONDS
stage() { echo "tsan: $1 ($((SECONDS - started)) s so far)"; }

source scripts/clang_tree.sh
configure_clang_tree tsan "$build" -DCOHORT_SANITIZE=thread
targets=(unit_tests api_tests cohort_run_tests cohort-run cohort-coordinator cohort-train)
stage "building ${targets[*]} in $build"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
if [ "$build_only" = 1 ]; then stage "built"; exit 0; fi

# halt_on_error: the first report fails its test, with both stacks printed.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
stage "unit and api tests under TSan"
ctest --test-dir "$build" -L '^(unit|api)$' -E '^api\.umbrella_header$' --output-on-failure -j "$jobs" --timeout 300
stage "the launcher and coordinator integration tests under TSan"
ctest --test-dir "$build" -R '^integration\.(launcher|coordinator_restart|coordinator_ha|coordinator_members|orphans)\.' \
  --output-on-failure -j "$jobs" --timeout 300
stage "done"
