"""Topology loading and building, and topology-aware rank orders."""

import itertools
import json
import unittest

import _support
import cohort

GiB = 1 << 30
TRAINING = ["e0", "a0", "c0", "b1", "d0", "a1", "chief", "c1", "b0", "e1"]


def load():
    return cohort.Topology.from_file(_support.data("cluster.yaml"))


class LoadTest(unittest.TestCase):
    def test_nodes_in_file_order_with_every_field(self):
        topo = load()
        self.assertEqual(len(topo), 12)
        self.assertEqual(topo.ids, ["e0", "a0", "c0", "b1", "ev0", "d0", "a1", "chief", "x0",
                                    "c1", "b0", "e1"])
        e0 = topo.nodes[0]
        self.assertEqual(e0, cohort.Node(
            id="e0", host="h5", address="10.0.3.5:29500", role="worker", status="ready",
            switch="s3", rack="r3", zone="eu-1", region="eu", gpu_count=8,
            gpu_memory=80 * GiB))
        self.assertEqual(topo["ev0"].role, "evaluator")
        self.assertEqual(topo["chief"].role, "chief")
        self.assertEqual(topo["x0"].status, "down")
        self.assertEqual(topo["c0"].gpu_memory, 40 * GiB)
        self.assertIsNone(topo["c0"].address)
        self.assertEqual(topo[-1].id, "e1")
        self.assertEqual([n.id for n in topo[1:3]], ["a0", "c0"])

    def test_find(self):
        topo = load()
        self.assertEqual(topo.find("a1"), 6)
        self.assertEqual(topo.index("a1"), 6)
        self.assertIsNone(topo.find("nobody"))
        self.assertIn("a1", topo)
        self.assertNotIn("nobody", topo)
        with self.assertRaises(cohort.NotFound) as cm:
            topo.index("nobody")
        self.assertIn("nobody", str(cm.exception))
        with self.assertRaises(cohort.OutOfRange):
            topo.node(12)

    def test_yaml_and_json_agree(self):
        from_json = cohort.Topology.from_file(_support.data("cluster.json"))
        from_yaml = cohort.Topology.from_file(_support.data("cluster_same.yaml"))
        self.assertEqual(from_json.nodes, from_yaml.nodes)
        self.assertEqual(from_json["w1"].gpu_memory, 16 * GiB)
        self.assertEqual(from_json["boss"].host, "boss")  # alone on its own host
        self.assertEqual(from_json["w2"].address, "10.1.0.2:1234")

    def test_to_json_round_trips(self):
        topo = load()
        text = topo.to_json()
        self.assertIsInstance(json.loads(text), dict)
        self.assertEqual(len(topo.to_dict()["nodes"]), 12)
        again = cohort.Topology.from_string(text, format="json", source_name="copy.json")
        self.assertEqual(again.nodes, topo.nodes)
        self.assertEqual(cohort.Topology.from_string(text).nodes, topo.nodes)

    def test_from_string_yaml(self):
        topo = cohort.Topology.from_string(
            "nodes:\n  - id: n0\n    gpus: 2\n    gpu_memory: 1GiB\n  - {id: n1, host: n0h}\n",
            format="yaml")
        self.assertEqual([n.id for n in topo], ["n0", "n1"])
        self.assertEqual((topo["n0"].gpu_count, topo["n0"].gpu_memory), (2, GiB))
        self.assertEqual(topo["n1"].host, "n0h")


class BadInputTest(unittest.TestCase):
    def test_unknown_field(self):
        with self.assertRaises(cohort.ParseError) as cm:
            cohort.Topology.from_file(_support.data("bad_field.yaml"))
        message = str(cm.exception)
        self.assertRegex(message, r"bad_field\.yaml:5:\d+")
        self.assertIn("unknown field 'foo'", message)
        self.assertIn("nodes[2].foo", message)

    def test_unknown_field_in_string_names_source(self):
        with self.assertRaises(cohort.ParseError) as cm:
            cohort.Topology.from_string("nodes:\n  - id: n0\n    colour: red\n",
                                        format="yaml", source_name="inline.yaml")
        self.assertRegex(str(cm.exception), r"inline\.yaml:3:\d+")
        self.assertIn("colour", str(cm.exception))

    def test_syntax_error(self):
        with self.assertRaises(cohort.ParseError) as cm:
            cohort.Topology.from_file(_support.data("bad_syntax.yaml"))
        self.assertRegex(str(cm.exception), r"bad_syntax\.yaml:\d+")

    def test_bad_role(self):
        with self.assertRaises(cohort.ParseError) as cm:
            cohort.Topology.from_file(_support.data("bad_role.yaml"))
        self.assertRegex(str(cm.exception), r"bad_role\.yaml:4:\d+")
        self.assertIn("janitor", str(cm.exception))

    def test_duplicate_id(self):
        with self.assertRaises(cohort.ParseError) as cm:
            cohort.Topology.from_file(_support.data("duplicate.yaml"))
        self.assertIn("n0", str(cm.exception))
        self.assertIn("duplicate.yaml", str(cm.exception))

    def test_bad_json(self):
        with self.assertRaises(cohort.ParseError):
            cohort.Topology.from_string('{"nodes": [', format="json", source_name="x.json")


