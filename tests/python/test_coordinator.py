"""cohort.Coordinator hosted in this process and cohort.CoordinatorClient:
join, wait for the world, heartbeat, the store, shards, leave, and the
errors for a wrong token, an unknown job and a wrong generation."""

import socket
import threading
import time
import unittest

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort

SETTINGS = {"min_nodes": 2, "max_nodes": 2, "last_call": 0, "heartbeat_interval": 0.05}


class CoordinatorTest(unittest.TestCase):
    def setUp(self):
        self.server = cohort.Coordinator(token="py-secret")
        self.addCleanup(self.server.close)
        self.client = cohort.CoordinatorClient(self.server.url, token="py-secret", timeout=5,
                                               retry_deadline=2)
        self.addCleanup(self.client.close)

    def test_hosting(self):
        self.assertTrue(self.server.url.startswith("http://127.0.0.1:"))
        self.assertEqual(self.server.url, f"http://127.0.0.1:{self.server.port}")
        with cohort.Coordinator(token="") as other:
            self.assertNotEqual(other.port, self.server.port)
        self.assertTrue(other.closed)
        with self.assertRaises(cohort.InvalidArgument):
            other.url

    def test_rendezvous_store_shards(self):
        c = self.client
        c.create_job("train", SETTINGS)
        self.assertEqual(c.job_state("train")["name"], "train")
        self.assertEqual(c.join("train", "a", host="host-a", address="127.0.0.1:7000"),
                         {"state": "waiting", "generation": 0, "rank": None})
        self.assertEqual(c.world("train", "a")["state"], "waiting")
        self.assertEqual(c.heartbeat("train", "a")["state"], "waiting")

        result = {}
        waiter = threading.Thread(
            target=lambda: result.update(world=c.wait_for_world("train", "a", timeout=5)))
        waiter.start()
        time.sleep(0.1)
        joined = c.join("train", "b")
        waiter.join()
        self.assertEqual(joined["state"], "active")
        world = result["world"]
        self.assertEqual(world["state"], "active")
        self.assertEqual(world["world_size"], 2)
        gen = world["generation"]
        self.assertEqual(gen, joined["generation"])
        self.assertIn("127.0.0.1:7000", [p["address"] for p in world["peers"]])

        beat = c.heartbeat("train", "a", gen, step=3, step_time=0.5)
        self.assertEqual(beat, {"generation": gen, "state": "active", "rendezvous": False})

        c.store_set("train", gen, "addr/0", b"a\0b")
        self.assertEqual(c.store_get("train", gen, "addr/0"), b"a\0b")
        getter = {}
        t = threading.Thread(
            target=lambda: getter.update(v=c.store_get("train", gen, "late", timeout=5)))
        t.start()
        time.sleep(0.1)
        c.store_set("train", gen, "late", "here")
        t.join()
        self.assertEqual(getter["v"], b"here")
        with self.assertRaises(cohort.Timeout) as caught:
            c.store_get("train", gen, "never", timeout=0.05)
        self.assertIn("'never'", str(caught.exception))
        with self.assertRaises(cohort.NotFound):
            c.store_get("train", gen, "never")
        with self.assertRaises(cohort.Mismatch):
            c.store_set("train", gen + 1, "k", "v")
        self.assertEqual(c.store_add("train", gen, "n", 4), 4)
        self.assertEqual(c.store_add("train", gen, "n", -1), 3)
        self.assertEqual(c.store_compare_and_set("train", gen, "lead", None, "a"), (True, b"a"))
        self.assertEqual(c.store_compare_and_set("train", gen, "lead", "x", "b"), (False, b"a"))
        c.store_wait("train", gen, ["n", "lead"], timeout=1)
        with self.assertRaises(cohort.Timeout) as caught:
            c.store_wait("train", gen, ["n", "absent"], timeout=0.05)
        self.assertIn("absent", str(caught.exception))
        self.assertTrue(c.store_delete("train", gen, "lead"))
        self.assertFalse(c.store_delete("train", gen, "lead"))

        beat = c.heartbeat_metrics("train", "a", gen, {
            "step": 5, "collective_seq": 2, "in_collective": False, "gpu": {"gpus": []},
            "samples": [{"age": 0.2, "step": 4, "step_time": 0.1}, {"age": 0, "step": 5}]})
        self.assertEqual(beat["world_size"], 2)
        self.assertIn(beat["rank"], (0, 1))
        member = [m for m in c.job_state("train")["members"] if m["id"] == "a"][0]
        self.assertEqual(member["collective_seq"], 2)
        with self.assertRaises(cohort.InvalidArgument) as caught:
            c.heartbeat_metrics("train", "a", gen, {"samples": [{"age": -1, "step": 1}]})
        self.assertIn("samples", str(caught.exception))

        c.register_dataset("train", {"shards": [{"id": "s0", "bytes": 1}]})
        lease = c.next_shard("train", "a")
        self.assertTrue(lease["granted"])
        self.assertEqual(lease["shard_id"], "s0")
        self.assertTrue(c.shard_done("train", "a", lease["lease"]))
        self.assertFalse(c.shard_done("train", "a", lease["lease"]))
        self.assertTrue(c.next_shard("train", "a")["finished"])

        c.leave("train", "b", failed="killed by signal 9")
        self.assertTrue(c.heartbeat("train", "a", gen)["rendezvous"])
        members = {m["id"]: m for m in c.job_state("train")["members"]}
        self.assertEqual(members["b"]["state"], "failed")
        self.assertIn("killed by signal 9", members["b"]["reason"])

    def test_errors(self):
        wrong = cohort.CoordinatorClient(self.server.url, token="nope", retry_deadline=0)
        with self.assertRaises(cohort.PermissionDenied) as caught:
            wrong.job_state("x")
        self.assertIn("401", str(caught.exception))
        with self.assertRaises(cohort.NotFound) as caught:
            self.client.job_state("no-such-job")
        self.assertIn("no-such-job", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            cohort.CoordinatorClient("localhost:1")
        with self.assertRaises(cohort.InvalidArgument):
            self.client.wait_for_world("x", "y", timeout=-1)

    def test_dead_server_is_unavailable(self):
        url = self.server.url
        self.server.close()
        client = cohort.CoordinatorClient(url, timeout=1, retry_deadline=0.2)
        start = time.monotonic()
        with self.assertRaises(cohort.Unavailable) as caught:
            client.job_state("x")
        self.assertLess(time.monotonic() - start, 3)
        self.assertIn(url, str(caught.exception))

    def test_a_list_of_replicas_passes_a_dead_one_over(self):
        # Through the C API: the URL string goes to the client as it is.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        client = cohort.CoordinatorClient(f"{dead},{self.server.url}", token="py-secret", timeout=5,
                                          retry_deadline=2)
        self.addCleanup(client.close)
        start = time.monotonic()
        client.create_job("listed", SETTINGS)
        self.assertLess(time.monotonic() - start, 1)
        self.assertEqual(client.job_state("listed")["name"], "listed")
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.CoordinatorClient(f"{self.server.url},,{dead}")
        self.assertIn("entry 2 is empty", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
