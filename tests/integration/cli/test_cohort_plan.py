"""cohort-plan end to end: the binary run as a user runs it.

Needs COHORT_PLAN (the binary) and COHORT_EXAMPLES (the examples folder).
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

PLAN = os.environ.get("COHORT_PLAN", "build/examples/cohort-plan")
EXAMPLES = os.environ.get("COHORT_EXAMPLES", "examples")
CLUSTER = os.path.join(EXAMPLES, "cluster.yaml")
DATASET = os.path.join(EXAMPLES, "dataset.txt")
LOCALITY = os.path.join(EXAMPLES, "locality.yaml")


def run(*args):
    return subprocess.run([PLAN, *args], capture_output=True, text=True, timeout=60)


class HelpAndVersion(unittest.TestCase):
    def test_help_documents_every_flag(self):
        result = run("--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        for flag in ["--cluster", "--dataset", "--locality", "--strategy", "--shard-bytes", "--shards",
                     "--replication", "--seed", "--load-slack", "--remove", "--roles", "--json", "--limit",
                     "--advise", "--style", "--batch-size", "--budget", "--disk-budget", "--sample-bytes",
                     "--epochs", "--access", "--pattern", "--locality-threshold", "--measurements",
                     "--help", "--version"]:
            self.assertIn(flag, result.stdout)
        # Every long flag the parser accepts appears in the help.
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "cohort_plan",
                               "options.cpp")) as f:
            source = f.read()
        for flag in set(re.findall(r'arg == "(--[a-z-]+)"', source)):
            self.assertIn(flag, result.stdout, f"{flag} is accepted but not in --help")

    def test_version(self):
        result = run("--version")
        self.assertEqual(result.returncode, 0)
        self.assertRegex(result.stdout, r"^cohort-plan \d+\.\d+\.\d+")


class Tables(unittest.TestCase):
    def test_rank_order_and_plan_tables(self):
        result = run("-c", CLUSTER, "-d", DATASET, "--limit", "0")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        self.assertIn("rank order (12 ranks on 6 hosts)", out)
        self.assertRegex(out, r"\n\s+0\s+chief-0\s+gpu-a1\s+chief")
        # 2 zones and 3 racks: the ring leaves each group exactly once.
        self.assertRegex(out, r"zone\s+2\n")
        self.assertRegex(out, r"rack\s+3\n")
        self.assertIn("strategy hash, replication 1", out)
        self.assertNotIn("eval-0", out.split("shard plan")[1])  # evaluators hold no training shards

    def test_remove_reports_moves(self):
        result = run("-c", CLUSTER, "-d", DATASET, "--remove", "worker-3")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"replan without worker-3: \d+ of \d+ placements moved")


class Json(unittest.TestCase):
    def test_json_document(self):
        result = run("-c", CLUSTER, "-d", DATASET, "--json", "-r", "2", "--remove", "worker-1,worker-2")
        self.assertEqual(result.returncode, 0, result.stderr)
        doc = json.loads(result.stdout)
        self.assertEqual(doc["world_size"], 12)
        self.assertEqual([r["rank"] for r in doc["rank_order"]], list(range(12)))
        self.assertEqual(doc["ring_crossings"]["rack"], 3)
        plan = doc["plan"]
        self.assertEqual(plan["replication"], 2)
        for shard in plan["shards"]:
            self.assertEqual(len(set(shard["owners"])), 2)
        removed_load = sum(m["load"] for m in plan["members"] if m["id"] in ("worker-1", "worker-2"))
        self.assertEqual(doc["replan"]["moved"], removed_load)

    def test_locality_strategy(self):
        result = run("-c", CLUSTER, "-d", DATASET, "--json", "-s", "locality", "--locality", LOCALITY)
        self.assertEqual(result.returncode, 0, result.stderr)
        plan = json.loads(result.stdout)["plan"]
        first = plan["shards"][0]
        self.assertEqual(first["owners"], ["worker-1"])  # part-00000 is on worker-1's disk


class BadInput(unittest.TestCase):
    def write(self, text, suffix):
        f = tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_bad_cluster_names_file_line_and_field(self):
        path = self.write("nodes:\n  - id: a\n    gpus: lots\n", ".yaml")
        result = run("-c", path, "-d", DATASET)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{path}:3:11: nodes[0].gpus: expected a non-negative integer", result.stderr)

    def test_bad_dataset_line(self):
        path = self.write("a 10\nb ten\n", ".txt")
        result = run("-c", CLUSTER, "-d", path)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{path}:2:3:", result.stderr)

    def test_missing_file(self):
        result = run("-c", "/nonexistent/cluster.yaml", "-d", DATASET)
        self.assertEqual(result.returncode, 1)
        self.assertIn("/nonexistent/cluster.yaml: cannot open", result.stderr)

    def test_usage_errors_exit_2(self):
        for args, message in [((), "--cluster FILE is required"),
                              (("-c", CLUSTER, "-d", DATASET, "--strategy", "nope"), "unknown strategy 'nope'"),
                              (("-c", CLUSTER, "-d", DATASET, "--shards", "x"), "--shards: expected"),
                              (("-c", CLUSTER, "-d", DATASET, "--load-slack", "200"), "--load-slack: must be in [0, 100]"),
                              (("-c", CLUSTER, "-d", DATASET, "--bogus"), "unknown option '--bogus'"),
                              (("-c", CLUSTER, "-d", DATASET, "--shards", "4", "--shard-bytes", "1MiB"), "not both"),
                              (("-c", CLUSTER, "-d", DATASET, "-s", "locality"), "needs --locality")]:
            result = run(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(message, result.stderr)

    def test_unsatisfiable_replication(self):
        result = run("-c", CLUSTER, "-d", DATASET, "-r", "13")
        self.assertEqual(result.returncode, 1)
        self.assertIn("replication 13 needs at least 13", result.stderr)

    def test_unknown_removed_node(self):
        result = run("-c", CLUSTER, "-d", DATASET, "--remove", "ghost")
        self.assertEqual(result.returncode, 1)
        self.assertIn("--remove: no node 'ghost'", result.stderr)


ADVISE = ("-c", CLUSTER, "-d", DATASET, "-s", "locality", "--locality", LOCALITY, "--advise",
          "--batch-size", "256", "--budget", "8GiB")


class Advise(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_tables(self):
        result = run(*ADVISE, "--limit", "0")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout.split("data advice:")[1]
        self.assertIn("style allreduce, batch 256 x 4KiB = 1MiB", out)
        self.assertIn("prefetch:    2 batches (2MiB): the job: no measurement", out)
        self.assertIn("cache:       no: 1 epoch of sequential access", out)
        # worker-4 and worker-8 also hold shards they have no copy of: below 0.8.
        self.assertIn("locality:    worker-1: 1 of 12 nodes read at least 0.80", out)
        self.assertRegex(out, r"\nworker-4\s+2\s+2MiB\s+0\.76 ")
        self.assertRegex(out, r"\nworker-1\s+2\s+2MiB\s+1\.00\*")
        # part-00000 is on worker-1's disk: shard 0 is read there, at priority 0.
        self.assertRegex(out, r"\n\s+0\s+\S+\s+worker-1\s+1\.00\s+2\s+none\s+0\s+the only replica; locality 1\.00; "
                              r"locality 1\.00 on worker-1: a local read")
        self.assertRegex(out, r"\n\s+9\s+\S+\s+chief-0\s+0\.00\s+2\s+none\s+100\s+.*from remote storage")

    def test_json_and_measurements(self):
        path = self.write(json.dumps({"job": {"data_wait_fraction": 0.02},
                                      "nodes": {"worker-3": {"data_wait": 0.3, "step_time": 0.6,
                                                             "prefetch_hit_rate": 0.4}}}))
        result = run(*ADVISE, "--style", "parameter_server", "--epochs", "2", "--pattern", "train/part-0000[0-3]*",
                     "--measurements", path, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        advice = json.loads(result.stdout)["advice"]
        self.assertEqual(advice["style"], "parameter_server")
        self.assertEqual(len(advice["files"]), 4)
        self.assertTrue(advice["cache"]["enabled"])
        nodes = {n["node"]: n for n in advice["nodes"]}
        self.assertEqual(nodes["worker-3"]["prefetch"]["batches"], 8)  # ceil(4 / (1 - 0.5))
        self.assertIn("worker-3: data wait 0.50", nodes["worker-3"]["prefetch"]["reason"])
        self.assertEqual(nodes["worker-2"]["prefetch"]["batches"], 4)  # the job's 0.02: the baseline
        self.assertIn("(the job's)", nodes["worker-2"]["prefetch"]["reason"])
        first = advice["shards"][0]
        self.assertEqual((first["shard"], first["preferred_node"], first["priority"]["value"]), (0, "worker-1", 0))

    def test_errors(self):
        for args, code, message in [
                (("-c", CLUSTER, "-d", DATASET, "--batch-size", "4"), 2, "--batch-size needs --advise"),
                (("-c", CLUSTER, "-d", DATASET, "--advise", "--budget", "1GiB"), 2, "--advise needs --batch-size"),
                (("-c", CLUSTER, "-d", DATASET, "--advise", "--batch-size", "4"), 2, "--advise needs --budget"),
                ((*ADVISE, "--batch-size", "0"), 2, "--batch-size: must be at least 1"),
                ((*ADVISE, "--style", "ring"), 2, "--style: unknown style 'ring'"),
                ((*ADVISE, "--budget", "lots"), 2, "--budget: expected a positive size"),
                ((*ADVISE, "--access", "sideways"), 2, "--access: unknown access"),
                ((*ADVISE, "--locality-threshold", "2"), 2, "--locality-threshold: must be in (0, 1]"),
                ((*ADVISE, "--pattern", "test/*"), 1, "file pattern 'test/*' matches none"),
                ((*ADVISE, "--measurements", "/nonexistent/m.json"), 1, "--measurements: /nonexistent/m.json: cannot open")]:
            with self.subTest(args=args):
                result = run(*args)
                self.assertEqual(result.returncode, code, result.stderr)
                self.assertIn(message, result.stderr)
        path = self.write('{"nodes": {"worker-3": {"prefetch_hit_rate": 2}}}')
        result = run(*ADVISE, "--measurements", path)
        self.assertEqual(result.returncode, 1)
        self.assertIn("measurements.nodes.worker-3.prefetch_hit_rate: must be in [0, 1], got 2", result.stderr)
        path = self.write('{"jobs": {}}')
        result = run(*ADVISE, "--measurements", path)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{path}: unknown field 'jobs'", result.stderr)


if __name__ == "__main__":
    unittest.main()
