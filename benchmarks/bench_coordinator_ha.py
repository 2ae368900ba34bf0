#!/usr/bin/env python3
"""Question: how long is an etcd-backed coordinator unable to write when its
leader dies, with default settings (a 2 s leader lease)? Target (issue 17):
at most 3 s from kill -9 of the leader to the first write the new leader
answers.

Starts a real etcd on free loopback ports and three `cohort-coordinator
--etcd` replicas, creates a job, then RUNS times: kill -9 the leader, and
from that moment send a write (POST /v1/jobs, a new job each time) every
10 ms to the surviving replicas, following X-Cohort-Leader as the clients
do, until one is answered 201. Also split out: when etcd deleted the leader
key (a watch on it, through etcdctl), and when a follower said it leads.
The killed replica is started again (as a follower) before the next run.
The same again with SIGTERM (a clean stop revokes the lease: the anchor for
what the election itself costs), and the physical floor: one etcd write
round trip (a put through etcd's JSON gateway) in the same run.

    benchmarks/bench_coordinator_ha.py --coordinator build/examples/cohort-coordinator [--runs 10]
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import coordinator_ha as ha  # noqa: E402  (the test's etcd and replica helpers)


def first_write(urls, since, name):
    """Seconds from `since` until a replica of `urls` answers a write."""
    current = urls[0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            status, _, leader = ha.call(current, "POST", "/v1/jobs", {"name": name}, timeout=1)
            if status in (200, 201):
                return time.monotonic() - since
            if status == 503 and leader and leader in urls:
                current = leader
                continue
        except OSError:
            pass
        current = urls[(urls.index(current) + 1) % len(urls)] if current in urls else urls[0]
        time.sleep(0.01)
    raise RuntimeError("no write answered within 30 s")


class KeyWatch(threading.Thread):
    """etcdctl watch on the leader key: when each DELETE was seen."""

    def __init__(self, etcd, key):
        super().__init__(daemon=True)
        self.deletes = []
        self.proc = subprocess.Popen(
            ["etcdctl", f"--endpoints={etcd.endpoints()}", "watch", key],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "ETCDCTL_API": "3"})

    def run(self):
        for line in self.proc.stdout:
            if line.strip() == b"DELETE":
                self.deletes.append(time.monotonic())

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def etcd_put_round_trip(etcd, n=50):
    """The median of n puts through etcd's JSON gateway on one keep-alive
    connection: what one fenced write of the leader costs at least."""
    import base64
    import http.client
    import json
    conn = http.client.HTTPConnection("127.0.0.1", etcd.client_ports[0], timeout=5)
    times = []
    for i in range(n):
        body = json.dumps({"key": base64.b64encode(b"/bench/floor").decode(),
                           "value": base64.b64encode(str(i).encode()).decode()})
        started = time.monotonic()
        conn.request("POST", "/v3/kv/put", body)
        conn.getresponse().read()
        times.append(time.monotonic() - started)
    conn.close()
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="cohort-bench-ha-")
    try:
        etcd = ha.Etcd(workdir, 1)
        prefix = "/cohort/bench-ha"
        ports = ha.free_ports(3)
        replicas = [ha.Replica(args.coordinator, etcd, prefix, workdir, f"r{i}", ports[i]) for i in range(3)]
        urls = [r.url for r in replicas]
        watch = KeyWatch(etcd, prefix + "/leader")
        watch.start()
        results = {"kill -9": [], "SIGTERM": []}
        elected = []
        deleted = []
        n = 0
        for how, sig in (("kill -9", signal.SIGKILL), ("SIGTERM", signal.SIGTERM)):
            for _ in range(args.runs):
                leader = ha.leader_of(replicas, within=15)
                time.sleep(0.8)  # a few lease refreshes: the kill lands at a random point of the cycle
                n += 1
                before = len(watch.deletes)
                killed = time.monotonic()
                leader.proc.send_signal(sig)
                leader.proc.wait()
                survivors = [r for r in replicas if r is not leader]
                took = first_write([r.url for r in survivors], killed, f"probe-{n}")
                results[how].append(took)
                if how == "kill -9":
                    new = ha.leader_of(survivors)
                    if len(watch.deletes) > before:
                        deleted.append(watch.deletes[before] - killed)
                    elected.append(new.name)
                print(f"{how}: {leader.name} -> first write answered {took:.3f} s later", flush=True)
                # The killed replica comes back as a follower.
                i = replicas.index(leader)
                replicas[i] = ha.Replica(args.coordinator, etcd, prefix, workdir, leader.name, leader.port)
        floor = etcd_put_round_trip(etcd)
        watch.stop()

        print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; etcd 1 member; "
              f"3 replicas; leader lease 2 s (default); {args.runs} runs each\n")
        print("| stop of the leader | median | max | min | target | met |")
        print("|---|---:|---:|---:|---:|---|")
        for how, times in results.items():
            target = "<= 3 s" if how == "kill -9" else ""
            met = ("yes" if max(times) <= 3.0 else "**no**") if how == "kill -9" else ""
            print(f"| {how} -> first write answered by the new leader | {statistics.median(times):.3f} s | "
                  f"{max(times):.3f} s | {min(times):.3f} s | {target} | {met} |")
        if deleted:
            print(f"| kill -9 -> etcd deleted the leader key (lease expiry) | {statistics.median(deleted):.3f} s | "
                  f"{max(deleted):.3f} s | {min(deleted):.3f} s | | |")
        print(f"| physical floor: one etcd write round trip (gateway put, keep-alive) | {floor * 1000:.1f} ms | | | | |")
        print(f"\nkill -9 / SIGTERM (median): {statistics.median(results['kill -9']) / statistics.median(results['SIGTERM']):.1f}x")
    finally:
        for p in ha.CHILDREN:
            if p.poll() is None:
                p.kill()
            p.wait()
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
