#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/) in build-asan/ and runs each
# for SECONDS (default 60): scripts/sanitize.sh without its test suites.
set -euo pipefail
exec bash "$(dirname "$0")/sanitize.sh" --fuzz-only "${1:-60}"
