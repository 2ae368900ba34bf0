"""Coordinator replicas from Python (cohort.Coordinator(etcd=...)): two
replicas on a real etcd elect one leader, the follower answers 503 naming it,
and closing the leader hands over to the follower with the job kept; a
keyword the library does not know is refused."""

import json
import time
import unittest
import urllib.error
import urllib.request

import _support  # noqa: F401  (sets up the import path)
import cohort
from test_etcd_store import Etcd


def replica(url):
    with urllib.request.urlopen(url + "/v1/replica", timeout=5) as r:
        return json.loads(r.read())


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def wait_for_leader(coordinators, within=10.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        leaders = [c for c in coordinators if replica(c.url)["role"] == "leader"]
        if len(leaders) == 1:
            return leaders[0]
        time.sleep(0.05)
    raise AssertionError("no single leader")


class CoordinatorReplicas(unittest.TestCase):
    def test_one_leads_and_hands_over(self):
        with Etcd() as etcd:
            a = cohort.Coordinator(etcd=etcd.endpoint, etcd_prefix="/cohort/pytest-ha", replica_id="a")
            b = cohort.Coordinator(etcd=etcd.endpoint, etcd_prefix="/cohort/pytest-ha", replica_id="b",
                                   leader_ttl=2)
            try:
                leader = wait_for_leader([a, b])
                follower = b if leader is a else a
                status, _, body = post(leader.url, "/v1/jobs", {"name": "train"})
                self.assertEqual(status, 201, body)
                deadline = time.monotonic() + 5
                while replica(follower.url)["leader"] != leader.url and time.monotonic() < deadline:
                    time.sleep(0.05)
                status, headers, body = post(follower.url, "/v1/jobs", {"name": "other"})
                self.assertEqual(status, 503)
                self.assertEqual(body["error"], "not_leader")
                self.assertEqual(headers.get("X-Cohort-Leader"), leader.url)
                leader.close()
                self.assertIs(wait_for_leader([follower], within=5), follower)
                with urllib.request.urlopen(follower.url + "/v1/jobs/train", timeout=5) as r:
                    self.assertEqual(r.status, 200)
            finally:
                a.close()
                b.close()

    def test_unknown_keyword_is_refused(self):
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Coordinator(etcd="127.0.0.1:1", etcd_prefx="/x")
        self.assertIn("etcd_prefx", str(caught.exception))

    def test_bad_prefix_is_refused(self):
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Coordinator(etcd="127.0.0.1:1", etcd_prefix="relative")
        self.assertIn("prefix", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
