"""cohort.torch's data side: ElasticSampler (the same order on every rank,
each index once per epoch, padding as DistributedSampler pads, exact resume,
elastic resume onto another world size) and ShardDataset over a real
in-process coordinator (each shard done once per epoch by two members, and
a stopped member resuming from its state without repeating a shard).
python3-torch is a dependency (scripts/deps.sh): without it these tests
fail, they do not skip."""

import collections
import json
import threading
import unittest

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort

try:
    import torch
    import cohort.torch as ctorch
except ImportError:  # reported by the test below, not skipped
    torch = ctorch = None

TWO = {"min_nodes": 2, "max_nodes": 2, "last_call": 0, "heartbeat_interval": 0.05,
       "failure_timeout": 5}
ITEMS = 3  # items per shard


def load_shard(lease):
    return [(lease["epoch"], lease["shard"], i) for i in range(ITEMS)]


def samplers(n, world_size, **kwargs):
    return [ctorch.ElasticSampler(n, rank=r, world_size=world_size, **kwargs)
            for r in range(world_size)]


class Available(unittest.TestCase):
    def test_torch_is_installed(self):
        self.assertIsNotNone(torch, "python3-torch is missing: run scripts/deps.sh (Debian's "
                                    "python3-torch)")


@unittest.skipIf(torch is None, "reported by Available")
class SamplerTest(unittest.TestCase):
    def test_same_order_every_rank_each_index_once(self):
        for n, w in ((10, 3), (12, 4), (7, 1), (5, 8)):
            for s in samplers(n, w, seed=7):
                s.set_epoch(2)
            ranks = [list(s) for s in samplers(n, w, seed=7)]
            # Every rank's share comes from one permutation: rank r holds positions r, r+w, ...
            whole = list(cohort.epoch_order(n, seed=7, epoch=0, rank=0, world_size=1))
            per = -(-n // w)
            padded = (whole * (per * w // max(n, 1) + 1))[:per * w]
            self.assertEqual(ranks, [padded[r::w] for r in range(w)])
            self.assertEqual(sorted(set(i for r in ranks for i in r)), list(range(n)))
            self.assertTrue(all(len(r) == per for r in ranks))

    def test_padding_and_drop_last_as_torch(self):
        for n, w, drop in ((10, 3, False), (10, 3, True), (5, 8, False), (11, 4, True)):
            for r in range(w):
                ours = ctorch.ElasticSampler(n, rank=r, world_size=w, shuffle=False,
                                             drop_last=drop)
                theirs = torch.utils.data.DistributedSampler(range(n), num_replicas=w, rank=r,
                                                             shuffle=False, drop_last=drop)
                self.assertEqual(list(ours), list(theirs), (n, w, drop, r))
                self.assertEqual(len(ours), len(theirs))

    def test_set_epoch_changes_order(self):
        s = ctorch.ElasticSampler(50, rank=0, world_size=1)
        first = list(s)
        self.assertEqual(list(s), first)  # a second pass of the same epoch: the same order
        s.set_epoch(1)
        second = list(s)
        self.assertNotEqual(first, second)
        self.assertEqual(sorted(first), sorted(second))

    def test_resume_mid_epoch_exactly(self):
        for n, w in ((23, 3), (10, 4)):
            for r in range(w):
                whole = ctorch.ElasticSampler(n, rank=r, world_size=w, seed=3)
                whole.set_epoch(5)
                expected = list(whole)
                for cut in range(len(expected) + 1):
                    s = ctorch.ElasticSampler(n, rank=r, world_size=w, seed=3)
                    s.set_epoch(5)
                    it = iter(s)
                    before = [next(it) for _ in range(cut)]
                    state = json.loads(json.dumps(s.state_dict()))
                    self.assertEqual(state["position"], cut)
                    again = ctorch.ElasticSampler(n, rank=r, world_size=w)  # seed from state
                    again.load_state_dict(state)
                    again.set_epoch(5)  # the loop's set_epoch keeps the loaded position
                    self.assertEqual(len(again), len(expected) - cut)
                    self.assertEqual(before + list(again), expected, (n, w, r, cut))
                    again.set_epoch(6)
                    self.assertEqual(len(list(again)), len(expected))

    def test_consumed_overrides_drawn(self):
        s = ctorch.ElasticSampler(20, rank=0, world_size=2)
        it = iter(s)
        drawn = [next(it) for _ in range(6)]  # a loader drew ahead; training used 4
        state = s.state_dict(consumed=4)
        self.assertEqual(state["position"], 4)
        again = ctorch.ElasticSampler(20, rank=0, world_size=2)
        again.load_state_dict(state)
        self.assertEqual(list(again)[:2], drawn[4:])
        with self.assertRaises(cohort.InvalidArgument):
            s.state_dict(consumed=7)

    def test_elastic_resume_onto_another_world_size(self):
        for n, old, new, drop in ((40, 4, 3, False), (40, 2, 5, True), (17, 3, 2, False)):
            first = samplers(n, old, seed=9, drop_last=drop)
            consumed = []
            for s in first:
                s.set_epoch(1)
                it = iter(s)
                consumed += [next(it) for _ in range(3)]  # lockstep: 3 steps each
            states = [s.state_dict() for s in first]
            second = samplers(n, new, seed=9, drop_last=drop)
            for s in second:
                s.load_state_dict(states[0])
            rest = [list(s) for s in second]
            self.assertEqual(len(set(len(r) for r in rest)), 1)  # equal shares, padded or cut
            left = set(range(n)) - set(consumed)
            seen = set(i for r in rest for i in r)
            self.assertFalse(seen & set(consumed), "a consumed index came back")
            if drop:
                self.assertLessEqual(len(left) - len(seen), new - 1)  # only the cut tail
            else:
                self.assertEqual(seen, left)
            # Resuming the resumed split onto yet another size still misses nothing.
            if not drop:
                third = samplers(n, old, seed=9)
                it = [iter(s) for s in second]
                taken = [next(i) for i in it]
                for s in third:
                    s.load_state_dict(second[0].state_dict())
                final = set(i for s in third for i in s)
                self.assertEqual(final | set(taken), left)
                self.assertFalse(final & set(consumed))

    def test_bad_state_and_arguments(self):
        s = ctorch.ElasticSampler(10, rank=0, world_size=2)
        with self.assertRaises(cohort.InvalidArgument):
            ctorch.ElasticSampler(11, rank=0, world_size=2).load_state_dict(s.state_dict())
        with self.assertRaises(cohort.InvalidArgument):
            ctorch.ElasticSampler(10, rank=0, world_size=2, shuffle=False).load_state_dict(
                s.state_dict())
        with self.assertRaises(cohort.InvalidArgument):
            ctorch.ElasticSampler(10, rank=2, world_size=2)

    def test_in_a_data_loader(self):
        s = ctorch.ElasticSampler(range(9), rank=1, world_size=2, shuffle=False)
        loader = torch.utils.data.DataLoader(list(range(100, 109)), batch_size=2, sampler=s)
        self.assertEqual([b.tolist() for b in loader], [[101, 103], [105, 107], [100]])


@unittest.skipIf(torch is None, "reported by Available")
class ShardDatasetTest(unittest.TestCase):
    def setUp(self):
        self.server = cohort.Coordinator(token="")
        self.addCleanup(self.server.close)
        self.client = cohort.CoordinatorClient(self.server.url, token="", timeout=5,
                                               retry_deadline=2)
        self.addCleanup(self.client.close)

    def member(self, job, member):
        m = cohort.Membership(self.server.url, job, member, host="host-" + member)
        self.addCleanup(m.close)
        return m

    def two_members(self, job, shards, epochs):
        self.client.create_job(job, TWO)
        self.client.register_dataset(job, {"shards": [{"id": f"s{i}"} for i in range(shards)],
                                           "epochs": epochs, "shuffle": True, "seed": 4})
        a, b = self.member(job, "a"), self.member(job, "b")
        worlds = {}
        threads = [threading.Thread(target=lambda m=m: worlds.update({m.member: m.next_world(10)}))
                   for m in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        self.assertEqual(sorted(w["world_size"] for w in worlds.values()), [2, 2])
        return a, b

    def progress(self, job):
        return self.client.job_state(job)["shards"]

    def test_two_members_each_shard_done_once_per_epoch(self):
        shards, epochs = 7, 2
        a, b = self.two_members("two", shards, epochs)
        got, errors = {"a": [], "b": []}, []

        def consume(m):
            try:
                ds = ctorch.ShardDataset(m, load_shard)
                while not ds.finished:
                    got[m.member].append((ds.epoch, list(ds)))
                    self.assertTrue(all(e == ds.epoch or ds.epoch is None
                                        for e, _, _ in got[m.member][-1][1]))
                got[m.member + "-reports"] = ds.reports
            except Exception as exc:  # noqa: BLE001  (handed to the test)
                errors.append(exc)
        threads = [threading.Thread(target=consume, args=(m,)) for m in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(errors, errors)
        items = [item for name in "ab" for _, pas in got[name] for item in pas]
        self.assertEqual(collections.Counter(items),
                         collections.Counter((e, s, i) for e in range(epochs)
                                             for s in range(shards) for i in range(ITEMS)))
        reports = got["a-reports"] + got["b-reports"]
        self.assertEqual(sorted((e, s) for e, s, _ in reports),
                         sorted((e, s) for e in range(epochs) for s in range(shards)))
        self.assertTrue(all(counted for _, _, counted in reports))
        p = self.progress("two")
        self.assertTrue(p["finished"])
        self.assertEqual(p["duplicate_reports"], 0)
        self.assertEqual([e["done"] for e in p["epochs"]], [shards] * epochs)

    def test_a_stopped_member_resumes_from_its_state(self):
        shards = 6
        a, b = self.two_members("stop", shards, 1)
        ds = ctorch.ShardDataset(a, load_shard)
        it = iter(ds)
        before = [next(it) for _ in range(ITEMS + 1)]  # one shard done, the next begun
        state = json.loads(json.dumps(ds.state_dict()))  # survives JSON, like a checkpoint
        del it, ds  # the member stops mid-shard
        self.assertEqual(state["current"]["position"], 1)
        self.assertEqual(sum(len(v) for v in state["completed"].values()), 1)

        # b takes what a does not hold, and waits for a's shard in progress to be done.
        b_items = []
        reader = threading.Thread(target=lambda: b_items.extend(ctorch.ShardDataset(b, load_shard)))
        reader.start()
        resumed = ctorch.ShardDataset(a, load_shard)
        resumed.load_state_dict(state)
        after = list(resumed)
        reader.join(30)
        self.assertFalse(reader.is_alive(), "b hung")
        a_items = before + after
        self.assertEqual(len(a_items), len(set(a_items)), "a repeated an item")
        self.assertEqual(sorted(a_items + b_items),
                         sorted((0, s, i) for s in range(shards) for i in range(ITEMS)))
        p = self.progress("stop")
        self.assertTrue(p["finished"])
        self.assertEqual(p["duplicate_reports"], 0)

    def test_a_restarted_client_repeats_no_completed_shard(self):
        # A worker process restarted under the same member id speaks through a new client.
        self.client.create_job("solo", dict(TWO, min_nodes=1, max_nodes=1))
        self.client.register_dataset("solo", {"shards": [{"id": f"s{i}"} for i in range(4)]})
        self.client.join("solo", "w")
        self.client.wait_for_world("solo", "w", timeout=10)
        ds = ctorch.ShardDataset(self.client, load_shard, job="solo", member="w")
        it = iter(ds)
        before = [next(it) for _ in range(2 * ITEMS)]  # two shards handed out
        state = ds.state_dict()
        self.assertEqual(sum(len(v) for v in state["completed"].values()), 1)  # 2nd unreported
        with cohort.CoordinatorClient(self.server.url, token="") as fresh:
            again = ctorch.ShardDataset(fresh, load_shard, job="solo", member="w")
            again.load_state_dict(state)
            after = list(again)
            self.assertTrue(again.finished)
        self.assertEqual(sorted(before + after),
                         sorted((0, s, i) for s in range(4) for i in range(ITEMS)))
        self.assertTrue(all(counted for _, _, counted in again.reports))

    def test_a_completed_shard_handed_out_again_is_not_yielded(self):
        # A coordinator that lost its progress leases a finished shard again.
        self.client.create_job("lost", dict(TWO, min_nodes=1, max_nodes=1))
        self.client.register_dataset("lost", {"shards": [{"id": "s0"}, {"id": "s1"}]})
        self.client.join("lost", "w")
        self.client.wait_for_world("lost", "w", timeout=10)
        ds = ctorch.ShardDataset(self.client, load_shard, job="lost", member="w")
        ds.load_state_dict({"epoch": 0, "completed": {0: [0]}, "current": None,
                            "pending": None})
        self.assertEqual(sorted(ds), [(0, 1, i) for i in range(ITEMS)])
        self.assertEqual(sorted(ds.reports), [(0, 0, True), (0, 1, True)])

    def test_bad_sources(self):
        with self.assertRaises(cohort.InvalidArgument):
            ctorch.ShardDataset(self.client, load_shard)  # no job, member
        with self.assertRaises(cohort.InvalidArgument):
            ctorch.ShardDataset(object(), load_shard)


if __name__ == "__main__":
    unittest.main()
