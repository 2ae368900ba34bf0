"""cohort.data.ShardLoader over a real in-process coordinator and real
temporary files: every shard of every epoch read once with its bytes, its
waits in the member's heartbeat, a short file an error naming the shard,
the file and the offset, memoryviews, and cohort.torch's ShardDataset
reading its shards through a loader (and resuming from a saved state).
python3-torch is a dependency (scripts/deps.sh): without it the torch tests
fail, they do not skip."""

import json
import os
import shutil
import tempfile
import time
import unittest

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort
import cohort.data

try:
    import torch
    import cohort.torch as ctorch
except ImportError:  # reported by the test below, not skipped
    torch = ctorch = None

ONE = {"min_nodes": 1, "max_nodes": 1, "last_call": 0, "heartbeat_interval": 0.05,
       "failure_timeout": 5}


def content(file, size):
    return bytes((i * 7 + file * 31 + i // 251) % 256 for i in range(size))


class Fixture(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cohort-shard-loader-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.server = cohort.Coordinator(token="")
        self.addCleanup(self.server.close)
        self.client = cohort.CoordinatorClient(self.server.url, token="", timeout=5,
                                               retry_deadline=2)
        self.addCleanup(self.client.close)

    def files(self, listed, written=None):
        """Data files (relative names) and their cohort.Dataset, as listed."""
        written = written or listed
        for f, size in enumerate(written):
            with open(os.path.join(self.dir, f"part-{f}.bin"), "wb") as out:
                out.write(content(f, size))
        return cohort.Dataset([(f"part-{f}.bin", size) for f, size in enumerate(listed)])

    def expected(self, shards, index):
        out = b""
        for path, begin, end in shards[index].segments:
            with open(os.path.join(self.dir, path), "rb") as f:
                out += f.read()[begin:end]
        return out

    def member(self, job, shards, epochs=1, member="w0"):
        self.client.create_job(job, ONE)
        self.client.register_dataset(job, cohort.data.ShardLoader.plan(shards, epochs))
        m = cohort.Membership(self.server.url, job, member, host="host-" + member)
        self.addCleanup(m.close)
        self.assertEqual(m.next_world(10)["world_size"], 1)
        return m

    def member_state(self, job, member):
        for m in self.client.job_state(job)["members"]:
            if m["id"] == member:
                return m
        return None


class ShardLoaderTest(Fixture):
    def test_every_shard_once_per_epoch_with_its_bytes(self):
        shards = cohort.split_shards(self.files([5000, 1700, 9001]), shard_count=8)
        m = self.member("epochs", shards, epochs=2)
        seen = []
        with cohort.data.ShardLoader(m, shards, root=self.dir, workers=2, prefetch_depth=3) as loader:
            for shard in loader:
                self.assertEqual(shard.data, self.expected(shards, shard.shard), shard.shard)
                self.assertEqual(shard.shard_id, str(shard.shard))
                self.assertGreaterEqual(shard.wait, 0)
                seen.append((shard.epoch, shard.shard))
            stats = loader.stats()
        self.assertEqual(sorted(seen), [(e, s) for e in range(2) for s in range(8)])
        self.assertEqual(stats["shards"], 16)
        self.assertEqual(stats["reported"], 16)  # each one done when the next was asked for
        self.assertEqual(stats["bytes"], 2 * (5000 + 1700 + 9001))
        self.assertEqual(stats["prefetch_hits"] + stats["prefetch_misses"], 16)
        self.assertLessEqual(stats["max_ahead"], 3)
        self.assertTrue(stats["finished"])
        progress = self.client.job_state("epochs")["shards"]
        self.assertTrue(progress["finished"])
        self.assertEqual([e["done"] for e in progress["epochs"]], [8, 8])

    def test_the_wait_reaches_the_heartbeat(self):
        shards = cohort.split_shards(self.files([4000]), shard_count=4)
        m = self.member("wait", shards)
        loader = cohort.data.ShardLoader(m, shards, root=self.dir, prefetch_depth=1)
        self.addCleanup(loader.close)
        shard = loader.next_shard()
        self.assertGreater(loader.data_wait, 0)
        self.assertAlmostEqual(shard.wait, loader.data_wait, places=6)
        m.record_step(1, step_time=0.5)  # data_wait left None: the loader's
        deadline = time.monotonic() + 5
        entry = {}
        while time.monotonic() < deadline:
            entry = self.member_state("wait", "w0") or {}
            if entry.get("step") == 1:
                break
            time.sleep(0.02)
        self.assertEqual(entry.get("step"), 1, entry)
        self.assertAlmostEqual(entry.get("data_wait"), loader.data_wait, places=6)
        self.assertEqual(loader.done(shard)["outcome"], "counted")
        with self.assertRaises(cohort.InvalidArgument):
            loader.done(shard)

    def test_a_short_file_names_the_shard_the_file_and_the_offset(self):
        shards = cohort.split_shards(self.files([1000], written=[600]), shard_count=4)
        self.client.create_job("short", ONE)
        self.client.register_dataset("short", cohort.data.ShardLoader.plan(shards))
        self.client.join("short", "c0")
        loader = cohort.data.ShardLoader(self.client, shards, job="short", member="c0",
                                         root=self.dir, copy=False, timeout=10)
        self.addCleanup(loader.close)
        good, errors = [], {}
        for _ in range(4):
            try:
                shard = loader.next_shard()
            except cohort.FileError as e:
                errors[2 if "shard 2 (" in str(e) else 3] = str(e)
                continue
            self.assertIsInstance(shard.data, memoryview)
            self.assertEqual(bytes(shard.data), self.expected(shards, shard.shard))
            good.append(shard.shard)
            loader.done(shard.lease)
        self.assertEqual(good, [0, 1])
        self.assertIn("part-0.bin", errors[2])
        self.assertIn("offset 500", errors[2])
        self.assertIn("offset 750", errors[3])
        self.assertIn("member 'c0' of job 'short'", errors[3])
        self.assertEqual(loader.stats()["failed"], 2)
        # Not reported, the failed shards stay leased until their leases expire.
        loader.timeout = 0.2
        with self.assertRaises(cohort.Timeout):
            loader.next_shard()

    def test_a_scheduler_policy_that_reduces_prefetch_reads_fewer_ahead(self):
        shards = cohort.split_shards(self.files([12000]), shard_count=12)
        m = self.member("depth", shards)
        pressure = cohort.data.PolicyAction("reduce_prefetch", rule="reduce_prefetch_on_memory_pressure",
                                            category="memory", factor=0.25)
        with cohort.data.TransferScheduler(workers=2, prefetch_depth=8,
                                           policy=lambda facts: [pressure]) as scheduler:
            with cohort.data.ShardLoader(m, shards, root=self.dir, scheduler=scheduler) as loader:
                time.sleep(0.3)  # a loop that does not ask: the reader fills the depth, 8 x 0.25
                stats = loader.stats()
                self.assertEqual(stats["depth"], 2)
                self.assertEqual(stats["ahead"], 2)
                self.assertEqual(scheduler.stats().prefetch_depth, 2)
                for shard in loader:
                    self.assertEqual(shard.data, self.expected(shards, shard.shard))
                    self.assertLessEqual(loader.stats()["ahead"], 2)
                stats = loader.stats()
            self.assertEqual(stats["shards"], 12)
            self.assertEqual(stats["max_ahead"], 2)
            self.assertGreater(stats["prefetch_hits"], 0)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.ShardLoader(m, shards, scheduler="no")

    def test_close_gives_the_leases_back(self):
        shards = cohort.split_shards(self.files([6000]), shard_count=6)
        m = self.member("release", shards)
        leased = lambda: self.client.job_state("release")["shards"]["epochs"][0]["leased"]
        loader = cohort.data.ShardLoader(m, shards, root=self.dir, prefetch_depth=3)
        shard = loader.next_shard()
        deadline = time.monotonic() + 5
        while loader.stats()["ahead"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertGreaterEqual(leased(), 3)
        loader.close()  # the shard handed out and the ones ahead go back
        self.assertEqual(leased(), 0)
        self.assertGreaterEqual(self.client.job_state("release")["shards"]["released"], 3)
        self.assertEqual(m.shard_release(shard.lease), "requeued")
        # Kept leased without release_on_close.
        with cohort.data.ShardLoader(m, shards, root=self.dir, prefetch_depth=2,
                                     release_on_close=False) as kept:
            kept.next_shard()
        self.assertGreaterEqual(leased(), 1)

    def test_bad_arguments(self):
        shards = cohort.split_shards(self.files([100]), shard_count=1)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.ShardLoader(self.client, shards, job="j", member="m", release_on_close=1)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.ShardLoader(self.client, shards)  # no job= and member=
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.ShardLoader(object(), shards)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.ShardLoader(self.client, [1, 2], job="j", member="m")
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.ShardLoader(self.client, shards, job="j", member="m", prefetch_depth=0)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.data.ShardLoader.plan(shards, epochs=0)


class TorchAvailable(unittest.TestCase):
    def test_torch_is_installed(self):
        self.assertIsNotNone(torch, "python3-torch is missing: run scripts/deps.sh (Debian's "
                                    "python3-torch)")


@unittest.skipIf(torch is None, "reported by TorchAvailable")
class ShardDatasetWithALoaderTest(Fixture):
    def test_passes_read_through_the_loader(self):
        shards = cohort.split_shards(self.files([3000, 2000]), shard_count=5)
        m = self.member("torch", shards, epochs=2)
        loader = cohort.data.ShardLoader(m, shards, root=self.dir, prefetch_depth=2)
        self.addCleanup(loader.close)
        ds = ctorch.ShardDataset(loader)  # one item per shard: its bytes
        passes = []
        while not ds.finished:
            items = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0))
            if items:
                passes.append(sorted(items))
        expected = sorted(self.expected(shards, i) for i in range(5))
        self.assertEqual(passes, [expected, expected])
        self.assertEqual(loader.stats()["shards"], 10)
        self.assertEqual(sorted(r[:2] for r in ds.reports), [(e, s) for e in range(2) for s in range(5)])
        self.assertTrue(all(counted for _, _, counted in ds.reports))
        self.assertEqual(len(ds.reports), 10)

    def test_a_resumed_shard_is_read_without_a_lease_of_the_loader(self):
        shards = cohort.split_shards(self.files([4000]), shard_count=4)
        m = self.member("resume", shards)

        def four_items(lease):
            data = lease["data"]
            return [(lease["shard"], i, bytes(data[i * 250:(i + 1) * 250])) for i in range(4)]

        loader = cohort.data.ShardLoader(m, shards, root=self.dir, prefetch_depth=2)
        ds = ctorch.ShardDataset(loader, four_items)
        it = iter(ds)
        before = [next(it) for _ in range(6)]  # one shard done, the next half read
        state = json.loads(json.dumps(ds.state_dict()))
        self.assertEqual(state["current"]["position"], 2)
        del it, ds
        loader.close()
        m.leave()  # its leases ahead go back to the queue at once

        again = cohort.Membership(self.server.url, "resume", "w1", host="host-w1")
        self.addCleanup(again.close)
        again.next_world(10)
        loader2 = cohort.data.ShardLoader(again, shards, root=self.dir)
        self.addCleanup(loader2.close)
        resumed = ctorch.ShardDataset(loader2, four_items)
        resumed.load_state_dict(state)
        after = list(resumed)
        items = before + after
        self.assertEqual(len(items), len(set(items)), "an item came twice")
        self.assertEqual(sorted(items),
                         sorted((s, i, self.expected(shards, s)[i * 250:(i + 1) * 250])
                                for s in range(4) for i in range(4)))
        self.assertTrue(self.client.job_state("resume")["shards"]["finished"])


if __name__ == "__main__":
    unittest.main()
