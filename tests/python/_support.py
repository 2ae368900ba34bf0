"""Shared by the Python tests: puts the cohort package on sys.path (from
$COHORT_PYTHONPATH, else python/ of this source tree), and finds test data."""

import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.environ.get("COHORT_PYTHONPATH") or os.path.normpath(
    os.path.join(HERE, "..", "..", "python"))
if PACKAGE_DIR not in sys.path:
    sys.path.insert(0, PACKAGE_DIR)

DATA_DIR = os.path.join(HERE, "data")


def data(name):
    return os.path.join(DATA_DIR, name)


def seeded_random(test_name):
    """A random.Random whose seed is printed (and can be fixed with COHORT_TEST_SEED)."""
    seed = int(os.environ.get("COHORT_TEST_SEED") or random.SystemRandom().randrange(2**32))
    print(f"\n{test_name}: seed {seed} (set COHORT_TEST_SEED={seed} to repeat)",
          file=sys.stderr)
    return random.Random(seed)


def child_env(**extra):
    """The environment for a `python -m cohort` child process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
