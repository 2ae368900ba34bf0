#!/usr/bin/env bash
# Writes the C ABI of a built libcohort.so as libabigail XML (abidw): only the
# cohort_* functions of capi/cohort.h and the types they use (abi/cohort.suppr),
# without paths or source locations, so that the same ABI always gives the
# same file. The library needs debug information (a RelWithDebInfo or Debug
# build): abidw reads the types from it.
#
# Usage: scripts/abi_dump.sh LIBCOHORT_SO OUT_FILE
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 LIBCOHORT_SO OUT_FILE" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
exec abidw --headers-dir "$root/capi" --drop-private-types --exported-interfaces-only \
  --drop-undefined-syms --suppressions "$root/abi/cohort.suppr" \
  --no-corpus-path --no-comp-dir-path --no-show-locs --type-id-style hash \
  --out-file "$2" "$1"
