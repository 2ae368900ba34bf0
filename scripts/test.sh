#!/usr/bin/env bash
# Builds everything (library, examples, tests, benchmarks) in build/ with
# warnings as errors and runs every test through ctest, then the sanitizer
# stages (scripts/sanitize.sh: ASan+UBSan tests and the fuzzers;
# scripts/tsan.sh: the threaded code's tests under TSan).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
# Debian's interpreter: it sees the python3-* packages deps.sh installs
# (numpy), which a python3 earlier on PATH (pyenv, a venv) may not.
python=()
if [ -x /usr/bin/python3 ]; then python=(-DPython3_EXECUTABLE=/usr/bin/python3); fi
# The tests' own objects at -O0 without debug information: less than half
# their compile time (COHORT_TEST_COMPILE_OPTIONS); the library, programs
# and benchmarks stay -O2 -g.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOHORT_WERROR=ON "-DCOHORT_TEST_COMPILE_OPTIONS=-O0;-g0" \
  "${python[@]}"
cmake --build build -j "$jobs"
sanitize=1
if [ "${COHORT_NO_SANITIZE:-0}" = 1 ]; then sanitize=0; fi
# The two sanitizer trees are built while the tests run, at the lowest CPU
# priority: the tests (most of their time is spent waiting on processes and
# timeouts) keep the CPU they need and the builds take what they leave.
# Measured on a fresh clone: the ASan tree was nearly done when the tests
# ended (they took 3.6 min longer for it), and the TSan tree then built
# alone for 7 min. Their output goes to a log, shown if they fail.
builds=""
if [ "$sanitize" = 1 ]; then
  setsid -w nice -n 19 bash -c 'bash scripts/sanitize.sh --build-only && bash scripts/tsan.sh --build-only' \
    > build/sanitizer-builds.log 2>&1 &
  builds=$!
  trap '[ -n "$builds" ] && kill -- -"$builds" 2>/dev/null; true' EXIT
fi
# The integration tests the ASan stage runs on ASan-built programs run
# there only (scripts/asan_integration.sh).
skip=()
if [ "$sanitize" = 1 ]; then
  source scripts/asan_integration.sh
  skip=(-E "$asan_integration_programs|$asan_integration_python")
fi
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 300 "${skip[@]}"
if [ "$sanitize" = 1 ]; then
  echo "test: waiting for the sanitizer builds (build/sanitizer-builds.log)"
  if ! wait "$builds"; then
    builds=""
    tail -n 60 build/sanitizer-builds.log >&2
    echo "test: the sanitizer builds failed; the whole log is build/sanitizer-builds.log" >&2
    exit 1
  fi
  builds=""
  # The sanitizer stages: ASan+UBSan tests and the fuzzers, then TSan
  # (docs/guide.md, "Sanitizers and fuzzing"); their builds are up to date.
  bash scripts/sanitize.sh "${COHORT_FUZZ_SECONDS:-10}"
  bash scripts/tsan.sh
fi
