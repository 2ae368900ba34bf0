"""Datasets, shards and shard plans."""

import gc
import math
import unittest

import _support
import cohort

KiB = 1024


def check_cover(test, dataset_files, shards):
    """Every byte of every file is in exactly one shard, in file order."""
    sizes = {f.path: f.bytes for f in dataset_files}
    order = [f.path for f in dataset_files if f.bytes]
    position = {path: 0 for path in sizes}
    sequence = []
    for i, shard in enumerate(shards):
        test.assertEqual(shard.index, i)
        test.assertGreater(shard.bytes, 0, f"shard {i} is empty")
        test.assertEqual(shard.bytes, sum(end - begin for _, begin, end in shard.segments))
        for path, begin, end in shard.segments:
            test.assertEqual(begin, position[path], f"shard {i}: gap or overlap in {path}")
            test.assertLess(begin, end)
            position[path] = end
            if not sequence or sequence[-1] != path:
                sequence.append(path)
    test.assertEqual(position, sizes)
    test.assertEqual(sequence, order)  # a shard spans only consecutive files


class DatasetTest(unittest.TestCase):
    def test_listing(self):
        ds = cohort.Dataset.from_file(_support.data("dataset.txt"))
        self.assertEqual(ds.files, [
            cohort.DataFile("train/part-000.rec", 1000, 10),
            cohort.DataFile("train/part-001.rec", 2 * KiB, 20),
            cohort.DataFile("train/part-002.rec", 1500, None),
            cohort.DataFile("val/part-000.rec", 700, 7)])
        self.assertEqual(len(ds), 4)
        self.assertEqual(ds.total_bytes, 1000 + 2048 + 1500 + 700)
        self.assertEqual(ds[-1].path, "val/part-000.rec")

    def test_tab_separated_listing_allows_spaces(self):
        ds = cohort.Dataset.from_file(_support.data("dataset_tabs.txt"))
        self.assertEqual(ds.files, [cohort.DataFile("my data/part one.rec", 100, 5),
                                    cohort.DataFile("my data/part two.rec", 300, None)])

    def test_yaml(self):
        ds = cohort.Dataset.from_file(_support.data("dataset.yaml"))
        self.assertEqual(ds.files, [cohort.DataFile("a.rec", 100, 10),
                                    cohort.DataFile("b.rec", KiB, None),
                                    cohort.DataFile("c.rec", 50, 5)])

    def test_from_string(self):
        ds = cohort.Dataset.from_string("x 10 1\ny 20\n", format="listing")
        self.assertEqual(ds.files, [cohort.DataFile("x", 10, 1), cohort.DataFile("y", 20)])
        js = cohort.Dataset.from_string('{"files": [{"path": "x", "bytes": 10}]}', "json")
        self.assertEqual(js.files, [cohort.DataFile("x", 10)])

    def test_bad_listing_names_file_and_line(self):
        with self.assertRaises(cohort.ParseError) as cm:
            cohort.Dataset.from_file(_support.data("bad_dataset.txt"))
        self.assertRegex(str(cm.exception), r"bad_dataset\.txt:2")

    def test_missing_file(self):
        with self.assertRaises(cohort.FileError) as cm:
            cohort.Dataset.from_file(_support.data("missing.txt"))
        self.assertIn("missing.txt", str(cm.exception))

    def test_built(self):
        ds = cohort.Dataset([("a", 100), ("b", 200, 10), cohort.DataFile("c", 5)])
        self.assertEqual(ds.files, [cohort.DataFile("a", 100), cohort.DataFile("b", 200, 10),
                                    cohort.DataFile("c", 5)])
        self.assertEqual(cohort.Dataset({"a": 1, "b": 2}).total_bytes, 3)
        ds.add_file("d", 7, 1)
        self.assertEqual(ds.total_bytes, 312)

    def test_invalid(self):
        ds = cohort.Dataset([("a", 100)])
        with self.assertRaises(cohort.InvalidArgument) as cm:
            ds.add_file("a", 5)
        self.assertIn("a", str(cm.exception))
        for args in (("", 5), ("b", -1), ("b", 2**64), ("b", 5, -2), ("b", "5")):
            with self.subTest(args=args), self.assertRaises(cohort.InvalidArgument):
                ds.add_file(*args)
        self.assertEqual(len(ds), 1)


