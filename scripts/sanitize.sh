#!/usr/bin/env bash
# CI's sanitizer stage (README, "Testing"): one clang build in build-asan/
# with ASan and UBSan, every object also instrumented for libFuzzer
# (COHORT_FUZZ=ON), then
#   1. the unit, api and capi tests under ASan+UBSan (leaks included), the
#      python tests with the ASan runtime preloaded (leaks not checked), and
#      the integration tests of cohort's programs (see below),
#   2. every fuzzer replaying its seeds and regression inputs (ctest -L fuzz),
#   3. every fuzzer fuzzing for FUZZ_SECONDS (default 20), two at a time,
#      from the seed COHORT_FUZZ_SEED (default 1; 0 draws one at random).
#      With a fixed seed libFuzzer makes the same mutations in the same
#      order on every run of the same code (where a harness's coverage does
#      not hang on time or threads), so a CI failure can be reproduced and
#      a longer run with that seed, before a push, tries what a shorter one
#      will; scripts/fuzz.sh draws a new seed each run, to explore.
# Any sanitizer report, test failure or fuzzer crash fails the stage; a
# crash leaves its input in build-asan/fuzz/artifacts/.
#
#   scripts/sanitize.sh [FUZZ_SECONDS]        all three
#   scripts/sanitize.sh --fuzz-only [SECONDS] build the fuzzers and run 3
#                                              (what scripts/fuzz.sh does)
#   scripts/sanitize.sh --build-only          configure and build only (what
#                                              scripts/test.sh runs early)
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz_only=0 build_only=0
if [ "${1:-}" = "--fuzz-only" ]; then
  fuzz_only=1
  shift
elif [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
seconds=${1:-20}
case "$seconds" in '' | *[!0-9]*) echo "sanitize: FUZZ_SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;; esac
seed=${COHORT_FUZZ_SEED:-1}
case "$seed" in '' | *[!0-9]*) echo "sanitize: COHORT_FUZZ_SEED must be a whole number, not '$seed'" >&2; exit 2 ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
build="$PWD/build-asan"  # absolute: a harness may change its directory
started=$SECONDS
stage() { echo "sanitize: $1 ($((SECONDS - started)) s so far)"; }

source scripts/clang_tree.sh
source scripts/asan_integration.sh
configure_clang_tree sanitize "$build" -DCOHORT_FUZZ=ON
mapfile -t fuzzers < "$build/tests/fuzz/fuzzers.txt"
targets=()
for f in "${fuzzers[@]}"; do targets+=("fuzz_$f"); done
if [ "$fuzz_only" = 0 ]; then
  targets+=(unit_tests cohort_run_tests api_tests capi_c_test capi_c_test_static
           capi_etcd_store_cohort capi_etcd_store_cohort_static
           cohort-run cohort-coordinator cohort-train cohort_comm_worker)
fi
stage "building ${#targets[@]} targets in $build"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
if [ "$build_only" = 1 ]; then stage "built"; exit 0; fi

# Sanitizer reports end the process with an error; leaks are reports too.
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

if [ "$fuzz_only" = 0 ]; then
  # The C++ and C suites; capi.symbols, capi.abi, capi.contract and
  # api.umbrella_header check exports and text, not behaviour.
  stage "unit, api and capi tests under ASan+UBSan"
  ctest --test-dir "$build" -L '^(unit|api|capi)$' -E '^(capi\.(symbols|abi|contract)|api\.umbrella_header)$' \
    --output-on-failure -j "$jobs" --timeout 300
  # The python suite: each test has clang's runtime preloaded into the
  # interpreter (CMakeLists.txt, COHORT_ASAN_PRELOAD), and so do its
  # children (ranks as processes, etcd, openssl), which run fine with it;
  # leak checks are off there.
  stage "python tests under ASan+UBSan (runtime preloaded)"
  ctest --test-dir "$build" -L '^python$' --output-on-failure -j "$jobs" --timeout 300
  # The integration tests whose processes are cohort's programs, built
  # here with ASan: the launcher, the coordinator (restarts, replicas on
  # etcd, members), orphans, collectives between processes, the demo,
  # torchrun-style scripts and the emulated hosts. Then those whose ranks
  # are Python processes alone, with the runtime preloaded. Left to the
  # normal stage (docs/guide.md says why): comm_shm.* (7 minutes under
  # ASan), chaos.short and the slowloris (long, and the same code as the
  # coordinator tests here), and the cases where an ASan-built cohort-run
  # starts Python workers (two ASan runtimes cannot share those processes).
  stage "integration tests of cohort's programs under ASan+UBSan"
  ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 300 \
    -R "$asan_integration_programs"
  stage "integration tests with Python ranks under ASan+UBSan (runtime preloaded)"
  ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 300 \
    -R "$asan_integration_python"
  stage "replaying the fuzzers' seeds and regression inputs"
  ctest --test-dir "$build" -L '^fuzz$' --output-on-failure -j "$jobs" --timeout 300
fi

if [ "$seconds" -gt 0 ]; then
  stage "fuzzing ${#fuzzers[@]} harnesses for $seconds s each (seed $seed)"
  mkdir -p "$build/fuzz/artifacts"
  export COHORT_SANITIZE_BUILD="$build" COHORT_FUZZ_SECONDS="$seconds" COHORT_FUZZ_SEED="$seed"
  # Each harness's working corpus starts from its seeds (named by content:
  # two seeds may share a file name). Drawn seeds keep what earlier runs
  # found (fuzz/corpus/); a fixed seed starts from the seeds alone
  # (fuzz/fixed/, emptied first), so the run is the same wherever it runs.
  printf '%s\n' "${fuzzers[@]}" | xargs -P "$jobs" -I{} bash -c '
    name=$1
    if [ "$COHORT_FUZZ_SEED" = 0 ]; then
      corpus=$COHORT_SANITIZE_BUILD/fuzz/corpus/$name
    else
      corpus=$COHORT_SANITIZE_BUILD/fuzz/fixed/$name
      rm -rf "$corpus"
    fi
    mkdir -p "$corpus"
    while IFS= read -r seed; do
      [ -n "$seed" ] && cp "$seed" "$corpus/seed-$(sha1sum < "$seed" | cut -c1-16)"
    done < "$COHORT_SANITIZE_BUILD/tests/fuzz/$name.seeds"
    log=$COHORT_SANITIZE_BUILD/fuzz/$name.log
    if "$COHORT_SANITIZE_BUILD/tests/fuzz/fuzz_$name" -max_total_time="$COHORT_FUZZ_SECONDS" -seed="$COHORT_FUZZ_SEED" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$COHORT_SANITIZE_BUILD/fuzz/artifacts/$name-" "$corpus" > "$log" 2>&1; then
      echo "fuzz $name: $(grep -E "^stat::number_of_executed_units" "$log" | tr -dc 0-9) runs, no crash" \
        "($(grep -m1 -oE "Seed: [0-9]+" "$log"))"
    else
      echo "fuzz $name: FAILED; the end of $log:" >&2
      tail -n 40 "$log" >&2
      exit 1
    fi' _ {} || {
    echo "sanitize: a fuzzer crashed; its input is in $build/fuzz/artifacts/. Fix the defect, add a regression" \
      "test to the normal suite, and keep the input in tests/fuzz/corpus/<fuzzer>/" >&2
    exit 1
  }
fi
stage "done"
