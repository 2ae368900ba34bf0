#!/usr/bin/env python3
"""Checks that the C ABI of the built libcohort.so is exactly the one recorded
in abi/libcohort.abi: the same cohort_* functions with the same parameter and
return types, and the same public structs and typedefs. Any difference fails,
an added function as much as a changed one, so that the ABI only changes on
purpose: regenerate the baseline with scripts/abi_baseline.sh and commit it
with the change.

Usage: check_abi.py LIBCOHORT_SO SOURCE_ROOT

Exit status: 0 same ABI, 1 a difference (abidiff's report is printed), 2 the
check could not run, 77 skipped (no abidw/abidiff, or a library built without
debug information, which abidw needs to see the types).
"""

import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def has_debug_info(library):
    try:
        out = subprocess.run(["readelf", "-S", "--wide", library], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return True  # cannot tell: let abidw decide
    return ".debug_info" in out


def main(argv):
    if len(argv) != 3:
        print("usage: check_abi.py LIBCOHORT_SO SOURCE_ROOT", file=sys.stderr)
        return 2
    library, root = argv[1], argv[2]
    baseline = os.path.join(root, "abi", "libcohort.abi")
    missing = [tool for tool in ("abidw", "abidiff") if shutil.which(tool) is None]
    if missing:
        print(f"SKIP: {' and '.join(missing)} not found: install abigail-tools "
              "(scripts/deps.sh does) to check the C ABI")
        return SKIP
    if not has_debug_info(library):
        print(f"SKIP: {library} has no debug information; abidw needs it: check the ABI "
              "in a RelWithDebInfo or Debug build")
        return SKIP
    if not os.path.exists(baseline):
        print(f"FAIL: {baseline} is missing: create it with scripts/abi_baseline.sh")
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        current = os.path.join(scratch, "libcohort.abi")
        dump = subprocess.run(["bash", os.path.join(root, "scripts", "abi_dump.sh"), library,
                               current], capture_output=True, text=True)
        if dump.returncode != 0:
            print(f"check_abi.py: abidw failed ({dump.returncode}):\n{dump.stdout}{dump.stderr}",
                  file=sys.stderr)
            return 2
        diff = subprocess.run(["abidiff", "--no-show-locs", baseline, current],
                              capture_output=True, text=True)
    report = (diff.stdout + diff.stderr).strip()
    if diff.returncode == 0:
        print(f"OK: the C ABI of {library} is the one in abi/libcohort.abi")
        return 0
    if diff.returncode & 3:  # 1: error, 2: usage error
        print(f"check_abi.py: abidiff failed ({diff.returncode}):\n{report}", file=sys.stderr)
        return 2
    kind = "an INCOMPATIBLE change" if diff.returncode & 8 else "a change"
    print(f"FAIL: the C ABI of {library} differs from abi/libcohort.abi ({kind}):\n")
    print(report)
    print("\nThe C ABI (capi/cohort.h) is frozen: every change to it, compatible or not, must "
          "be made on purpose. If this one is, regenerate the baseline and commit it with the "
          "change:\n    scripts/abi_baseline.sh BUILD_DIR\nand say in the commit what changed; "
          "an incompatible change also needs COHORT_VERSION_MAJOR (the SOVERSION) raised. "
          "Otherwise undo the change to the ABI.")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