class SplitTest(unittest.TestCase):
    def setUp(self):
        self.ds = cohort.Dataset.from_file(_support.data("dataset.txt"))

    def test_by_bytes(self):
        shards = cohort.split_shards(self.ds, shard_bytes=1000)
        check_cover(self, self.ds.files, shards)
        sizes = [s.bytes for s in shards]
        self.assertEqual(len(shards), math.ceil(self.ds.total_bytes / 1000))
        self.assertLessEqual(max(sizes), 1000)
        self.assertLessEqual(max(sizes) - min(sizes), 1)

    def test_by_count(self):
        for count in (1, 2, 3, 7, 100, self.ds.total_bytes):
            with self.subTest(count=count):
                shards = self.ds.split(shard_count=count)
                self.assertEqual(len(shards), count)
                check_cover(self, self.ds.files, shards)
                sizes = [s.bytes for s in shards]
                self.assertLessEqual(max(sizes) - min(sizes), 1)

    def test_records(self):
        known = cohort.Dataset([("a", 100, 10), ("b", 300, 30), ("c", 50, 7)])
        shards = cohort.split_shards(known, shard_count=6)
        self.assertEqual(sum(s.records for s in shards), 47)
        unknown = cohort.split_shards(self.ds, shard_count=4)  # part-002 has no count
        self.assertTrue(any(s.records is None for s in unknown))

    def test_random_datasets(self):
        rng = _support.seeded_random("random_datasets")
        for trial in range(40):
            files = [(f"f{i}", rng.choice([1, 7, 100, 4096, rng.randrange(1, 10**6)]))
                     for i in range(rng.randrange(1, 12))]
            ds = cohort.Dataset(files)
            if rng.random() < 0.5:
                shards = ds.split(shard_bytes=rng.randrange(1, ds.total_bytes + 10))
            else:
                shards = ds.split(shard_count=rng.randrange(1, min(ds.total_bytes, 500) + 1))
            with self.subTest(trial=trial, files=files, shards=len(shards)):
                check_cover(self, ds.files, shards)

    def test_bad_specs(self):
        with self.assertRaises(cohort.InvalidArgument):
            cohort.split_shards(self.ds, shard_bytes=100, shard_count=10)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.split_shards(self.ds)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.split_shards(self.ds, shard_count=0)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.split_shards(self.ds, shard_bytes=-5)
        with self.assertRaises(cohort.Unsatisfiable):
            cohort.split_shards(cohort.Dataset([("a", 3)]), shard_count=4)

    def test_shards_keep_their_own_files(self):
        ds = cohort.Dataset([("a", 10), ("b", 10)])
        shards = ds.split(shard_count=4)
        ds.close()
        self.assertEqual(shards[3].segments, [("b", 5, 10)])
        self.assertEqual(shards.files, ["a", "b"])
        with self.assertRaises(IndexError):
            shards[4]


def owners_of(plan):
    return [plan.owners(s) for s in range(len(plan))]