class BuildTest(unittest.TestCase):
    def test_add_node(self):
        topo = cohort.Topology()
        self.assertEqual(len(topo), 0)
        node = topo.add_node("n0", host="box", address="10.0.0.1:1", role="chief",
                             switch="s", rack="r", zone="z", region="g", gpus=4,
                             gpu_memory=24 * GiB, status="joining")
        self.assertEqual(node, cohort.Node("n0", "box", "10.0.0.1:1", "chief", "joining",
                                           "s", "r", "z", "g", 4, 24 * GiB))
        self.assertEqual(topo.add_node("n1"), cohort.Node("n1", host="n1"))
        self.assertEqual(len(topo), 2)

    def test_setters(self):
        topo = cohort.Topology(["n0"])
        topo.set_locality("n0", "rack", "r9")
        topo.set_gpus("n0", 2, 1000)
        topo.set_status("n0", "draining")
        node = topo["n0"]
        self.assertEqual((node.rack, node.gpu_count, node.gpu_memory, node.status),
                         ("r9", 2, 1000, "draining"))
        topo.set_locality("n0", "rack", None)
        self.assertIsNone(topo["n0"].rack)
        with self.assertRaises(cohort.NotFound):
            topo.set_status("nobody", "down")
        with self.assertRaises(cohort.InvalidArgument):
            topo.set_locality("n0", "host", "h")  # host is not a label

    def test_duplicate_id_is_invalid_and_leaves_topology_unchanged(self):
        topo = cohort.Topology(["n0"])
        with self.assertRaises(cohort.InvalidArgument) as cm:
            topo.add_node("n0")
        self.assertIn("n0", str(cm.exception))
        self.assertEqual(len(topo), 1)

    def test_invalid_arguments(self):
        topo = cohort.Topology()
        for kwargs in ({"id": ""}, {"id": "n", "role": "janitor"},
                       {"id": "n", "status": "asleep"}, {"id": "n", "gpus": -1},
                       {"id": "n", "gpus": 2**32}, {"id": "n\0x"}):
            with self.subTest(kwargs=kwargs), self.assertRaises(cohort.InvalidArgument):
                topo.add_node(**kwargs)
        self.assertEqual(len(topo), 0)

    def test_nodes_from_ids_dicts_and_nodes(self):
        topo = cohort.Topology(["a", {"id": "b", "host": "box", "gpus": 1},
                                cohort.Node("c", rack="r1")])
        self.assertEqual([(n.id, n.host, n.gpu_count, n.rack) for n in topo],
                         [("a", "a", 0, None), ("b", "box", 1, None), ("c", "c", 0, "r1")])
        with self.assertRaises(cohort.InvalidArgument):
            cohort.Topology([42])

    def test_built_equals_loaded(self):
        loaded = load()
        built = cohort.Topology(loaded.nodes)
        self.assertEqual(built.nodes, loaded.nodes)


