# Sourced by scripts/sanitize.sh and scripts/tsan.sh: configures a clang
# build tree for a sanitizer.
#   configure_clang_tree NAME BUILD_DIR CMAKE_ARGS...
# NAME prefixes the error when clang is missing.
configure_clang_tree() {
  local name=$1 dir=$2
  shift 2
  command -v clang++ >/dev/null || { echo "$name: clang++ is missing; run scripts/deps.sh" >&2; exit 1; }
  local extra=()
  if [ -x /usr/bin/python3 ]; then extra+=(-DPython3_EXECUTABLE=/usr/bin/python3); fi
  # A second run (or CI with a warm cache) rebuilds in seconds.
  if command -v ccache >/dev/null; then
    extra+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  # -O1 with line tables only: a quarter less compile time than -O2 -g, and
  # the reports still name file and line. The tests' own objects at -O0:
  # half their compile time again (measured on coordinator_client_test.cpp
  # under ASan: 5.8 s against 11.3 s), and they do little of the work.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOHORT_WERROR=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCOHORT_BUILD_BENCHMARKS=OFF \
    -DCOHORT_TEST_COMPILE_OPTIONS=-O0 \
    "${extra[@]}" "$@" >/dev/null
}
