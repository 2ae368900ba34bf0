#!/usr/bin/env bash
# pip install, offline, as python/setup.py documents it: in a fresh venv
# (--system-site-packages, for numpy) made by Debian's Python,
#   pip install --no-build-isolation --no-index ./python
# and, in a second venv, the same with `.` at the top of the tree, each with
# COHORT_BUILD_DIR set to this build. Then, from a folder outside the source
# tree with PYTHONPATH, COHORT_LIBRARY and COHORT_BUILD_DIR unset:
# `python -m cohort --version` prints this build's version, and the library
# cohort loads is the copy bundled in the venv's site-packages, which runs a
# one-rank Communicator. Also: the wheel is tagged py3-none-<platform>, not
# pure; the build leaves nothing in the source tree; and with no built
# library the install fails saying to build it. Fails (never skips) when
# pip, venv, setuptools or wheel are missing: scripts/deps.sh installs them.
#
# Usage: pip_install.sh SOURCE_DIR LIBRARY_DIR VERSION [PYTHON]
#   LIBRARY_DIR: the folder holding this build's libcohort.so.0;
#   PYTHON: the interpreter whose pip is tested (default /usr/bin/python3).
set -euo pipefail

source_dir=$1
library_dir=$2
version=$3
python=${4:-/usr/bin/python3}

fail() { echo "FAIL: $*" >&2; exit 1; }
missing() { fail "$* (run scripts/deps.sh as root: it installs python3-pip, python3-venv, python3-setuptools and python3-wheel)"; }

[ -x "$python" ] || missing "$python not found"
"$python" -c 'import venv, ensurepip' 2>/dev/null || missing "$python has no venv/ensurepip"
"$python" -m pip --version >/dev/null 2>&1 || missing "$python has no pip"
"$python" -c 'import setuptools, wheel' 2>/dev/null || missing "$python lacks setuptools or wheel"
[ -e "$library_dir/libcohort.so.0" ] || fail "no libcohort.so.0 in $library_dir: build the cohort target first"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH COHORT_LIBRARY PYTHONHOME

# What the build may leave behind in the source tree; those present before
# are someone else's.
scratch=(build python/build cohort.egg-info python/cohort.egg-info)
before=()
for f in "${scratch[@]}"; do [ -e "$source_dir/$f" ] && before+=("$f"); done

check_install() {  # VENV WHAT: runs the installed package from outside the tree
  local venv=$1 what=$2
  local out
  out=$(cd "$work" && env -u COHORT_BUILD_DIR "$venv/bin/python" -m cohort --version) ||
    fail "$what: python -m cohort --version failed"
  [ "$out" = "cohort $version" ] || fail "$what: python -m cohort --version printed '$out', expected 'cohort $version'"
  echo "$what: $out"
  (cd "$work" && env -u COHORT_BUILD_DIR "$venv/bin/python" - "$source_dir" <<'EOF') || fail "$what: the installed package does not work"
import os
import sys
import sysconfig

import cohort

source = os.path.realpath(sys.argv[1])
package = os.path.dirname(os.path.realpath(cohort.__file__))
site = os.path.realpath(sysconfig.get_paths()["platlib"])
library = os.path.realpath(cohort.library_path())
print("package:", package)
print("library:", library)
if os.path.commonpath([package, site]) != site:
    sys.exit(f"cohort was imported from {package}, not the venv's {site}")
if library != os.path.join(package, "libcohort.so.0"):
    sys.exit(f"loaded {library}, not the copy bundled in {package}")
if os.path.commonpath([library, source]) == source:
    sys.exit(f"loaded {library} from the source tree")

import numpy as np
with cohort.Communicator(0, 1) as comm:
    data = np.arange(8, dtype=np.float32)
    comm.allreduce(data)
    comm.barrier()
    if comm.size != 1 or not np.array_equal(data, np.arange(8, dtype=np.float32)):
        sys.exit(f"one-rank allreduce gave {data}")
print("one-rank Communicator: allreduce and barrier ok")
EOF
  local wheel_file
  wheel_file=$(echo "$venv"/lib/python3*/site-packages/cohort-*.dist-info/WHEEL)
  grep -q '^Root-Is-Purelib: false' "$wheel_file" || fail "$what: the wheel claims to be pure: $(cat "$wheel_file")"
  grep -Eq '^Tag: py3-none-linux_' "$wheel_file" || fail "$what: unexpected wheel tag: $(grep Tag "$wheel_file")"
}

install_from() {  # VENV TARGET: a fresh venv, then pip install TARGET from SOURCE_DIR
  local venv=$1 target=$2
  "$python" -m venv --system-site-packages "$venv" || missing "$python -m venv failed"
  [ -x "$venv/bin/pip" ] || missing "the venv has no pip"
  (cd "$source_dir" && COHORT_BUILD_DIR=$library_dir "$venv/bin/pip" install --no-cache-dir \
     --no-build-isolation --no-index --quiet "$target") || fail "pip install $target failed"
}

start=$SECONDS
install_from "$work/venv-python" ./python
check_install "$work/venv-python" "pip install ./python"
install_from "$work/venv-root" .
check_install "$work/venv-root" "pip install ."

for f in "${scratch[@]}"; do
  if [ -e "$source_dir/$f" ] && [[ ! " ${before[*]-} " == *" $f "* ]]; then
    fail "the build left $source_dir/$f behind"
  fi
done

# No built library: a clear error, not a package without one.
mkdir "$work/empty"
if (cd "$source_dir" && COHORT_BUILD_DIR=$work/empty "$work/venv-root/bin/pip" install \
      --no-cache-dir --no-build-isolation --no-index ./python) >"$work/nolib.log" 2>&1; then
  fail "pip install succeeded with no built library"
fi
grep -q "cmake --build" "$work/nolib.log" || { cat "$work/nolib.log"; fail "the error does not say to build the library"; }
echo "no library: pip install fails, saying: $(grep -m1 'no built libcohort' "$work/nolib.log" | sed 's/^ *//')"
echo "ok ($((SECONDS - start)) s)"
