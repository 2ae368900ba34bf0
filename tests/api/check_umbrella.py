#!/usr/bin/env python3
"""Checks that include/cohort/cohort.hpp, which says it is the whole C++ API,
includes every public header of include/cohort/ but export.hpp (the export
macro, which each header includes itself). version.hpp.in counts as the
version.hpp it generates.

Usage: check_umbrella.py INCLUDE_COHORT_DIR
"""

import os
import re
import sys

# Internals that are not a concept of the API on their own.
NOT_API = {"export.hpp", "cohort.hpp"}


def main(argv):
    if len(argv) != 2:
        print("usage: check_umbrella.py INCLUDE_COHORT_DIR", file=sys.stderr)
        return 2
    folder = argv[1]
    headers = set()
    for name in os.listdir(folder):
        if name.endswith(".hpp.in"):
            name = name[:-len(".in")]  # generated at configure time
        if name.endswith(".hpp") and name not in NOT_API:
            headers.add(name)
    with open(os.path.join(folder, "cohort.hpp"), encoding="utf-8") as f:
        included = set(re.findall(r"^\s*#\s*include\s*<cohort/([\w.]+)>", f.read(), re.M))
    missing = sorted(headers - included)
    unknown = sorted(included - headers)
    for name in missing:
        print(f"FAIL: cohort.hpp does not include <cohort/{name}>: add it (the umbrella header "
              "is the whole C++ API)")
    for name in unknown:
        print(f"FAIL: cohort.hpp includes <cohort/{name}>, which is not a public header of {folder}")
    if missing or unknown:
        return 1
    print(f"OK: cohort.hpp includes all {len(headers)} public headers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
