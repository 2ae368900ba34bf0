"""Epoch order: a shared permutation, padded or trimmed, split across ranks."""

import unittest

import _support
import cohort

try:
    import numpy
except ImportError:
    numpy = None


class EpochOrderTest(unittest.TestCase):
    def test_single_rank_gets_a_permutation(self):
        for n in (0, 1, 2, 10, 1000):
            with self.subTest(n=n):
                order = cohort.epoch_order(n, seed=7, epoch=1)
                self.assertIsInstance(order, list)
                self.assertEqual(sorted(order), list(range(n)))

    def test_deterministic_and_epoch_dependent(self):
        a = cohort.epoch_order(500, seed=42, epoch=3)
        self.assertEqual(a, cohort.epoch_order(500, seed=42, epoch=3))
        self.assertNotEqual(a, cohort.epoch_order(500, seed=42, epoch=4))
        self.assertNotEqual(a, cohort.epoch_order(500, seed=43, epoch=3))
        self.assertNotEqual(a, list(range(500)))

    def test_no_shuffle_keeps_order(self):
        self.assertEqual(cohort.epoch_order(10, seed=9, shuffle=False), list(range(10)))
        self.assertEqual(cohort.epoch_order(10, rank=1, world_size=3, shuffle=False),
                         [1, 4, 7, 0])

    def test_ranks_partition_the_padded_permutation(self):
        rng = _support.seeded_random("padded_permutation")
        for _ in range(30):
            n = rng.randrange(0, 300)
            world = rng.randrange(1, 17)
            seed, epoch = rng.randrange(2**64), rng.randrange(100)
            perm = cohort.epoch_order(n, seed=seed, epoch=epoch)
            total = -(-n // world) * world
            padded = (perm * (total // n + 1))[:total] if n else []
            for rank in range(world):
                with self.subTest(n=n, world=world, rank=rank):
                    mine = cohort.epoch_order(n, seed=seed, epoch=epoch, rank=rank,
                                              world_size=world)
                    self.assertEqual(mine, padded[rank::world])

    def test_drop_last_trims(self):
        perm = cohort.epoch_order(10, seed=1)
        ranks = [cohort.epoch_order(10, seed=1, rank=r, world_size=4, drop_last=True)
                 for r in range(4)]
        self.assertEqual([len(r) for r in ranks], [2, 2, 2, 2])
        for r in range(4):
            self.assertEqual(ranks[r], perm[:8][r::4])

    def test_padding_when_world_exceeds_n(self):
        perm = cohort.epoch_order(3, seed=2)
        got = [cohort.epoch_order(3, seed=2, rank=r, world_size=7) for r in range(7)]
        self.assertEqual(got, [[perm[r % 3]] for r in range(7)])

    def test_invalid(self):
        with self.assertRaises(cohort.InvalidArgument):
            cohort.epoch_order(10, rank=2, world_size=2)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.epoch_order(10, world_size=0)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.epoch_order(-1)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.epoch_order(10, seed=2**64)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.epoch_order(10.5)

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_numpy(self):
        arr = cohort.epoch_order(100, seed=5, rank=1, world_size=3, as_numpy=True)
        self.assertEqual(arr.dtype, numpy.uint64)
        self.assertEqual(arr.tolist(), cohort.epoch_order(100, seed=5, rank=1, world_size=3))

    @unittest.skipIf(numpy is not None, "numpy is installed")
    def test_numpy_missing(self):
        with self.assertRaises(cohort.InvalidArgument):
            cohort.epoch_order(10, as_numpy=True)


if __name__ == "__main__":
    unittest.main()
