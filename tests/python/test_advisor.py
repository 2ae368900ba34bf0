"""The data advisor from Python: cohort.data.advise and DataAdvisor."""

import unittest

import _support  # noqa: F401  (puts the package on sys.path)
import cohort
import cohort.data

MiB = 1 << 20


def make_plan(replication=3):
    """Three workers holding every shard of three 64 MiB files (1 KiB per
    sample), in 8 MiB shards; n2 has train/a.rec on its disk, n1 train/b.rec
    and n0 half of eval/c.rec nearby."""
    files = cohort.Dataset.of([("train/a.rec", 64 * MiB, 65536), ("train/b.rec", 64 * MiB, 65536),
                               ("eval/c.rec", 64 * MiB, 65536)])
    return cohort.plan_shards(files, ["n0", "n1", "n2"], shard_bytes=8 * MiB, replication=replication,
                              locality={"n2": {"train/a.rec": 1.0}, "n1": {"train/b.rec": 1.0},
                                        "n0": {"eval/c.rec": 0.5}})


class Baseline(unittest.TestCase):
    def setUp(self):
        self.plan = make_plan()

    def test_allreduce_and_parameter_server(self):
        ar = cohort.data.advise(self.plan, batch_size=1024, memory_budget=64 * MiB)
        self.assertIsInstance(ar, cohort.data.DataAdvice)
        self.assertEqual(ar.style, "allreduce")
        self.assertEqual(ar.baseline.prefetch_batches, 2)
        self.assertEqual(ar.prefetch_batches, 2)
        self.assertEqual(ar.prefetch_bytes, 2 * MiB)
        self.assertEqual(ar.sample_bytes, 1024)
        self.assertFalse(ar.measured)
        self.assertFalse(ar.cache)
        self.assertIn("read once", ar.cache_reason)
        ps = cohort.data.advise(self.plan, batch_size=1024, memory_budget="64MiB", style="parameter_server")
        self.assertEqual(ps.prefetch_batches, 4)
        self.assertIn("parameter_server: 4 batches", ps.baseline.prefetch_reason)
        self.assertEqual([n.prefetch_batches for n in ps.nodes], [4, 4, 4])

    def test_cache_when_read_again(self):
        a = cohort.data.advise(self.plan, batch_size=1024, memory_budget="1GiB", epochs=3)
        self.assertTrue(a.cache)
        self.assertIn("epochs 3 > 1", a.cache_reason)
        self.assertEqual({s.cache for s in a.shards}, {"memory"})
        r = cohort.data.advise(self.plan, batch_size=1024, memory_budget="1GiB", access="random")
        self.assertTrue(r.cache)
        self.assertIn("random access", r.cache_reason)


