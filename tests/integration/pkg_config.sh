#!/usr/bin/env bash
# integration.pkg_config: compiles a C program against the installed
# cohort.pc with `cc main.c $(pkg-config --cflags --libs cohort)` and runs it.
#
# Usage: pkg_config.sh PREFIX CC SOURCE WORK_DIR VERSION [EXTRA_FLAGS...]
#   EXTRA_FLAGS go to the compiler (the sanitizer flags of the main build).
# Exits 77 (ctest: skipped) when pkg-config is not installed.
set -euo pipefail

if [[ $# -lt 5 ]]; then
    echo "usage: pkg_config.sh PREFIX CC SOURCE WORK_DIR VERSION [EXTRA_FLAGS...]" >&2
    exit 2
fi
prefix=$1 cc=$2 source=$3 work=$4 version=$5
shift 5
extra_flags=("$@")

if ! command -v pkg-config >/dev/null 2>&1; then
    echo "SKIP: pkg-config is not installed"
    exit 77
fi

# GNUInstallDirs picks lib, lib64 or lib/<multiarch>: find the file.
mapfile -t found < <(find "$prefix" -path '*/pkgconfig/cohort.pc' -type f)
if [[ ${#found[@]} -ne 1 ]]; then
    echo "FAIL: expected one pkgconfig/cohort.pc under $prefix, found ${#found[@]}: ${found[*]:-}" \
        "(did integration.install run?)" >&2
    exit 1
fi
pcdir=$(dirname "${found[0]}")
libdir=$(dirname "$pcdir")
export PKG_CONFIG_PATH=$pcdir
echo "== $pcdir/cohort.pc"
cat "$pcdir/cohort.pc"

modversion=$(pkg-config --modversion cohort)
if [[ $modversion != "$version" ]]; then
    echo "FAIL: pkg-config --modversion cohort says '$modversion', expected '$version'" >&2
    exit 1
fi
# ${pcfiledir}-relative paths must land in this prefix.
includedir=$(pkg-config --variable=includedir cohort)
if [[ ! -f $includedir/cohort.h ]]; then
    echo "FAIL: pkg-config's includedir '$includedir' has no cohort.h" >&2
    exit 1
fi
read -r -a flags <<<"$(pkg-config --cflags --libs cohort)"
echo "ok: cohort $modversion, flags: ${flags[*]}"

rm -rf -- "$work"
mkdir -p -- "$work"
program=$work/pkg_config_consumer
echo "== $cc -std=c11 ... $source ${flags[*]}"
if ! "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror "${extra_flags[@]}" \
    "$source" "${flags[@]}" -o "$program"; then
    echo "FAIL: compiling against cohort.pc failed" >&2
    exit 1
fi
if ! readelf -d "$program" | grep -q '(NEEDED).*\[libcohort\.so\.[0-9]*\]'; then
    echo "FAIL: the program does not load libcohort.so.N" >&2
    exit 1
fi

echo "== run"
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$program"
echo "integration.pkg_config: ok"
