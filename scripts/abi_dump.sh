#!/usr/bin/env bash
# Writes the C ABI of a built libcohort.so as libabigail XML (abidw): only the
# cohort_* functions of capi/cohort.h and the types they use (abi/cohort.suppr),
# without paths or source locations, so that the same ABI always gives the
# same file, whatever the build folder. The library needs debug information (a RelWithDebInfo or Debug
# build): abidw reads the types from it.
#
# Usage: scripts/abi_dump.sh LIBCOHORT_SO OUT_FILE
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 LIBCOHORT_SO OUT_FILE" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
abidw --headers-dir "$root/capi" --drop-private-types --exported-interfaces-only \
  --drop-undefined-syms --suppressions "$root/abi/cohort.suppr" \
  --no-corpus-path --no-comp-dir-path --no-show-locs --type-id-style hash \
  --out-file "$2" "$1"
# abidw still names each translation unit by the path it was compiled as,
# which depends on the build folder (and on ccache's CCACHE_BASEDIR): keep
# the path from the source root. It also lists declaration-only C++ classes
# of namespace cohort that no C function reaches, in whichever unit it met
# them first, which varies between builds: drop them, and the units left
# empty.
python3 - "$2" <<'PY'
import re, sys
path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    text = f.read()
text = re.sub(r"path='[^']*?((?:capi|src)/[^']*)'", r"path='\1'", text)
text = re.sub(r"\n    <namespace-decl name='cohort'>.*?\n    </namespace-decl>", "", text,
              flags=re.S)
text = re.sub(r"\n *<abi-instr [^>]*>\n *</abi-instr>", "", text)
with open(path, "w", encoding="utf-8") as f:
    f.write(text)
PY
