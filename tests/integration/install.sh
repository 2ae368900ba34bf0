#!/usr/bin/env bash
# integration.install: installs the build tree into a private prefix and
# checks the layout a user (or a distribution) relies on: headers, the
# versioned shared library with its SONAME, the static library, the CMake
# package and cohort.pc, none of them pointing back into the build or
# source tree.
#
# Usage: install.sh CMAKE BUILD_DIR PREFIX LIBDIR VERSION SOURCE_DIR [CONFIG]
#   LIBDIR is CMAKE_INSTALL_LIBDIR (relative to PREFIX); CONFIG is the
#   configuration to install for multi-config generators (may be empty).
set -euo pipefail

if [[ $# -lt 6 ]]; then
    echo "usage: install.sh CMAKE BUILD_DIR PREFIX LIBDIR VERSION SOURCE_DIR [CONFIG]" >&2
    exit 2
fi
cmake=$1 build_dir=$2 prefix=$3 libdir_rel=$4 version=$5 source_dir=$6 config=${7:-}
major=${version%%.*}
libdir=$prefix/$libdir_rel
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
expect_file() {
    if [[ -f $1 ]]; then echo "ok: $1"; else fail "missing file $1"; fi
}

case $prefix in
    "$build_dir"/*) ;;
    *) echo "refusing to install outside the build tree: $prefix" >&2; exit 2 ;;
esac

echo "== installing $build_dir into $prefix"
rm -rf -- "$prefix"
config_args=()
[[ -n $config ]] && config_args=(--config "$config")
if ! "$cmake" --install "$build_dir" --prefix "$prefix" "${config_args[@]}"; then
    echo "FAIL: cmake --install failed" >&2
    exit 1
fi

echo "== headers"
expect_file "$prefix/include/cohort.h"
expect_file "$prefix/include/cohort/cohort.hpp"
expect_file "$prefix/include/cohort/version.hpp"
if [[ -f $prefix/include/cohort/version.hpp ]] &&
    ! grep -q "kVersion = \"$version\"" "$prefix/include/cohort/version.hpp"; then
    fail "include/cohort/version.hpp does not say version $version"
fi
# Every include in an installed header must resolve inside the install:
# a public header that reaches into src/ breaks every user.
while IFS= read -r header; do
    dir=$(dirname "$header")
    while IFS= read -r included; do
        [[ -z $included ]] && continue
        if [[ ! -f $prefix/include/$included && ! -f $dir/$included ]]; then
            fail "${header#"$prefix"/} includes \"$included\", which is not installed"
        fi
    done < <(sed -n -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
                    -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\(cohort[^>]*\)>.*/\1/p' "$header")
done < <(find "$prefix/include" -type f \( -name '*.h' -o -name '*.hpp' \))

echo "== libraries in $libdir"
real=$libdir/libcohort.so.$version
expect_file "$real"
for link in "libcohort.so.$major" libcohort.so; do
    if [[ -L $libdir/$link ]]; then
        echo "ok: $libdir/$link -> $(readlink "$libdir/$link")"
        [[ $(readlink -f "$libdir/$link") == $(readlink -f "$real") ]] ||
            fail "$link does not lead to libcohort.so.$version"
    else
        fail "missing symlink $libdir/$link"
    fi
done
expect_file "$libdir/libcohort.a"
if [[ -f $real ]]; then
    dynamic=$(readelf -d "$real")
    soname=$(sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p' <<<"$dynamic")
    if [[ $soname == "libcohort.so.$major" ]]; then
        echo "ok: SONAME $soname"
    else
        fail "SONAME is '$soname', expected libcohort.so.$major"
    fi
    if grep -E '\((RPATH|RUNPATH)\)' <<<"$dynamic" | grep -qF "$build_dir"; then
        fail "the installed library keeps a run path into the build tree:" \
            "$(grep -E '\((RPATH|RUNPATH)\)' <<<"$dynamic")"
    fi
fi

echo "== CMake package and pkg-config file"
package=$libdir/cmake/Cohort
expect_file "$package/CohortConfig.cmake"
expect_file "$package/CohortConfigVersion.cmake"
expect_file "$package/CohortTargets.cmake"
if ! compgen -G "$package/CohortTargets-*.cmake" >/dev/null; then
    fail "missing $package/CohortTargets-<config>.cmake"
fi
pc=$libdir/pkgconfig/cohort.pc
expect_file "$pc"
if [[ -f $pc ]] && ! grep -qx "Version: $version" "$pc"; then
    fail "cohort.pc does not say 'Version: $version'"
fi
# The install must be relocatable and must not depend on this checkout.
while IFS= read -r file; do
    for tree in "$build_dir" "$source_dir"; do
        if grep -qF "$tree" "$file"; then
            fail "${file#"$prefix"/} mentions $tree: $(grep -nF "$tree" "$file" | head -3)"
        fi
    done
done < <(find "$package" "$libdir/pkgconfig" "$prefix/include" -type f)

if [[ $failures -ne 0 ]]; then
    echo "integration.install: $failures problem(s)" >&2
    exit 1
fi
echo "integration.install: ok ($prefix)"
