"""cohort.Coordinator hosted in this process and cohort.CoordinatorClient:
join, wait for the world, heartbeat, the store, shards, leave, and the
errors for a wrong token, an unknown job and a wrong generation."""

import os
import socket
import subprocess
import tempfile
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
        # Given back, the shard goes to b now, on a lease of its own.
        self.assertEqual(c.shard_release("train", "a", lease["lease"]), "released")
        self.assertEqual(c.shard_release("train", "a", lease["lease"]), "requeued")
        with self.assertRaises(cohort.NotFound) as caught:
            c.shard_release("train", "a", 77)
        self.assertIn("never granted lease 77", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            c.shard_release("train", "a", -1)
        self.assertEqual(c.job_state("train")["shards"]["released"], 1)
        given = c.next_shard("train", "b")
        self.assertEqual(given["shard_id"], "s0")
        with self.assertRaises(cohort.InvalidArgument) as caught:
            c.shard_release("train", "a", given["lease"])
        self.assertIn("was granted to 'b', not 'a'", str(caught.exception))
        self.assertTrue(c.shard_done("train", "b", given["lease"]))
        self.assertEqual(c.shard_release("train", "b", given["lease"]), "reported")
        self.assertFalse(c.shard_done("train", "a", lease["lease"]))  # b's report came first
        self.assertFalse(c.shard_done("train", "b", given["lease"]))
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


class CoordinatorHttps(unittest.TestCase):
    """Coordinator(tls_cert=, tls_key=, tls_client_ca=) serves HTTPS with
    client certificates; clients take their files from the environment.
    Certificates are made here with the openssl command."""

    ENV = ("COHORT_COORDINATOR_CACERT", "COHORT_COORDINATOR_CERT", "COHORT_COORDINATOR_KEY")

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory(prefix="cohort-https-")
        d = cls.folder.name
        with open(os.path.join(d, "cert.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60, cwd=d)
        run("req", "-x509", *ec, "-days", "1", "-subj", "/CN=ca", "-keyout", "ca.key", "-out", "ca.pem")
        for name in ("server", "client"):
            run("req", *ec, "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr")
            run("x509", "-req", "-days", "1", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-extfile", "cert.ext", "-out", f"{name}.pem")
        cls.files = {n: os.path.join(d, n) for n in os.listdir(d)}

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def setUp(self):
        saved = {k: os.environ.get(k) for k in self.ENV}
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                                 for k, v in saved.items()])
        for k in self.ENV:
            os.environ.pop(k, None)

    def test_mutual_tls(self):
        f = self.files
        with cohort.Coordinator(token="", tls_cert=f["server.pem"], tls_key=f["server.key"],
                                tls_client_ca=f["ca.pem"], max_connections=64, idle_timeout=5) as server:
            self.assertEqual(server.url, f"https://127.0.0.1:{server.port}")
            os.environ["COHORT_COORDINATOR_CACERT"] = f["ca.pem"]
            with cohort.CoordinatorClient(server.url, token="", timeout=5, retry_deadline=0) as anonymous:
                with self.assertRaisesRegex(cohort.PermissionDenied, "certificate"):
                    anonymous.create_job("refused")
            os.environ["COHORT_COORDINATOR_CERT"] = f["client.pem"]
            os.environ["COHORT_COORDINATOR_KEY"] = f["client.key"]
            with cohort.CoordinatorClient(server.url, token="", timeout=5, retry_deadline=0) as client:
                client.create_job("train", SETTINGS)
                self.assertEqual(client.job_state("train")["name"], "train")
                self.assertEqual(client.join("train", "a")["state"], "waiting")

    def test_bad_options_are_named(self):
        f = self.files
        with self.assertRaisesRegex(cohort.InvalidArgument, "tls_key_file"):
            cohort.Coordinator(tls_cert=f["server.pem"])
        with self.assertRaisesRegex(cohort.InvalidArgument, "cannot read .*/nonexistent.pem"):
            cohort.Coordinator(tls_cert="/nonexistent.pem", tls_key=f["server.key"])
        with self.assertRaisesRegex(cohort.InvalidArgument, '"idle_timeout" must be a positive number'):
            cohort.Coordinator(idle_timeout=-1)
        with self.assertRaisesRegex(cohort.InvalidArgument, '"max_connections" must be a whole number from 0 to 65536'):
            cohort.Coordinator(max_connections=70000)
        with self.assertRaisesRegex(cohort.InvalidArgument, "unknown keyword 'tls_ca'"):
            cohort.Coordinator(tls_ca=f["ca.pem"])


if __name__ == "__main__":
    unittest.main()
