"""python -m cohort."""

import json
import subprocess
import sys
import unittest

import _support
import cohort


def run(*args, **env):
    return subprocess.run([sys.executable, "-m", "cohort", *args], capture_output=True,
                          text=True, env=_support.child_env(**env), timeout=120)


class CliTest(unittest.TestCase):
    def test_version(self):
        child = run("--version")
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertRegex(child.stdout, r"^cohort \d+\.\d+\.\d+\n$")
        self.assertEqual(child.stdout.split()[1], cohort.__version__)

    def test_help(self):
        child = run("--help")
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertIn("usage", child.stdout)
        self.assertIn("--version", child.stdout)

    def test_help_works_without_the_library(self):
        child = run("--help", COHORT_LIBRARY="/nonexistent/libcohort.so")
        self.assertEqual(child.returncode, 0, child.stderr)

    def test_version_without_the_library_fails_clearly(self):
        child = run("--version", COHORT_LIBRARY="/nonexistent/libcohort.so")
        self.assertEqual(child.returncode, 1)
        self.assertIn("/nonexistent/libcohort.so", child.stderr)
        self.assertNotIn("Traceback", child.stderr)

    def test_library(self):
        child = run("--library")
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(child.stdout.strip(), cohort.library_path())

    def test_ranks(self):
        child = run("ranks", _support.data("cluster.yaml"))
        self.assertEqual(child.returncode, 0, child.stderr)
        lines = child.stdout.splitlines()
        self.assertEqual(lines[1].split()[-1], "chief")
        self.assertIn("world size 10", child.stdout)
        self.assertIn("rack 3", child.stdout)

    def test_plan(self):
        child = run("plan", _support.data("dataset.txt"), _support.data("cluster.yaml"),
                    "--shard-bytes", "1KiB", "--replication", "2")
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(len(json.loads(child.stdout)["shards"]), 6)

    def test_plan_locality(self):
        child = run("plan", _support.data("dataset.txt"), _support.data("cluster.yaml"),
                    "--shard-count", "4", "--strategy", "locality")
        self.assertEqual(child.returncode, 1)
        self.assertIn("--strategy locality needs --locality FILE", child.stderr)

    def test_error_exit(self):
        child = run("ranks", _support.data("bad_field.yaml"))
        self.assertEqual(child.returncode, 1)
        self.assertIn("bad_field.yaml:5", child.stderr)
        self.assertNotIn("Traceback", child.stderr)


if __name__ == "__main__":
    unittest.main()
