#!/usr/bin/env bash
# integration.find_package: an outside project (consumer/) finds the
# installed package with find_package(Cohort 0.1 REQUIRED), builds one
# program against cohort::cohort and one against cohort::cohort_static, and
# runs both. Also checks that an incompatible version request is refused.
#
# Usage: find_package.sh CMAKE GENERATOR CONSUMER_SOURCE WORK_DIR INITIAL_CACHE PREFIX LIBDIR [CONFIG]
#   INITIAL_CACHE is a -C script with the compilers, flags and dependency
#   locations of the main build; LIBDIR is CMAKE_INSTALL_LIBDIR.
set -euo pipefail

if [[ $# -lt 7 ]]; then
    echo "usage: find_package.sh CMAKE GENERATOR CONSUMER_SOURCE WORK_DIR INITIAL_CACHE PREFIX LIBDIR [CONFIG]" >&2
    exit 2
fi
cmake=$1 generator=$2 source=$3 work=$4 cache=$5 prefix=$6 libdir=$prefix/$7 config=${8:-}

if [[ ! -f $libdir/cmake/Cohort/CohortConfig.cmake ]]; then
    echo "FAIL: no CohortConfig.cmake under $libdir/cmake/Cohort: did integration.install run?" >&2
    exit 1
fi

configure() {  # BUILD_DIR EXTRA_ARGS...
    local dir=$1
    shift
    rm -rf -- "$dir"
    "$cmake" -S "$source" -B "$dir" -G "$generator" -C "$cache" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DCOHORT_EXPECTED_PREFIX="$prefix" "$@"
}

echo "== find_package(Cohort 1.0) must be refused (SameMajorVersion)"
if configure "$work-v1" -DCOHORT_REQUESTED_VERSION=1.0 >"$work-v1.log" 2>&1; then
    cat "$work-v1.log"
    echo "FAIL: find_package(Cohort 1.0) accepted the installed 0.x package" >&2
    exit 1
fi
# CMake wraps its messages: join the lines before matching.
if ! tr -s ' \n' ' ' <"$work-v1.log" | grep -q 'compatible with requested version "1.0"'; then
    cat "$work-v1.log"
    echo "FAIL: configuring with Cohort 1.0 failed for another reason than the version" >&2
    exit 1
fi
rm -rf -- "$work-v1" "$work-v1.log"
echo "ok: refused"

echo "== configure $source in $work"
if ! configure "$work"; then
    echo "FAIL: the consumer project did not configure against $prefix" >&2
    exit 1
fi

echo "== build"
build_args=()
[[ -n $config ]] && build_args=(--config "$config")
if ! "$cmake" --build "$work" -j1 "${build_args[@]}"; then
    echo "FAIL: the consumer project did not build against $prefix" >&2
    exit 1
fi

find_program() {
    local path
    path=$(find "$work" -type f -name "$1" -perm -u+x | head -n 1)
    if [[ -z $path ]]; then
        echo "FAIL: $1 was not built in $work" >&2
        exit 1
    fi
    echo "$path"
}
shared=$(find_program consumer)
static=$(find_program consumer_static)

echo "== link check"
if ! readelf -d "$shared" | grep -q '(NEEDED).*\[libcohort\.so\.[0-9]*\]'; then
    echo "FAIL: consumer does not load libcohort.so.N:" >&2
    readelf -d "$shared" | grep NEEDED >&2
    exit 1
fi
if readelf -d "$static" | grep -q '(NEEDED).*libcohort'; then
    echo "FAIL: consumer_static links libcohort dynamically:" >&2
    readelf -d "$static" | grep NEEDED >&2
    exit 1
fi
echo "ok: consumer needs libcohort.so, consumer_static does not"

echo "== run"
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
loaded=$(LD_TRACE_LOADED_OBJECTS=1 "$shared" | grep libcohort || true)
case $loaded in
    *"$libdir"/*) echo "ok: $loaded" ;;
    *) echo "FAIL: consumer loads libcohort from elsewhere: '$loaded'" >&2; exit 1 ;;
esac
"$shared"
"$static"
echo "integration.find_package: ok"