class PlanTest(unittest.TestCase):
    NODES = [f"n{i}" for i in range(8)]

    def setUp(self):
        self.ds = cohort.Dataset([(f"file{i}", 1000 + 37 * i, 10) for i in range(10)])

    def plan(self, **kwargs):
        kwargs.setdefault("shard_count", 200)
        return cohort.plan_shards(self.ds, self.NODES, **kwargs)

    def check_consistent(self, plan):
        owners = owners_of(plan)
        for shard, who in enumerate(owners):
            self.assertEqual(len(set(who)), plan.replication, f"shard {shard}: {who}")
        assignments = plan.assignments
        self.assertEqual(list(assignments), plan.members)
        for member, shards in assignments.items():
            self.assertEqual(shards, [s for s, who in enumerate(owners) if member in who])
            self.assertEqual(plan.loads[member], len(shards))
        self.assertEqual(sum(plan.loads.values()), len(plan) * plan.replication)

    def test_hash(self):
        plan = self.plan(replication=2)
        self.assertEqual((len(plan), plan.replication, plan.moved), (200, 2, 0))
        self.assertEqual(plan.members, self.NODES)
        self.assertEqual(plan.strategy, "hash")
        self.check_consistent(plan)

    def check_hash_cap(self, replication):
        # cohort.h: "HASH: a node may hold up to ceil(average * (1 + slack))
        # placements".
        for count in (200, 203, 1000):
            for slack in (0.0, 0.01, 0.1, 0.5):
                with self.subTest(count=count, replication=replication, slack=slack):
                    plan = self.plan(replication=replication, shard_count=count,
                                     load_slack=slack)
                    self.check_consistent(plan)
                    cap = math.ceil(count * replication / 8 * (1 + slack))
                    self.assertLessEqual(max(plan.loads.values()), cap, plan.loads)

    def test_hash_load_slack_caps_loads(self):
        self.check_hash_cap(replication=1)

    def test_hash_load_slack_caps_loads_of_replicas(self):
        self.check_hash_cap(replication=2)

    def test_hash_is_deterministic(self):
        first, second = self.plan(seed=5), self.plan(seed=5)
        self.assertEqual(first.assignments, second.assignments)
        self.assertEqual(first.to_json(), second.to_json())

    def test_round_robin_is_even(self):
        plan = self.plan(strategy="round_robin", shard_count=203)
        self.check_consistent(plan)
        loads = plan.loads.values()
        self.assertLessEqual(max(loads) - min(loads), 1)

    def test_random_depends_on_seed(self):
        a, b, c = (self.plan(strategy="random", seed=s) for s in (1, 1, 2))
        self.check_consistent(a)
        self.assertEqual(a.assignments, b.assignments)
        self.assertNotEqual(a.assignments, c.assignments)

    def test_locality(self):
        ds = cohort.Dataset([(f"f{i}", 1000) for i in range(4)])
        nodes = [f"n{i}" for i in range(4)]
        locality = {f"n{i}": {f"f{i}": 1.0} for i in range(4)}
        plan = cohort.plan_shards(ds, nodes, strategy="locality", shard_bytes=250,
                                  locality=locality,
                                  weights={"locality": 1.0, "load": 0.0, "hardware": 0.0})
        self.check_consistent(plan)
        for s in range(len(plan)):
            (path, _, _), = plan.shards[s].segments
            self.assertEqual(plan.owner(s), "n" + path[1:], f"shard {s} of {path}")

    def test_locality_file(self):
        ds = cohort.Dataset([(f"f{i}", 1000) for i in range(4)])
        plan = cohort.plan_shards(ds, [f"n{i}" for i in range(4)], strategy="locality",
                                  shard_bytes=250, locality=_support.data("locality.yaml"),
                                  weights={"load": 0.0, "hardware": 0.0})
        for s in range(len(plan)):
            (path, _, _), = plan.shards[s].segments
            self.assertEqual(plan.owner(s), "n" + path[1:], f"shard {s} of {path}")

    def test_bad_locality_file(self):
        with self.assertRaises(cohort.ParseError) as cm:
            self.plan(strategy="locality", locality=_support.data("bad_locality.yaml"))
        self.assertRegex(str(cm.exception), r"bad_locality\.yaml:3:\d+")
        self.assertIn("2.5", str(cm.exception))
        with self.assertRaises(cohort.FileError):
            self.plan(strategy="locality", locality=_support.data("no_locality.yaml"))

    def test_replicas_on_distinct_hosts(self):
        topo = cohort.Topology()
        for h in range(4):
            for p in range(2):
                topo.add_node(f"h{h}p{p}", host=f"h{h}")
        plan = cohort.plan_shards(self.ds, topo, shard_count=100, replication=2)
        for s in range(len(plan)):
            hosts = {topo[m].host for m in plan.owners(s)}
            self.assertEqual(len(hosts), 2, f"shard {s}: {plan.owners(s)}")

    def test_members_by_role(self):
        topo = cohort.Topology()
        for node_id, role in (("w0", "worker"), ("boss", "chief"), ("ev", "evaluator"),
                              ("ps", "parameter_server"), ("w1", "worker")):
            topo.add_node(node_id, role=role)
        plan = cohort.plan_shards(self.ds, topo, shard_count=10)
        self.assertEqual(plan.members, ["w0", "boss", "w1"])
        everyone = cohort.plan_shards(self.ds, topo, shard_count=10, roles="all")
        self.assertEqual(everyone.members, ["w0", "boss", "ev", "ps", "w1"])
        servers = cohort.plan_shards(self.ds, topo, shard_count=10, roles=["parameter_server"])
        self.assertEqual(servers.members, ["ps"])
        self.assertEqual(servers.assignments, {"ps": list(range(10))})
        with self.assertRaises(cohort.InvalidArgument):
            cohort.plan_shards(self.ds, topo, shard_count=10, roles=["janitor"])

    def test_only_ready_nodes_are_members(self):
        topo = cohort.Topology(["a", "b", "c"])
        topo.set_status("b", "down")
        plan = cohort.plan_shards(self.ds, topo, shard_count=10)
        self.assertEqual(plan.members, ["a", "c"])

    def test_inputs_in_other_forms(self):
        plan = cohort.plan_shards({"x": 100, "y": 50}, ["p", "q"], shard_bytes=30)
        self.assertEqual(len(plan), 5)
        self.assertEqual(plan.shards[4].segments, [("y", 20, 50)])
        shards = cohort.split_shards([("x", 100)], shard_count=4)
        self.assertEqual(len(cohort.plan_shards(shards, ["p"])), 4)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.plan_shards(shards, ["p"], shard_count=4)

    def test_json(self):
        plan = self.plan(replication=2, shard_count=20)
        data = plan.to_dict()
        self.assertIn("hash", plan.to_json())
        self.assertIn("members", data)
        self.assertIn("shards", data)
        self.assertEqual(len(data["shards"]), 20)

    def test_invalid(self):
        with self.assertRaises(cohort.Unsatisfiable):
            self.plan(replication=9)
        with self.assertRaises(cohort.InvalidArgument):
            self.plan(replication=0)
        with self.assertRaises(cohort.InvalidArgument):
            self.plan(strategy="alphabetical")
        with self.assertRaises(cohort.InvalidArgument):
            self.plan(seed=-1)
        with self.assertRaises(cohort.InvalidArgument):
            self.plan(load_slack=-0.5)
        with self.assertRaises(cohort.InvalidArgument):
            self.plan(weights={"speed": 1.0})
        with self.assertRaises(cohort.InvalidArgument):
            self.plan(strategy="locality", locality={"n0": {"file0": 1.5}})
        with self.assertRaises(cohort.InvalidArgument):
            self.plan(strategy="custom")
        with self.assertRaises(cohort.InvalidArgument):
            cohort.plan_shards(self.ds, "n0", shard_count=5)
        plan = self.plan()
        with self.assertRaises(cohort.NotFound):
            plan.member_shards("nobody")
        with self.assertRaises(cohort.OutOfRange):
            plan.owner(200)
        with self.assertRaises(cohort.OutOfRange):
            plan.owner(0, replica=1)

    def test_large_plan(self):
        ds = cohort.Dataset([("big", 300_000)])
        plan = cohort.plan_shards(ds, self.NODES, shard_bytes=1)
        self.assertEqual(len(plan), 300_000)
        assignments = plan.assignments
        self.assertEqual(sorted(s for shards in assignments.values() for s in shards),
                         list(range(300_000)))


