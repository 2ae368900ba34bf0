#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/) in build-asan/ and runs each
# for SECONDS (default 60): scripts/sanitize.sh without its test suites.
# Each run draws new seeds (COHORT_FUZZ_SEED=0) unless COHORT_FUZZ_SEED is
# set: CI's short runs use seed 1, and `COHORT_FUZZ_SEED=1 scripts/fuzz.sh
# 60` covers what they try.
set -euo pipefail
export COHORT_FUZZ_SEED=${COHORT_FUZZ_SEED:-0}
exec bash "$(dirname "$0")/sanitize.sh" --fuzz-only "${1:-60}"