class Locality(unittest.TestCase):
    def test_local_replica_and_priority(self):
        plan = make_plan()
        a = cohort.data.advise(plan, batch_size=1024, memory_budget=64 * MiB)
        self.assertEqual(len(a.shards), 24)
        self.assertEqual({s.preferred_node for s in a.shards[:8]}, {"n2"})
        self.assertEqual({s.preferred_node for s in a.shards[8:16]}, {"n1"})
        self.assertEqual({s.priority for s in a.shards[:16]}, {0})
        self.assertEqual({s.preferred_node for s in a.shards[16:]}, {"n0"})
        self.assertEqual({s.priority for s in a.shards[16:]}, {50})  # half of it is remote
        self.assertIn("best locality of 3 replicas", a.shards[0].node_reason)
        self.assertEqual(a.high_locality_nodes, ["n1", "n2"])
        self.assertTrue(a.node("n2").high_locality)
        self.assertEqual(a.node("n2").locality, 1.0)
        with self.assertRaises(KeyError):
            a.node("n9")

    def test_patterns(self):
        plan = make_plan()
        a = cohort.data.DataAdvisor(1024, 64 * MiB, patterns="train/*").advise(plan)
        self.assertEqual(a.files, ["train/a.rec", "train/b.rec"])
        self.assertEqual([s.shard for s in a.shards], list(range(16)))
        with self.assertRaises(cohort.NotFound) as caught:
            cohort.data.advise(plan, 1024, 64 * MiB, patterns=["train/*", "test/*"])
        self.assertIn("file pattern 'test/*' matches none", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.data.advise(plan, 1024, 64 * MiB, patterns=["train/[a"])
        self.assertIn("is not closed", str(caught.exception))


class Measured(unittest.TestCase):
    def setUp(self):
        self.plan = make_plan()
        self.advisor = cohort.data.DataAdvisor(batch_size=1024, memory_budget=64 * MiB)

    def test_wait_raises_the_prefetch_of_the_node_that_waits(self):
        a = self.advisor.advise(self.plan, {"nodes": {"n0": {"data_wait_fraction": 0.5,
                                                             "prefetch_hit_rate": 0.2}}})
        self.assertEqual(a.node("n0").prefetch_batches, 4)
        self.assertTrue(a.node("n0").measured)
        self.assertIn("data wait 0.50 of the step", a.node("n0").prefetch_reason)
        self.assertEqual(a.node("n1").prefetch_batches, 2)
        self.assertEqual(a.prefetch_batches, 2)  # the job's: not measured

    def test_flat_measurements_are_the_jobs_and_stay_within_the_budget(self):
        last = 0
        for wait in [i / 20 for i in range(20)]:
            a = cohort.data.DataAdvisor(1024, 6 * MiB).advise(self.plan, {"data_wait_fraction": wait})
            self.assertGreaterEqual(a.prefetch_batches, last)
            self.assertLessEqual(a.prefetch_bytes, 6 * MiB)
            last = a.prefetch_batches
        self.assertEqual(last, 6)
        self.assertIn("capped at 6 batches by the memory budget", a.prefetch_reason)

    def test_data_wait_in_seconds(self):
        a = self.advisor.advise(self.plan, {"job": {"data_wait": 0.3, "step_time": 0.4}})
        self.assertEqual(a.prefetch_batches, 8)  # ceil(2 / (1 - 0.75))

    def test_depth_in_use_and_factor_floor(self):
        # A queue of 3 that waited a quarter of the step needs 4 ahead; a
        # pack that halves the depth (floor 0.5) makes that 8.
        halved = cohort.data.DataAdvisor(1024, 64 * MiB, prefetch_factor_floor=0.5)
        a = halved.advise(self.plan, {"data_wait_fraction": 0.25, "prefetch_hit_rate": 0.5, "prefetch_depth": 3})
        self.assertEqual(a.prefetch_batches, 8)
        self.assertIn("= 4 batches from the depth in use", a.prefetch_reason)
        self.assertIn("prefetch factor floor 0.50", a.prefetch_reason)
        self.assertEqual(self.advisor.advise(self.plan, {"data_wait_fraction": 0.25, "prefetch_hit_rate": 0.5,
                                                         "prefetch_depth": 3}).prefetch_batches, 4)
        for bad, needle in [(2.5, "whole number"), (float("inf"), "whole number"), (0, "1..64"), (65, "1..64")]:
            with self.subTest(prefetch_depth=bad):
                with self.assertRaises(cohort.Error) as caught:
                    self.advisor.advise(self.plan, {"data_wait_fraction": 0.2, "prefetch_depth": bad})
                self.assertIn("prefetch_depth", str(caught.exception))
                self.assertIn(needle, str(caught.exception))
        with self.assertRaises(cohort.Error) as caught:
            cohort.data.DataAdvisor(1024, 64 * MiB, prefetch_factor_floor=0).advise(self.plan)
        self.assertIn("prefetch_factor_floor: must be in (0, 1]", str(caught.exception))

    def test_bad_measurements(self):
        for measurements, needle in [({"job": {"prefetch_hit_rate": 1.5}}, "prefetch_hit_rate: must be in [0, 1]"),
                                     ({"job": {"read_bytes_per_second": -1}}, "read_bytes_per_second"),
                                     ({"job": {"data_wait_fraction": -0.2}}, "data_wait_fraction"),
                                     ({"job": {"data_wait": 0.1}}, "data_wait: needs step_time"),
                                     ({"nodes": {"ghost": {"data_wait_fraction": 0.1}}}, "node 'ghost'")]:
            with self.subTest(measurements=measurements):
                with self.assertRaises(cohort.Error) as caught:
                    self.advisor.advise(self.plan, measurements)
                self.assertIn(needle, str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            self.advisor.advise(self.plan, {"job": {"hit_rate": 0.5}})
        self.assertIn("unknown measurement 'hit_rate'", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            self.advisor.advise(self.plan, {"job": {"prefetch_hit_rate": "high"}})


class BadArguments(unittest.TestCase):
    def test_named(self):
        plan = make_plan()
        for kwargs, needle in [(dict(batch_size=0, memory_budget=MiB), "batch_size: must be at least 1"),
                               (dict(batch_size=8, memory_budget=0), "memory_budget_bytes: must be at least 1"),
                               (dict(batch_size=8, memory_budget=MiB, epochs=0), "epochs"),
                               (dict(batch_size=8, memory_budget=MiB, locality_threshold=1.5),
                                "locality_threshold"),
                               (dict(batch_size=8, memory_budget="lots"), "expected a size such as 8GiB"),
                               (dict(batch_size=8, memory_budget=MiB, access="backwards"), "unknown access")]:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(cohort.InvalidArgument) as caught:
                    cohort.data.advise(plan, **kwargs)
                self.assertIn(needle, str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.DataAdvisor(8, MiB, style="ring")
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.DataAdvisor(-1, MiB)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.DataAdvisor(8, MiB).advise("not a plan")

    def test_json_is_kept(self):
        a = cohort.data.advise(make_plan(), 1024, 64 * MiB)
        self.assertEqual(cohort.data.DataAdvice.from_json(a.json), a)


if __name__ == "__main__":
    unittest.main()
