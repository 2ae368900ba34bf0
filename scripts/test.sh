#!/usr/bin/env bash
# Builds everything (library, examples, tests, benchmarks) in build/ with
# warnings as errors and runs every test through ctest, then the sanitizer
# stage (scripts/sanitize.sh: ASan+UBSan tests and the fuzzers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
# Debian's interpreter: it sees the python3-* packages deps.sh installs
# (numpy), which a python3 earlier on PATH (pyenv, a venv) may not.
python=()
if [ -x /usr/bin/python3 ]; then python=(-DPython3_EXECUTABLE=/usr/bin/python3); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOHORT_WERROR=ON "${python[@]}"
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 300
# The sanitizer stage: ASan+UBSan tests and the fuzzers (docs/guide.md,
# "Sanitizers and fuzzing").
if [ "${COHORT_NO_SANITIZE:-0}" != 1 ]; then
  bash scripts/sanitize.sh "${COHORT_FUZZ_SECONDS:-20}"
fi
