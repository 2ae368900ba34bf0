"""Builds the cohort wheel: the ctypes binding with libcohort bundled beside it.

The library is not compiled here; CMake builds it (cmake --build build) and
this copies it into the package folder as cohort/libcohort.so.0, where
cohort/_lib.py looks second (after $COHORT_LIBRARY). Which library is copied:

1. $COHORT_LIBRARY, the path of a libcohort.so;
2. libcohort.so.0 in $COHORT_BUILD_DIR, a CMake build folder;
3. libcohort.so.0 in build/ at the top of the source tree.

Debug information is stripped from the copy when `strip` is on PATH
(COHORT_STRIP=0 keeps it). The wheel is tagged py3-none-<platform>: it holds
no Python extension, but a native library for this machine, linked against
this machine's shared libraries (fmt, yaml-cpp, Boost.JSON, curl, RE2, ...).

`pip install ./python` runs this file; `pip install .` at the top of the
source tree runs ../setup.py, which calls main() with the folder prefix.
Offline (Debian's python3-setuptools and python3-wheel, no PyPI):
    pip install --no-build-isolation --no-index ./python
"""

import atexit
import ctypes
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # wheel missing: pip falls back to setup.py install
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(HERE)
BUNDLED = "libcohort.so.0"  # the SONAME (SOVERSION = the ABI major version)


class LibraryMissing(SystemExit):
    pass


def find_library():
    """The libcohort file to bundle, by the rules in the docstring."""
    explicit = os.environ.get("COHORT_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            raise LibraryMissing(f"cohort: COHORT_LIBRARY={explicit} is not a file; point it "
                                 "at a built libcohort.so, or unset it to use the build folder")
        return explicit
    build_dir = os.environ.get("COHORT_BUILD_DIR") or os.path.join(SOURCE_ROOT, "build")
    where = "COHORT_BUILD_DIR" if os.environ.get("COHORT_BUILD_DIR") else "the default"
    for name in (BUNDLED, "libcohort.so"):
        candidate = os.path.join(build_dir, name)
        if os.path.isfile(candidate):
            return candidate
    raise LibraryMissing(
        f"cohort: no built libcohort in {build_dir} ({where}): the wheel bundles the library "
        "CMake builds, so build it first:\n"
        f"    cmake -S {SOURCE_ROOT} -B {build_dir} && cmake --build {build_dir} --target cohort\n"
        "or set COHORT_BUILD_DIR to another CMake build folder, or COHORT_LIBRARY to the "
        "path of a libcohort.so")


def library_version(path):
    """cohort_version() of the library that will be bundled: the wheel's version."""
    try:
        lib = ctypes.CDLL(os.path.abspath(path))
    except OSError as exc:
        raise LibraryMissing(f"cohort: cannot load {path} to read its version: {exc}") from None
    lib.cohort_version.restype = ctypes.c_char_p
    return lib.cohort_version().decode()


class BuildPyWithLibrary(build_py):
    """build_py, then the library copied into build_lib/cohort/."""

    def run(self):
        super().run()
        source = find_library()
        target = os.path.join(self.build_lib, "cohort", BUNDLED)
        self.announce(f"bundling {source} as {target}", level=2)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.remove(target)
        shutil.copyfile(source, target)  # follows the libcohort.so -> .so.0 -> .so.0.1.0 links
        os.chmod(target, 0o755)
        if os.environ.get("COHORT_STRIP", "1") != "0" and shutil.which("strip"):
            subprocess.run(["strip", "--strip-debug", target], check=True)


commands = {"build_py": BuildPyWithLibrary}

if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """A wheel for this platform (it holds a native library) but any Python 3."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = PlatformWheel


def main(prefix=""):
    """setup() for the package in `prefix` (relative to the current folder, as
    setuptools wants): "" from python/, "python" from the top of the tree."""
    source = find_library()
    # Scratch files (build/, cohort.egg-info/) go to a temporary folder, not
    # the source tree: never into the top-level build/, which is CMake's, and
    # two builds from one tree at once do not share them.
    scratch = tempfile.mkdtemp(prefix="cohort-wheel-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    setup(
        name="cohort",
        version=library_version(source),
        description="Coordination for distributed ML training: the ctypes binding of libcohort",
        license="See LICENSE in the source tree",
        python_requires=">=3.9",
        packages=["cohort"],
        package_dir={"cohort": os.path.join(prefix, "cohort")},
        extras_require={"numpy": ["numpy"], "torch": ["torch"]},
        cmdclass=commands,
        zip_safe=False,
        options={"build": {"build_base": os.path.join(scratch, "build")},
                 "egg_info": {"egg_base": scratch}},
    )


if __name__ == "__main__":
    main()
