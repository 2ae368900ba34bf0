"""examples/checkpoint_file.py, the checkpoints of train_numpy.py and
torch/train_elastic.py: a file written and read back exactly, and each
file that is not this worker's to use ignored with a line saying why."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from checkpoint_file import Checkpoint, checkpoint_file  # noqa: E402

OWNER = ("train", 1764140000.25, 123456789)
VALUES = [0.1, -2.5e-300, 1.0 / 3.0, 7.0, 0.0]


class CheckpointFile(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "w.ckpt")

    def tearDown(self):
        self.dir.cleanup()

    def saved(self, owner=OWNER, kind="demo"):
        Checkpoint(self.path, owner, kind).save(VALUES)

    def load(self, size=len(VALUES), owner=OWNER, kind="demo"):
        return Checkpoint(self.path, owner, kind).load(size)

    def test_round_trip_is_exact_and_leaves_no_temporary_file(self):
        self.saved()
        self.assertEqual(self.load(), (VALUES, None))
        self.assertEqual(os.listdir(self.dir.name), ["w.ckpt"])

    def test_no_file_says_nothing(self):
        self.assertEqual(self.load(), (None, ""))

    def test_a_file_that_is_not_a_checkpoint(self):
        with open(self.path, "w") as f:
            f.write("hello\n")
        self.assertEqual(self.load()[1], f"checkpoint '{self.path}': not a demo checkpoint (first line 'hello'); "
                                         "ignored")

    def test_another_kind_is_not_this_programs(self):
        self.saved(kind="other")
        self.assertIn("not a demo checkpoint (first line 'other checkpoint 1')", self.load()[1])

    def test_another_job_instance(self):
        self.saved(owner=("train", 5.0, OWNER[2]))
        self.assertEqual(self.load()[1], f"checkpoint '{self.path}': written for job 'train' created at 5.0, not "
                                         f"this job 'train' created at {OWNER[1]!r}; ignored")

    def test_other_flags_or_another_size(self):
        self.saved(owner=OWNER[:2] + (42,))
        self.assertIn("written with other model or data flags; ignored", self.load()[1])
        self.saved()
        self.assertIn("written with other model or data flags; ignored", self.load(size=4)[1])

    def test_a_cut_off_file(self):
        self.saved()
        with open(self.path) as f:
            lines = f.read().split("\n")
        with open(self.path, "w") as f:
            f.write("\n".join(lines[:7]) + "\n")
        self.assertEqual(self.load()[1], f"checkpoint '{self.path}': value 3 of 5 is missing or not a number "
                                         "(a cut-off file?); ignored")

    def test_a_damaged_header(self):
        self.saved()
        with open(self.path) as f:
            text = f.read()
        with open(self.path, "w") as f:
            f.write(text.replace("fingerprint ", "fingerprint x"))
        self.assertEqual(self.load()[1], f"checkpoint '{self.path}': damaged header; ignored")

    def test_an_unwritable_place_names_the_file(self):
        path = "/dev/null/w.ckpt"
        with self.assertRaises(OSError) as caught:
            Checkpoint(path, OWNER, "demo").save(VALUES)
        self.assertEqual(caught.exception.strerror, f"cannot write checkpoint '{path}': Not a directory")
        self.assertEqual(Checkpoint(path, OWNER, "demo").load(5), (None, f"cannot read checkpoint '{path}': "
                                                                         "Not a directory"))

    def test_the_file_name(self):
        env = dict(os.environ)
        try:
            os.environ.pop("COHORT_CHECKPOINT_DIR", None)
            self.assertIsNone(checkpoint_file(None, "m", "demo"))
            self.assertEqual(checkpoint_file("given.ckpt", "m", "demo"), "given.ckpt")
            os.environ["COHORT_CHECKPOINT_DIR"] = "/ck"
            os.environ["LOCAL_RANK"] = "3"
            self.assertEqual(checkpoint_file(None, "m", "demo"), "/ck/demo-3.ckpt")
            os.environ.pop("LOCAL_RANK")
            self.assertEqual(checkpoint_file(None, "../h/1", "demo"), "/ck/demo-.._h_1.ckpt")
        finally:
            os.environ.clear()
            os.environ.update(env)


if __name__ == "__main__":
    unittest.main()
