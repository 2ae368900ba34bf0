"""cohort.Membership against a coordinator hosted in this process: two members
get a world of two and all-reduce through its store, metrics reach the job's
state, a leave opens a round the other member hears of, shards are leased;
members of two roles (workers and an evaluator) get worlds of their own and
the evaluator's death opens no round for the workers; and the errors of bad
arguments and of Membership.from_env."""

import array
import os
import threading
import time
import unittest

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort

SETTINGS = {"min_nodes": 2, "max_nodes": 2, "last_call": 0, "heartbeat_interval": 0.05,
            "failure_timeout": 2}
ENV = ("COHORT_COORDINATOR", "COHORT_JOB", "COHORT_MEMBER", "COHORT_GENERATION", "COHORT_HOST", "COHORT_ROLE")


def eventually(done, limit=5.0):
    """Polls done() until it is true or `limit` seconds passed."""
    deadline = time.monotonic() + limit
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def in_threads(members, fn):
    """fn(member) for every member at once; returns the results in order and
    re-raises the first exception."""
    results = [None] * len(members)
    errors = []

    def run(i):
        try:
            results[i] = fn(members[i])
        except Exception as exc:  # noqa: BLE001  (handed to the test)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(members))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def member_entry(state, member):
    return next(m for m in state["members"] if m["id"] == member)