class ReplanTest(unittest.TestCase):
    NODES = [f"n{i}" for i in range(8)]

    def setUp(self):
        self.ds = cohort.Dataset([(f"file{i}", 5000) for i in range(10)])

    def check_departure(self, strategy, replication):
        plan = cohort.plan_shards(self.ds, self.NODES, strategy=strategy, shard_count=240,
                                  replication=replication, seed=3)
        gone = "n5"
        after = plan.replan([n for n in self.NODES if n != gone])
        self.assertNotIn(gone, after.members)
        self.assertEqual(after.replication, replication)
        for s in range(len(plan)):
            kept = set(plan.owners(s)) - {gone}
            self.assertLessEqual(kept, set(after.owners(s)),
                                 f"shard {s}: {plan.owners(s)} -> {after.owners(s)} moved a "
                                 f"placement off a member that stayed")
            self.assertEqual(len(set(after.owners(s))), replication)
        self.assertEqual(after.moved, plan.load(gone))

    def test_departure_moves_only_the_departed_nodes_shards(self):
        for strategy in ("hash", "round_robin", "random"):
            for replication in (1, 2, 3):
                with self.subTest(strategy=strategy, replication=replication):
                    self.check_departure(strategy, replication)

    def test_newcomer_gets_an_even_share_and_nothing_else_moves(self):
        plan = cohort.plan_shards(self.ds, self.NODES, shard_count=240)
        after = plan.replan(self.NODES + ["n8"])
        share = after.load("n8")
        self.assertIn(share, (240 // 9, 240 // 9 + 1))
        self.assertEqual(after.moved, share)
        for s in range(len(plan)):
            self.assertIn(after.owner(s), (plan.owner(s), "n8"))

    def test_same_membership_moves_nothing(self):
        plan = cohort.plan_shards(self.ds, self.NODES, shard_count=100)
        after = plan.replan(cohort.Topology(self.NODES))
        self.assertEqual(after.moved, 0)
        self.assertEqual(after.assignments, plan.assignments)
        self.assertEqual(len(after.shards), 100)

    def test_replan_with_new_options(self):
        plan = cohort.plan_shards(self.ds, self.NODES, shard_count=100)
        after = plan.replan(self.NODES[:4], strategy="round_robin")
        self.assertEqual(after.strategy, "round_robin")
        self.assertEqual(after.members, self.NODES[:4])

    def test_replan_keeps_the_options_it_is_not_given(self):
        plan = cohort.plan_shards(self.ds, self.NODES, strategy="random", shard_count=100,
                                  replication=2, seed=5)
        after = plan.replan(self.NODES[:6], seed=9)
        self.assertEqual(after.replication, 2)
        self.assertEqual(after.strategy, "random")
        self.assertEqual(after.moved, plan.load("n6") + plan.load("n7"))


class CustomTest(unittest.TestCase):
    def setUp(self):
        self.ds = cohort.Dataset([("a", 1000), ("b", 1000)])
        self.nodes = ["p", "q", "r", "s"]

    def test_callback_places_shards(self):
        calls = []

        def assign(shard, replica, taken, member_count):
            calls.append((shard, replica, list(taken), member_count))
            return (shard + 3 * replica) % member_count

        plan = cohort.plan_shards(self.ds, self.nodes, shard_count=10, replication=2,
                                  custom=assign)
        self.assertEqual(plan.strategy, "custom")
        for s in range(10):
            self.assertEqual(plan.owners(s), [self.nodes[s % 4], self.nodes[(s + 3) % 4]])
        self.assertEqual(calls[:4], [(0, 0, [], 4), (0, 1, [0], 4), (1, 0, [], 4),
                                     (1, 1, [1], 4)])
        self.assertEqual(len(calls), 20)

    def test_exception_surfaces_as_callback_error(self):
        def assign(shard, replica, taken, member_count):
            if shard == 3:
                raise ZeroDivisionError("no shard 3 for you")
            return 0

        with self.assertRaises(cohort.CallbackError) as cm:
            cohort.plan_shards(self.ds, self.nodes, shard_count=10, custom=assign)
        self.assertIsInstance(cm.exception.__cause__, ZeroDivisionError)
        self.assertIn("no shard 3 for you", str(cm.exception))
        self.assertEqual(cm.exception.code, 9)

    def test_keyboard_interrupt_is_not_wrapped(self):
        def assign(*args):
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            cohort.plan_shards(self.ds, self.nodes, shard_count=10, custom=assign)

    def test_negative_result_aborts(self):
        with self.assertRaises(cohort.CallbackError) as cm:
            cohort.plan_shards(self.ds, self.nodes, shard_count=10, custom=lambda *a: -1)
        self.assertIsNone(cm.exception.__cause__)

    def test_bad_results_are_rejected(self):
        for bad in (lambda s, r, taken, n: n, lambda s, r, taken, n: 0,
                    lambda s, r, taken, n: "zero"):
            with self.subTest(bad=bad), self.assertRaises(cohort.Error):
                cohort.plan_shards(self.ds, self.nodes, shard_count=10, replication=2,
                                   custom=bad)

    def test_callback_outlives_its_caller(self):
        counter = {"calls": 0}

        def make():
            def assign(shard, replica, taken, member_count):
                counter["calls"] += 1
                return shard % member_count
            return cohort.plan_shards(self.ds, self.nodes, shard_count=8, custom=assign)

        plan = make()
        gc.collect()
        after = plan.replan(self.nodes[:2])
        self.assertEqual(after.members, ["p", "q"])
        self.check_all_placed(after)
        self.assertGreaterEqual(counter["calls"], 8)

    def check_all_placed(self, plan):
        placed = sorted(s for shards in plan.assignments.values() for s in shards)
        self.assertEqual(placed, list(range(len(plan))))

    def test_not_callable(self):
        with self.assertRaises(cohort.InvalidArgument):
            cohort.plan_shards(self.ds, self.nodes, shard_count=4, custom=42)
        with self.assertRaises(cohort.InvalidArgument):
            cohort.plan_shards(self.ds, self.nodes, shard_count=4, strategy="hash",
                               custom=lambda *a: 0)


if __name__ == "__main__":
    unittest.main()
