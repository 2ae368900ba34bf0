"""The etcd:// store from Python: ranks as separate processes meet through a
real etcd (started here on free loopback ports in a temporary folder) and
all-reduce; a malformed URL and an etcd that is down give clear errors."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.request

import _support
import cohort

ETCD = "/usr/bin/etcd"


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Etcd:
    """One etcd member in a temporary folder, killed and removed on exit."""

    def __enter__(self):
        self.folder = tempfile.TemporaryDirectory(prefix="cohort-etcd-py-")
        for _ in range(3):  # a port taken between picking and binding: again
            client, peer = free_ports(2)
            self.endpoint = f"127.0.0.1:{client}"
            self.log = open(os.path.join(self.folder.name, "etcd.log"), "ab")
            self.process = subprocess.Popen(
                [ETCD, "--name=m0", f"--data-dir={self.folder.name}/m0",
                 f"--listen-client-urls=http://{self.endpoint}",
                 f"--advertise-client-urls=http://{self.endpoint}",
                 f"--listen-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-cluster=m0=http://127.0.0.1:{peer}"],
                stdout=self.log, stderr=self.log)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1) as r:
                        if b'"true"' in r.read():
                            return self
                except OSError:
                    time.sleep(0.1)
            self._stop()
        raise RuntimeError(f"etcd did not start; see {self.folder.name}/etcd.log")

    def _stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        self.log.close()

    def __exit__(self, *exc):
        self._stop()
        self.folder.cleanup()


RANK = textwrap.dedent("""
    import sys, array
    import cohort
    rank, size, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with cohort.Communicator(rank, size, store, address="127.0.0.1",
                             timeout=30, connect_timeout=30) as comm:
        data = array.array("f", [rank + 1.0] * 100)
        comm.allreduce(data)
        print(data[0], data[99])
""")


class EtcdStoreTest(unittest.TestCase):
    def test_processes_all_reduce_through_etcd(self):
        with Etcd() as etcd:
            store = f"etcd://{etcd.endpoint}/cohort/pytest/0"
            size = 3
            ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(size), store],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=_support.child_env(), text=True)
                     for r in range(size)]
            for r, p in enumerate(ranks):
                try:
                    out, err = p.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    for q in ranks:
                        q.kill()
                    raise
                self.assertEqual(p.returncode, 0, f"rank {r}: {err}")
                self.assertEqual(out.split(), ["6.0", "6.0"])

    def test_bad_url_names_the_problem(self):
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Communicator(0, 2, "etcd://127.0.0.1:2379", connect_timeout=5)
        self.assertIn("no key prefix", str(caught.exception))

    def test_etcd_down_is_unavailable_within_the_timeout(self):
        port = free_ports(1)[0]
        start = time.monotonic()
        with self.assertRaises(cohort.Unavailable) as caught:
            cohort.Communicator(0, 2, f"etcd://127.0.0.1:{port}/cohort/down/0", connect_timeout=1)
        self.assertLess(time.monotonic() - start, 5)
        self.assertIn(f"http://127.0.0.1:{port}", str(caught.exception))
        self.assertIn("etcd unavailable", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