class RankOrderTest(unittest.TestCase):
    def check_contiguous(self, order, topo, key):
        """Every group (by `key` of the node) occupies consecutive ranks."""
        groups = [key(topo.node(info.node_index)) for info in order]
        seen = set()
        for i, g in enumerate(groups):
            if i and groups[i - 1] == g:
                continue
            self.assertNotIn(g, seen, f"group {g} is split: {groups}")
            seen.add(g)
        return len(seen)

    def test_ranks_ready_training_nodes_contiguously(self):
        topo = load()
        order = topo.rank_order()
        self.assertEqual(len(order), 10)
        self.assertEqual(order.world_size, 10)
        self.assertEqual(sorted(order.node_ids), sorted(TRAINING))
        self.assertEqual(order[0].node_id, "chief")
        self.assertEqual(self.check_contiguous(order, topo, lambda n: n.host), 6)
        self.assertEqual(self.check_contiguous(order, topo, lambda n: n.switch), 3)
        self.assertEqual(self.check_contiguous(order, topo, lambda n: n.rack), 3)
        self.assertEqual(order.host_count, 6)

    def test_rank_info(self):
        topo = load()
        order = topo.rank_order()
        hosts = []
        for r, info in enumerate(order):
            node = topo.node(info.node_index)
            self.assertEqual(info.rank, r)
            self.assertEqual(info.node_id, node.id)
            self.assertEqual(order.rank_of(node.id), r)
            if not hosts or hosts[-1] != node.host:
                hosts.append(node.host)
            self.assertEqual(info.node_rank, len(hosts) - 1)
            same_host = [i for i in order if topo.node(i.node_index).host == node.host]
            self.assertEqual(info.local_world_size, len(same_host))
            self.assertEqual(info.local_rank, [i.rank for i in same_host].index(r))
        self.assertEqual(order[-1], order[len(order) - 1])
        with self.assertRaises(IndexError):
            order[len(order)]

    def test_ring_crossings(self):
        order = load().rank_order()
        self.assertEqual(order.ring_crossings("host"), 6)
        self.assertEqual(order.ring_crossings("switch"), 3)
        self.assertEqual(order.ring_crossings("rack"), 3)  # one per rack
        self.assertEqual(order.ring_crossings("zone"), 0)
        self.assertEqual(order.ring_crossings("region"), 0)
        with self.assertRaises(cohort.InvalidArgument):
            order.ring_crossings("galaxy")

    def test_unranked_nodes(self):
        order = load().rank_order()
        for node_id in ("ev0", "x0"):
            with self.assertRaises(cohort.NotFound):
                order.rank_of(node_id)

    def test_roles(self):
        topo = load()
        self.assertEqual(topo.rank_order(("evaluator",)).node_ids, ["ev0"])
        self.assertEqual(len(topo.rank_order("all")), 11)  # all but the down node
        self.assertEqual(len(topo.rank_order(["worker"])), 9)
        self.assertEqual(topo.rank_order(("worker", "chief")).node_ids,
                         topo.rank_order().node_ids)
        with self.assertRaises(cohort.Unsatisfiable):
            topo.rank_order(("coordinator",))
        with self.assertRaises(cohort.InvalidArgument):
            topo.rank_order(())
        with self.assertRaises(cohort.InvalidArgument):
            topo.rank_order(("janitor",))

    def test_same_nodes_in_any_order_get_the_same_ranks(self):
        rng = _support.seeded_random("same_nodes_any_order")
        nodes = load().nodes
        expected = cohort.Topology(nodes).rank_order().node_ids
        for _ in range(10):
            rng.shuffle(nodes)
            self.assertEqual(cohort.Topology(nodes).rank_order().node_ids, expected)

    def test_random_clusters_keep_groups_contiguous(self):
        rng = _support.seeded_random("random_clusters")
        for trial in range(25):
            topo = cohort.Topology()
            count = rng.randrange(1, 40)
            for i in range(count):
                zone = rng.randrange(2)
                rack = rng.randrange(3)
                host = rng.randrange(6)
                topo.add_node(f"n{i}", host=f"z{zone}-r{rack}-h{host}", zone=f"z{zone}",
                              rack=f"r{rack}", role="chief" if i == 0 else "worker")
            order = topo.rank_order()
            self.assertEqual(order[0].node_id, "n0")
            hosts = self.check_contiguous(order, topo, lambda n: n.host)
            racks = self.check_contiguous(order, topo, lambda n: (n.zone, n.rack))
            zones = self.check_contiguous(order, topo, lambda n: n.zone)
            self.assertEqual(order.host_count, hosts)
            for level, groups in (("host", hosts), ("rack", racks), ("zone", zones)):
                with self.subTest(trial=trial, level=level):
                    self.assertEqual(order.ring_crossings(level), groups if groups > 1 else 0)

    def test_order_is_a_snapshot(self):
        topo = cohort.Topology(["a", "b"])
        order = topo.rank_order()
        topo.add_node("c")
        self.assertEqual(len(order), 2)
        topo.close()
        self.assertEqual(sorted(order.node_ids), ["a", "b"])
        self.assertEqual(len(list(itertools.islice(order, 5))), 2)


if __name__ == "__main__":
    unittest.main()
