"""Status codes become exceptions that carry the code and the C message."""

import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest

import _support
import cohort
from cohort import _lib, errors

def read_header():
    with open(os.path.join(_support.HERE, "..", "..", "capi", "cohort.h")) as f:
        return f.read()


CODES = {
    1: cohort.InvalidArgument, 2: cohort.ParseError, 3: cohort.FileError,
    4: cohort.NotFound, 5: cohort.OutOfRange, 6: cohort.Timeout, 7: cohort.Unavailable,
    8: cohort.NoMemory, 9: cohort.CallbackError, 10: cohort.InternalError,
    11: cohort.BufferTooSmall, 12: cohort.Unsatisfiable, 13: cohort.PeerFailed,
    14: cohort.Mismatch, 15: cohort.Closed, 16: cohort.PermissionDenied,
}


class HierarchyTest(unittest.TestCase):
    def test_one_class_per_code(self):
        self.assertEqual(len(set(CODES.values())), len(CODES))
        for code, cls in CODES.items():
            self.assertTrue(issubclass(cls, cohort.Error), cls)
            self.assertEqual(cls.code, code)
            err = errors.error_for(code, "what failed")
            self.assertIs(type(err), cls)
            self.assertEqual(err.code, code)
            self.assertEqual(str(err), "what failed")
            self.assertEqual(err.message, "what failed")

    def test_codes_match_header(self):
        header = read_header()
        found = {int(v): n for n, v in re.findall(r"#define COHORT_ERR_(\w+) (\d+)", header)}
        self.assertEqual(set(found), set(CODES))

    def test_builtin_bases(self):
        self.assertTrue(issubclass(cohort.InvalidArgument, ValueError))
        self.assertTrue(issubclass(cohort.FileError, OSError))
        self.assertTrue(issubclass(cohort.OutOfRange, IndexError))
        self.assertTrue(issubclass(cohort.NotFound, LookupError))
        self.assertTrue(issubclass(cohort.Timeout, TimeoutError))
        self.assertTrue(issubclass(cohort.LibraryNotFound, ImportError))

    def test_unknown_code(self):
        err = errors.error_for(99, "odd")
        self.assertIs(type(err), cohort.Error)
        self.assertEqual(err.code, 99)

    def test_strerror_names_every_code(self):
        names = {code: cohort.strerror(code) for code in CODES}
        self.assertEqual(names[1], "invalid argument")
        for code, name in names.items():
            self.assertTrue(name, code)
        self.assertEqual(len(set(names.values())), len(names), names)


class BindingTest(unittest.TestCase):
    def test_every_header_function_is_declared(self):
        header = read_header()
        declared = set(re.findall(r"COHORT_API[^;(]*?\b(cohort_\w+)\s*\(", header))
        self.assertGreater(len(declared), 50)
        self.assertEqual(declared, set(_lib.PROTOTYPES))
        lib = _lib.load()
        for name in declared:
            self.assertIsNotNone(getattr(lib, name).argtypes, name)

    def test_version(self):
        self.assertRegex(cohort.__version__, r"^\d+\.\d+\.\d+")
        header = read_header()
        parts = [re.search(rf"#define COHORT_VERSION_{p} (\d+)", header).group(1)
                 for p in ("MAJOR", "MINOR", "PATCH")]
        self.assertEqual(cohort.__version__, ".".join(parts))


class MessageTest(unittest.TestCase):
    def test_missing_file_is_file_error_naming_it(self):
        path = _support.data("no-such-cluster.yaml")
        with self.assertRaises(cohort.FileError) as cm:
            cohort.Topology.from_file(path)
        self.assertEqual(cm.exception.code, 3)
        self.assertIn("no-such-cluster.yaml", str(cm.exception))
        self.assertIsInstance(cm.exception, OSError)

    def test_parse_error_names_file_and_line(self):
        with self.assertRaises(cohort.ParseError) as cm:
            cohort.Topology.from_file(_support.data("bad_field.yaml"))
        self.assertEqual(cm.exception.code, 2)
        self.assertRegex(str(cm.exception), r"bad_field\.yaml:5:\d+")

    def test_message_of_last_failure(self):
        with self.assertRaises(cohort.ParseError) as first:
            cohort.Topology.from_file(_support.data("bad_field.yaml"))
        with self.assertRaises(cohort.InvalidArgument) as second:
            cohort.epoch_order(10, rank=3, world_size=2)
        self.assertNotEqual(first.exception.message, second.exception.message)
        self.assertTrue(second.exception.message)

    def test_each_thread_sees_its_own_message(self):
        results = {}

        def fail(name, path):
            for _ in range(200):
                try:
                    cohort.Topology.from_file(path)
                except cohort.Error as exc:
                    results.setdefault(name, set()).add(os.path.basename(path) in str(exc))

        threads = [threading.Thread(target=fail, args=(f"t{i}", _support.data(name)))
                   for i, name in enumerate(("bad_field.yaml", "bad_role.yaml",
                                             "no-such-file.yaml", "duplicate.yaml"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, {f"t{i}": {True} for i in range(4)})

    def test_closed_handle(self):
        topo = cohort.Topology()
        topo.close()
        topo.close()  # twice is fine
        with self.assertRaises(cohort.InvalidArgument):
            len(topo)
        with cohort.Topology(["a"]) as t:
            self.assertEqual(len(t), 1)
        self.assertTrue(t.closed)


class LibraryLookupTest(unittest.TestCase):
    def run_child(self, code, **env):
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=_support.child_env(**env), timeout=60)

    def test_missing_library_lists_where_it_looked(self):
        bogus = os.path.join(_support.HERE, "no-such-dir", "libcohort.so")
        child = self.run_child(
            "import cohort\n"
            "try:\n    cohort.version()\n"
            "except cohort.LibraryNotFound as e:\n"
            "    assert isinstance(e, ImportError) and isinstance(e, cohort.Error)\n"
            "    print(e)\n", COHORT_LIBRARY=bogus)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertIn(bogus, child.stdout)
        self.assertIn("COHORT_LIBRARY", child.stdout)

    def test_build_dir_variable_comes_before_the_build_tree(self):
        loaded = os.path.realpath(cohort.library_path())
        if not os.path.isfile(loaded):
            self.skipTest("libcohort was found by name on the system")
        with tempfile.TemporaryDirectory() as tmp:
            link = os.path.join(tmp, "libcohort.so")
            os.symlink(loaded, link)
            child = self.run_child("import cohort; print(cohort.library_path())",
                                   COHORT_LIBRARY="", COHORT_BUILD_DIR=tmp)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(child.stdout.strip(), link)


if __name__ == "__main__":
    unittest.main()