class MembershipTest(unittest.TestCase):
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

    def test_world_communicator_metrics_and_a_leave(self):
        self.client.create_job("train", SETTINGS)
        a, b = self.member("train", "a"), self.member("train", "b")
        self.assertEqual((a.member, a.job), ("a", "train"))
        self.assertIn("'a'", repr(a))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            a.communicator()
        self.assertIn("next_world", str(caught.exception))

        worlds = in_threads([a, b], lambda m: m.next_world(timeout=10))
        self.assertEqual(sorted(w["rank"] for w in worlds), [0, 1])
        for w in worlds:
            self.assertEqual(w["state"], "active")
            self.assertEqual(w["world_size"], 2)
            self.assertEqual(w["generation"], worlds[0]["generation"])
        self.assertFalse(a.round_pending)

        def all_reduce(m):
            with m.communicator() as comm:
                data = array.array("f", [comm.rank + 1.0, 0.5])
                comm.allreduce(data)
                return list(data)

        self.assertEqual(in_threads([a, b], all_reduce), [[3.0, 1.0], [3.0, 1.0]])

        a.record_step(7, step_time=0.25, samples_per_sec=512)
        a.set_collective(3, False)
        a.set_gpu_json([{"index": 0, "utilization": 88}])
        # The first step in a world goes out at once; the GPU sample with
        # the next heartbeat.
        self.assertTrue(eventually(
            lambda: "gpu" in member_entry(self.client.job_state("train"), "a")))
        entry = member_entry(self.client.job_state("train"), "a")
        self.assertEqual(entry["step_time"], 0.25)
        self.assertEqual(entry["gpu"], [{"index": 0, "utilization": 88}])

        b.leave()
        b.leave()  # does nothing
        self.assertTrue(eventually(lambda: a.round_pending))
        # Alone, a cannot form the world of two.
        with self.assertRaises(cohort.Timeout) as caught:
            a.next_world(timeout=0.3)
        self.assertIn("member 'a' has no world", str(caught.exception))
        # b joins again: both are in the next generation.
        worlds = in_threads([a, b], lambda m: m.next_world(timeout=10))
        self.assertEqual(worlds[0]["generation"], worlds[1]["generation"])
        self.assertGreater(worlds[0]["generation"], 1)
        self.assertFalse(a.round_pending)

    def test_role_groups(self):
        self.assertEqual(cohort.role_job("train"), "train")
        self.assertEqual(cohort.role_job("train", "worker"), "train")
        self.assertEqual(cohort.role_job("train", "default"), "train")
        self.assertEqual(cohort.role_job("train", "evaluator"), "train.evaluator")
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.role_job("train", "a.b")
        self.assertIn("'a.b' is not a role name", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Membership(self.server.url, "train", "x", role="no way")
        self.assertIn("'no way' is not a role name", str(caught.exception))

        self.client.create_job("train", SETTINGS)
        self.client.create_job("train.evaluator", dict(SETTINGS, min_nodes=1, max_nodes=1))
        workers = [self.member("train", "a"), self.member("train", "b")]
        evaluator = cohort.Membership(self.server.url, "train", "a", host="host-e", role="evaluator")
        self.assertEqual((workers[0].job, workers[0].role), ("train", "default"))
        self.assertEqual((evaluator.job, evaluator.role), ("train.evaluator", "evaluator"))
        worlds = in_threads(workers + [evaluator], lambda m: m.next_world(timeout=10))
        self.assertEqual([w["world_size"] for w in worlds], [2, 2, 1])
        self.assertEqual(worlds[2]["rank"], 0)

        def all_reduce(m):
            with m.communicator() as comm:
                data = array.array("i", [comm.rank + 1])
                comm.allreduce(data)
                return data[0]

        self.assertEqual(in_threads(workers + [evaluator], all_reduce), [3, 3, 1])
        entry = member_entry(self.client.job_state("train.evaluator"), "a")
        self.assertEqual(entry["role"], "evaluator")
        # The evaluator dies without a word: its job fails it after
        # failure_timeout (2 s); the workers hear of no round.
        evaluator.close()
        self.assertTrue(eventually(
            lambda: member_entry(self.client.job_state("train.evaluator"), "a")["state"] != "active", 6))
        time.sleep(0.3)
        self.assertFalse(workers[0].round_pending or workers[1].round_pending)
        self.assertEqual(self.client.job_state("train")["generation"], worlds[0]["generation"])

    def test_shards(self):
        self.client.create_job("data", dict(SETTINGS, min_nodes=1, max_nodes=1))
        self.client.register_dataset("data", {"shards": [{"id": "s0"}]})
        m = self.member("data", "w")
        self.assertEqual(m.next_world(timeout=5)["world_size"], 1)
        lease = m.next_shard()
        self.assertTrue(lease["granted"])
        self.assertEqual(lease["shard_id"], "s0")
        self.assertEqual(m.shard_done(lease["lease"]), {"outcome": "counted", "counted": True})
        self.assertTrue(m.next_shard()["finished"])
        # Nobody died: nothing is reported, and the round is asked for all
        # the same.
        with m.communicator() as comm:
            self.assertEqual(comm.dead_ranks, [])
            self.assertEqual(m.report_dead(comm), 0)
        self.assertTrue(m.round_pending)

    def test_bad_arguments(self):
        m = self.member("nojob", "x")
        with self.assertRaises(cohort.NotFound) as caught:
            m.next_world(timeout=1)
        self.assertIn("nojob", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            m.next_world(timeout=-1)
        with self.assertRaises(cohort.InvalidArgument):
            m.record_step(-1)
        with self.assertRaises(cohort.InvalidArgument):
            m.record_step(1, step_time="fast")
        with self.assertRaises(cohort.InvalidArgument) as caught:
            m.set_gpu_json("{not json")
        self.assertIn("not JSON", str(caught.exception))
        m.close()
        with self.assertRaises(cohort.InvalidArgument):
            m.round_pending

    def test_from_env(self):
        saved = {name: os.environ.pop(name) for name in ENV if name in os.environ}

        def restore():
            for name in ENV:
                os.environ.pop(name, None)
            os.environ.update(saved)

        self.addCleanup(restore)
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Membership.from_env()
        self.assertIn("COHORT_COORDINATOR is not set", str(caught.exception))
        os.environ["COHORT_COORDINATOR"] = "127.0.0.1:http"
        os.environ["COHORT_JOB"] = "train"
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Membership.from_env()
        self.assertIn("COHORT_COORDINATOR='127.0.0.1:http'", str(caught.exception))
        os.environ["COHORT_COORDINATOR"] = self.server.url
        os.environ["COHORT_MEMBER"] = "from-env"
        with cohort.Membership.from_env() as m:
            self.assertEqual((m.member, m.job, m.role), ("from-env", "train", "default"))
        os.environ["COHORT_ROLE"] = "evaluator"
        with cohort.Membership.from_env() as m:
            self.assertEqual((m.job, m.role), ("train.evaluator", "evaluator"))
        os.environ["COHORT_ROLE"] = "bad/role"
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Membership.from_env()
        self.assertIn("COHORT_ROLE: 'bad/role' is not a role name", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
